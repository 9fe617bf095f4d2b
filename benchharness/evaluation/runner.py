"""The plan: for each encoder, encode the unique sentences of all selected tasks once, then
let every task evaluate from those vectors.

Encoders are handed in by a name resolver (``get_encoder``: ``Resolver.get``) and tasks as
objects, so the runner depends on the two contracts (``benchharness.core.encoder``,
``benchharness.core.task``) and on no family of either.

Results come back as objects, each with its task's per-item outputs attached and bootstrap
intervals computed from them (``benchharness.scoring.confidence``; seeded by the run seed and the
task name). Storage is a sink the runner writes to only when given one (``ResultStore``, a folder;
``MemoryStore``, a Ray unit's copy); it also holds the results a run may reuse, as the overwrite
strategy says. A result recomputed from identical items by the same clean commit keeps the
intervals it had. Stored results that lack items are reused as they are; ``add_items``
recomputes them whatever the overwrite strategy, and notes any score that comes out different
(it should not: the same code computes it).

Failures are contained: an encoder that cannot be built, a task whose data is missing, a task
whose evaluation raises, or a result that cannot be stored (a NaN metric is not JSON) is reported
in the summary while everything else finishes. An encoder that returns a NaN or infinite vector
fails every task of its pass before any evaluates: a score computed from such vectors is
meaningless, however plausible it looks. Messages go to the ``benchharness.evaluation.runner``
logger.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from benchharness.core.data_root import DATA_ROOT_LABEL, DataRoot
from benchharness.core.encoder import Encoder, WrappingEncoder, stable_hash
from benchharness.core.errors import UnavailableDataError, UserError
from benchharness.core.kind_models import KindModel
from benchharness.core.kinds import DENSE, ModelKind, ViewSettings
from benchharness.core.prompts import DEFAULT, Role
from benchharness.core.provenance import now, versions
from benchharness.core.resources import peak_rss_mib
from benchharness.core.results import ProtocolRecord, Result, ResultSink, Timings, fingerprint
from benchharness.core.seeding import seed_everything
from benchharness.core.specs import split_composition
from benchharness.core.task import DataRecord, Embed, EncoderDrivenTask, Evaluation, Task
from benchharness.evaluation.cache import CachingEncoder
from benchharness.evaluation.embeddings import (
    EmbeddingStore,
    Group,
    PassMemory,
    cache_below,
    encode_groups,
    encoding_line,
    non_finite_message,
    pass_groups,
    zero_vectors,
)
from benchharness.evaluation.kinds import kind_of
from benchharness.evaluation.kinds.first_stage import Searches
from benchharness.evaluation.pipeline_names import first_stage_depths
from benchharness.evaluation.run_settings import RunSettings
from benchharness.scoring.confidence import confidence_record

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What became of one (encoder, task) pair; ``result`` is the result itself when it was
    computed or reused."""

    encoder: str
    task: str
    status: str  # computed | reused | failed | skipped
    main_score: float | None = None
    message: str = ""
    result: Result | None = field(default=None, repr=False, compare=False)
    #: computed and saved in the run's store by this run
    saved: bool = False
    #: a failure the log told in one line with the others of its cause (``UnavailableDataError``)
    told_together: bool = False


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
    store: ResultSink | None
    settings: RunSettings
    versions: dict[str, str | None]
    summary: Summary
    #: sha256 of each loaded task's data
    digests: dict[str, str] = field(default_factory=dict)
    #: the first stages' top lists the run's pipelines share (``evaluation.kinds.first_stage``)
    searches: Searches = field(default_factory=Searches)

    @property
    def seed(self) -> int:
        return self.settings.seed

    @property
    def scratch(self) -> Path | None:
        """Where a pass too large for memory spills: beside the embedding cache, else the temporary folder."""
        return self.settings.cache_dir

    def fail(self, encoder: str, task: str, message: str, log_line: str, exc: BaseException | None = None) -> None:
        self.summary.outcomes.append(Outcome(encoder, task, "failed", message=message))
        logger.error(log_line, exc_info=None if exc is None or isinstance(exc, UserError) else exc)

    def evaluation_failed(self, encoder: str, task: str, exc: Exception) -> None:
        """A task whose evaluation raised: it fails alone, and the run goes on."""
        self.fail(encoder, task, f"evaluation: {exc}", f"[{encoder}/{task}] failed: {exc}", exc)


