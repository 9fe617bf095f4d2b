"""``benchharness sentences``, then vectors computed outside, then ``run --encoders vectors:DIR``:
the stored scores are the computing encoder's own; the file is never silently replaced."""

from __future__ import annotations

import json

import numpy as np
import pytest

import benchharness
from benchharness.cli import main
from benchharness.core.task import EncoderDrivenTask, TaskMetadata, TaskProvider
from tests.vector_fakes import DOCUMENTS, PAIRS, PROVIDER, QUERIES, RoleHashEncoder, role_of


@pytest.fixture
def here(tmp_path, monkeypatch, register_plugin):
    """A project folder as the working directory, the fake tasks installed, an empty data root."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n')
    (tmp_path / "data").mkdir()
    register_plugin("tasks", "vector-fakes", PROVIDER)
    return tmp_path


def sentences(*flags: str) -> int:
    return main(["sentences", "--tasks", "VecPairs,VecSearch", "--data-dir", "data", *flags])


def test_sentences_then_vectors_then_run_stores_the_encoders_own_scores(here, capsys):
    assert sentences("--out", "out") == 0
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in (here / "out/sentences.jsonl").read_text(encoding="utf-8").splitlines()]
    n_pairs = len({s for a, b, _ in PAIRS for s in (a, b)})
    assert len(lines) == n_pairs + len(QUERIES) + len(DOCUMENTS)
    assert [line["role"] for line in lines] == ["default"] * n_pairs + ["query"] * 3 + ["document"] * 5
    assert all(line.get("instruction") == "Find the answer" for line in lines if line["role"] == "query")
    assert (
        f"wrote out/sentences.jsonl: {len(lines)} lines ({n_pairs} default, 3 query, 5 document) for 2 task(s)" in out
    )
    assert "next: write out/vectors.npy: one float32 row per line, same order" in out
    assert "benchharness run --encoders vectors:out --tasks VecPairs,VecSearch" in out

    # elsewhere: the lines encoded by a model that tells the roles apart
    encoder = RoleHashEncoder()
    np.save(
        here / "out/vectors.npy",
        np.concatenate([encoder.encode_role([x["text"]], role_of(x)) for x in lines]),
    )
    assert (
        main(
            ["run", "--encoders", "vectors:out", "--tasks", "VecPairs,VecSearch", "--results-dir", "results", "--quiet"]
        )
        == 0
    )
    stored = {r.task: r.metrics for r in benchharness.load_results(here / "results").results}
    own = {r.task: r.metrics for r in benchharness.evaluate(encoder, ["VecPairs", "VecSearch"]).results}
    assert stored == own


def test_an_existing_file_is_replaced_only_with_overwrite(here, capsys):
    assert sentences("--out", "out") == 0
    before = (here / "out/sentences.jsonl").read_bytes()
    capsys.readouterr()
    assert sentences("--out", "out") == 2
    err = capsys.readouterr().err
    assert "out/sentences.jsonl exists; give --overwrite to replace it" in err and len(err.splitlines()) == 1
    assert sentences("--out", "out", "--overwrite") == 0
    assert "unchanged out/sentences.jsonl" in capsys.readouterr().out
    assert (here / "out/sentences.jsonl").read_bytes() == before
    np.save(here / "out/vectors.npy", np.ones((3, 2), np.float32))
    assert main(["sentences", "--tasks", "VecPairs", "--data-dir", "data", "--out", "out", "--overwrite"]) == 0
    assert "out/vectors.npy was computed for the lines just replaced: compute it again" in capsys.readouterr().err
    assert (here / "out/sentences.jsonl").read_bytes() != before


def test_the_next_step_names_each_kind_files_and_a_replacement_warns_of_each(here, capsys):
    assert sentences("--out", "out") == 0
    out = capsys.readouterr().out
    n = len({s for a, b, _ in PAIRS for s in (a, b)}) + len(QUERIES) + len(DOCUMENTS)
    assert f"a sparse model's rows: out/vectors.npz, scipy.sparse.save_npz, shape ({n}, vocabulary)" in out
    assert f"out/tokens.npy, every line's token vectors stacked, and out/token_offsets.npy, {n + 1} int64" in out
    for name in ("vectors.npz", "tokens.npy"):
        (here / "out" / name).write_bytes(b"computed for the old lines")
    assert main(["sentences", "--tasks", "VecPairs", "--data-dir", "data", "--out", "out", "--overwrite"]) == 0
    err = capsys.readouterr().err
    for name in ("vectors.npz", "tokens.npy"):
        assert f"out/{name} was computed for the lines just replaced: compute it again" in err


def test_missing_data_and_bad_selections_are_one_line_errors(here, capsys):
    assert main(["sentences", "--tasks", "STSBenchmark", "--data-dir", "data", "--out", "out"]) == 2
    assert capsys.readouterr().err.startswith("benchharness: error: missing data file")
    assert not (here / "out/sentences.jsonl").exists()
    assert main(["sentences", "--tasks", " , ", "--out", "out"]) == 2
    assert "names no task" in capsys.readouterr().err
    (here / "file").write_text("")
    assert main(["sentences", "--tasks", "VecPairs", "--data-dir", "data", "--out", "file"]) == 2
    assert "--out file is a file; give a folder" in capsys.readouterr().err


def test_a_task_that_drives_its_own_encoding_is_refused(here, register_plugin, capsys):
    class Driven(EncoderDrivenTask):
        metadata = TaskMetadata(
            name="Driven", family="test", description="", split="test", main_score="x", protocol="none", reference=""
        )

        def _load(self, data):
            pass

        def evaluate_encoder(self, encoder, seed, settings=None):
            return {"x": 0.0}

        def data_record(self):
            return {}

    register_plugin("tasks", "driven", TaskProvider(tasks={"Driven": Driven}))
    assert main(["sentences", "--tasks", "VecPairs,Driven", "--data-dir", "data", "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert "Driven encodes through the encoder itself" in err and len(err.splitlines()) == 1
