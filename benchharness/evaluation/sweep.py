"""``run --executor ray``: a sweep of encoders x tasks as Ray tasks, with the driver as the only
writer of results.

The unit of work is one base encoder's pass over its tasks: every encoder of the sweep that
composes on the same base (``x``, ``x+whitening``, ``x+repal``) goes to one unit, so they share
``x``'s vectors on one host, as in a sequential run. Before anything is submitted the driver reads
the result store: a unit whose every result would be reused is not submitted. A unit receives its
encoders' stored results as objects (per-item outputs attached), runs the ordinary runner on them
as a ``MemoryStore`` (so reuse, ``--overwrite stale`` and ``--add-items`` decide exactly as in a
sequential run) and hands back the results it computed, as objects; the driver stores each as its
unit finishes, so nothing finished is lost when a later unit fails, and workers need no shared
file system. A unit whose worker dies (a killed process, a lost node) is retried by Ray; one that
raises is reported as failed for its pairs while the others go on. Each unit asks for one GPU when
the cluster has one (a recipe that must be trained first trains there), else one CPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchharness.core import digests
from benchharness.core.cpu_share import usable_cpus
from benchharness.core.encoder import identity_scope
from benchharness.core.results import MemoryStore, Result, ResultStore
from benchharness.core.specs import split_composition
from benchharness.core.task import Task
from benchharness.evaluation.ray_cluster import enter_driver_folder, ray_session, slot
from benchharness.evaluation.results import Results
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import Outcome

logger = logging.getLogger(__name__)

#: attempts after a worker dies before its unit is given up (Ray's own default, stated here)
RETRIES = 3


@dataclass
class Unit:
    """One base encoder's pass: the encoders composed on it, each on every task of the sweep."""

    base: str
    encoders: list[str]
    #: stored results of these encoders, per-item outputs attached where they are kept
    stored: list[Result] = field(default_factory=list)


def plan(
    encoder_names: list[str],
    task_names: list[str],
    store: ResultStore,
    overwrite: str,
    add_items: bool,
    identity_of: Callable[[str], str | None],
) -> tuple[list[Unit], list[Outcome]]:
    """The units to submit, and the results reused without submitting anything: a unit is left out
    only when each of its pairs is stored for the identity its encoder has now (``identity_of``,
    None when it cannot be known here without building a model: the worker decides then, by the
    runner's own rule)."""
    groups: dict[str, list[str]] = {}
    for name in encoder_names:
        groups.setdefault(split_composition(name)[0], []).append(name)
    units, reused = [], []
    for base, names in groups.items():
        unit = Unit(base, names)
        settled = []
        for name in names:
            asked, identity = False, None  # the identity is asked for once per encoder, when needed
            for task in task_names:
                try:
                    stored = store.load(name, task)
                except ValueError:  # damaged or another's: the worker recomputes it
                    stored = None
                if stored is None:
                    continue
                with_items = store.has_items(stored)
                if with_items:
                    stored.per_item = store.load_items(stored)
                unit.stored.append(stored)
                if overwrite != "reuse" or (add_items and not with_items):
                    continue
                if not asked:
                    asked, identity = True, identity_of(name)
                if identity is not None and stored.encoder_identity.get("hash") == identity:
                    settled.append(Outcome(name, task, "reused", stored.main_score, result=stored))
        if len(settled) == len(names) * len(task_names):
            reused.extend(settled)
        else:
            units.append(unit)
    return units, reused


def _identity_in_driver(settings: RunSettings) -> Callable[[str], str | None]:
    """An encoder's identity as the driver can tell it without training or loading a model (the
    hf and st families fingerprint weight files; a recipe resolves only once trained); None when it
    cannot."""
    from benchharness.evaluation.run_resolver import resolver_for

    resolver = resolver_for(settings.but(train=False), settings.data(verify=False))

    def identity_of(name: str) -> str | None:
        try:
            return resolver.get(name).identity
        except Exception:  # not known here without work (an untrained recipe...): the worker decides
            return None

    return identity_of


#: a log message of a worker, replayed by the driver: logger name, level, text
LogLine = tuple[str, int, str]


