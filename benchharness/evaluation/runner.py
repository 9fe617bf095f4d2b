"""The plan: for each encoder, encode the unique sentences of all selected tasks once, then
let every task evaluate from that store and write its result.

Encoders and tasks are handed in by name resolvers (``get_encoder``, ``get_task``: the CLI passes
``Resolver.get`` and ``benchharness.tasks.get``), so the runner depends on the two contracts
(``benchharness.core.encoder``, ``benchharness.core.task``) and on no family of either.

Each result keeps its task's per-item outputs beside it and bootstrap intervals computed from
them (``benchharness.scoring.confidence``; seeded by the run seed and the task name); a result recomputed
from identical items by the same clean commit keeps the intervals it had. Results stored before
items were kept are reused as they are; ``add_items=True`` (``run --add-items``) recomputes those
that lack them, whatever the overwrite strategy, and notes any score that comes out different
(it should not: the same code computes it).

Failures are contained: an encoder that cannot be built, a task whose data is missing, a task
whose evaluation raises, or a result that cannot be stored (a NaN metric is not JSON) is reported
in the summary while everything else finishes and is saved. An encoder that returns a NaN or
infinite vector fails every task of its pass before any evaluates: a score computed from such
vectors is meaningless, however plausible it looks.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchharness.core.data_root import DATA_ROOT_LABEL, DataRoot
from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.progress import progress_shown
from benchharness.core.provenance import now, versions
from benchharness.core.resources import peak_rss_mib
from benchharness.core.results import OVERWRITE, ProtocolRecord, Result, ResultStore, Timings, fingerprint
from benchharness.core.seeding import seed_everything
from benchharness.core.task import EncoderDrivenTask, Evaluation, Task
from benchharness.evaluation.cache import CachingEncoder
from benchharness.evaluation.embeddings import (
    DEFAULT_MEMORY_MIB,
    EmbeddingStore,
    PassMemory,
    encode_pass,
    non_finite_message,
    unique_sentences,
    zero_vectors,
)
from benchharness.scoring.confidence import confidence_record

DEFAULT_SEED = 1111  # SentEval's seed, used by every task that draws random numbers


@dataclass
class Outcome:
    encoder: str
    task: str
    status: str  # computed | reused | failed | skipped
    main_score: float | None = None
    message: str = ""


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]


@dataclass
class _Context:
    """What every step of a run shares."""

    data: DataRoot
    store: ResultStore
    seed: int
    versions: dict[str, str | None]
    summary: Summary
    log: Callable[[str], None]
    #: bootstrap intervals for each result (a training loop's evaluations go without)
    intervals: bool = True
    #: sha256 of each loaded task's data
    digests: dict[str, str] = field(default_factory=dict)
    #: a pass's vectors larger than this go to a file in ``scratch`` (the system's temporary folder if None)
    memory_mib: float = DEFAULT_MEMORY_MIB
    scratch: Path | None = None

    def fail(self, encoder: str, task: str, message: str, log_line: str) -> None:
        self.summary.outcomes.append(Outcome(encoder, task, "failed", message=message))
        self.log(log_line)


@dataclass
class _Plan:
    """One encoder's pass: the tasks to compute, and what is known of their stored results."""

    todo: list[Task] = field(default_factory=list)
    #: main scores of results recomputed only to add items
    previous: dict[str, float] = field(default_factory=dict)
    #: stored results about to be recomputed
    replaced: dict[str, Result] = field(default_factory=dict)


