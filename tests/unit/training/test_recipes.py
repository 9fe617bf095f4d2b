"""Training recipes: names resolve to recipes, keys, the run store, training on demand."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from benchharness.core.settings import Config, load_config
from benchharness.training import estimate, recipes, train
from benchharness.training.runstore import RunStore
from tests.helpers import DATA, MINILM_L3, ROOT

L3_REVISION = "4d59d8028bd304f4cf32dd5ae1c35482ebe16c83"  # refs/main of the shared cache


class ConstantDev:
    """A dev evaluation that is not under test here: the loop only needs a score to record."""

    task_name = "constant"

    def __call__(self, encoder) -> float:
        return 0.0


def constant_dev(method, options, settings) -> ConstantDev:
    return ConstantDev()


def quiet(store: RunStore, **settings):
    """The settings of a test's on-demand training: the shared data, the runs folder of ``store``, the
    constant dev evaluation, no progress bar."""
    from benchharness.training.settings import TrainSettings

    return TrainSettings(config=Config(runs_dir=store.root), data_dir=DATA, dev=constant_dev, **settings)


@pytest.fixture
def book(tmp_path, tiny_bert) -> recipes.RecipeBook:
    """A recipe file with one tiny SimCSE recipe on a random BERT and a text corpus."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "".join(
            f"sentence number {i} about {w} .\n"
            for i, w in enumerate(["cats", "dogs", "rain", "music", "trains", "bread", "chess", "rivers"] * 2)
        )
    )
    path = tmp_path / "recipes.toml"
    path.write_text(f'''
[recipes.tiny]
method = "simcse"
base = "{tiny_bert}"
preset = "cpu"
options = {{ data = "text:{corpus}", max_steps = 3, batch_size = 4, max_length = 16, eval_every = 0 }}

[recipes.tiny-lr]
extends = "tiny"
options = {{ lr = 1e-4 }}
''')
    return recipes.read_book(path)


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "runs")


def test_method_names_resolve_to_their_recipes():
    from benchharness.training.methods.paser.model import PRESETS

    book = recipes.load_book()
    paser = book.get("paser")
    assert (paser.method, paser.base, paser.base_revision, paser.preset) == ("paser", MINILM_L3, L3_REVISION, "cpu")
    cpu = PRESETS["cpu"]
    for key in ("batch_size", "lr", "max_steps", "max_length", "top_k", "decoder_layers", "data"):
        assert paser.options[key] == cpu[key], key
    assert (
        paser.options["seed"] == 42 and paser.options["weight_decay"] == 0.0
    )  # the shared options' defaults, filled in
    assert {"device", "out", "threads", "name"}.isdisjoint(paser.options)
    for method in ("consert", "simcse", "defsent-plus"):
        assert book.get(method).method == method
    top1 = book.get("paser-top1")
    assert {k for k in paser.options if paser.options[k] != top1.options[k]} == {"top_k"}
    assert top1.options["top_k"] == 1 and top1.base_revision == L3_REVISION


def test_defsent_rounds_are_one_training_and_two_stage_bases_are_recipes():
    book = recipes.load_book()
    final, r2 = book.get("defsent-plus"), book.get("defsent-plus-r2")
    assert final.key == r2.key and (final.encoder_round, r2.encoder_round) == (3, 2)
    assert recipes.command(r2) == "benchharness train defsent-plus"
    assert r2.options["round_lrs"] == "5e-05,4e-05,3e-05"  # the paper's BERT-base schedule
    with pytest.raises(recipes.RecipeError, match=r"round 4 outside 1\.\.3"):
        book.get("defsent-plus-r4")
    assert book.lookup("paser-r2") is None  # rounds belong to DefSent+ only
    sup_unsup = book.get("consert-sup-unsup")
    assert sup_unsup.base_recipe is not None and sup_unsup.base_recipe.key == book.get("consert-sup").key
    assert sup_unsup.canonical()["base"] == {"recipe": book.get("consert-sup").key}


