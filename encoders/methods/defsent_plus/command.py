"""``benchharness train defsent-plus``: DefSent+'s progressive separate training, one registered
encoder per round (``<out>-r1``, ``-r2``...); rerunning skips finished rounds and resumes an
interrupted one. The method (pooler, frozen entry head, loss) is ``benchharness.encoders.methods.defsent_plus.model``.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from benchharness.core.cpu_share import kept_threads
from benchharness.core.data_root import DataRoot
from benchharness.core.devices import check_precision, pick_device
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import non_negative_float, non_negative_int, positive_int
from benchharness.core.seeding import seed_everything
from benchharness.encoders.methods import data_parallel
from benchharness.encoders.methods.base_model import load_base
from benchharness.encoders.methods.defsent_plus.dictionary import (
    Dictionary,
    format_statistics,
    merge,
    read_source,
    statistics,
    subsample,
)
from benchharness.encoders.methods.defsent_plus.entry_space import (
    ENTRY_TYPES,
    entry_embeddings,
    ica_transform,
    plot_entry_space,
)
from benchharness.encoders.methods.defsent_plus.model import (
    DEFAULTS,
    TRAINING_POOLINGS,
    DefSentPlus,
    prepare_pooler,
    round_lrs,
)
from benchharness.encoders.methods.launch import DevFactory, preflight, train_with_dev
from benchharness.encoders.methods.manifest import update_manifest
from benchharness.encoders.methods.train_config import (
    TrainConfig,
    add_training_arguments,
    config_from_options,
    resolve_options,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

HELP = "DefSent+: definitions classified into frozen entry embeddings, progressive separate training"

#: shared flags that contradict the protocol (one epoch, no warmup, final weights)
FIXED_BY_PROTOCOL = ("epochs", "max_steps", "warmup_ratio", "eval_every", "patience", "limit")


def _learning_rates(text: str) -> str:
    """``--round-lrs``: a comma list of non-negative numbers (kept as text; ``round_lrs`` expands it).
    A round at 0 trains nothing: its encoder is the original checkpoint, which is how a test shows
    that progressive separate training restarts every round from it."""
    for value in (v.strip() for v in text.split(",")):
        if not value:
            raise argparse.ArgumentTypeError(f"empty value in {text!r}; expected e.g. 5e-5,4e-5,3e-5")
        non_negative_float(value)
    return text


#: the command's own settings when a flag is not given (the flags default to None so that a recipe
#: can tell the flags a user gave from those it leaves to the recipe)
COMMAND_DEFAULTS: dict[str, Any] = {
    "dictionary": "wordnet,oxford-valid,oxford-test",
    "min_definitions": 1,
    "single_word": False,
    "subset_seed": 42,
    "rounds": 3,
    "training_pooling": "cls",
    "entry_type": "amp",
    "ica_max_iter": 1000,
    "entry_batch_size": 128,
    "no_final_space": False,
    "dev": False,
    "stats_only": False,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser)
    d = COMMAND_DEFAULTS
    g = parser.add_argument_group("DefSent+")
    g.add_argument(
        "--dictionary",
        help="comma list of sources merged into one dictionary: wordnet, oxford-train, oxford-valid, "
        "oxford-test (the data root's oxford/<split>.txt; train is not shipped here), or a path "
        f"to an 'entry<TAB>definition' file (default: {d['dictionary']})",
    )
    g.add_argument("--max-entries", type=positive_int, help="train on a seeded sample of this many entries")
    g.add_argument("--min-definitions", type=positive_int, help="keep entries with at least N definitions (default 1)")
    g.add_argument("--single-word", action="store_true", default=None, help="keep single-word entries only")
    g.add_argument("--subset-seed", type=non_negative_int, help="seed of the --max-entries sample (default 42)")
    g.add_argument("--rounds", type=positive_int, help="PST rounds (default 3, the paper's for raw BERT)")
    g.add_argument(
        "--round-lrs",
        type=_learning_rates,
        help="comma list of per-round learning rates (default: --lr for every round, "
        "else the paper's BERT-base 5e-5,4e-5,3e-5)",
    )
    g.add_argument(
        "--training-pooling",
        choices=TRAINING_POOLINGS,
        help="pooler over [CLS] or over the mean during training (default cls)",
    )
    g.add_argument(
        "--entry-type",
        choices=ENTRY_TYPES,
        help="entry embeddings: ac (average CLS) or amp (average mean pooling; default)",
    )
    g.add_argument("--ica-rounds", help="comma list of rounds that train against the ICA-transformed space")
    g.add_argument("--ica-max-iter", type=positive_int, help="(default 1000)")
    g.add_argument(
        "--entry-batch-size", type=positive_int, help="batch size of the entry-embedding passes (default 128)"
    )
    g.add_argument(
        "--no-final-space",
        action="store_true",
        default=None,
        help="skip building and plotting the last round's own entry space",
    )
    g.add_argument(
        "--dev", action="store_true", default=None, help="record STS-B dev Spearman before and after each round"
    )
    g.add_argument("--stats-only", action="store_true", default=None, help="print the dictionary statistics and exit")


def parse_rounds(spec: str | None, rounds: int) -> set[int]:
    try:
        chosen = {int(v) for v in (spec or "").split(",") if v.strip()}
    except ValueError:
        raise InvalidInputError(f"--ica-rounds {spec!r}: expected a comma list of round numbers, e.g. 2,3") from None
    bad = sorted(r for r in chosen if not 1 <= r <= rounds)
    if bad:
        raise InvalidInputError(f"--ica-rounds {bad} outside 1..{rounds}")
    return chosen


def _read_sources(args: argparse.Namespace, data_root: Path) -> list[Dictionary]:
    """The ``--dictionary`` sources, read before any model loads so that a missing file fails first."""
    specs = [s.strip() for s in args.dictionary.split(",") if s.strip()]
    if not specs:
        raise InvalidInputError(f"--dictionary {args.dictionary!r} names no source; use e.g. wordnet,oxford-valid")
    return [read_source(spec, data_root) for spec in specs]


def _dictionary(
    args: argparse.Namespace, parts: list[Dictionary], tokenizer: Any, data_root: Path
) -> tuple[Dictionary, dict[str, Any]]:
    """Merge and subset the dictionary; print and return Table-1-like statistics."""
    full = merge(*parts) if len(parts) > 1 else parts[0]

    def count(texts: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

    rows = {part.sources[0]: statistics(part, count) for part in parts} if len(parts) > 1 else {}
    rows["+".join(full.sources)] = statistics(full, count)
    chosen = subsample(full, args.max_entries, args.min_definitions, args.single_word, args.subset_seed)
    if chosen is not full:
        rows[chosen.sources[-1]] = statistics(chosen, count)
    print(format_statistics(rows))
    info = {
        "name": "dictionary",
        "kind": "(definition, entry) pairs",
        "sources": full.sources,
        "statistics": rows,
        "subset": chosen.sources[-1] if chosen is not full else None,
        "n_examples": chosen.n_definitions,
        "n_entries": len(chosen),
        "data_root": str(data_root),
    }
    return chosen, info


def options(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting of the run the flags describe: the protocol's defaults < the flags, with each
    round's learning rate resolved (``round_lrs``; ``lr`` is round 1's)."""
    given = [k for k in FIXED_BY_PROTOCOL if getattr(args, k, None) is not None]
    if given:
        raise InvalidInputError(
            f"DefSent+ trains exactly one epoch, no warmup, and keeps the final weights; "
            f"--{', --'.join(k.replace('_', '-') for k in given)} cannot be used with it"
        )
    if getattr(args, "data", None) is not None:
        raise InvalidInputError("DefSent+ trains on a dictionary: use --dictionary, not --data")
    if getattr(args, "negatives", None) is not None:
        raise InvalidInputError(
            "DefSent+ classifies definitions into entries and has no in-batch negatives to gather: drop --negatives"
        )
    opts = resolve_options(args, None, {**DEFAULTS, **COMMAND_DEFAULTS})
    if opts["rounds"] < 1:
        raise InvalidInputError("--rounds must be >= 1")
    opts["data"] = "dictionary"  # not a corpus: the dictionary settings below say which
    opts["eval_at_start"] = bool(opts["dev"])
    if opts["dev"] and (opts.get("eval_pooling") or "avg") == "prompt":
        raise InvalidInputError("--dev cannot evaluate pooling 'prompt'; drop --dev or choose another --eval-pooling")
    lrs = round_lrs(opts.get("round_lrs"), opts.get("lr"), opts["rounds"])
    opts["round_lrs"] = ",".join(str(lr) for lr in lrs)
    opts["lr"] = lrs[0]
    parse_rounds(opts.get("ica_rounds"), opts["rounds"])
    return opts