@dataclass
class _Plan:
    """One encoder's pass: the tasks to compute, and what is known of their stored results."""

    todo: list[Task] = field(default_factory=list)
    #: main scores of results recomputed only to add items
    previous: dict[str, float] = field(default_factory=dict)
    #: stored results about to be recomputed
    replaced: dict[str, Result] = field(default_factory=dict)


@dataclass(frozen=True)
class _Model:
    """One encoder of the run, as each step of its evaluation needs it: the name it was asked by
    (its results' ``encoder``), the model, its identity record and its plan."""

    name: str
    encoder: Encoder
    identity: dict
    plan: _Plan


@dataclass
class _Computed:
    """One task as one model computed it, before it is kept: the evaluation and its timings, and
    for a task evaluated from the pass's vectors, the zero vectors among those it asked for and the
    length of one."""

    task: Task
    evaluation: Evaluation
    timings: Timings
    zeros: int | None = None
    width: int | None = None


def run(
    encoder_names: list[str],
    tasks: list[Task],
    get_encoder: Callable[[str], Encoder],
    data: DataRoot,
    store: ResultSink | None,
    settings: RunSettings,
) -> Summary:
    """Evaluate every encoder on every task; each result is returned in its outcome, and kept in
    ``store`` when there is one (which also holds the results that may be reused)."""
    ctx = _Context(data, store, settings, versions(), Summary(), searches=Searches(first_stage_depths(encoder_names)))
    loaded = _load_tasks(tasks, encoder_names, ctx)
    if not loaded:  # no model is loaded (or trained on demand) for nothing
        return ctx.summary
    pending: list[_Pass] = []
    for enc_name in encoder_names:
        if pending and not _same_base(enc_name, pending[0].model.name):  # before another model loads
            pending = _pend(pending, None, ctx)
        try:
            encoder = get_encoder(enc_name)
            info = encoder.identity_record()
            identity = {"hash": stable_hash(info)[:16], **info}
        except Exception as exc:
            for name in loaded:
                ctx.summary.outcomes.append(Outcome(enc_name, name, "failed", message=f"encoder: {exc}"))
            logger.error(
                "[%s] cannot build encoder: %s", enc_name, exc, exc_info=None if isinstance(exc, UserError) else exc
            )
            continue
        try:
            kind = kind_of(encoder)
        except UserError as exc:
            for name in loaded:
                ctx.summary.outcomes.append(Outcome(enc_name, name, "failed", message=f"encoder: {exc}"))
            logger.error("[%s] %s", enc_name, exc)
            continue
        plan = _plan(enc_name, encoder, identity["hash"], loaded, ctx)
        plan.todo = _runnable(plan.todo, enc_name, kind, ctx)
        model = _Model(enc_name, encoder, identity, plan)
        for task in plan.todo:
            if isinstance(task, EncoderDrivenTask):
                _evaluate_driven(task, model, ctx)
        from_embeddings = [t for t in plan.todo if not isinstance(t, EncoderDrivenTask)]
        if from_embeddings and kind.open_view is None:
            pending = _pend(pending, _Pass(model, from_embeddings), ctx)
        elif from_embeddings:
            _evaluate_with_views(from_embeddings, model, ctx, kind)
    _pend(pending, None, ctx)
    return ctx.summary