def test_two_recipes_never_share_a_key():
    book = recipes.load_book()
    keys = {name: book.get(name).key for name in book.names()}
    assert len(set(keys.values())) == len(keys)
    paser = book.get("paser")
    changed = [
        recipes.build("paser", MINILM_L3, "cpu", {k: v}, revision=L3_REVISION).key
        for k, v in {"seed": 43, "lr": 1e-5, "top_k": 2, "data": "stsb-train", "max_steps": 99}.items()
    ]
    other_revision = recipes.build("paser", MINILM_L3, "cpu", {}, revision="0" * 40).key
    assert len({paser.key, *changed, other_revision}) == 7


def test_same_recipe_same_key_in_another_process():
    code = (
        "from benchharness.core.settings import apply_environment, load_config; apply_environment(load_config()); "
        "from benchharness.training.recipes import load_book; print(load_book().get('consert-joint-unsup').key)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    assert out.stdout.strip() == recipes.load_book().get("consert-joint-unsup").key


def _flags(method: str, argv: list[str]) -> dict:
    """What ``benchharness train <method> <argv>`` asks ``derive`` for: the options given, and the
    recipe, base and preset flags."""
    from benchharness.cli import build_parser
    from benchharness.cli.train import given_options

    args = build_parser(expand="train").parse_args(["train", method, *argv])
    return {
        "given": given_options(args),
        "recipe": args.recipe,
        "base": args.base,
        "preset": getattr(args, "preset", None),
    }


def test_flags_derive_a_new_recipe_with_its_own_key():
    book = recipes.load_book()
    derived = recipes.derive("paser", **_flags("paser", ["--top-k", "1"]), book=book)
    assert derived.name is None and derived.display_name == f"recipe:{derived.key}"
    assert derived.key == book.get("paser-top1").key  # the same run as the named variant
    assert recipes.command(derived) == f"benchharness train paser --base {MINILM_L3} --preset cpu --top-k 1"
    same = recipes.derive("paser", **_flags("paser", ["--top-k", "3", "--device", "cpu", "--threads", "1"]), book=book)
    assert same.name == "paser" and same.key == book.get("paser").key  # repeats the recipe; run-time flags don't count
    paper = recipes.derive("paser", **_flags("paser", ["--preset", "paper"]), book=book)
    assert paper.options["epochs"] == 5 and paper.options["max_steps"] is None and paper.key != same.key
    with pytest.raises(recipes.RecipeError, match="trains consert, not paser"):
        recipes.derive("paser", **_flags("paser", ["--recipe", "consert"]), book=book)


#: each method's official optimizer step: (optimizer, correct_bias, adam_eps, weight_decay, grad_clip)
OFFICIAL_STEPS = {
    "simcse": ("adamw-legacy", True, 1e-8, 0.0, 1.0),
    "paser": ("adamw-legacy", True, 1e-8, 0.0, 1.0),
    "consert": ("adamw-legacy", False, 1e-6, 0.01, 1.0),
    "defsent-plus": ("adamw-legacy", True, 1e-6, 0.0, 1.0),
}


def test_recipes_step_as_the_official_code_and_flags_change_the_step():
    book = recipes.load_book()
    for name in book.names():
        recipe = book.get(name)
        step = tuple(recipe.options[k] for k in ("optimizer", "correct_bias", "adam_eps", "weight_decay", "grad_clip"))
        assert step == OFFICIAL_STEPS[recipe.method], name
    consert = book.get("consert")
    derived = recipes.derive("consert", **_flags("consert", ["--correct-bias", "--adam-eps", "1e-8"]), book=book)
    assert (derived.options["correct_bias"], derived.options["adam_eps"]) == (True, 1e-8) and derived.key != consert.key
    assert recipes.command(derived).endswith("--preset unsup-cpu --adam-eps 1e-08 --correct-bias")
    back = recipes.derive("consert", **_flags("consert", ["--no-correct-bias"]), book=book)
    assert back.name == "consert" and back.key == consert.key  # repeats the preset's setting
    torch_step = recipes.derive("simcse", **_flags("simcse", ["--optimizer", "torch-adamw"]), book=book)
    assert torch_step.options["optimizer"] == "torch-adamw" and torch_step.key != book.get("simcse").key
    assert recipes.command(torch_step).endswith("--preset cpu --optimizer torch-adamw")
    with pytest.raises(recipes.RecipeError, match="correct_bias=False needs optimizer adamw-legacy"):
        recipes.derive("consert", **_flags("consert", ["--optimizer", "torch-adamw"]), book=book)


def test_recipe_file_errors_name_the_file_recipe_and_option(tmp_path):
    path = tmp_path / "recipes.toml"
    path.write_text('[recipes.bad]\nmethod = "paser"\nbase = "x"\noptions = { topk = 1 }\n')
    with pytest.raises(recipes.RecipeError, match=r"recipes.toml: recipe 'bad': paser has no option 'topk'"):
        recipes.read_book(path).get("bad")
    path.write_text('[recipes.bad]\nmethod = "paser"\nbase = "x"\noptions = { threads = 2 }\n')
    with pytest.raises(recipes.RecipeError, match="threads say where or how"):
        recipes.read_book(path).get("bad")
    path.write_text('[recipes.bad]\nmethod = "paser"\nbase = "x"\npreset = "gpu"\n')
    with pytest.raises(recipes.RecipeError, match="unknown preset 'gpu'; choose one of cpu, paper, paper-sup"):
        recipes.read_book(path).get("bad")


def test_on_demand_trains_once_then_reuses(book, store, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="benchharness")
    recipe = book.get("tiny")
    folder = train.ensure_trained(quiet(store), recipe, book=book)
    assert folder == store.root / "simcse" / recipe.key / "run"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["training"]["steps"] == 3 and manifest["recipe"]["key"] == recipe.key
    assert manifest["recipe"]["options"] == recipe.options and manifest["name"] == "tiny"
    assert json.loads((folder.parent / "recipe.json").read_text())["key"] == recipe.key
    assert f"training tiny (simcse on {recipe.base}" in caplog.text

    def no_training(*args, **kwargs):
        raise AssertionError("trained a recipe that has a finished run")

    monkeypatch.setattr(train, "method_named", no_training)
    assert train.ensure_trained(quiet(store), recipe, book=book) == folder
    other = book.get("tiny-lr")
    assert store.folder(other) != store.folder(recipe) and not store.finished(other)
    assert recipes.stored_recipe(store, recipe.key, book).key == recipe.key


def test_an_interrupted_run_resumes_at_the_next_request(book, store, caplog):
    caplog.set_level(logging.INFO, logger="benchharness")
    recipe = book.get("tiny")
    train.train_in_store(quiet(store, stop_after=1), recipe, book)
    assert not store.finished(recipe) and (store.out(recipe) / "checkpoint" / "state.pt").is_file()
    assert "stopped after step 1; rerun the same command to resume" in caplog.text
    caplog.clear()
    folder = train.ensure_trained(quiet(store), recipe, book=book)
    assert "resuming tiny" in caplog.text and "at step 1/3" in caplog.text
    steps = [json.loads(line)["step"] for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1] == 3
    assert json.loads((folder / "manifest.json").read_text())["training"]["steps"] == 3


def test_a_run_killed_before_its_first_checkpoint_starts_again(book, store):
    recipe = book.get("tiny")
    store.out(recipe).mkdir(parents=True)
    (store.out(recipe) / "metrics.jsonl").write_text('{"step": 0}\n')  # what a kill leaves behind
    train.ensure_trained(quiet(store), recipe, book=book)
    assert store.finished(recipe)


def test_no_train_prints_the_command(tmp_path, monkeypatch, capsys):
    from benchharness.cli import main

    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))
    assert (
        main(
            [
                "run",
                "--encoders",
                "paser-top1",
                "--tasks",
                "STSBenchmark-dev",
                "--no-train",
                "--results-dir",
                str(tmp_path / "results"),
                "--no-cache",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "benchharness train paser --recipe paser-top1\n" in err and "--no-train" in err
    assert "100 steps" in err  # the cpu preset's max_steps, with the time estimate
    assert not (tmp_path / "results").exists()


def test_the_runs_root_honours_environment_and_config(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCHHARNESS_RUNS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "benchharness.toml").write_text("[paths]\n")
    assert load_config(tmp_path / "a" / "benchharness.toml").runs_dir == tmp_path / "xdg/benchharness/runs"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "benchharness.toml").write_text('[paths]\nruns_dir = "trained"\n')
    assert load_config(tmp_path / "b" / "benchharness.toml").runs_dir == tmp_path / "b" / "trained"
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "env"))
    assert load_config(tmp_path / "b" / "benchharness.toml").runs_dir == tmp_path / "env"
    assert Config().runs_dir == tmp_path / "env"  # without a configuration file too