@kept_threads()  # --threads is this run's: a library call that trains leaves the count as found
def main(args: argparse.Namespace, dev: DevFactory | None = None) -> int:
    opts = options(args)
    run = argparse.Namespace(**{**vars(args), **opts})  # flags left unset stay None
    lrs = round_lrs(run.round_lrs, None, run.rounds)
    ica_rounds = parse_rounds(run.ica_rounds, run.rounds)
    base_config = config_from_options(opts)
    if base_config.threads:
        torch.set_num_threads(base_config.threads)
    device = pick_device(base_config.device)
    precision = check_precision(base_config.precision, device)
    data_root = DataRoot(getattr(args, "data_dir", None)).root
    sources = _read_sources(run, data_root)
    preflight(base_config)

    seed_everything(base_config.seed)
    encoder: PreTrainedModel | None
    encoder, tokenizer, source = load_base(base_config.base)
    dictionary, data = _dictionary(run, sources, tokenizer, data_root)
    if run.stats_only:
        return 0
    texts, labels = dictionary.pairs()
    examples = list(zip(texts, labels))
    name = base_config.name or base_config.out.resolve().name
    previous: Path | None = None
    started = time.perf_counter()
    for r in range(1, run.rounds + 1):
        out = base_config.out.with_name(f"{base_config.out.name}-r{r}")
        if (out / "manifest.json").exists() and not base_config.overwrite:
            logger.info("round %d: %s is finished; reusing it (pass --overwrite to retrain every round)", r, out)
            previous = out / "model"
            continue
        t_round = time.perf_counter()
        if encoder is None:  # every round trains the original checkpoint again
            seed_everything(base_config.seed)
            encoder, tokenizer, source = load_base(base_config.base)
        builder = encoder if previous is None else load_base(str(previous))[0]
        builder.to(device)  # type: ignore[arg-type]  # transformers wraps .to with functools.wraps: mypy loses self
        logger.info("round %d: entry embeddings (%s) with %s", r, run.entry_type.upper(), previous or base_config.base)
        # every rank of a data-parallel run builds the same matrix (DDP then copies rank 0's once); one bar
        matrix = entry_embeddings(
            builder,
            tokenizer,
            dictionary,
            run.entry_type,
            base_config.max_length,
            run.entry_batch_size,
            device,
            precision,
            data_parallel.is_main(),
        )
        entry_seconds = time.perf_counter() - t_round
        space = run.entry_type.upper()
        if r in ica_rounds:
            matrix = torch.from_numpy(ica_transform(matrix, run.ica_max_iter, 42))
            space = f"ICA({space}) x100"
        del builder
        extra_pooler, pooler_note = prepare_pooler(encoder, source.path)
        method = DefSentPlus(
            encoder,
            tokenizer,
            matrix,
            run.training_pooling,
            base_config.max_length,
            opts.get("eval_pooling") or "avg",
            extra_pooler,
            {
                "round": r,
                "rounds": run.rounds,
                "entry_type": run.entry_type,
                "entry_space": space,
                "entry_space_built_by": str(previous) if previous else f"base {base_config.base}",
                "ica": {
                    "max_iter": run.ica_max_iter,
                    "whiten": "unit-variance",
                    "fun": "logcosh",
                    "random_state": 42,
                    "scale": 100,
                }
                if r in ica_rounds
                else None,
                "pooler": pooler_note,
                "restart": "original checkpoint (progressive separate training)",
            },
        )
        overrides = {"out": out, "name": f"{name}-r{r}", "lr": lrs[r - 1]}
        config = TrainConfig(**{**base_config.to_dict(), **overrides})
        result = train_with_dev(method, examples, config, data, source, dev)
        if not result.completed:
            return 0  # paused by --stop-after; rerunning resumes this round
        if data_parallel.is_main():  # rank 0 writes; the round's model is complete on every rank's return
            plot_entry_space(matrix, out / "entry_space.png", f"{name} round {r}: {space} entry space")
            update_manifest(
                out,
                entry_space_plot="entry_space.png",
                round_seconds={
                    "entry_embeddings": round(entry_seconds, 1),
                    "total": round(time.perf_counter() - t_round, 1),
                },
            )
            logger.info("round %d: registered %s-r%d (%s); %.0f s", r, name, r, out, time.perf_counter() - t_round)
        previous = out / "model"
        encoder = None
    if not data_parallel.is_main():
        return 0
    if previous is not None and not run.no_final_space:
        final = load_base(str(previous))[0].to(device)  # type: ignore[arg-type]  # as above
        matrix = entry_embeddings(
            final,
            tokenizer,
            dictionary,
            run.entry_type,
            base_config.max_length,
            run.entry_batch_size,
            device,
            precision,
        )
        plot_entry_space(
            matrix,
            previous.parent / "entry_space_after.png",
            f"{name} after round {run.rounds}: {run.entry_type.upper()} entry space",
        )
        update_manifest(previous.parent, entry_space_after_plot="entry_space_after.png")
    logger.info(
        "DefSent+ done in %.0f s: %s; evaluate them with: benchharness run --encoders %s --tasks sts",
        time.perf_counter() - started,
        ", ".join(f"{name}-r{r}" for r in range(1, run.rounds + 1)),
        shlex.quote(
            ",".join(str(base_config.out.with_name(f"{base_config.out.name}-r{r}")) for r in range(1, run.rounds + 1))
        ),
    )
    return 0


def count_examples(options: dict[str, Any]) -> int:
    """Definitions per round, for the time estimate of ``benchharness run``."""
    root = DataRoot().root
    parts = [read_source(s.strip(), root) for s in options["dictionary"].split(",") if s.strip()]
    full = merge(*parts) if len(parts) > 1 else parts[0]
    return subsample(
        full, options.get("max_entries"), options["min_definitions"], options["single_word"], options["subset_seed"]
    ).n_definitions
