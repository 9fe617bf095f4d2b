"""Data-parallel training (``--nproc``, DDP through torchrun) on tiny random BERTs, 2 processes on
CPU with gloo: the gradients of the first step equal one process's on the same global batch, the
ranks stay in sync, only rank 0 writes, a halted run resumes to the uninterrupted run's weights,
and ``benchharness train --nproc 2`` launches it all. The recipe keys of single-process runs stay
as they were.

The processes run ``ddp_worker.py`` under torchrun; each launch has a subprocess timeout, and the
workers dump every thread's traceback and exit before it (``faulthandler.dump_traceback_later``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import DATA, ROOT, make_tiny_bert, needs_data
from tests.unit.training import ddp_worker

#: the module's fixtures launch torchrun once each (tens of seconds): under ``pytest -n 2 --dist
#: loadgroup`` its tests share one worker, else each worker would launch them again
pytestmark = pytest.mark.xdist_group("torchrun")

WORKER = Path(ddp_worker.__file__)
TIMEOUT = 240  # seconds for one launch; the workers give up at ddp_worker.HANG_SECONDS
#: |DDP gradient - single-process gradient| allowed, as a fraction of the case's largest gradient.
#: Measured float32 noise (padding to each rank's length instead of the batch's, another summation
#: order of the loss and of the all-reduce): at most 1.5e-5 of the largest gradient for SimCSE (its
#: embedding gradients are sums of many nearly cancelling terms), 1.4e-7 to 3.4e-7 for the others.
#: 1e-4 leaves a 6x margin and is 5,000x below what the detached gather changes (half of it).
TOLERANCE = 1e-4


def launch(command: list[str], timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``command`` in a session of its own; on timeout, kill that session (torchrun and every
    process it started) and fail with what it printed."""
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"{' '.join(command[:6])}... did not finish in {timeout} s:\n{output[-6000:]}")
    result = subprocess.CompletedProcess(command, proc.returncode, output, "")
    assert result.returncode == 0, output[-6000:]
    return result


