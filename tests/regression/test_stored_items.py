"""Every committed result keeps its per-item outputs, so ``compare`` and the leaderboard's marks work
on any pair out of the box: the file is there, its bytes are the ones the result links, and it holds
one output per item of the task (the count the result records, checked against the array)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from benchharness.core.results import RESERVED_FOLDERS
from tests.helpers import ROOT

RESULTS = sorted(p for p in (ROOT / "results").glob("*/*.json") if p.parent.name not in RESERVED_FOLDERS)


def test_the_committed_results_are_there():
    assert len(RESULTS) > 200


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_stored_result_keeps_its_items(path):
    result = json.loads(path.read_text())
    items = result.get("items")
    assert items, (
        f"{path} keeps no per-item outputs: benchharness run --encoders '{result['encoder']}' "
        f"--tasks {result['task']} --add-items"
    )
    file = path.with_name(items["file"])
    assert hashlib.sha256(file.read_bytes()).hexdigest() == items["sha256"], f"{file} is not the file linked"
    with np.load(file, allow_pickle=False) as arrays:
        lengths = {len(arrays[k]) for k in arrays.files if arrays[k].ndim and k != "subset_names"}
    assert items["n"] in lengths
