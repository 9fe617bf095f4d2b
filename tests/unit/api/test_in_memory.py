"""The library computes in memory: ``evaluate`` writes nothing unless asked, its results carry their
per-item outputs, ``compare`` on them equals ``benchharness compare`` on the same results stored,
and an in-memory model's weights are hashed once per call."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import pytest
from scipy.stats import spearmanr

import benchharness
from benchharness.cli import main
from benchharness.core.errors import InvalidInputError
from benchharness.core.items import MissingItemsError

TASK = "STSBenchmark-dev"


def _tree(root: Path) -> set[str]:
    """Every file and folder under ``root`` (bytecode caches aside: importing writes those)."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


def test_evaluate_with_defaults_creates_no_file_or_folder(project, monkeypatch):
    scratch = project.parent / f"{project.name}-tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    monkeypatch.setenv("XDG_CACHE_HOME", str(scratch / "xdg-cache"))
    before = _tree(project)
    results = benchharness.evaluate("glove-50d", [TASK, "STS12"])
    assert not results.failed and len(results) == 2
    assert _tree(project) == before and not any(scratch.iterdir())
    for result in results:
        assert result.items is None  # links no file ...
        items = results.items(result).items  # ... it carries the outputs themselves
        assert result.main_score == pytest.approx(100 * spearmanr(items["cosine"], items["gold"])[0], abs=1e-9)


def test_stored_results_link_their_items_and_carry_them(project):
    results = benchharness.evaluate("glove-50d", TASK, results_dir="stored")
    [result] = results
    assert (
        result.items["file"] == f"{TASK}.items.npz"
        and (project / "stored" / "glove-50d" / result.items["file"]).is_file()
    )
    assert result.per_item is not None
    loaded = benchharness.load_results("stored")
    [again] = loaded
    assert again.per_item is None and again.main_score == result.main_score
    assert (loaded.items(again).items["cosine"] == result.per_item.items["cosine"]).all()