def test_a_trained_recipe_is_an_encoder_named_by_its_key(book, store, monkeypatch):
    from benchharness.evaluation.resolver import Resolver

    recipe = book.get("tiny")
    train.ensure_trained(quiet(store), recipe, book=book)
    monkeypatch.setattr(recipes, "RECIPES_FILE", book.path)
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(store.root))
    encoder = Resolver(train_missing=False).get("tiny")
    assert encoder.identity_info()["model"] == f"recipe:{recipe.key}"
    text = json.dumps(encoder.metadata)
    assert str(store.root) not in text and encoder.metadata["training"]["recipe"]["key"] == recipe.key


def test_estimate_is_steps_times_the_measured_seconds_per_step():
    book = recipes.load_book()
    paser = book.get("paser")
    found = estimate.measured(paser, book, "cpu")
    assert found is not None
    per_step, row, scaled = found
    assert not scaled and row.batch_size == 32 and per_step == row.seconds_per_step
    est = estimate.estimate(paser, book, "cpu")
    per_evaluation = estimate.evaluation_seconds(row, book)
    evaluations = 3 * per_evaluation[0] if per_evaluation is not None else 0.0
    setup = row.seconds_setup or 0.0  # data, model and saving, where the row measured them
    assert est.steps == 100 and est.seconds == pytest.approx(100 * row.seconds_per_step + evaluations + setup)
    assert (f"{setup:.0f} s of data, model and saving" in est.basis) == (row.seconds_setup is not None)
    bigger = recipes.derive("paser", **_flags("paser", ["--batch-size", "64"]), book=book)
    per_step64, _, scaled64 = estimate.measured(bigger, book, "cpu")
    assert scaled64 and per_step64 == pytest.approx(2 * row.seconds_per_step)


