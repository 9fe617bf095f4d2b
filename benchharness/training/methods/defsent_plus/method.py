"""DefSent+ as a training method: progressive separate training, one trained encoder per round.

With an output folder ``<out>``, round k is registered as ``<out>-r<k>`` (rerunning skips finished
rounds and resumes an interrupted one); in memory, every round's encoder is returned, the last one
being the method's. The module, pooler, frozen entry head and loss are ``model.py``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from benchharness.core.atomic import atomic_file
from benchharness.core.cpu_share import kept_threads
from benchharness.core.devices import check_precision, pick_device
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import BadValue, non_negative_float, non_negative_int, positive_int
from benchharness.core.manifests import METRICS, read_manifest
from benchharness.training import data_parallel
from benchharness.training.base_model import base_folder, load_base
from benchharness.training.manifest import update_manifest
from benchharness.training.method import Examples, Method, TrainedRun, TrainingData
from benchharness.training.methods.defsent_plus.dictionary import (
    Dictionary,
    format_statistics,
    merge,
    read_source,
    statistics,
    subsample,
)
from benchharness.training.methods.defsent_plus.entry_space import (
    ENTRY_TYPES,
    entry_embeddings,
    ica_transform,
    plot_entry_space,
)
from benchharness.training.methods.defsent_plus.model import (
    DEFAULTS,
    TRAINING_POOLINGS,
    DefSentPlus,
    prepare_pooler,
    round_lrs,
)
from benchharness.training.options import TrainingOptions, option, shared_option

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from benchharness.core.data_root import DataRoot
    from benchharness.training.harness import Trainer

logger = logging.getLogger(__name__)

#: shared settings that contradict the protocol (one epoch, no warmup, final weights)
FIXED_BY_PROTOCOL = ("epochs", "max_steps", "warmup_ratio", "eval_every", "patience", "limit")
DICTIONARY = "wordnet,oxford-valid,oxford-test"


def _learning_rates(text: str) -> str:
    """``--round-lrs``: a comma list of non-negative numbers (kept as text; ``round_lrs`` expands it).
    A round at 0 trains nothing: its encoder is the original checkpoint, which is how a test shows
    that progressive separate training restarts every round from it."""
    for value in (v.strip() for v in text.split(",")):
        if not value:
            raise BadValue(f"empty value in {text!r}; expected e.g. 5e-5,4e-5,3e-5")
        non_negative_float(value)
    return text


@dataclass(frozen=True)
class DefSentPlusOptions(TrainingOptions):
    """The protocol's training settings (``model.DEFAULTS``, the official ``TrainEncoder.py``: the
    legacy AdamW with eps 1e-6, gradient norm clipped at 1.0, one epoch, no warmup, the last partial
    batch kept, final weights), then the dictionary and the rounds. ``--dev`` scores the dev set
    before and after each round, without periodic evaluation."""

    DEV_WITHOUT_PERIOD: ClassVar[bool] = True

    batch_size: int = shared_option("batch_size", DEFAULTS["batch_size"])
    max_length: int = shared_option("max_length", DEFAULTS["max_length"])
    optimizer: str = shared_option("optimizer", DEFAULTS["optimizer"])
    correct_bias: bool = shared_option("correct_bias", DEFAULTS["correct_bias"])
    weight_decay: float = shared_option("weight_decay", DEFAULTS["weight_decay"])
    adam_eps: float = shared_option("adam_eps", DEFAULTS["adam_eps"])
    grad_clip: float | None = shared_option("grad_clip", DEFAULTS["grad_clip"])
    epochs: int = shared_option("epochs", DEFAULTS["epochs"])
    warmup_ratio: float = shared_option("warmup_ratio", DEFAULTS["warmup_ratio"])
    drop_last: bool = shared_option("drop_last", DEFAULTS["drop_last"])
    eval_every: int | None = shared_option("eval_every", DEFAULTS["eval_every"])
    eval_at_start: bool = shared_option("eval_at_start", DEFAULTS["eval_at_start"])
    seed: int = shared_option("seed", DEFAULTS["seed"])
    dictionary: str = option(
        DICTIONARY,
        "comma list of sources merged into one dictionary: wordnet, oxford-train, oxford-valid, "
        "oxford-test (the data root's oxford/<split>.txt; train is not shipped here), or a path "
        f"to an 'entry<TAB>definition' file (default: {DICTIONARY})",
    )
    max_entries: int | None = option(
        None, "train on a seeded sample of this many entries", parse=positive_int, recorded="when-set"
    )
    min_definitions: int = option(1, "keep entries with at least N definitions (default 1)", parse=positive_int)
    single_word: bool = option(False, "keep single-word entries only")
    subset_seed: int = option(42, "seed of the --max-entries sample (default 42)", parse=non_negative_int)
    rounds: int = option(3, "PST rounds (default 3, the paper's for raw BERT)", parse=positive_int)
    round_lrs: str | None = option(
        None,
        "comma list of per-round learning rates (default: --lr for every round, "
        "else the paper's BERT-base 5e-5,4e-5,3e-5)",
        parse=_learning_rates,
        recorded="when-set",
    )
    training_pooling: str = option(
        "cls", "pooler over [CLS] or over the mean during training (default cls)", choices=TRAINING_POOLINGS
    )
    entry_type: str = option(
        "amp", "entry embeddings: ac (average CLS) or amp (average mean pooling; default)", choices=ENTRY_TYPES
    )
    ica_rounds: str | None = option(
        None, "comma list of rounds that train against the ICA-transformed space", recorded="when-set"
    )
    ica_max_iter: int = option(1000, "(default 1000)", parse=positive_int)
    entry_batch_size: int = option(128, "batch size of the entry-embedding passes (default 128)", parse=positive_int)
    no_final_space: bool = option(False, "skip building and plotting the last round's own entry space")
    dev: bool = option(False, "record STS-B dev Spearman before and after each round")

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_rounds(self.ica_rounds, self.rounds)
        if self.dev and (self.eval_pooling or "avg") == "prompt":
            raise InvalidInputError(
                "--dev cannot evaluate pooling 'prompt'; drop --dev or choose another --eval-pooling"
            )

    def sentence_data(self) -> str | None:
        return "DefSent+ trains on a dictionary, not sentences: pass dictionary=<wordnet,oxford-valid,... or a file>"


def parse_rounds(spec: str | None, rounds: int) -> set[int]:
    try:
        chosen = {int(v) for v in (spec or "").split(",") if v.strip()}
    except ValueError:
        raise InvalidInputError(f"--ica-rounds {spec!r}: expected a comma list of round numbers, e.g. 2,3") from None
    bad = sorted(r for r in chosen if not 1 <= r <= rounds)
    if bad:
        raise InvalidInputError(f"--ica-rounds {bad} outside 1..{rounds}")
    return chosen


def adjust(record: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's refusals, and each round's learning rate resolved (``round_lrs``; ``lr`` is
    round 1's)."""
    fixed = [k for k in FIXED_BY_PROTOCOL if given.get(k) is not None]
    if fixed:
        raise InvalidInputError(
            f"DefSent+ trains exactly one epoch, no warmup, and keeps the final weights; "
            f"--{', --'.join(k.replace('_', '-') for k in fixed)} cannot be used with it"
        )
    if given.get("data") is not None:
        raise InvalidInputError("DefSent+ trains on a dictionary: use --dictionary, not --data")
    if given.get("negatives") is not None:
        raise InvalidInputError(
            "DefSent+ classifies definitions into entries and has no in-batch negatives to gather: drop --negatives"
        )
    record["data"] = "dictionary"  # not a corpus: the dictionary settings say which
    record["eval_at_start"] = bool(record["dev"])
    if isinstance(record["rounds"], int) and record["rounds"] >= 1:
        lrs = round_lrs(given.get("round_lrs"), given.get("lr"), record["rounds"])
        record["round_lrs"] = ",".join(str(lr) for lr in lrs)
        record["lr"] = lrs[0]
    return record