def run(
    encoder_names: list[str],
    task_names: list[str],
    get_encoder: Callable[[str], Encoder],
    get_task: Callable[[str], Task],
    data: DataRoot,
    store: ResultStore,
    overwrite: str = "reuse",
    seed: int = DEFAULT_SEED,
    show_progress: bool = True,
    log: Callable[[str], None] = print,
    add_items: bool = False,
    intervals: bool = True,
    memory_mib: float = DEFAULT_MEMORY_MIB,
    scratch: Path | None = None,
) -> Summary:
    """Evaluate every encoder on every task, storing one result per pair; ``memory_mib`` bounds the
    memory of one encoding pass's vectors (a larger pass is written to a file in ``scratch``)."""
    if overwrite not in OVERWRITE:
        raise InvalidInputError(f"overwrite must be one of {', '.join(OVERWRITE)}")
    ctx = _Context(data, store, seed, versions(), Summary(), log, intervals, memory_mib=memory_mib, scratch=scratch)
    tasks = _load_tasks(task_names, get_task, encoder_names, ctx)
    for enc_name in encoder_names:
        try:
            encoder = get_encoder(enc_name)
            identity = {"hash": encoder.identity, **encoder.identity_info()}
        except Exception as exc:
            for name in tasks:
                ctx.summary.outcomes.append(Outcome(enc_name, name, "failed", message=f"encoder: {exc}"))
            log(f"[{enc_name}] cannot build encoder: {exc}")
            continue
        plan = _plan(enc_name, identity["hash"], tasks, overwrite, add_items, ctx)
        for task in plan.todo:
            if isinstance(task, EncoderDrivenTask):
                _evaluate_driven(task, enc_name, encoder, identity, ctx)
        from_embeddings = [t for t in plan.todo if not isinstance(t, EncoderDrivenTask)]
        if from_embeddings:
            _evaluate_from_embeddings(from_embeddings, enc_name, encoder, identity, plan, show_progress, ctx)
    return ctx.summary


def _load_tasks(task_names: list[str], get_task: Callable[[str], Task], encoder_names: list[str],
                ctx: _Context) -> dict[str, Task]:
    """Every task with its data read and digested; a task whose data cannot be read fails for every
    encoder, and the others go on."""
    tasks: dict[str, Task] = {}
    for name in task_names:
        task = get_task(name)
        try:
            task.load(ctx.data)
            tasks[name] = task
        except Exception as exc:  # data problems are per task
            for enc in encoder_names:
                ctx.summary.outcomes.append(Outcome(enc, name, "failed", message=str(exc)))
            ctx.log(f"[{name}] cannot load: {exc}")
    for name, task in tasks.items():
        driven = isinstance(task, EncoderDrivenTask)
        ctx.digests[name] = task.data_record()["sha256"] if driven else ctx.data.digest(task.files)
    return tasks


def _plan(enc_name: str, identity: str, tasks: dict[str, Task], overwrite: str, add_items: bool,
          ctx: _Context) -> _Plan:
    """Which tasks this encoder computes: stored results are reused as the overwrite strategy says,
    except those lacking items when ``add_items`` asks for them."""
    plan = _Plan()
    for name, task in tasks.items():
        stored = _stored(ctx.store, enc_name, name, ctx.log)
        if stored is not None and add_items and not ctx.store.has_items(stored):
            plan.previous[name] = stored.main_score
        elif stored is not None and overwrite != "always":
            fresh = stored.fingerprint() == fingerprint(identity, ctx.digests[name], _protocol(task))
            if overwrite == "reuse" or fresh:
                note = "" if fresh else "stored with a different identity/data/protocol; --overwrite stale recomputes"
                ctx.summary.outcomes.append(Outcome(enc_name, name, "reused", stored.main_score, note))
                continue
        if stored is not None:
            plan.replaced[name] = stored
        plan.todo.append(task)
    return plan


def _evaluate_from_embeddings(todo: list[Task], enc_name: str, encoder: Encoder, identity: dict, plan: _Plan,
                              show_progress: bool, ctx: _Context) -> None:
    """The shared pass: every unique sentence of ``todo`` encoded once, then each task evaluated
    from the embeddings and stored."""
    seed_everything(ctx.seed)
    sentences = unique_sentences(todo)
    ctx.log(f"[{enc_name}] encoding {len(sentences)} unique sentences for {len(todo)} task(s)")
    t0 = time.perf_counter()
    encoded_before = encoder.encoded if isinstance(encoder, CachingEncoder) else 0
    with PassMemory(len(sentences), ctx.memory_mib, ctx.scratch) as memory:
        try:
            vectors = encode_pass(encoder, sentences, memory, show_progress)
        except Exception as exc:
            for task in todo:
                ctx.summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"encoding: {exc}"))
            ctx.log(f"[{enc_name}] encoding failed: {exc}{_trace(exc)}")
            return
        encode_seconds = time.perf_counter() - t0
        newly_encoded = encoder.encoded - encoded_before if isinstance(encoder, CachingEncoder) else len(sentences)
        _evaluate_tasks(todo, enc_name, encoder, identity, plan, show_progress, ctx, sentences, vectors,
                        {"encode_seconds_all_tasks": round(encode_seconds, 3),
                         "sentences_encoded_all_tasks": len(sentences), "sentences_not_from_cache": newly_encoded})