def _runnable(tasks: list[Task], enc_name: str, kind: ModelKind, ctx: _Context) -> list[Task]:
    """The tasks a model of ``kind`` can run; each other one fails now, before anything is encoded,
    in one line naming the kind and what the task needs (a cross-encoder has no vector to cluster)."""
    runnable = []
    for task in tasks:
        why = kind.refusal(enc_name, task.name, task.takes)
        if why is None:
            runnable.append(task)
        else:
            ctx.fail(enc_name, task.name, why, f"[{enc_name}/{task.name}] {why}")
    return runnable


def _load_tasks(tasks: list[Task], encoder_names: list[str], ctx: _Context) -> dict[str, Task]:
    """Every task with its data read and digested; a task whose data cannot be read fails for every
    encoder, and the others go on. Tasks that lack their data for one shared cause are told in one
    line (``UnavailableDataError``)."""
    loaded: dict[str, Task] = {}
    unavailable: dict[type[UnavailableDataError], list[tuple[str, UnavailableDataError]]] = {}
    for task in tasks:
        try:
            task.load(ctx.data)
            loaded[task.name] = task
        except UnavailableDataError as exc:
            unavailable.setdefault(type(exc), []).append((task.name, exc))
        except Exception as exc:  # data problems are per task
            for enc in encoder_names:
                ctx.summary.outcomes.append(Outcome(enc, task.name, "failed", message=str(exc)))
            logger.error("[%s] cannot load: %s", task.name, exc)
    for cause, failed in unavailable.items():
        together = len(failed) > 1
        for name, error in failed:
            for enc in encoder_names:
                ctx.summary.outcomes.append(Outcome(enc, name, "failed", message=str(error), told_together=together))
            logger.log(logging.DEBUG if together else logging.ERROR, "[%s] cannot load: %s", name, error)
        if together:
            logger.error(cause.summary(failed, list(loaded)))
    for name, task in loaded.items():
        ctx.digests[name] = (
            task.data_record()["sha256"] if isinstance(task, EncoderDrivenTask) else ctx.data.digest(task.files)
        )
    return loaded


def _plan(enc_name: str, encoder: Encoder, identity: str, tasks: dict[str, Task], ctx: _Context) -> _Plan:
    """Which tasks this encoder computes: stored results are reused as the overwrite strategy says,
    except those lacking items when ``add_items`` asks for them. Without a store, all of them.

    A stored result is reused only for the identity it was computed with: under one name, other
    weights (a model trained in place, a new hub revision) are other results, as results are keyed
    by model revision in mteb and lm-eval. So ``reuse`` keeps a result of the same identity even
    when its data or protocol record changed (``stale`` recomputes those), and recomputes and
    replaces one of another identity, with a warning naming both. What the encoder is asked to
    encode besides the sentences (the prompt put before each role's sentences, the task's
    instruction) decides too: the same weights asked other inputs give other vectors."""
    plan = _Plan()
    overwrite, add_items = ctx.settings.overwrite, ctx.settings.add_items
    for name, task in tasks.items():
        stored = None if ctx.store is None else _stored(ctx.store, enc_name, name)
        if stored is not None and add_items and not ctx.store.has_items(stored):  # type: ignore[union-attr]
            plan.previous[name] = stored.main_score
        elif stored is not None and overwrite != "always":
            fresh = stored.fingerprint() == fingerprint(identity, ctx.digests[name], _protocol(task, encoder))
            same_identity = stored.encoder_identity.get("hash") == identity
            same_inputs = _inputs_of(stored) == _inputs(encoder, task)
            if fresh or (overwrite == "reuse" and same_identity and same_inputs):
                note = "" if fresh else "stored with other data or protocol; overwrite 'stale' recomputes"
                ctx.summary.outcomes.append(Outcome(enc_name, name, "reused", stored.main_score, note, stored))
                continue
            if same_identity and not same_inputs:
                logger.info(
                    "[%s/%s] the stored result was computed from other inputs (%s; now %s): recomputing it",
                    enc_name,
                    name,
                    _inputs_of(stored),
                    _inputs(encoder, task),
                )
            elif not same_identity:
                logger.warning(
                    "[%s/%s] the stored result is of another identity (%s; now %s): recomputing it, and replacing it",
                    enc_name,
                    name,
                    stored.encoder_identity.get("hash"),
                    identity,
                )
        if stored is not None:
            plan.replaced[name] = stored
        plan.todo.append(task)
    return plan