def _read_dictionary(options: DefSentPlusOptions, data: DataRoot) -> list[Dictionary]:
    """The dictionary sources, read before any model loads so that a missing file fails first."""
    specs = [s.strip() for s in options.dictionary.split(",") if s.strip()]
    if not specs:
        raise InvalidInputError(f"--dictionary {options.dictionary!r} names no source; use e.g. wordnet,oxford-valid")
    return [read_source(spec, data.root) for spec in specs]


@dataclass
class DictionaryExamples(Examples):
    """The (definition, entry index) pairs of the merged and subset dictionary, with the
    dictionary itself (its entries are the classes) and the sources it merges (for statistics)."""

    dictionary: Dictionary
    parts: list[Dictionary]
    full: Dictionary

    def statistics(self, tokenizer: Any) -> dict[str, Any]:
        """Table-1-like statistics of each source, the merge and the subset, in ``tokenizer``'s tokens."""

        def count(texts: list[str]) -> list[int]:
            return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

        parts, full, chosen = self.parts, self.full, self.dictionary
        rows = {part.sources[0]: statistics(part, count) for part in parts} if len(parts) > 1 else {}
        rows["+".join(full.sources)] = statistics(full, count)
        if chosen is not full:
            rows[chosen.sources[-1]] = statistics(chosen, count)
        return rows