def torchrun(*runs: tuple[str, Path, Path]) -> None:
    """One torchrun launch of two processes that run each (scenario, model, out) in turn."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(WORKER)]
    launch(command + [str(word) for run in runs for word in run])


# ----------------------------------------------------------------------------------------------
# recipes and refusals (one process, no torchrun)


def test_only_data_parallel_recipes_record_the_world_size_and_the_gather():
    from benchharness.training import recipes
    from benchharness.training.options import TrainingOptions

    book = recipes.load_book()
    for method in ("simcse", "consert", "paser", "defsent-plus"):
        named = book.get(method)
        one = recipes.derive(method, {"nproc": 1}, book=book)
        assert (one.name, one.key) == (method, named.key)  # --nproc 1 is the single-process recipe
        assert not {"nproc", "negatives"} & set(named.options)
        ddp = recipes.derive(method, {"nproc": 2}, book=book)
        assert ddp.key != named.key and ddp.name is None
        assert (ddp.options["nproc"], ddp.options["negatives"]) == (2, "gather-grad")
        assert {k for k in ddp.options if ddp.options[k] != named.options.get(k)} == {"nproc", "negatives"}
        assert "--nproc 2" in recipes.command(ddp)
    detached = recipes.derive("simcse", {"nproc": 2, "negatives": "gather-detached"}, book=book)
    assert detached.options["negatives"] == "gather-detached" and detached.key != ddp.key
    assert not {"nproc", "negatives"} & set(TrainingOptions().shared())
    assert TrainingOptions(nproc=2, batch_size=8).shared()["nproc"] == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "simcse", "--nproc", "0"], "argument --nproc: must be a positive integer, got 0"),
        (["train", "simcse", "--nproc", "3"], "batch size 32 does not split into 3 equal slices"),
        (["train", "consert", "--negatives", "gather-detached"], "applies to data-parallel runs only"),
        (["train", "defsent-plus", "--nproc", "2", "--negatives", "gather-grad"], "has no in-batch negatives"),
    ],
    ids=["zero", "indivisible-batch", "negatives-alone", "defsent-negatives"],
)
def test_bad_process_layouts_are_refused_in_one_line_before_a_model_loads(argv, message, capsys, monkeypatch):
    from benchharness.cli import main
    from benchharness.training import base_model

    monkeypatch.setattr(base_model, "load_base", lambda *a, **k: pytest.fail("a model loaded"))
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own refusal
        status = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and message in err[-1]


def test_a_data_parallel_run_refuses_to_start_outside_torchrun_and_in_a_world_of_another_size(monkeypatch):
    from benchharness.cli.train import _world_size
    from benchharness.core.errors import InvalidInputError
    from benchharness.training.data_parallel import check_launch

    with pytest.raises(InvalidInputError, match="must start under torchrun"):
        check_launch(2, torch.device("cpu"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(InvalidInputError, match="torchrun started 2 processes but the run's nproc is 1"):
        check_launch(1, torch.device("cpu"))
    given: dict[str, int] = {}
    _world_size(given)
    assert given["nproc"] == 2  # torchrun's world size is the run's --nproc
    given["nproc"] = 4
    with pytest.raises(InvalidInputError, match="--nproc 4 but torchrun started 2 processes"):
        _world_size(given)


def test_training_on_demand_names_the_command_that_launches_a_data_parallel_recipe(tmp_path):
    from benchharness.core.settings import Config
    from benchharness.evaluation.run_settings import RunSettings
    from benchharness.training import recipes
    from benchharness.training.catalogue import train_settings
    from benchharness.training.train import NotTrainedError, ensure_trained

    recipe = recipes.derive("simcse", {"nproc": 2})
    settings = train_settings(RunSettings(data_dir=DATA, config=Config(runs_dir=tmp_path / "runs")))
    with pytest.raises(NotTrainedError, match=r"only `benchharness train` launches: .*--nproc 2"):
        ensure_trained(settings, recipe)


# ----------------------------------------------------------------------------------------------
# gradients of the first step


@pytest.fixture(scope="module")
def no_dropout_bert(tmp_path_factory) -> Path:
    """A tiny BERT with every dropout probability 0: the gradients are then deterministic."""
    return make_tiny_bert(tmp_path_factory.mktemp("bert-no-dropout"), dropout=0.0)


#: PaSeR's cases of the gradient check read NLTK's stopwords
STOPWORDS = "nltk_data/corpora/stopwords/english"


@pytest.fixture(scope="module")
def ddp_runs(no_dropout_bert, tiny_bert, tmp_path_factory) -> dict[str, Path]:
    """Both scenarios of ``ddp_worker`` in one torchrun launch, each in its own folder: the gradient
    check where the stopwords are, and the loop."""
    runs = {}
    if (DATA / STOPWORDS).exists():
        runs["gradients"] = (no_dropout_bert, tmp_path_factory.mktemp("ddp-gradients"))
    runs["train"] = (tiny_bert, tmp_path_factory.mktemp("ddp-train"))
    torchrun(*((scenario, model, out) for scenario, (model, out) in runs.items()))
    return {scenario: out for scenario, (_, out) in runs.items()}


@pytest.fixture(scope="module")
def ddp_gradients(ddp_runs) -> Path:
    """Rank 0's gradients after DDP's all-reduce, one file per case of ``ddp_worker.CASES``."""
    return ddp_runs["gradients"]


def one_process_gradients(case: str, model: Path) -> dict[str, torch.Tensor | None]:
    """The same case's gradients in this process, on the whole global batch."""
    from benchharness.training.loop import local_loss

    method, examples = ddp_worker.build(case, model)
    method.train()
    _, _, loss = local_loss(method, method, examples, len(examples), torch.device("cpu"), "fp32", None)
    loss.backward()
    return {n: p.grad for n, p in method.named_parameters()}


def largest_difference(got: dict, want: dict) -> tuple[float, float]:
    """(max |got - want|, max |want|) over every parameter; a parameter without gradient in one
    must have none in the other (BERT's pooler, which no loss here but DefSent+'s reads)."""
    assert {n for n, g in got.items() if g is None} == {n for n, g in want.items() if g is None}
    pairs = [(got[n], want[n]) for n in want if want[n] is not None]
    return max(float((g - w).abs().max()) for g, w in pairs), max(float(w.abs().max()) for _, w in pairs)


@needs_data(STOPWORDS)
@pytest.mark.distributed
@pytest.mark.parametrize("case", ddp_worker.CASES)
def test_first_step_gradients_equal_one_process_on_the_global_batch(case, ddp_gradients, no_dropout_bert):
    """Two processes, each on its half of an 8-sentence batch, the in-batch negatives gathered with
    gradients (the default), give the single-process gradient of the mean loss over all 8.

    Randomness that depends on how the batch is split is turned off in this check (``ddp_worker.build``):
    every dropout is 0, ConSERT's views are ``none`` (its token shuffle and cutoffs draw per row of each
    process's slice), PaSeR has no EDA augmentation and no MLM (drawn per collated batch). With them on,
    a data-parallel run draws its own augmentations, different from one process's."""
    got = torch.load(ddp_gradients / f"{case}.pt", weights_only=True)
    difference, largest = largest_difference(got, one_process_gradients(case, no_dropout_bert))
    assert difference <= TOLERANCE * largest, f"{case}: max |difference| {difference:.3g}, largest {largest:.3g}"
    if case != "defsent-plus":  # the pooler BERT computes and no loss of these reads: no gradient, no update
        assert got["encoder.pooler.dense.weight"] is None


