"""The processes of the data-parallel tests (``test_data_parallel.py``), started by torchrun:

    python -m torch.distributed.run --standalone --nproc-per-node 2 ddp_worker.py <scenario> <model> <out> [...]

Each ``<scenario> <model> <out>`` runs in turn in the same processes (one launch: each start
imports torch and transformers in every process). ``gradients``: the first step's gradients of
every case of :data:`CASES` (after DDP's all-reduce), saved by rank 0 as ``<out>/<case>.pt``.
``train``: the shared loop on a tiny SimCSE (dropout on), uninterrupted
(``<out>/straight``) and halted after step 5 then resumed (``<out>/resumed``), each stopped early
at step 6; each rank saves its step count and final parameters as ``<out>/<run>-rank<r>.pt``, and
the ranks that ran the dev evaluation leave ``<out>/<run>-dev-rank<r>``.

The methods are built here, for the test process too, so that both build the same ones.
A hang prints every thread's traceback and exits (``faulthandler``) before the test's own
subprocess timeout.
"""

from __future__ import annotations

import faulthandler
import sys
from pathlib import Path
from typing import Any

import torch

#: a global batch of 8 sentences of different lengths (so that each rank pads to its own length)
SENTENCES = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "a man plays a guitar",
    "two children read old books about distant mountains",
    "rain falls",
    "the orchestra performed a beautiful symphony last night in the concert hall",
    "cats sleep on warm windows",
    "scientists discovered a new species of deep sea fish",
    "bread rises slowly in the cold kitchen",
]
#: every case of the gradient check: method, and the settings that keep its random draws out of it
CASES = ("simcse", "consert", "paser", "paser-supervised", "defsent-plus")
HANG_SECONDS = 150  # below the test's subprocess timeout


def no_dropout(module: torch.nn.Module) -> None:
    """Every dropout of ``module`` off, including the float ``dropout`` attributes of BART's decoder
    (PaSeR's decoder is built with dropout 0.1 whatever the encoder's config says)."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.Dropout):
            sub.p = 0.0
        for name in ("dropout", "activation_dropout", "attention_dropout"):
            if isinstance(getattr(sub, name, None), float):
                setattr(sub, name, 0.0)


def build(case: str, model: Path) -> tuple[torch.nn.Module, list[Any]]:
    """A method on the tiny BERT in ``model`` (dropout 0) and its global batch of examples, with
    no random draw that depends on how the batch is split: ConSERT's views are ``none`` (its token
    shuffle and cutoffs draw per row of each rank's slice), PaSeR has no EDA augmentation and no
    MLM (both drawn per collated batch) and its decoder's dropout is off."""
    from benchharness.core.seeding import seed_everything
    from benchharness.training.authoring import load_base

    seed_everything(0)  # training-only heads are drawn at construction
    encoder, tokenizer, source = load_base(str(model))
    if case == "simcse":
        from benchharness.training.methods.simcse.model import SimCSE, SimCSEOptions

        return SimCSE(encoder, tokenizer, SimCSEOptions(max_length=32)), list(SENTENCES)
    if case == "consert":
        from benchharness.training.methods.consert.model import ConSERT, ConSERTOptions

        options = ConSERTOptions(view1="none", view2="none", max_length=32)
        return ConSERT(encoder, tokenizer, options), list(SENTENCES)
    if case.startswith("paser"):
        from benchharness.training.methods.paser.model import PaSeR, PaSeROptions

        supervised = case == "paser-supervised"
        options = PaSeROptions(
            max_length=32, augment="none", decoder_layers=1, decoder_heads=2, mlm_weight=0.0, supervised=supervised
        )
        method = PaSeR(encoder, tokenizer, options, checkpoint=source.path)
        no_dropout(method)
        examples: list[Any] = list(SENTENCES)
        if supervised:  # (anchor, entailment, contradiction): the next and the previous sentence
            examples = [(s, SENTENCES[(i + 1) % 8], SENTENCES[i - 1]) for i, s in enumerate(SENTENCES)]
        return method, examples
    from benchharness.training.methods.defsent_plus.model import DefSentPlus

    entries = torch.randn(5, encoder.config.hidden_size)
    return DefSentPlus(encoder, tokenizer, entries, max_length=32), [(s, i % 5) for i, s in enumerate(SENTENCES)]


def gradients(model: Path, out: Path) -> None:
    import numpy as np

    from benchharness.training import data_parallel
    from benchharness.training.loop import local_loss

    for case in (*CASES, "simcse-detached"):
        negatives = "gather-detached" if case.endswith("-detached") else "gather-grad"
        ctx = data_parallel.start(2, negatives, torch.device("cpu"))
        method, examples = build(case.removesuffix("-detached"), model)
        method.train()
        ddp = data_parallel.wrap(method, ctx)
        chunk = [examples[i] for i in data_parallel.local_rows(np.arange(len(examples)), ctx)]
        _, _, loss = local_loss(ddp, method, chunk, len(examples), torch.device("cpu"), "fp32", ctx)
        loss.backward()
        if ctx.rank == 0:
            torch.save({n: p.grad for n, p in method.named_parameters()}, out / f"{case}.pt")


def train(model: Path, out: Path) -> None:
    from benchharness.core.settings import Config
    from benchharness.training import data_parallel
    from benchharness.training.authoring import Plan, TrainingOptions, TrainSettings, run_loop

    rank = data_parallel.rank()
    sentences = [f"{s} number {i}" for i in range(2) for s in SENTENCES]  # 16: 4 steps of 4 an epoch

    def loop(name: str, **settings: Any) -> Any:
        method, _ = build("simcse", model)
        start = method.encoder.embeddings.position_embeddings.weight.detach().clone()

        def dev(encoder: torch.nn.Module) -> float:
            """Worse the further training moves the weights: the best step is the first evaluated
            after step 0, and patience 1 stops the run at the next evaluation."""
            (out / f"{name}-dev-rank{rank}").touch()
            return -float((encoder.embeddings.position_embeddings.weight.detach() - start).norm())

        options = TrainingOptions(
            nproc=2,
            batch_size=4,
            max_length=32,
            lr=1e-3,
            max_steps=12,
            warmup_ratio=0.0,
            eval_every=3,
            patience=1,
            log_every=1,
        )
        plan = Plan(base=str(model), out=out / name)
        run = TrainSettings(config=Config(), **settings)
        result = run_loop(method, sentences, options, run, plan, data={"name": "test sentences"}, dev=dev)
        torch.save({"steps": result.steps, "parameters": method.state_dict()}, out / f"{name}-rank{rank}.pt")
        return result

    loop("straight")
    halted = loop("resumed", stop_after=5)
    assert not halted.completed and halted.steps == 5
    loop("resumed")


if __name__ == "__main__":
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    args = sys.argv[1:]
    for at in range(0, len(args), 3):
        scenario, model_folder, out_folder = args[at : at + 3]
        {"gradients": gradients, "train": train}[scenario](Path(model_folder), Path(out_folder))