def examples(options: DefSentPlusOptions, data: TrainingData) -> DictionaryExamples:
    """The definitions of the merged dictionary (a seeded sample of its entries with ``--max-entries``),
    each with its entry's index."""
    parts = _read_dictionary(options, data.root)
    full = merge(*parts) if len(parts) > 1 else parts[0]
    chosen = subsample(full, options.max_entries, options.min_definitions, options.single_word, options.subset_seed)
    texts, labels = chosen.pairs()
    record = {
        "name": "dictionary",
        "kind": "(definition, entry) pairs",
        "sources": full.sources,
        "subset": chosen.sources[-1] if chosen is not full else None,
        "n_examples": chosen.n_definitions,
        "n_entries": len(chosen),
    }
    return DictionaryExamples(list(zip(texts, labels)), record, chosen, parts, full)


def describe_data(options: DefSentPlusOptions, found: Examples, tokenizer: Any) -> str:
    """The dictionary's statistics table (the paper's Table 1 columns), counted with the base's tokenizer."""
    assert isinstance(found, DictionaryExamples)  # what ``examples`` returns
    return format_statistics(found.statistics(tokenizer))


def _plot(run: TrainedRun, key: str, name: str, matrix: torch.Tensor, title: str) -> None:
    """A plot of an entry space beside the run (``files``, the manifest's ``key``), and in its folder.
    Without matplotlib (an environment installed without dependencies) the run keeps its weights
    and says in one line that the figure is left out: a figure is no reason to lose the training."""
    try:
        run.files[name] = plot_entry_space(matrix, title)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("matplotlib"):
            raise
        logger.warning("matplotlib is not installed: %s is left out of the run (pip install matplotlib)", name)
        return
    if run.manifest is not None:
        run.manifest[key] = name  # type: ignore[literal-required]
    if run.out is not None:
        with atomic_file(run.out / name, "wb") as fh:
            fh.write(run.files[name])
        update_manifest(run.out, **{key: name})