def _evaluate_tasks(todo: list[Task], enc_name: str, encoder: Encoder, identity: dict, plan: _Plan,
                    show_progress: bool, ctx: _Context, sentences: list[str], vectors: Any,
                    pass_timings: Timings) -> None:
    """Each task evaluated from the pass's vectors and stored; vectors that cannot be scored fail
    them all."""
    problem = non_finite_message(enc_name, sentences, vectors)
    if problem is not None:
        for task in todo:
            ctx.summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=problem))
        ctx.log(f"[{enc_name}] {problem}")
        return
    embeddings = EmbeddingStore(sentences, vectors)
    for task in todo:
        zeros = zero_vectors(embeddings, task.sentences())
        if zeros and zeros == len(set(task.sentences())):
            ctx.fail(enc_name, task.name, f"every one of the {zeros:,} sentences is encoded as a zero vector "
                     "(e.g. every word out of a word-vector vocabulary): cosine similarity, hence the score, is "
                     "undefined", f"[{enc_name}/{task.name}] failed: every sentence is a zero vector")
            continue
        seed_everything(ctx.seed)
        t1 = time.perf_counter()
        try:
            with progress_shown(show_progress):
                evaluation = task.evaluate_items(embeddings.embed, ctx.seed)
        except Exception as exc:
            ctx.fail(enc_name, task.name, f"evaluation: {exc}", f"[{enc_name}/{task.name}] failed: {exc}{_trace(exc)}")
            continue
        timings: Timings = {**pass_timings, "evaluate_seconds": round(time.perf_counter() - t1, 3),
                            "peak_rss_mb": round(peak_rss_mib(), 1)}
        data_record = {"sha256": ctx.digests[task.name], "root": DATA_ROOT_LABEL,
                       "files": sorted(ctx.data.label(f) for f in task.files), "verified": ctx.data.verify}
        confidence = None if not ctx.intervals else _confidence(
            evaluation, task, ctx.seed, ctx.log, _previous_confidence(ctx.store, plan.replaced.get(task.name),
                                                                      ctx.versions))
        _store(task, enc_name, encoder, identity, evaluation, data_record, timings, ctx, zeros=zeros,
               confidence=confidence, previous=plan.previous.get(task.name))


def _evaluate_driven(task: EncoderDrivenTask, enc_name: str, encoder: Encoder, identity: dict, ctx: _Context) -> None:
    """One task that encodes through the encoder itself (an mteb task): evaluated, stored and
    reported like the others; encoding time is part of its evaluation time."""
    seed_everything(ctx.seed)
    t0 = time.perf_counter()
    encoded_before = encoder.encoded if isinstance(encoder, CachingEncoder) else None
    try:
        metrics = task.evaluate_encoder(encoder, ctx.seed)
    except Exception as exc:
        ctx.fail(enc_name, task.name, f"evaluation: {exc}", f"[{enc_name}/{task.name}] failed: {exc}{_trace(exc)}")
        return
    timings: Timings = {"evaluate_seconds": round(time.perf_counter() - t0, 3), "peak_rss_mb": round(peak_rss_mib(), 1)}
    if encoded_before is not None:
        timings["sentences_not_from_cache"] = encoder.encoded - encoded_before  # type: ignore[attr-defined]
    _store(task, enc_name, encoder, identity, Evaluation(metrics), task.data_record(), timings, ctx)