class _Recorder(logging.Handler):
    """Keeps a worker's benchharness messages, formatted, for the driver to replay."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[LogLine] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append((record.name, record.levelno, text))


def run_unit(
    unit: Unit, task_names: list[str], settings: RunSettings, folder: str
) -> tuple[list[Outcome], list[LogLine]]:
    """A unit on a worker: the runner on its stored results, in memory; returns its outcomes (the
    computed and reused results in them) and its messages."""
    from benchharness.evaluation.evaluate import resolve_tasks
    from benchharness.evaluation.run_resolver import cache_at, resolver_for
    from benchharness.evaluation.runner import run

    enter_driver_folder(folder)
    _every_core()
    recorder = _Recorder()
    root = logging.getLogger("benchharness")
    root.addHandler(recorder)
    previous_level = root.level
    root.setLevel(logging.INFO)
    try:
        data_root = settings.data()
        cache = None if settings.cache_dir is None else cache_at(settings.cache_dir)
        resolver = resolver_for(settings, data_root, cache)
        remember = contextlib.nullcontext() if settings.cache_dir is None else digests.remembering(settings.cache_dir)
        with identity_scope(), remember:
            summary = run(
                unit.encoders,
                resolve_tasks(task_names, settings.config),
                resolver.get,
                data_root,
                MemoryStore(unit.stored),
                settings,
            )
    finally:
        root.removeHandler(recorder)
        root.setLevel(previous_level)
    return summary.outcomes, recorder.lines


def _every_core() -> None:
    """Give torch every usable core. A unit holds one CPU slot, so Ray starts it with one thread; but
    when fewer units than cores run (the last, longest unit of a sweep) the other cores would idle.
    The thread share (``benchharness.core.cpu_share``) trims the threads to the cores other processes
    leave free at every batch, so units running side by side do not oversubscribe. A worker process
    is the harness's own, so setting its threads changes no user's process."""
    cores = usable_cpus()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(cores)
    else:
        os.environ["OMP_NUM_THREADS"] = str(cores)


def sweep(encoder_names: list[str], tasks: list[Task], settings: RunSettings) -> Results:
    """Every encoder on every task as Ray tasks (see the module docstring), at
    ``settings.ray_address`` or on a local Ray; results are stored in ``settings.results_dir``."""
    if settings.results_dir is None:
        raise ValueError("a Ray sweep stores its results: give it a results folder")
    store = ResultStore(settings.results_dir, configured=settings.config.results_dir)
    task_names = [t.name for t in tasks]
    with identity_scope():
        units, outcomes = plan(
            encoder_names, task_names, store, settings.overwrite, settings.add_items, _identity_in_driver(settings)
        )
    logger.info("ray sweep: %d unit(s) to run, %d result(s) reused without running", len(units), len(outcomes))
    if units:
        with ray_session(settings.ray_address) as ray:
            remote = ray.remote(max_retries=RETRIES, **slot(ray))(run_unit)
            pending = {remote.remote(u, task_names, settings, os.getcwd()): u for u in units}
            while pending:
                (done,), _ = ray.wait(list(pending), num_returns=1)
                unit = pending.pop(done)
                outcomes.extend(_collect(ray, done, unit, task_names, store))
    return Results.from_outcomes(outcomes, True, store)


def _collect(ray: Any, ref: Any, unit: Unit, task_names: list[str], store: ResultStore) -> list[Outcome]:
    """A finished unit's outcomes, its computed results stored; a unit that failed fails its pairs."""
    try:
        outcomes, lines = ray.get(ref)
    except Exception as exc:  # retries exhausted, or the unit itself raised
        message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        logger.error("[%s] unit failed: %s", unit.base, message)
        return [Outcome(e, t, "failed", message=f"ray unit: {message}") for e in unit.encoders for t in task_names]
    for name, level, text in lines:
        logging.getLogger(name).log(level, "%s", text)
    kept = []
    for outcome in outcomes:
        if outcome.status == "computed" and outcome.result is not None:
            try:
                store.save(outcome.result)
            except (OSError, ValueError) as exc:
                logger.error("[%s/%s] cannot store the result: %s", outcome.encoder, outcome.task, exc)
                outcome = Outcome(outcome.encoder, outcome.task, "failed", message=f"storing: {exc}")
        kept.append(outcome)
    return kept