@dataclass
class _Pass:
    """One encoder's pass over the tasks it evaluates from embeddings (``todo``)."""

    model: _Model
    todo: list[Task]
    #: what the pass encodes with: the encoder, or the base of a last stage calibrated on each task
    #: (the pass encodes what it quantizes, once for all tasks)
    passing: Encoder = field(init=False)
    groups: dict[str, Group] = field(init=False)
    #: the embedding cache the pass goes through (``cache_below``), if any
    cache: CachingEncoder | None = field(init=False)

    def __post_init__(self) -> None:
        encoder = self.model.encoder
        self.passing = (
            encoder.wrapped if encoder.calibrated_per_task and isinstance(encoder, WrappingEncoder) else encoder
        )
        self.groups = pass_groups(self.todo, self.passing)
        self.cache = cache_below(self.passing)

    def shares(self, other: _Pass) -> bool:
        """Whether the two passes encode the same sentences through one embedding cache: the
        variants of one base (``minilm-l6+truncate(d=64|128)``), which the resolver builds on one
        shared base; the first pass fills the cache and the others are served from it."""
        return self.cache is not None and self.cache is other.cache and self.groups == other.groups


def _same_base(name: str, other: str) -> bool:
    """Whether two names are compositions of one base, which the resolver builds once for both."""
    parts, others = split_composition(name), split_composition(other)
    return len(parts) > 1 and len(others) > 1 and parts[0] == others[0]


def _pend(pending: list[_Pass], new: _Pass | None, ctx: _Context) -> list[_Pass]:
    """The passes waiting to run: ``new`` joins those it shares its base's cache with; otherwise
    (or with no ``new``: the next encoder has another base) they run now, and it waits alone. So the
    variants of one base run together, and the log says once what the base encodes for all of them."""
    if new is not None and pending and new.shares(pending[0]):
        return [*pending, new]
    variants = [p.model.name for p in pending] if len(pending) > 1 else None
    for p in pending:
        _evaluate_from_embeddings(p, ctx, variants)
    return [] if new is None else [new]


def _evaluate_from_embeddings(p: _Pass, ctx: _Context, variants: list[str] | None = None) -> None:
    """The shared pass: every unique sentence of ``p.todo`` encoded once for each distinct vector
    its roles call for (once in all, for a symmetric encoder), then each task evaluated from the
    embeddings. ``variants``: the passes of one base run together (``_pend``), the first of which
    says what the base encodes for all of them; the others, served by its cache, say nothing, unless
    the cache did not serve them all (the first pass failed, or the cache was left)."""
    todo, enc_name = p.todo, p.model.name
    seed_everything(ctx.seed)
    passing, groups, cache = p.passing, p.groups, p.cache
    sentences = [s for _, members in groups.values() for s in members]
    t0 = time.perf_counter()
    encoded_before = cache.encoded if cache is not None else 0
    leads = variants is None or variants[0] == enc_name

    def told(role: Any, total: int, cached: int) -> None:
        side = f" as {role}" if len(groups) > 1 else ""
        line = encoding_line(total, cached)
        if variants is None or cache is None:
            logger.info("[%s] %s%s for %d task(s)", enc_name, line, side, len(todo))
        else:
            logger.info(
                "[%s] %s%s for %d task(s), once for its %d variants: %s",
                cache.name,
                line,
                side,
                len(todo),
                len(variants),
                ", ".join(variants),
            )

    with PassMemory(len(sentences), ctx.settings.embedding_memory_mib, ctx.scratch) as memory:
        try:
            vectors = encode_groups(passing, groups, memory, told if leads else None)
        except Exception as exc:
            for task in todo:
                ctx.summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"encoding: {exc}"))
            logger.error(
                "[%s] encoding failed: %s", enc_name, exc, exc_info=None if isinstance(exc, UserError) else exc
            )
            return
        encode_seconds = time.perf_counter() - t0
        newly_encoded = cache.encoded - encoded_before if cache is not None else len(sentences)
        if not leads and newly_encoded:
            line = encoding_line(len(sentences), len(sentences) - newly_encoded)
            logger.info("[%s] %s for %d task(s), which the cache did not hold", enc_name, line, len(todo))
        _evaluate_tasks(
            p,
            ctx,
            sentences,
            vectors,
            {
                "encode_seconds_all_tasks": round(encode_seconds, 3),
                "sentences_encoded_all_tasks": len(sentences),
                "sentences_not_from_cache": newly_encoded,
            },
        )