def _store(task: Task, enc_name: str, encoder: Encoder, identity: dict, evaluation: Evaluation, data_record: dict,
           timings: Timings, ctx: _Context, *, zeros: int | None = None, confidence: dict | None = None,
           previous: float | None = None) -> None:
    """Build the task's result, save it (with its items, if any) and report it; a result that cannot
    be stored (a NaN metric, which JSON cannot hold) fails alone."""
    metrics = evaluation.metrics
    result = Result(
        encoder=enc_name, task=task.name, main_score=float(metrics[task.metadata.main_score]),
        main_metric=task.metadata.main_score, metrics=metrics, protocol=_protocol(task),
        encoder_identity=identity, encoder_metadata=encoder.metadata,
        data=data_record, seed=ctx.seed, timings=timings, versions=ctx.versions, date=now(),
        **({} if zeros is None else {"embedding_stats": {"zero_vectors": zeros}}),
        **({} if confidence is None else {"confidence": confidence}),
    )
    try:
        ctx.store.save(result, evaluation if evaluation.items else None)
    except (ValueError, OSError) as exc:  # a NaN metric (JSON cannot hold it); a full or read-only disk
        ctx.fail(enc_name, task.name, f"storing: {exc}", f"[{enc_name}/{task.name}] cannot store the result: {exc}")
        return
    notes = [f"{zeros:,} zero vectors"] if zeros else []
    if previous is not None and previous != result.main_score:
        notes.append(f"items added; the score moved by {result.main_score - previous:+.2g} from the stored "
                     f"{previous:.4f} (reproducibility tolerance 0.01)")
        ctx.log(f"[{enc_name}/{task.name}] warning: {notes[-1]}")
    ctx.summary.outcomes.append(Outcome(enc_name, task.name, "computed", result.main_score, "; ".join(notes)))
    ctx.log(f"[{enc_name}/{task.name}] {task.metadata.main_score} = {result.main_score:.2f}"
            + (f" ({notes[0]}: sentences the encoder could not represent)" if zeros else ""))


def _confidence(evaluation: Evaluation, task: Task, seed: int, log: Callable[[str], None],
                previous: tuple[dict, Evaluation] | None) -> dict | None:
    """The result's intervals, or a record of why there are none (too few items to resample, say):
    an interval that cannot be formed does not cost the score."""
    if not evaluation.items:
        return None
    try:
        return confidence_record(evaluation, task.metadata.main_score, task.name, seed, previous=previous)
    except ValueError as exc:
        log(f"[{task.name}] no confidence interval: {exc}")
        return {"error": str(exc)}


def _previous_confidence(store: ResultStore, stored: Result | None,
                         run_versions: dict[str, str | None]) -> tuple[dict, Evaluation] | None:
    """The intervals and items of a result being recomputed, when the same clean commit and the same
    libraries computed them (``confidence_record`` reuses them if the new items are identical);
    None otherwise, and then the intervals are bootstrapped afresh."""
    commit = run_versions.get("git_commit")
    if (stored is None or not stored.confidence or "error" in stored.confidence or commit is None
            or commit.endswith("-dirty") or stored.versions != run_versions):
        return None
    try:
        return stored.confidence, store.load_items(stored)
    except (OSError, ValueError):  # items missing, damaged or another run's: bootstrap afresh
        return None


def _trace(exc: Exception) -> str:
    """The traceback of an unexpected error, for the log; a user error's message says it all."""
    return "" if isinstance(exc, UserError) else "\n" + traceback.format_exc()


def _protocol(task: Task) -> ProtocolRecord:
    meta = task.metadata
    return {"variant": meta.protocol, "split": meta.split, "main_score": meta.main_score,
            **meta.protocol_details}


def _stored(store: ResultStore, encoder: str, task: str, log: Callable[[str], None]) -> Result | None:
    """The stored result, or None; a damaged file, or another encoder's, is recomputed and replaced
    (with a warning naming it) rather than ending the run."""
    try:
        return store.load(encoder, task)
    except ValueError as exc:
        log(f"[{encoder}/{task}] warning: {exc}; recomputing")
        return None