@needs_data(STOPWORDS)  # the launch computes PaSeR's gradients too
@pytest.mark.distributed
def test_the_detached_gather_gives_simcses_own_gradients(ddp_gradients, no_dropout_bert):
    """``--negatives gather-detached`` is SimCSE's official gather: each process scores the full batch
    but only its own rows carry gradient, so after DDP's average every parameter's gradient is the
    single-process one divided by the world size, not the single-process one."""
    got = torch.load(ddp_gradients / "simcse-detached.pt", weights_only=True)
    want = one_process_gradients("simcse", no_dropout_bert)
    difference, largest = largest_difference(got, want)
    assert difference > 0.4 * largest  # far from the single-process gradient: the option is not ignored
    halved = {n: None if g is None else g / 2 for n, g in want.items()}
    difference, largest = largest_difference(got, halved)
    assert difference <= TOLERANCE * largest


# ----------------------------------------------------------------------------------------------
# the loop in two processes


@pytest.fixture(scope="module")
def trained(ddp_runs) -> Path:
    """``ddp_worker.train``: a SimCSE run with dropout on, straight and halted-then-resumed."""
    return ddp_runs["train"]


#: a finished run's folder: its records beside the model's files (a tiny BERT's, as sentence-transformers pools it)
FINISHED = {
    *("manifest.json", "metrics.jsonl", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"),
    *("1_Pooling", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json"),
}


def _saved(out: Path, run: str, rank: int) -> dict:
    return torch.load(out / f"{run}-rank{rank}.pt", weights_only=True)


@pytest.mark.distributed
def test_ranks_stay_in_sync_and_stop_early_together(trained):
    for run in ("straight", "resumed"):
        ranks = [_saved(trained, run, r) for r in (0, 1)]
        assert ranks[0]["steps"] == ranks[1]["steps"] == 6  # patience 1: stopped at the evaluation of step 6
        first, second = (r["parameters"] for r in ranks)
        assert all(torch.equal(first[k], second[k]) for k in first), run
    manifest = json.loads((trained / "straight" / "manifest.json").read_text())
    assert manifest["selection"]["best_step"] == 3 and manifest["training"]["stopped_early"]
    assert manifest["training"]["sentences"] == 6 * 4  # the global batches', counted once
    assert (manifest["hyperparameters"]["nproc"], manifest["hyperparameters"]["negatives"]) == (2, "gather-grad")


@pytest.mark.distributed
def test_only_rank_0_evaluates_and_writes(trained):
    for run in ("straight", "resumed"):
        assert {p.name for p in (trained / run).iterdir()} == FINISHED
        records = [json.loads(line) for line in (trained / run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4, 5, 6]  # one line a step: one writer
        assert [r["step"] for r in records if "dev_spearman" in r] == [0, 3, 6]
    assert sorted(p.name for p in trained.glob("*-dev-rank*")) == ["resumed-dev-rank0", "straight-dev-rank0"]


@pytest.mark.distributed
def test_a_halted_run_resumes_on_every_rank_to_the_uninterrupted_weights(trained):
    """Halted after step 5 (``stop_after``, which checkpoints), the run restarts from rank 0's
    checkpoint on both ranks, each with its own random state (dropout is on), and ends with the
    weights of the run that was never stopped."""
    straight, resumed = _saved(trained, "straight", 0)["parameters"], _saved(trained, "resumed", 0)["parameters"]
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    curves = [json.loads((trained / run / "manifest.json").read_text())["dev_curve"] for run in ("straight", "resumed")]
    assert curves[0] == curves[1]


# ----------------------------------------------------------------------------------------------
# the command


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
@pytest.mark.distributed
def test_train_nproc_launches_torchrun_and_records_the_data_parallel_recipe(tiny_bert, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{s} {i}\n" for i in range(2) for s in ddp_worker.SENTENCES))
    out = tmp_path / "run"
    result = launch(
        [
            sys.executable,
            "-m",
            "benchharness.cli",
            "train",
            "simcse",
            "--base",
            str(tiny_bert),
            "--data",
            f"text:{corpus}",
            "--nproc",
            "2",
            "--batch-size",
            "4",
            "--max-steps",
            "3",
            "--max-length",
            "16",
            "--eval-every",
            "3",
            "--out",
            str(out),
        ]
    )
    # the processes are told the configuration file this one read, as an argument (no variable carries it)
    launched = (
        r"torchrun --standalone --nproc-per-node 2 -m benchharness\.cli (--config \S+benchharness\.toml )?train simcse"
    )
    assert re.search(launched, result.stdout), result.stdout
    assert {p.name for p in out.iterdir()} == FINISHED
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["recipe"]["options"]["nproc"] == 2 and "--nproc 2" in manifest["recipe"]["command"]
    assert [step for step, _ in manifest["dev_curve"]] == [0, 3]  # rank 0's evaluations, once each
    assert np.isfinite([score for _, score in manifest["dev_curve"]]).all()