def test_compare_in_memory_equals_the_cli_on_the_same_results_stored(project, capsys):
    a = benchharness.evaluate("glove-50d", "STSBenchmark")
    b = benchharness.evaluate("glove-50d+whitening", "STSBenchmark")
    in_memory = benchharness.compare(a, b, n_resamples=300, seed=3)
    assert [r.task for r in in_memory.rows] == ["STSBenchmark"]
    assert in_memory.rows[0].difference == pytest.approx(a.results[0].main_score - b.results[0].main_score)

    stored = benchharness.evaluate(["glove-50d", "glove-50d+whitening"], "STSBenchmark", results_dir="results")
    assert [r.main_score for r in stored] == [a.results[0].main_score, b.results[0].main_score]
    assert (
        main(
            [
                "compare",
                "glove-50d",
                "glove-50d+whitening",
                "--tasks",
                "STSBenchmark",
                "--resamples",
                "300",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == str(in_memory).strip()

    loaded = benchharness.load_results("results")
    from_folder = benchharness.compare(
        loaded, loaded, encoder_a="glove-50d", encoder_b="glove-50d+whitening", n_resamples=300, seed=3
    )
    assert str(from_folder) == str(in_memory)


def test_compare_says_what_is_missing(project):
    a = benchharness.evaluate("glove-50d", TASK)
    with pytest.raises(InvalidInputError, match="2 encoders"):
        benchharness.compare(benchharness.evaluate(["glove-50d", "glove-50d+whitening"], TASK), a)
    with pytest.raises(InvalidInputError, match="no task in common"):
        benchharness.compare(a, benchharness.evaluate("glove-50d+whitening", "STS12"))
    bare = benchharness.Results(a.results, a.outcomes)
    bare.results[0].per_item = None
    with pytest.raises(MissingItemsError, match="carries no per-item outputs"):
        benchharness.compare(bare, a)


def test_cli_compare_names_every_missing_result_and_one_command(project, capsys):
    benchharness.evaluate("glove-50d", "STS12", results_dir="results")
    assert main(["compare", "glove-50d", "minilm-l6", "--tasks", "STS12,STS13"]) == 2
    err = capsys.readouterr().err
    assert "minilm-l6 on STS12, glove-50d on STS13, minilm-l6 on STS13" in err
    assert "benchharness run --encoders 'glove-50d,minilm-l6' --tasks STS12,STS13" in err


def test_an_in_memory_models_weights_are_hashed_once_per_call(tiny_bert, project, monkeypatch):
    from transformers import AutoModel, AutoTokenizer

    from benchharness.encoders import in_memory

    calls = []
    real = in_memory._weights_sha256
    monkeypatch.setattr(in_memory, "_weights_sha256", lambda module, unused=(): calls.append(1) or real(module, unused))
    model, tokenizer = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    options = {"tokenizer": tokenizer, "pooling": "avg", "cache_dir": ".cache", "results_dir": "results"}
    first = benchharness.evaluate(model, [TASK, "STS12"], **options)
    assert len(calls) == 1  # the runner, the cache and the result record share one fingerprint
    with __import__("torch").no_grad():
        model.embeddings.word_embeddings.weight.mul_(1.5)
    second = benchharness.evaluate(model, [TASK, "STS12"], overwrite="stale", **options)
    assert len(calls) == 2  # a new call fingerprints afresh: changed weights are seen
    assert first.results[0].encoder_identity["hash"] != second.results[0].encoder_identity["hash"]
    assert [o.status for o in second.outcomes] == ["computed", "computed"]


def test_settings_are_one_checked_value():
    from benchharness.core.errors import InvalidInputError

    settings = benchharness.RunSettings(results_dir="r", batch_size=8)
    assert settings.results_dir == Path("r") and settings.but(seed=3).seed == 3
    for bad in ({"overwrite": "sometimes"}, {"batch_size": 0}, {"seed": -1}, {"encode_actors": 2}):
        with pytest.raises(InvalidInputError):
            benchharness.RunSettings(**bad)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seed = 5  # frozen


def test_nothing_is_printed_and_logging_silences_everything(project, capsys, caplog):
    import logging

    benchharness.evaluate("glove-50d", TASK)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # information is logged, not printed
    caplog.set_level(logging.INFO, logger="benchharness")
    benchharness.evaluate("glove-50d", TASK)
    assert any("spearman = " in r.getMessage() for r in caplog.records if r.name.startswith("benchharness."))
    caplog.clear()
    logging.getLogger("benchharness").setLevel(logging.CRITICAL)  # what a user does to silence it all
    benchharness.evaluate(
        lambda batch: [[1.0, 0.0]] * len(batch), TASK, results_dir="r", errors="keep"
    )  # warns: not stored, fails: constant cosines
    assert capsys.readouterr().err == "" and not caplog.records


def test_os_environ_is_left_as_found_by_a_cli_free_call(project):
    before = dict(os.environ)
    benchharness.evaluate("glove-50d", TASK)
    assert dict(os.environ) == before


def test_comparing_two_encoders_that_rank_every_pair_alike_gives_a_zero_difference_not_an_error(project):
    a = benchharness.evaluate("glove-50d", TASK)
    glove = benchharness.as_encoder("glove-50d")  # built once: the callable wraps it
    b = benchharness.evaluate(
        lambda batch: glove.encode(batch),
        TASK,
        name="glove-again",
        identity="glove-50d, again",
    )
    row = benchharness.compare(a, b, n_resamples=100).rows[0]
    assert (row.difference, row.low, row.high) == (0.0, 0.0, 0.0) and row.crosscheck == {"steiger": None}
    assert "A and B rank every pair alike" in str(benchharness.compare(a, b, n_resamples=100))


def test_results_of_two_calls_join_for_one_comparison_and_one_frame(project):
    """Two ``evaluate`` calls (one of them read back from a folder) joined with ``+``: one frame of
    both, one ``compare`` over the join equal to the comparison of the two; a pair computed
    differently in two parts is refused."""
    a = benchharness.evaluate("glove-50d", TASK)
    benchharness.evaluate("glove-50d+whitening", TASK, results_dir="stored")
    b = benchharness.load_results("stored")
    both = a + b
    assert [(r.encoder, r.task) for r in both] == [("glove-50d", TASK), ("glove-50d+whitening", TASK)]
    frame = both.to_pandas()
    assert list(frame.encoder) == ["glove-50d", "glove-50d+whitening"]
    joined = benchharness.compare(both, both, encoder_a="glove-50d", encoder_b="glove-50d+whitening", seed=3)
    assert str(joined) == str(benchharness.compare(a, b, seed=3))
    assert len(a + a) == 1  # the same result twice is one
    other = dataclasses.replace(a.results[0], protocol={**a.results[0].protocol, "variant": "edited"})
    with pytest.raises(InvalidInputError, match="is in two of the results joined"):
        _ = a + benchharness.Results([other], [], True, None)