def _evaluate_tasks(p: _Pass, ctx: _Context, sentences: list[str], vectors: Any, pass_timings: Timings) -> None:
    """Each task of the pass evaluated from its vectors (``sentences``: every group's, in row order);
    vectors that cannot be scored fail them all."""
    todo, enc_name, encoder = p.todo, p.model.name, p.model.encoder
    problem = non_finite_message(enc_name, sentences, vectors)
    if problem is not None:
        for task in todo:
            ctx.summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=problem))
        logger.error("[%s] %s", enc_name, problem)
        return
    embeddings = EmbeddingStore(p.groups, vectors, encoder)
    for task in todo:
        requests = task.requests()
        zeros, asked = zero_vectors(embeddings, requests)
        if zeros and zeros == asked:
            ctx.fail(
                enc_name,
                task.name,
                f"every one of the {zeros:,} sentences is encoded as a zero vector "
                "(e.g. every word out of a word-vector vocabulary): cosine similarity, hence the score, is "
                "undefined",
                f"[{enc_name}/{task.name}] failed: every sentence is a zero vector",
            )
            continue
        seed_everything(ctx.seed)
        t1 = time.perf_counter()
        try:
            embed = _task_embed(encoder, embeddings, requests)
            evaluation = task.evaluate_items(embed, ctx.seed)
        except Exception as exc:
            ctx.evaluation_failed(enc_name, task.name, exc)
            continue
        timings: Timings = {**pass_timings, "evaluate_seconds": round(time.perf_counter() - t1, 3)}
        _finish(_Computed(task, evaluation, timings, zeros, _width(embed, requests)), p.model, ctx)


def _evaluate_with_views(todo: list[Task], model: _Model, ctx: _Context, kind: ModelKind) -> None:
    """Each task scored through a view of a model of ``kind`` (``ModelKind.open_view``): the view
    computes what the task asks for through the kind's cache, a corpus a block at a time, and what
    it reports of the model's cost (active dimensions, bytes per document) joins the task's metrics."""
    assert kind.open_view is not None
    settings, enc_name, encoder = _view_settings(ctx), model.name, model.encoder
    for task in todo:
        seed_everything(ctx.seed)
        t1 = time.perf_counter()
        try:
            view = kind.open_view(encoder, settings)
            evaluation = task.evaluate_items(view, ctx.seed)
            evaluation.metrics.update(view.facts())
            for stage, stage_model in _stages(encoder).items():  # after the model's own: its searches are shared
                open_stage = kind_of(stage_model).open_view
                assert open_stage is not None  # a stage is a model of a kind with a view (a pipeline's first stage)
                stage_view = open_stage(stage_model, settings)
                scored = task.evaluate_items(stage_view, ctx.seed).metrics
                evaluation.metrics.update(_prefixed(stage, {**scored, **stage_view.facts()}))
        except Exception as exc:
            ctx.evaluation_failed(enc_name, task.name, exc)
            continue
        timings: Timings = {"evaluate_seconds": round(time.perf_counter() - t1, 3)}
        _finish(_Computed(task, evaluation, timings), model, ctx)


