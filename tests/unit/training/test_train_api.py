"""``benchharness.train``: a recipe or method trained from Python, on tiny random BERTs.

What it returns is an encoder ``evaluate`` takes as it is; it trains what ``benchharness train``
trains from the same settings (the same weights, bit for bit); it writes nothing without ``out``,
prints nothing and leaves the environment, torch's threads and the random generators as found; its
options are the method's declared ones, refused in one line when unknown or mistyped.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import benchharness
from benchharness.core.errors import InvalidInputError
from tests.helpers import MINILM_L3, needs_data

SENTENCES = [
    f"sentence {i} talks about {w} and {v} ."
    for i, (w, v) in enumerate(
        zip(
            ["cats", "dogs", "rain", "music", "trains", "bread", "chess", "rivers"] * 5,
            ["maps", "tea", "snow", "glass", "wood", "salt", "ink", "wool"] * 5,
        )
    )
]
#: a tiny run: 3 steps of 8 sentences, no dev evaluation (the dev split is not what these tests check)
TINY = {"max_steps": 3, "batch_size": 8, "max_length": 16, "eval_every": 0, "eval_at_start": False}
#: the same as the command line gives it (--eval-every 0: no dev evaluation at all, the final weights kept)
TINY_FLAGS = ["--max-steps", "3", "--batch-size", "8", "--max-length", "16", "--eval-every", "0"]
#: what a saved run's folder holds: its records beside the model's files (a tiny BERT's, and how
#: sentence-transformers pools it as the run is evaluated)
SAVED = [
    *("1_Pooling", "config.json", "config_sentence_transformers.json", "manifest.json", "metrics.jsonl"),
    *("model.safetensors", "modules.json", "sentence_bert_config.json", "tokenizer.json", "tokenizer_config.json"),
]


def weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in module.state_dict().items()}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def files_under(*folders: Path) -> set[Path]:
    return {p for folder in folders if folder.exists() for p in folder.rglob("*")}


def test_train_returns_an_encoder_that_evaluate_takes_and_that_saves_as_train_out_writes(tiny_bert, tmp_path, data_dir):
    model = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, device="cpu", seed=1, **TINY)
    assert isinstance(model, benchharness.Encoder) and isinstance(model, benchharness.TrainedEncoder)
    vectors = model.encode(["a man plays a guitar", "rain falls"])
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()
    assert model.manifest["training"]["steps"] == 3 and model.manifest["selection"]["rule"] == "final weights"
    assert model.recipe["method"] == "simcse" and model.recipe["options"]["seed"] == 1
    assert model.recipe["command"] is None  # sentences held in memory: no command trains it again
    assert model.manifest["data"]["n_examples"] == len(SENTENCES)
    assert model.manifest["data"]["data_root"] == str(data_dir)  # where the dev split would be read

    folder = model.save(tmp_path / "saved")
    assert sorted(p.name for p in folder.iterdir()) == SAVED
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["recipe"]["key"] == model.recipe["key"] and manifest["encoder"]["pooling"] == "cls_before_pooler"
    assert [json.loads(line)["step"] for line in (folder / "metrics.jsonl").read_text().splitlines()] == [3]
    with pytest.raises(InvalidInputError, match="not an empty folder"):
        model.save(folder)

    in_memory = benchharness.evaluate(model, "SICKRelatedness-trial", data_dir=data_dir, intervals=False)
    from_folder = benchharness.evaluate(str(folder), "SICKRelatedness-trial", data_dir=data_dir, intervals=False)
    assert in_memory.results[0].main_score == from_folder.results[0].main_score
    from sentence_transformers import SentenceTransformer

    loaded = SentenceTransformer(str(folder), device="cpu")  # the saved folder itself, as a new user loads it
    np.testing.assert_allclose(loaded.encode(["rain falls"]), model.encode(["rain falls"]), atol=1e-5)


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
def test_python_and_the_command_line_train_the_same_weights(tiny_bert, tmp_path):
    from transformers import AutoModel

    from benchharness.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{s}\n" for s in SENTENCES))
    settings = {k: v for k, v in TINY.items() if k != "eval_at_start"}
    model = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, device="cpu", seed=1, **settings)
    argv = ["train", "simcse", "--base", str(tiny_bert), "--data", str(corpus), "--device", "cpu", "--seed", "1"]
    assert main([*argv, *TINY_FLAGS, "--out", str(tmp_path / "cli"), "-q"]) == 0
    assert_same_weights(weights(model.model), weights(AutoModel.from_pretrained(tmp_path / "cli")))
    cli = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert cli["dev_curve"] == model.manifest["dev_curve"] == []  # --eval-every 0: no dev evaluation, not even at 0
    from_file = benchharness.train("simcse", base=str(tiny_bert), sentences=corpus, device="cpu", seed=1, **settings)
    assert_same_weights(weights(model.model), weights(from_file.model))
    assert from_file.recipe["options"]["data"] == str(corpus) == cli["recipe"]["options"]["data"]
    assert from_file.recipe["key"] == cli["recipe"]["key"]  # a file is the same recipe from either side


def test_without_out_nothing_is_written_nothing_printed_and_the_process_is_as_found(
    tiny_bert, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(runs))
    # the user's cache and data folders of this test alone: the machine's are shared with other test workers
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    watched = (tmp_path,)
    before_files = files_under(*watched)
    environ, threads = dict(os.environ), torch.get_num_threads()
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, device="cpu", **TINY)
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected  # the caller's streams go on
    assert dict(os.environ) == environ and torch.get_num_threads() == threads
    assert files_under(*watched) == before_files and not runs.exists()
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
def test_with_out_the_returned_encoder_is_the_folders_selected_one(tiny_bert, tmp_path):
    from transformers import AutoModel

    settings = {**TINY, "eval_every": 1, "max_steps": 3}
    model = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, out=tmp_path / "run", **settings)
    best = model.manifest["selection"]["best_step"]
    assert best in (1, 2, 3) and (tmp_path / "run" / "manifest.json").is_file()
    assert_same_weights(weights(model.model), weights(AutoModel.from_pretrained(tmp_path / "run")))
    in_memory = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, **settings)
    assert in_memory.manifest["selection"]["best_step"] == best
    assert_same_weights(weights(model.model), weights(in_memory.model))


def test_options_are_the_methods_declared_ones_checked_in_one_line(tiny_bert):
    with pytest.raises(InvalidInputError) as unknown:
        benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, temprature=0.1)
    message = str(unknown.value)
    assert "simcse has no option 'temprature' (did you mean 'temperature'?)" in message
    assert "options: " in message and "batch_size" in message and "\n" not in message
    with pytest.raises(InvalidInputError, match=r"temperature must be a number, got '0\.1'"):
        benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, temperature="0.1")
    with pytest.raises(InvalidInputError, match="max_steps must be a positive integer, got 0"):
        benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, max_steps=0)
    with pytest.raises(InvalidInputError, match="unknown preset 'gpu'"):
        benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, preset="gpu")
    with pytest.raises(InvalidInputError, match=r"neither a recipe .* nor a training method\. Did you mean: simcse"):
        benchharness.train("simcsee")


@pytest.mark.parametrize(
    "name, options, words",
    [
        ("defsent-plus", {}, "DefSent+ trains on a dictionary, not sentences: pass dictionary="),
        ("consert", {"objective": "sup"}, "ConSERT sup trains on NLI pairs, not sentences: pass data="),
        ("paser", {"supervised": True}, "supervised PaSeR trains on NLI triples, not sentences"),
    ],
)
def test_a_method_that_takes_other_data_than_sentences_says_what_it_takes(tiny_bert, name, options, words):
    import re

    with pytest.raises(InvalidInputError, match=re.escape(words)):
        benchharness.train(name, base=str(tiny_bert), sentences=SENTENCES, **options)


def test_defsent_plus_from_python_returns_every_round_and_prints_nothing(tiny_bert, tmp_path, capsys):
    toy = tmp_path / "toy.tsv"
    toy.write_text(
        "".join(
            f"{entry}\t{definition}\n"
            for entry, definition in [
                ("revitalize", "give new life or vigor to"),
                ("revitalize", "imbue something with new life and vitality"),
                ("harbor", "a sheltered port where ships can take on or discharge cargo"),
                ("harbor", "keep in one's mind"),
                ("bellow", "a very loud utterance"),
                ("bellow", "shout loudly and without restraint"),
            ]
        )
    )
    model = benchharness.train(
        "defsent-plus", base=str(tiny_bert), dictionary=str(toy), rounds=2, batch_size=3, max_length=32
    )
    assert [r.manifest["hyperparameters"]["round"] for r in model.rounds] == [1, 2] and model is model.rounds[-1]
    assert model.name.endswith("-r2") and model.manifest["entry_space_after_plot"] == "entry_space_after.png"
    assert model.files["entry_space.png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out == ""
    folder = model.save(tmp_path / "r2")
    assert (folder / "entry_space.png").is_file() and (folder / "entry_space_after.png").is_file()


@needs_data("senteval/SICK/SICK_trial.txt", "senteval/STS/STSBenchmark/sts-dev.csv")
def test_on_demand_training_reads_the_runs_data_root_and_fails_naming_its_missing_file(tmp_path, monkeypatch, data_dir):
    """A data root without STS12 and an empty run store: ``evaluate("simcse", data_dir=X)`` fails in
    one line naming the STS12 file under X, before any model loads, and never falls back to the
    configured data root (which has STS12)."""
    root = tmp_path / "data"
    for child in data_dir.iterdir():
        if child.name != "senteval":
            (root / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / child.name).symlink_to(child)
    for child in (data_dir / "senteval").iterdir():
        if child.name != "STS":
            (root / "senteval" / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / "senteval" / child.name).symlink_to(child)
    for child in (data_dir / "senteval" / "STS").iterdir():
        if not child.name.startswith("STS12"):
            (root / "senteval" / "STS" / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / "senteval" / "STS" / child.name).symlink_to(child)
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))
    from benchharness.training import harness

    monkeypatch.setattr(harness, "load_base", lambda *a, **k: pytest.fail("a model loaded"))
    with pytest.raises(benchharness.EvaluationFailedError) as failed:
        benchharness.evaluate("simcse", "SICKRelatedness-trial", data_dir=root, device="cpu")
    message = str(failed.value)
    assert f"missing data file {root}/senteval/STS/STS12-en-test/" in message
    assert str(data_dir / "senteval" / "STS" / "STS12") not in message


def test_the_minimal_plugin_method_trains_from_python_and_from_the_command_line(tiny_bert, tmp_path):
    """docs/examples/align-uniform-method, installed as a user would (its own folder): the command
    line takes its flags from its declaration, and Python and the command line train it alike."""
    import subprocess

    example = Path(__file__).resolve().parents[3] / "docs" / "examples" / "align-uniform-method"
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site)]
        + [str(example)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{s}\n" for s in SENTENCES))
    flags = ["--base", str(tiny_bert), "--data", str(corpus), "--max-steps", "2", "--batch-size", "8"]
    flags += ["--eval-every", "0", "--device", "cpu", "--weight", "0.5", "--out", str(tmp_path / "cli"), "-q"]
    # one fresh interpreter, whose start finds the installed package's entry point: the command
    # line's help and training, then the same run from Python
    script = f"""