@kept_threads()  # settings.threads is this run's: a library call that trains leaves the count as found
def stages(options: DefSentPlusOptions, found: Examples, trainer: Trainer) -> list[TrainedRun]:
    """Progressive separate training: each round builds the entry space with the previous round's
    encoder (round 1: the base's) and trains the original checkpoint against it, as stage ``r`` of
    the run (its folder ``<out>-r<k>``); a round an earlier invocation finished is read back."""
    assert isinstance(found, DictionaryExamples)  # what ``examples`` returns
    settings, plan = trainer.settings, trainer.plan
    lrs = round_lrs(options.round_lrs, None, options.rounds)
    ica_rounds = parse_rounds(options.ica_rounds, options.rounds)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = pick_device(settings.device)
    precision = check_precision(options.precision, device)
    base = trainer.base()
    encoder: PreTrainedModel | None = base.encoder
    tokenizer = base.tokenizer
    data = {**found.record, "statistics": found.statistics(tokenizer)}
    logger.info("DefSent+ dictionary:\n%s", format_statistics(data["statistics"]))
    dictionary = found.dictionary
    examples = Examples(found.items, data)
    name = plan.name
    runs: list[TrainedRun] = []
    previous: PreTrainedModel | None = None
    previous_label = ""

    def entry_space(model: PreTrainedModel, tokenizer: Any) -> torch.Tensor:
        """The dictionary's entry space under ``model``, as the options build it. Every rank of a
        data-parallel run builds the same matrix (DDP then copies rank 0's once), one bar shown."""
        return entry_embeddings(
            model,
            tokenizer,
            dictionary,
            options.entry_type,
            options.max_length,
            options.entry_batch_size,
            device,
            precision,
            data_parallel.is_main(),
        )

    started = time.perf_counter()
    for r in range(1, options.rounds + 1):
        out = plan.stage(r).out
        if out is not None and trainer.finished(r):
            logger.info("round %d: %s is finished; reusing it (pass --overwrite to retrain every round)", r, out)
            runs.append(_finished_round(out, settings.runs_dir))
            previous, previous_label = runs[-1].encoder, str(out)
            continue
        t_round = time.perf_counter()
        if encoder is None:  # every round trains the original checkpoint again
            base = trainer.base()
            encoder, tokenizer = base.encoder, base.tokenizer
        builder = encoder if previous is None else previous
        builder.to(device)  # type: ignore[arg-type]  # transformers wraps .to with functools.wraps: mypy loses self
        logger.info(
            "round %d: entry embeddings (%s) with %s", r, options.entry_type.upper(), previous_label or plan.base
        )
        matrix = entry_space(builder, tokenizer)
        entry_seconds = time.perf_counter() - t_round
        space = options.entry_type.upper()
        if r in ica_rounds:
            matrix = torch.from_numpy(ica_transform(matrix, options.ica_max_iter, 42))
            space = f"ICA({space}) x100"
        del builder
        extra_pooler, pooler_note = prepare_pooler(encoder, base.source.path)
        method = DefSentPlus(
            encoder,
            tokenizer,
            matrix,
            options.training_pooling,
            options.max_length,
            options.eval_pooling or "avg",
            extra_pooler,
            {
                "round": r,
                "rounds": options.rounds,
                "entry_type": options.entry_type,
                "entry_space": space,
                "entry_space_built_by": previous_label or f"base {plan.base}",
                "ica": {
                    "max_iter": options.ica_max_iter,
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
        run = trainer.fit(method, examples, base, replace(options, lr=lrs[r - 1]), round=r)
        if not run.completed:
            return [*runs, run]  # paused by stop_after; rerunning resumes this round
        if data_parallel.is_main():  # rank 0 writes; the round's model is complete on every rank's return
            _plot(
                run,
                "entry_space_plot",
                "entry_space.png",
                matrix,
                f"{name or 'defsent-plus'} round {r}: {space} entry space",
            )
            seconds = {"entry_embeddings": round(entry_seconds, 1), "total": round(time.perf_counter() - t_round, 1)}
            if run.manifest is not None:
                run.manifest["round_seconds"] = seconds
            if out is not None:
                update_manifest(out, round_seconds=seconds)
            logger.info("round %d: trained %s-r%d; %.0f s", r, name or "defsent-plus", r, time.perf_counter() - t_round)
        runs.append(run)
        previous, previous_label = run.encoder, str(out) if out is not None else f"round {r}"
        encoder = None
    if not data_parallel.is_main():
        return runs
    if previous is not None and not options.no_final_space:
        final = previous.to(device)  # type: ignore[arg-type]  # as above
        matrix = entry_space(final, tokenizer)
        _plot(
            runs[-1],
            "entry_space_after_plot",
            "entry_space_after.png",
            matrix,
            f"{name or 'defsent-plus'} after round {options.rounds}: {options.entry_type.upper()} entry space",
        )
    logger.info("DefSent+ done in %.0f s", time.perf_counter() - started)
    return runs


def _finished_round(out: Path, runs_dir: Path) -> TrainedRun:
    """A round an earlier invocation finished, read back from its folder."""
    encoder, tokenizer, _ = load_base(base_folder(str(out), runs_dir))
    metrics_file = out / METRICS
    metrics = [json.loads(line) for line in metrics_file.read_text().splitlines()] if metrics_file.is_file() else []
    manifest = read_manifest(out)
    return TrainedRun(encoder, tokenizer, manifest, metrics, out, manifest["training"]["steps"], True, None, None)


METHOD = Method(
    name="defsent-plus",
    help="DefSent+: definitions classified into frozen entry embeddings, progressive separate training",
    title="DefSent+",
    options=DefSentPlusOptions,
    examples=examples,
    stages=stages,
    adjust=adjust,
    describe_data=describe_data,
)
