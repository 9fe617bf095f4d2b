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
from typing import Callable

import numpy as np

from benchharness.core.data_root import DATA_ROOT_LABEL, DataRoot
from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.provenance import now, versions
from benchharness.core.resources import peak_rss_mib
from benchharness.core.results import OVERWRITE, ProtocolRecord, Result, ResultStore, Timings, fingerprint
from benchharness.core.seeding import seed_everything
from benchharness.core.task import EncoderDrivenTask, Evaluation, Task
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


class EmbeddingStore:
    """Sentence -> row lookup over one encoding pass; ``embed`` is what tasks receive."""

    def __init__(self, sentences: list[str], vectors: np.ndarray) -> None:
        self.index = {s: i for i, s in enumerate(sentences)}
        self.vectors = vectors

    def embed(self, sentences: list[str]) -> np.ndarray:
        try:
            return self.vectors[[self.index[s] for s in sentences]]
        except KeyError as exc:
            raise KeyError(f"task asked for a sentence it did not declare: {exc.args[0][:80]!r}") from None


def unique_sentences(loaded: list[Task]) -> list[str]:
    return list(dict.fromkeys(s for t in loaded for s in t.sentences()))


def non_finite_message(encoder: str, sentences: list[str], vectors: np.ndarray) -> str | None:
    """Why these vectors cannot be scored (rows holding NaN or inf), or None when all are finite."""
    if vectors.ndim != 2 or len(vectors) != len(sentences):
        return f"encoder {encoder!r} returned an array of shape {vectors.shape} for {len(sentences):,} sentences"
    bad = ~np.isfinite(vectors).all(axis=1)
    if not bad.any():
        return None
    first = sentences[int(np.argmax(bad))]
    return (f"encoder {encoder!r} returned {int(bad.sum()):,} non-finite vectors (NaN or inf) of {len(sentences):,} "
            f"(first: {first[:60]!r}); nothing was scored or stored. Check the model's weights and its "
            "precision (fp16 overflows), or its input handling for such sentences")


