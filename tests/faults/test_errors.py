"""Every bad input gets a clear error naming the value and what to do; non-finite
vectors fail; flags are validated before any model loads. Each test drives the CLI (``main``) or
the runner in-process and checks the exit status and the key words of the message."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import urllib.error
import urllib.request

import numpy as np
import pytest

from benchharness import tasks
from benchharness.cli import main
from benchharness.core.data_root import DataRoot
from benchharness.core.results import SLUG_MAX, ResultMismatchError, ResultStore, read_result, slug
from benchharness.core.specs import Family
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from tests.fakes import HashEncoder

TASK = "SICKRelatedness-trial"  # 500 pairs: the smallest STS task


class MaskedEncoder(HashEncoder):
    """Hash vectors, except that sentences containing ``word`` get ``value`` in every coordinate
    (NaN, inf or 0: the broken and the out-of-vocabulary cases)."""

    def __init__(self, word: str, value: float, name: str = "masked") -> None:
        super().__init__(name)
        self.word, self.value = word, value

    def encode(self, sentences):
        vectors = super().encode(sentences)
        vectors[[self.word in s.split() for s in sentences]] = self.value
        return vectors


def _task_sentences(data_dir, name=TASK) -> list[str]:
    task = tasks.get(name)
    task.load(DataRoot(data_dir))
    return list(dict.fromkeys(task.sentences()))


def _run(data_dir, store, encoder, names):
    return run(
        [encoder.name], [tasks.get(n) for n in names], lambda _: encoder, DataRoot(data_dir), store, RunSettings()
    )


# --- non-finite and zero vectors ------------------------------------------------------------------


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_vectors_fail_every_task_and_nothing_is_stored(data_dir, tmp_path, value):
    sentences = _task_sentences(data_dir, TASK) + _task_sentences(data_dir, "STSBenchmark-dev")
    unique = list(dict.fromkeys(sentences))
    expected = sum("dog" in s.split() for s in unique)  # counted by hand over the unique sentences
    assert expected > 0
    store = ResultStore(tmp_path)
    summary = _run(data_dir, store, MaskedEncoder("dog", value, "nan-enc"), [TASK, "STSBenchmark-dev"])
    assert [o.status for o in summary.outcomes] == ["failed", "failed"]
    message = summary.outcomes[0].message
    assert "'nan-enc'" in message and f"{expected:,} non-finite vectors" in message
    assert f"of {len(unique):,}" in message
    assert not list(tmp_path.rglob("*.json"))


def test_non_finite_vectors_exit_1_through_the_cli(project, register_plugin, capsys):
    def build(name, spec, defaults):
        return MaskedEncoder("dog", np.nan, name)

    register_plugin("families", "nanfake", Family("nanfake", build, "model", "nanfake:<x>", ()))
    assert main(["run", "--encoders", "nanfake:x", "--tasks", TASK, "--quiet", "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "non-finite vectors" in out and "nanfake:x" in out
    assert not list((project / "results").rglob("*.json"))


def test_zero_vectors_are_counted_per_task_in_the_result(data_dir, tmp_path):
    expected = sum("dog" in s.split() for s in _task_sentences(data_dir))
    store = ResultStore(tmp_path)
    summary = _run(data_dir, store, MaskedEncoder("dog", 0.0, "zeros"), [TASK])
    assert summary.outcomes[0].status == "computed"
    stored = json.loads(store.path("zeros", TASK).read_text())
    assert stored["embedding_stats"]["zero_vectors"] == expected
    assert f"{expected:,} zero vectors" in summary.outcomes[0].message
    # descriptive only: the fingerprint (identity, data, protocol) does not include it
    assert "zero_vectors" not in json.dumps(read_result(store.path("zeros", TASK)).fingerprint())


# --- training flags, before any model loads -------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value, words",
    [
        ("--max-steps", "0", "positive integer, got 0"),
        ("--limit", "0", "positive integer, got 0"),
        ("--eval-every", "-5", "integer >= 0, got -5"),
        ("--lr", "-1e-5", "positive number"),
        ("--warmup-ratio", "1.5", "in [0, 1)"),
        ("--batch-size", "x", "positive integer, got 'x'"),
        ("--preset", "nope", "invalid choice: 'nope'"),
        ("--temperature", "0", "positive number"),
        ("--optimizer", "sgd", "invalid choice: 'sgd'"),
        ("--adam-eps", "0", "positive number"),
    ],
)
def test_training_flags_are_refused_by_the_parser(tmp_path, capsys, flag, value, words):
    with pytest.raises(SystemExit) as exc:
        main(["train", "simcse", "--base", "unused", "--out", str(tmp_path / "run"), f"{flag}={value}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and words in err


def test_training_method_flags_are_validated(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "consert", "--base", "unused", "--out", str(tmp_path / "run"), "--rate1", "1.2"])
    assert exc.value.code == 2 and "argument --rate1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "defsent-plus", "--base", "unused", "--out", str(tmp_path / "r"), "--round-lrs", "5e-5,-1"])
    assert "argument --round-lrs" in capsys.readouterr().err


def test_torch_adamw_without_bias_correction_is_refused_before_the_model(tmp_path, capsys):
    # only the legacy transformers.AdamW can leave the bias correction out
    assert (
        main(
            [
                "train",
                "simcse",
                "--base",
                "nobody/nothing",
                "--out",
                str(tmp_path / "run"),
                "--optimizer",
                "torch-adamw",
                "--no-correct-bias",
                "--quiet",
            ]
        )
        == 2
    )
    assert "correct_bias=False needs optimizer adamw-legacy" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_missing_training_data_fails_before_the_model(tmp_path, capsys):
    missing = tmp_path / "nope.txt"
    assert (
        main(
            [
                "train",
                "simcse",
                "--base",
                "not-a/model",
                "--out",
                str(tmp_path / "run"),
                "--data",
                str(missing),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert str(missing) in err
    assert not (tmp_path / "run").exists()


@pytest.fixture
def sentences_file(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("".join(f"sentence number {i} is here .\n" for i in range(20)))
    return path


def test_missing_base_folder_is_no_such_folder(tmp_path, sentences_file, capsys):
    assert (
        main(
            [
                "train",
                "simcse",
                "--base",
                "./no/such/model",
                "--out",
                str(tmp_path / "run"),
                "--data",
                str(sentences_file),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no such folder './no/such/model'" in err and "Repo id" not in err
    assert not (tmp_path / "run").exists()


def test_too_few_examples_fail_before_the_model(tmp_path, sentences_file, capsys):
    # 20 sentences, --limit 5, batch 8: no full batch; the base id is never looked up
    assert (
        main(
            [
                "train",
                "simcse",
                "--base",
                "nobody/nothing",
                "--out",
                str(tmp_path / "run"),
                "--data",
                str(sentences_file),
                "--limit",
                "5",
                "--batch-size",
                "8",
                "--quiet",
            ]
        )
        == 2
    )
    assert "5 training examples give no full batch of 8" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_training_options_refuse_zero_steps_and_limits():
    from benchharness.training.options import TrainingOptions

    for key, value in (
        ("max_steps", 0),
        ("limit", 0),
        ("eval_every", -5),
        ("lr", -1.0),
        ("seed", -1),
        ("optimizer", "adam"),
    ):
        with pytest.raises(ValueError, match=key):
            TrainingOptions(**{key: value})


# --- run flags -------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag, value", [("--batch-size", "0"), ("--seed", "-1")])
def test_run_flags_are_refused_by_the_parser(project, capsys, flag, value):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--encoders", "glove-50d", "--tasks", TASK, flag, value])
    assert exc.value.code == 2 and f"argument {flag}" in capsys.readouterr().err


def test_run_device_without_cuda(project, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["run", "--encoders", "glove-50d", "--tasks", TASK, "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert main(["run", "--encoders", "glove-50d", "--tasks", TASK, "--device", "gpu"]) == 2
    assert "'gpu' is not a device" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--encoders", "--tasks"])
def test_empty_selection_exits_2(project, capsys, flag):
    args = {"--encoders": "glove-50d", "--tasks": TASK, flag: " , "}
    assert main(["run", *[x for kv in args.items() for x in kv]]) == 2
    assert f"{flag} ' , ' names no" in capsys.readouterr().err


def test_leaderboard_column_names_are_task_names():
    assert tasks.resolve("STS-B,SICK-R") == ["STSBenchmark", "SICKRelatedness"]
    assert tasks.resolve("sts-b") == ["STSBenchmark"]


# --- specs and config --------------------------------------------------------------------------------


def test_missing_local_spec_folder(project, capsys):
    assert main(["run", "--encoders", "hf:./missing-model", "--tasks", TASK]) == 2
    err = capsys.readouterr().err
    assert "no such folder './missing-model'" in err and "Repo id" not in err


def test_spec_parameter_typo_lists_accepted_ones(project, capsys):
    assert main(["run", "--encoders", "hf:sentence-transformers/all-MiniLM-L6-v2?poolng=avg", "--tasks", TASK]) == 2
    err = capsys.readouterr().err
    assert "no parameter 'poolng'" in err and "Did you mean 'pooling'?" in err and "max_length" in err
    assert main(["run", "--encoders", "minilm-l3+whitening(kk=3)", "--tasks", TASK]) == 2
    assert "Did you mean 'k'?" in capsys.readouterr().err


def test_config_cycle_is_named(project, capsys):
    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n[encoders.a]\nspec = "b"\n[encoders.b]\nspec = "a"\n'
        '[encoders.c]\nspec = "c+whitening"\n'
    )
    assert main(["run", "--encoders", "a", "--tasks", TASK]) == 2
    assert "encoder 'a' in" in (err := capsys.readouterr().err) and "refers to itself via a -> b -> a" in err
    assert main(["run", "--encoders", "c", "--tasks", TASK]) == 2
    assert "refers to itself via c -> c" in capsys.readouterr().err


def test_broken_config_file_exits_2(project, capsys):
    (project / "benchharness.toml").write_text("[paths\n")
    assert main(["list", "tasks"]) == 2
    assert "benchharness.toml: invalid TOML" in capsys.readouterr().err


# --- data download offline ---------------------------------------------------------------------------


def test_download_offline_is_clear_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["data", "download", "qqp", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "could not download qqp from http://qim.fb.com/quora_duplicate_questions.tsv" in err
    assert "name resolution" in err and "check the network" in err
    assert not (tmp_path / "qqp").exists()


# --- result files --------------------------------------------------------------------------------------


def test_wrong_types_name_the_file_and_run_recomputes(data_dir, tmp_path, caplog):
    store = ResultStore(tmp_path)
    enc = HashEncoder()
    _run(data_dir, store, enc, [TASK])
    path = store.path("hash", TASK)
    good = json.loads(path.read_text())
    path.write_text(json.dumps({**good, "main_score": "high"}))
    with pytest.raises(ValueError, match=r"main_score.*expected number") as exc:
        read_result(path)
    assert str(path) in str(exc.value)
    summary = _run(data_dir, store, enc, [TASK])
    assert summary.outcomes[0].status == "computed"
    assert any(str(path) in r.getMessage() and "recomputing" in r.getMessage() for r in caplog.records)
    assert json.loads(path.read_text())["main_score"] == good["main_score"]


def test_long_names_get_distinct_folders_and_plain_ones_keep_theirs():
    a, b = "hf:" + "x" * 200 + "?pooling=avg", "hf:" + "x" * 200 + "?pooling=cls"
    assert slug(a) != slug(b) and len(slug(a)) == len(slug(b)) == SLUG_MAX
    assert slug("minilm-l3+whitening(k=95)") == "minilm-l3+whitening(k=95)"
    name = "hf:sentence-transformers/paraphrase-MiniLM-L3-v2?pooling=cls_before_pooler"
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    assert slug(name) == f"hf_sentence-transformers_paraphrase-MiniLM-L3-v2_pooling=cls_before_pooler@{digest}"


def test_a_result_file_moved_into_another_encoders_folder_is_not_served(data_dir, tmp_path, caplog):
    store = ResultStore(tmp_path)
    _run(data_dir, store, HashEncoder("hf:a/b"), [TASK])
    moved = store.path("hf_a_b", TASK)
    moved.parent.mkdir(parents=True)
    store.path("hf:a/b", TASK).rename(moved)
    with pytest.raises(ResultMismatchError, match="'hf:a/b'"):
        store.load("hf_a_b", TASK)
    summary = _run(data_dir, store, HashEncoder("hf_a_b"), [TASK])
    assert summary.outcomes[0].status == "computed"
    assert any("holds the result of encoder 'hf:a/b'" in r.getMessage() for r in caplog.records)


def test_result_files_are_readable_by_others(data_dir, tmp_path):
    old = os.umask(0o022)
    try:
        store = ResultStore(tmp_path)
        _run(data_dir, store, HashEncoder(), [TASK])
    finally:
        os.umask(old)
    assert stat.S_IMODE(store.path("hash", TASK).stat().st_mode) == 0o644