@pytest.mark.parametrize(
    "flags, kind",
    [
        ("fpu avx avx2 avx512f avx512_bf16", "avx512-bf16"),
        ("fpu avx avx2 amx_bf16", "avx512-bf16"),
        ("fpu avx avx2", "avx2"),
        ("fpu sse2", "other"),
    ],
)
def test_the_estimate_uses_the_throughput_row_of_this_cpu_kind(tmp_path, monkeypatch, flags, kind):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert estimate.cpu_kind(cpuinfo) == kind
    book = recipes.load_book()
    simcse = book.get("simcse")
    rows = {t.cpu: t for t in book.throughput if t.method == "simcse" and t.device == "cpu"}
    assert set(rows) == {"avx2", "avx512-bf16"}
    monkeypatch.setattr(estimate, "cpu_kind", lambda: kind)
    per_step, row, _ = estimate.measured(simcse, book, "cpu")
    assert row is rows.get(kind, rows["avx2"])  # another kind: the file's first row
    assert per_step == row.seconds_per_step


def test_bf16_training_is_a_recipe_of_its_own():
    """Mixed precision changes what a step computes, so ``--precision bf16`` derives another recipe
    (another key, the precision in its record) and the default recipe's key stays that of fp32."""
    book = recipes.load_book()
    simcse = book.get("simcse")
    bf16 = recipes.derive("simcse", **_flags("simcse", ["--precision", "bf16"]), book=book)
    assert simcse.options["precision"] == "fp32" and bf16.options["precision"] == "bf16"
    assert bf16.key != simcse.key
    assert recipes.derive("simcse", **_flags("simcse", ["--precision", "fp32"]), book=book).key == simcse.key