import contextlib, io, benchharness, torch
from benchharness.cli import main
from transformers import AutoModel
shown = io.StringIO()
with contextlib.redirect_stdout(shown):
    try:
        main(["train", "align-uniform", "-h"])
    except SystemExit as exc:
        assert exc.code == 0, exc.code
print("--weight WEIGHT" in shown.getvalue() and "--preset {{small}}" in shown.getvalue())
print(main(["train", "align-uniform", *{flags!r}]))
model = benchharness.train("align-uniform", base={str(tiny_bert)!r}, sentences={str(corpus)!r}, max_steps=2,
                           batch_size=8, eval_every=0, device="cpu", weight=0.5)
saved = AutoModel.from_pretrained({str(tmp_path / "cli")!r}).state_dict()
mine = model.model.state_dict()
print(sorted(saved) == sorted(mine) and all(torch.equal(saved[k], mine[k]) for k in saved), model.manifest["method"])
"""
    same = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert same.returncode == 0, same.stderr
    assert same.stdout.split() == ["True", "0", "True", "align-uniform"], same.stdout + same.stderr
    assert json.loads((tmp_path / "cli" / "manifest.json").read_text())["recipe"]["options"]["weight"] == 0.5


def test_a_method_without_a_recipe_of_its_own_needs_a_base():
    from benchharness.training import recipes

    empty = recipes.RecipeBook(Path("none.toml"), {}, ())
    with pytest.raises(InvalidInputError, match=r"simcse has no recipe of its own in none\.toml: give the model"):
        recipes.derive("simcse", {}, book=empty)
    assert recipes.derive("simcse", {}, base=MINILM_L3, book=empty).preset == "cpu"  # the method's default preset


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
def test_the_configuration_given_to_train_reaches_the_dev_evaluation(tiny_bert, tmp_path, monkeypatch):
    """A working folder whose benchharness.toml cannot be read: ``train(config=<a good one>)`` scores
    its dev evaluations with the configuration it was given, never reading the one found here."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "benchharness.toml").write_text("[paths\nthis is not TOML\n")
    good = tmp_path / "elsewhere.toml"
    good.write_text(f'[paths]\nruns_dir = "{tmp_path / "runs"}"\n')
    model = benchharness.train(
        "simcse", base=str(tiny_bert), sentences=SENTENCES, config=good, **{**TINY, "eval_every": 1}
    )
    assert [step for step, _ in model.manifest["dev_curve"]] == [1, 2, 3]


def test_one_call_builds_its_recipe_once_and_scans_the_runs_folder_once(tiny_bert, monkeypatch, tmp_path):
    """``train("simcse", ...)`` with options: the recipe is built once (its options resolved once for
    it, once more to tell whether it is the named recipe's), and the runs folder is scanned once
    (for the base's name)."""
    from benchharness.core import manifests
    from benchharness.training import recipes

    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))
    built, scans = [], []
    build, scan = recipes.build, manifests.registered_runs
    monkeypatch.setattr(recipes, "build", lambda *a, **k: built.append(a) or build(*a, **k))
    monkeypatch.setattr(manifests, "registered_runs", lambda *a, **k: scans.append(a) or scan(*a, **k))
    benchharness.train("simcse", sentences=SENTENCES, max_steps=1, batch_size=8, eval_every=0)
    assert len(built) == 1 and len(scans) <= 1, (built, scans)


def test_the_examples_are_read_once_for_the_estimate_and_the_run(tiny_bert, tmp_path, register_plugin, caplog):
    """Training into a folder announces its time estimate from the examples the run reads: the
    method's ``examples`` is called once."""
    import logging

    from benchharness.training.methods.simcse.method import METHOD

    calls = []

    def examples(options, data):
        calls.append(options.data)
        return METHOD.examples(options, data)

    from dataclasses import replace

    register_plugin("methods", "counted-simcse", replace(METHOD, name="counted-simcse", examples=examples))
    caplog.set_level(logging.INFO, logger="benchharness")
    benchharness.train("counted-simcse", base=str(tiny_bert), sentences=SENTENCES, out=tmp_path / "run", **TINY)
    assert len(calls) == 1
    assert any("3 steps" in r.getMessage() for r in caplog.records), caplog.text
