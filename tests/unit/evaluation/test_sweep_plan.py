"""The Ray sweep's driver leaves a unit out only when every pair is stored for the identity its
encoder has now: a result stored by other weights under the same name is recomputed, as in a
sequential run (no Ray is started here: ``plan`` is the driver's decision alone)."""

from __future__ import annotations

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.results import ResultStore
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.evaluation.sweep import plan
from tests.fakes import HashEncoder

TASKS = ["SICKRelatedness-trial"]


def test_a_unit_is_settled_only_for_the_identity_its_results_were_computed_with(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    encoder = HashEncoder("enc")
    run(["enc"], [tasks.get(t) for t in TASKS], lambda _: encoder, DataRoot(data_dir), store, RunSettings())
    same = {"enc": encoder.identity}
    units, reused = plan(["enc"], TASKS, store, "reuse", False, same.get)
    assert units == [] and [(o.encoder, o.status) for o in reused] == [("enc", "reused")]
    units, reused = plan(["enc"], TASKS, store, "reuse", False, {"enc": "0" * 16}.get)  # other weights now
    assert [u.encoders for u in units] == [["enc"]] and reused == []
    units, reused = plan(["enc"], TASKS, store, "reuse", False, lambda name: None)  # unknown here
    assert [u.encoders for u in units] == [["enc"]] and len(units[0].stored) == 1  # the worker decides