def zero_vectors(embeddings: EmbeddingStore, task: Task) -> int:
    """How many of the task's sentences are encoded as all-zero vectors (e.g. every word out of a
    word-vector vocabulary): cosine similarity is undefined for them, so the result reports them."""
    sentences = list(dict.fromkeys(task.sentences()))
    return int((~embeddings.embed(sentences).any(axis=1)).sum()) if sentences else 0


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
) -> Summary:
    if overwrite not in OVERWRITE:
        raise InvalidInputError(f"overwrite must be one of {', '.join(OVERWRITE)}")
    summary = Summary()
    tasks: dict[str, Task] = {}
    for name in task_names:
        task = get_task(name)
        try:
            task.load(data)
            tasks[name] = task
        except Exception as exc:  # data problems are per task
            for enc in encoder_names:
                summary.outcomes.append(Outcome(enc, name, "failed", message=str(exc)))
            log(f"[{name}] cannot load: {exc}")
    digests = {name: t.data_record()["sha256"] if isinstance(t, EncoderDrivenTask) else data.digest(t.files)
               for name, t in tasks.items()}
    run_versions = versions()

    for enc_name in encoder_names:
        try:
            encoder = get_encoder(enc_name)
            identity_info = encoder.identity_info()
            identity = encoder.identity
        except Exception as exc:
            for name in tasks:
                summary.outcomes.append(Outcome(enc_name, name, "failed", message=f"encoder: {exc}"))
            log(f"[{enc_name}] cannot build encoder: {exc}")
            continue
        todo: list[Task] = []
        previous: dict[str, float] = {}  # main scores of results recomputed only to add items
        replaced: dict[str, Result] = {}  # stored results about to be recomputed
        for name, task in tasks.items():
            stored = _stored(store, enc_name, name, log)
            if stored is not None and add_items and not store.has_items(stored):
                previous[name] = stored.main_score
            elif stored is not None and overwrite != "always":
                current = fingerprint(identity, digests[name], _protocol(task))
                fresh = stored.fingerprint() == current
                if overwrite == "reuse" or fresh:
                    note = "" if fresh else " (stored with a different identity/data/protocol; --overwrite stale recomputes)"
                    summary.outcomes.append(Outcome(enc_name, name, "reused", stored.main_score, note.strip()))
                    continue
            if stored is not None:
                replaced[name] = stored
            todo.append(task)
        driven = [t for t in todo if isinstance(t, EncoderDrivenTask)]
        for task in driven:
            _run_driven(task, enc_name, encoder, seed, run_versions, store, summary, log)
        todo = [t for t in todo if not isinstance(t, EncoderDrivenTask)]
        if not todo:
            continue

        seed_everything(seed)
        sentences = unique_sentences(todo)
        log(f"[{enc_name}] encoding {len(sentences)} unique sentences for {len(todo)} task(s)")
        t0 = time.perf_counter()
        encoded_before = getattr(encoder, "encoded", None)  # CachingEncoder counts real encodings
        try:
            vectors = encoder.encode(sentences, show_progress=show_progress)
        except Exception as exc:
            for task in todo:
                summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"encoding: {exc}"))
            log(f"[{enc_name}] encoding failed: {exc}\n{traceback.format_exc()}")
            continue
        encode_seconds = time.perf_counter() - t0
        vectors = np.asarray(vectors)
        problem = non_finite_message(enc_name, sentences, vectors)
        if problem is not None:
            for task in todo:
                summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=problem))
            log(f"[{enc_name}] {problem}")
            continue
        newly_encoded = (len(sentences) if encoded_before is None
                         else getattr(encoder, "encoded") - encoded_before)
        embeddings = EmbeddingStore(sentences, vectors)

        for task in todo:
            seed_everything(seed)
            t1 = time.perf_counter()
            try:
                evaluation = task.evaluate_items(embeddings.embed, seed)
            except Exception as exc:
                summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"evaluation: {exc}"))
                log(f"[{enc_name}/{task.name}] failed: {exc}\n{traceback.format_exc()}")
                continue
            zeros = zero_vectors(embeddings, task)
            metrics = evaluation.metrics
            result = Result(
                encoder=enc_name,
                task=task.name,
                main_score=float(metrics[task.metadata.main_score]),
                main_metric=task.metadata.main_score,
                metrics=metrics,
                protocol=_protocol(task),
                encoder_identity={"hash": identity, **identity_info},
                encoder_metadata=encoder.metadata,
                data={"sha256": digests[task.name], "root": DATA_ROOT_LABEL,
                      "files": sorted(str(f.relative_to(data.root)) for f in task.files),
                      "verified": data.verify},
                seed=seed,
                timings={"encode_seconds_all_tasks": round(encode_seconds, 3),
                         "sentences_encoded_all_tasks": len(sentences),
                         "sentences_not_from_cache": newly_encoded,
                         "evaluate_seconds": round(time.perf_counter() - t1, 3),
                         "peak_rss_mb": round(peak_rss_mib(), 1)},
                versions=run_versions,
                date=now(),
                embedding_stats={"zero_vectors": zeros},
                confidence=_confidence(evaluation, task, seed, log,
                                       _previous_confidence(store, replaced.get(task.name), run_versions)),
            )
            try:
                store.save(result, evaluation)
            except ValueError as exc:  # e.g. a NaN metric, which JSON cannot hold
                summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"storing: {exc}"))
                log(f"[{enc_name}/{task.name}] cannot store the result: {exc}")
                continue
            notes = [f"{zeros:,} zero vectors"] if zeros else []
            if task.name in previous and previous[task.name] != result.main_score:
                notes.append(f"items added; the score moved from the stored {previous[task.name]!r}")
                log(f"[{enc_name}/{task.name}] warning: {notes[-1]}")
            note = "; ".join(notes)
            summary.outcomes.append(Outcome(enc_name, task.name, "computed", result.main_score, note))
            log(f"[{enc_name}/{task.name}] {task.metadata.main_score} = {result.main_score:.2f}"
                + (f" ({notes[0]}: sentences the encoder could not represent)" if zeros else ""))
    return summary


def _run_driven(task: EncoderDrivenTask, enc_name: str, encoder: Encoder, seed: int,
                run_versions: dict[str, str | None], store: ResultStore, summary: Summary,
                log: Callable[[str], None]) -> None:
    """One task that encodes through the encoder itself (an mteb task): evaluated, stored and
    reported like the others; encoding time is part of its evaluation time."""
    seed_everything(seed)
    t0 = time.perf_counter()
    encoded_before = getattr(encoder, "encoded", None)  # CachingEncoder counts real encodings
    try:
        metrics = task.evaluate_encoder(encoder, seed)
    except Exception as exc:
        summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"evaluation: {exc}"))
        log(f"[{enc_name}/{task.name}] failed: {exc}\n{traceback.format_exc()}")
        return
    timings: Timings = {"evaluate_seconds": round(time.perf_counter() - t0, 3), "peak_rss_mb": round(peak_rss_mib(), 1)}
    if encoded_before is not None:
        timings["sentences_not_from_cache"] = getattr(encoder, "encoded") - encoded_before
    result = Result(
        encoder=enc_name, task=task.name, main_score=float(metrics[task.metadata.main_score]),
        main_metric=task.metadata.main_score, metrics=metrics, protocol=_protocol(task),
        encoder_identity={"hash": encoder.identity, **encoder.identity_info()}, encoder_metadata=encoder.metadata,
        data=task.data_record(), seed=seed, timings=timings, versions=run_versions, date=now(),
    )
    try:
        store.save(result)
    except ValueError as exc:
        summary.outcomes.append(Outcome(enc_name, task.name, "failed", message=f"storing: {exc}"))
        log(f"[{enc_name}/{task.name}] cannot store the result: {exc}")
        return
    summary.outcomes.append(Outcome(enc_name, task.name, "computed", result.main_score))
    log(f"[{enc_name}/{task.name}] {task.metadata.main_score} = {result.main_score:.2f}")


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