def _view_settings(ctx: _Context) -> ViewSettings:
    """What a kind's view is told of the run: its cache folder, memory bound and shared first-stage lists."""
    return ViewSettings(ctx.settings.cache_dir, ctx.settings.embedding_memory_mib, ctx.searches)


def _stages(encoder: Encoder) -> dict[str, Encoder]:
    """The models whose scores on each task a result of ``encoder`` reports beside its own, by the
    name their metrics go under (``KindModel.stages``: a pipeline's first stage alone)."""
    return encoder.stages() if isinstance(encoder, KindModel) else {}


def _prefixed(stage: str, metrics: dict[str, Any]) -> dict[str, Any]:
    return {f"{stage}/{key}": value for key, value in metrics.items()}


def _finish(computed: _Computed, model: _Model, ctx: _Context) -> None:
    """A task evaluated from the run's data: its memory and intervals, then kept."""
    task, plan, confidence = computed.task, model.plan, None
    computed.timings["peak_rss_mb"] = round(peak_rss_mib(), 1)
    if ctx.settings.intervals:
        earlier = _previous_confidence(ctx.store, plan.replaced.get(task.name), ctx.versions)
        confidence = _confidence(computed.evaluation, task, ctx.seed, earlier)
    _keep(computed, model, ctx, confidence=confidence, previous=plan.previous.get(task.name))


def _data_record(task: Task, ctx: _Context) -> DataRecord:
    """Where a result's data came from: the task's own record when it reads its data itself (an mteb
    task), else the files it read under the run's data root, their digest and whether they are verified."""
    if isinstance(task, EncoderDrivenTask):
        return task.data_record()
    return {
        "sha256": ctx.digests[task.name],
        "root": DATA_ROOT_LABEL,
        "files": sorted(ctx.data.label(f) for f in task.files),
        "verified": ctx.data.verified(task.files),
    }


def _task_embed(encoder: Encoder, embeddings: EmbeddingStore, requests: dict[Role, list[str]]) -> Embed:
    """What a task's ``embed`` serves: the pass's vectors, or, for a stage calibrated on each task,
    its codes calibrated on every vector the task asks for (all roles together)."""
    if not encoder.calibrated_per_task:
        return embeddings.embed
    asked = np.unique(np.concatenate([embeddings.positions(s, role) for role, s in requests.items()]))
    codes = encoder.for_task(embeddings.vectors[asked])  # type: ignore[attr-defined]
    return lambda sentences, role=DEFAULT: codes(embeddings.embed(sentences, role))


def _width(embed: Embed, requests: dict[Role, list[str]]) -> int:
    """The length of the rows a task was served (one row asked for again)."""
    role, sentences = next(iter(requests.items()))
    return int(embed(sentences[:1], role).shape[1])


def _evaluate_driven(task: EncoderDrivenTask, model: _Model, ctx: _Context) -> None:
    """One task that encodes through the encoder itself (an mteb task): evaluated and reported like
    the others; encoding time is part of its evaluation time."""
    enc_name, encoder = model.name, model.encoder
    seed_everything(ctx.seed)
    t0 = time.perf_counter()
    encoded_before = encoder.encoded if isinstance(encoder, CachingEncoder) else None
    try:
        outcome = task.evaluate_encoder(encoder, ctx.seed, _view_settings(ctx))
        evaluation = outcome if isinstance(outcome, Evaluation) else Evaluation(outcome)
        for stage, stage_model in _stages(encoder).items():
            scored = task.evaluate_encoder(stage_model, ctx.seed, _view_settings(ctx))
            evaluation.metrics.update(_prefixed(stage, scored.metrics if isinstance(scored, Evaluation) else scored))
    except Exception as exc:
        ctx.evaluation_failed(enc_name, task.name, exc)
        return
    timings: Timings = {"evaluate_seconds": round(time.perf_counter() - t0, 3), "peak_rss_mb": round(peak_rss_mib(), 1)}
    if encoded_before is not None:
        timings["sentences_not_from_cache"] = encoder.encoded - encoded_before  # type: ignore[attr-defined]
    _keep(_Computed(task, evaluation, timings), model, ctx)