def test_the_estimate_adds_the_dev_evaluations_the_loop_will_make(monkeypatch, training_corpora):
    """consert: eval at step 0, then every 30 of 150 steps (5) = 6 evaluations; paser: step 0, 50,
    100 = 3; defsent-plus evaluates nothing unless --dev, then before and after each of 3 rounds."""
    book, data = recipes.load_book(), training_corpora
    assert estimate.planned_evaluations(book.get("consert"), data) == 6
    assert estimate.planned_evaluations(book.get("paser"), data) == 3
    assert estimate.planned_evaluations(book.get("defsent-plus"), data) == 0
    assert estimate.planned_evaluations(book.get("defsent-plus-l6-10k"), data) == 6
    monkeypatch.setattr(estimate, "cpu_kind", lambda: "avx512-bf16")
    consert = book.get("consert")
    per_step, row, _ = estimate.measured(consert, book, "cpu")
    assert row.seconds_per_evaluation is not None
    est = estimate.estimate(consert, book, "cpu", data)
    setup = row.seconds_setup or 0.0
    assert est.seconds == pytest.approx(150 * per_step + 6 * row.seconds_per_evaluation + setup)
    assert "6 dev evaluations" in str(est)


def test_a_row_without_a_timed_evaluation_scales_another_kinds_by_the_step_times():
    """An AVX2 row measured before evaluations were timed: its evaluation is the other CPU kind's
    times the ratio of their seconds per step (per sentence-token, should the batches differ)."""
    import dataclasses

    book = recipes.load_book()
    timed = recipes.Throughput(
        "simcse",
        "b",
        "cpu",
        32,
        32,
        seconds_per_step=0.5,
        steps=20,
        machine="m",
        command="c",
        date="d",
        cpu="avx512-bf16",
        seconds_per_evaluation=4.0,
    )
    untimed = dataclasses.replace(timed, seconds_per_step=0.75, cpu="avx2", seconds_per_evaluation=None)
    other = dataclasses.replace(timed, method="paser", seconds_per_evaluation=None)
    book = dataclasses.replace(book, throughput=(untimed, timed, other))
    assert estimate.evaluation_seconds(timed, book) == (4.0, "")
    seconds, note = estimate.evaluation_seconds(untimed, book)
    assert seconds == pytest.approx(6.0) and "avx512-bf16" in note
    assert estimate.evaluation_seconds(other, book) is None


def test_a_defsent_plus_estimate_counts_its_setup_once_for_all_rounds(monkeypatch, training_corpora):
    """DefSent+ reads its dictionary once and trains every round from it: three rounds of 49 steps
    (1,000 entries, 1,567 definitions, batch 32) and the measured setup once, not once a round."""
    monkeypatch.setattr(estimate, "cpu_kind", lambda: "avx512-bf16")
    book = recipes.load_book()
    defsent = book.get("defsent-plus")
    per_step, row, _ = estimate.measured(defsent, book, "cpu")
    assert row.seconds_setup is not None and defsent.rounds == 3
    est = estimate.estimate(defsent, book, "cpu", training_corpora)
    assert est.steps == 3 * 49
    assert est.seconds == pytest.approx(3 * 49 * per_step + row.seconds_setup)
    assert "a round" not in est.basis