def _keep(
    computed: _Computed, model: _Model, ctx: _Context, *, confidence: dict | None = None, previous: float | None = None
) -> None:
    """Build the task's result, with its per-item outputs attached, save it to the store if there is
    one, and report it. A metric that is NaN or infinite fails the task alone, naming the metric: such
    a score says nothing, no result file can hold it, and it must never be reported or reused. A
    result that cannot be stored (a full or read-only disk) fails alone too."""
    enc_name, encoder = model.name, model.encoder
    task, evaluation, zeros = computed.task, computed.evaluation, computed.zeros
    metrics = evaluation.metrics
    undefined = [key for key, value in metrics.items() if isinstance(value, float) and not math.isfinite(value)]
    if undefined:
        message = (
            f"{', '.join(f'{k} = {metrics[k]}' for k in undefined)}: the task gave no defined score; nothing stored"
        )
        ctx.fail(enc_name, task.name, message, f"[{enc_name}/{task.name}] failed: {message}")
        return
    result = Result(
        encoder=enc_name,
        task=task.name,
        main_score=float(metrics[task.metadata.main_score]),
        main_metric=task.metadata.main_score,
        metrics=metrics,
        protocol=_protocol(task, encoder),
        encoder_identity=model.identity,
        encoder_metadata=_metadata(encoder, task, evaluation.prompts),
        data=_data_record(task, ctx),
        seed=ctx.seed,
        timings=computed.timings,
        versions=ctx.versions,
        date=now(),
        embedding_stats=_embedding_stats(encoder, zeros, computed.width),
        confidence=confidence,
        per_item=evaluation if evaluation.items else None,
    )
    notes = [f"{zeros:,} zero vectors"] if zeros else []
    saved = False
    if ctx.store is not None and not encoder.pinned:
        # its identity ties the result to no model (a server that reports no revision): a stored
        # copy could never be reused or compared, only mistaken for a pinned one
        notes.append("not stored: the encoder is unpinned (give it an identity to store its results)")
    elif ctx.store is not None:
        try:
            ctx.store.save(result)
        except (ValueError, OSError) as exc:  # a NaN metric (JSON cannot hold it); a full or read-only disk
            ctx.fail(enc_name, task.name, f"storing: {exc}", f"[{enc_name}/{task.name}] cannot store the result: {exc}")
            return
        saved = True
    if previous is not None and previous != result.main_score:
        notes.append(
            f"items added; the score moved by {result.main_score - previous:+.2g} from the stored "
            f"{previous:.4f} (reproducibility tolerance 0.01)"
        )
        logger.warning("[%s/%s] %s", enc_name, task.name, notes[-1])
    ctx.summary.outcomes.append(
        Outcome(enc_name, task.name, "computed", result.main_score, "; ".join(notes), result, saved=saved)
    )
    logger.info(
        "[%s/%s] %s = %.2f%s",
        enc_name,
        task.name,
        task.metadata.main_score,
        result.main_score,
        f" ({notes[0]}: sentences the encoder could not represent)" if zeros else "",
    )


def _embedding_stats(encoder: Encoder, zeros: int | None, width: int | None) -> dict[str, int | float] | None:
    """The zero vectors among those a task asked for, and the size of one: its width and the
    bytes it takes (``Encoder.bytes_per_vector``: 4 a value, or a quantized code's size)."""
    stats: dict[str, int | float] = {} if zeros is None else {"zero_vectors": zeros}
    if width is not None:
        stats.update(dimensions=width, bytes_per_vector=encoder.bytes_per_vector(width))
    return stats or None


def _confidence(evaluation: Evaluation, task: Task, seed: int, previous: tuple[dict, Evaluation] | None) -> dict | None:
    """The result's intervals, or a record of why there are none (too few items to resample, say):
    an interval that cannot be formed does not cost the score."""
    if not evaluation.items:
        return None
    try:
        return confidence_record(evaluation, task.metadata.main_score, task.name, seed, previous=previous)
    except ValueError as exc:
        logger.warning("[%s] no confidence interval: %s", task.name, exc)
        return {"error": str(exc)}


def _previous_confidence(
    store: ResultSink | None, stored: Result | None, run_versions: dict[str, str | None]
) -> tuple[dict, Evaluation] | None:
    """The intervals and items of a result being recomputed, when the same clean commit and the same
    libraries computed them (``confidence_record`` reuses them if the new items are identical);
    None otherwise, and then the intervals are bootstrapped afresh."""
    commit = run_versions.get("git_commit")
    if (
        store is None
        or stored is None
        or not stored.confidence
        or "error" in stored.confidence
        or commit is None
        or commit.endswith("-dirty")
        or stored.versions != run_versions
    ):
        return None
    try:
        return stored.confidence, store.load_items(stored)
    except (OSError, ValueError):  # items missing, damaged or another run's: bootstrap afresh
        return None


def _metadata(encoder: Encoder, task: Task, applied: dict[str, str] | None = None) -> dict[str, Any]:
    """The encoder's metadata, with the prompt it put in front of each role's sentences for this
    task when it put any (``prompts_applied``: what a reader needs to reproduce the inputs).
    ``applied``: those prompts as a task that encodes by itself reports them."""
    metadata = encoder.metadata
    if applied is None and not encoder.prompts.empty:
        applied = {str(role): encoder.prompts.for_role(role) for role in task.requests()}
    return {**metadata, "prompts_applied": applied} if applied else metadata


def _inputs(encoder: Encoder, task: Task) -> dict[str, Any]:
    """What ``encoder`` is asked to encode for ``task`` besides its sentences: the prompt before each
    role's sentences and the task's instruction (a ``vectors:`` file keys its rows by it)."""
    return {"prompts": _metadata(encoder, task).get("prompts_applied"), "instruction": task.metadata.instruction}


def _inputs_of(result: Result) -> dict[str, Any]:
    """``_inputs`` as a stored result records them."""
    prompts = result.encoder_metadata.get("prompts_applied")
    return {"prompts": prompts, "instruction": result.protocol.get("instruction")}


def _protocol(task: Task, encoder: Encoder | None = None) -> ProtocolRecord:
    """The task's protocol record; for a model of a kind other than dense, with its kind and the
    similarity it scored by (the task's own ``similarity`` names the dense one, cosine)."""
    meta = task.metadata
    record = {
        "variant": meta.protocol,
        "split": meta.split,
        "main_score": meta.main_score,
        **meta.protocol_details,
        **({"instruction": meta.instruction} if meta.instruction else {}),
    }
    if encoder is not None and encoder.model_kind != DENSE:
        record["model_kind"] = encoder.model_kind
        record["similarity"] = encoder.similarity  # the model's own: dot or cosine, maxsim or meanmaxsim
    if isinstance(encoder, KindModel):  # a pipeline names its stages, and a reranking protocol its variant
        record.update(encoder.protocol_details(meta.protocol))
    return cast(ProtocolRecord, record)  # the named keys, then the task's own protocol details


def _stored(store: ResultSink, encoder: str, task: str) -> Result | None:
    """The stored result, or None; a damaged file, or another encoder's, is recomputed and replaced
    (with a warning naming it) rather than ending the run."""
    try:
        return store.load(encoder, task)
    except ValueError as exc:
        logger.warning("[%s/%s] %s; recomputing", encoder, task, exc)
        return None
