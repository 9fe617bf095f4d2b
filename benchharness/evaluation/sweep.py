"""``run --executor ray``: a sweep of encoders x tasks as Ray tasks, with the driver as the only
writer of results.

The unit of work is one base encoder's pass over its tasks: every encoder of the sweep that
composes on the same base (``x``, ``x+whitening``, ``x+repal``) goes to one unit, so they share
``x``'s vectors on one host, as in a sequential run. Before anything is submitted the driver reads
the result store: a unit whose every result would be reused is not submitted. A unit receives
copies of its encoders' stored results (with their per-item files), runs the ordinary runner on a
private folder (so reuse, ``--overwrite stale`` and ``--add-items`` decide exactly as in a
sequential run) and hands back the files it computed; the driver writes each atomically as its
unit finishes, so nothing finished is lost when a later unit fails, and workers need no shared
file system for results. A unit whose worker dies (a killed process, a lost node) is retried by
Ray; one that raises is reported as failed for its pairs while the others go on. Each unit asks
for one GPU when the cluster has one (a recipe that must be trained first trains there), else one
CPU.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchharness.core.atomic import atomic_file
from benchharness.core.cpu_share import usable_cpus
from benchharness.core.results import OVERWRITE, ResultStore
from benchharness.core.specs import split_composition
from benchharness.evaluation.ray_cluster import enter_driver_folder, ray_session, slot
from benchharness.evaluation.results import Results
from benchharness.evaluation.runner import Outcome

#: attempts after a worker dies before its unit is given up (Ray's own default, stated here)
RETRIES = 3


@dataclass
class Unit:
    """One base encoder's pass: the encoders composed on it, each on every task of the sweep."""

    base: str
    encoders: list[str]
    #: stored result files of these encoders (JSON and per-item files), by path under the store
    stored: dict[str, bytes] = field(default_factory=dict)


def plan(encoder_names: list[str], task_names: list[str], store: ResultStore, overwrite: str,
         add_items: bool) -> tuple[list[Unit], list[Outcome]]:
    """The units to submit, and the results reused without submitting anything."""
    groups: dict[str, list[str]] = {}
    for name in encoder_names:
        groups.setdefault(split_composition(name)[0], []).append(name)
    units, reused = [], []
    for base, names in groups.items():
        unit = Unit(base, names)
        settled = []
        for name in names:
            for task in task_names:
                try:
                    stored = store.load(name, task)
                except ValueError:  # damaged or another's: the worker recomputes it
                    stored = None
                if stored is None:
                    continue
                path = store.path(name, task)
                unit.stored[str(path.relative_to(store.root))] = path.read_bytes()
                if stored.items and store.has_items(stored):
                    items = path.with_name(stored.items["file"])
                    unit.stored[str(items.relative_to(store.root))] = items.read_bytes()
                if overwrite == "reuse" and not (add_items and not store.has_items(stored)):
                    settled.append(Outcome(name, task, "reused", stored.main_score))
        if len(settled) == len(names) * len(task_names):
            reused.extend(settled)
        else:
            units.append(unit)
    return units, reused


def run_unit(unit: Unit, task_names: list[str], settings: dict[str, Any], folder: str) -> dict[str, Any]:
    """A unit on a worker: the runner on a private copy of its stored results; returns its outcomes,
    log and the files it computed."""
    from benchharness import tasks as task_registry
    from benchharness.core.data_root import DataRoot
    from benchharness.evaluation.run_resolver import resolver_for
    from benchharness.evaluation.runner import run

    enter_driver_folder(folder)
    _every_core()
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchharness-unit-") as scratch:
        root = Path(scratch)
        for rel, data in unit.stored.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        store = ResultStore(root)
        data_root = DataRoot(settings["data_dir"], verify=settings["verify_data"])
        resolver = resolver_for(settings, data_root)
        summary = run(unit.encoders, task_names, resolver.get, task_registry.get, data_root, store,
                      overwrite=settings["overwrite"], seed=settings["seed"], show_progress=False, log=lines.append,
                      add_items=settings["add_items"], intervals=settings["intervals"],
                      memory_mib=settings["embedding_memory_mib"],
                      scratch=None if settings["cache_dir"] is None else Path(settings["cache_dir"]))
        files = {}
        for outcome in summary.outcomes:
            if outcome.status != "computed":
                continue
            result = store.load(outcome.encoder, outcome.task)
            path = store.path(outcome.encoder, outcome.task)
            files[str(path.relative_to(root))] = path.read_bytes()
            if result is not None and result.items:
                items = path.with_name(result.items["file"])
                files[str(items.relative_to(root))] = items.read_bytes()
    return {"outcomes": [asdict(o) for o in summary.outcomes], "files": files, "log": lines}


def _every_core() -> None:
    """Give torch every usable core. A unit holds one CPU slot, so Ray starts it with one thread; but
    when fewer units than cores run (the last, longest unit of a sweep) the other cores would idle.
    The thread share (``benchharness.core.cpu_share``) trims the threads to the cores other processes
    leave free at every batch, so units running side by side do not oversubscribe."""
    cores = usable_cpus()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(cores)
    else:
        os.environ["OMP_NUM_THREADS"] = str(cores)


def write_back(store: ResultStore, files: dict[str, bytes]) -> None:
    """A unit's files into the store, per-item files before the JSON that links them."""
    for rel in sorted(files, key=lambda r: r.endswith(".json")):
        target = store.root / rel
        if not target.resolve().is_relative_to(store.root.resolve()):
            raise ValueError(f"a worker returned a path outside the result store: {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(target) as fh:
            fh.write(files[rel])


def sweep(encoder_names: list[str], task_names: list[str], settings: dict[str, Any], results_dir: Path,
          address: str | None = None, log: Callable[[str], None] = print) -> Results:
    """Every encoder on every task as Ray tasks (see the module docstring); ``settings`` are
    ``evaluate``'s keyword arguments."""
    if settings["overwrite"] not in OVERWRITE:
        raise ValueError(f"overwrite must be one of {', '.join(OVERWRITE)}")
    store = ResultStore(results_dir)
    units, outcomes = plan(encoder_names, task_names, store, settings["overwrite"], settings["add_items"])
    log(f"ray sweep: {len(units)} unit(s) to run, {len(outcomes)} result(s) reused without running")
    if units:
        with ray_session(address) as ray:
            remote = ray.remote(max_retries=RETRIES, **slot(ray))(run_unit)
            pending = {remote.remote(u, task_names, settings, os.getcwd()): u for u in units}
            while pending:
                (done,), _ = ray.wait(list(pending), num_returns=1)
                unit = pending.pop(done)
                outcomes.extend(_collect(ray, done, unit, task_names, store, log))
    results = [r for o in outcomes if o.status in ("computed", "reused") and (r := store.load(o.encoder, o.task))]
    return Results(results, outcomes, True)


def _collect(ray: Any, ref: Any, unit: Unit, task_names: list[str], store: ResultStore,
             log: Callable[[str], None]) -> list[Outcome]:
    """A finished unit's outcomes, its files written; a unit that failed fails its pairs."""
    try:
        out = ray.get(ref)
    except Exception as exc:  # retries exhausted, or the unit itself raised
        message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        log(f"[{unit.base}] unit failed: {message}")
        return [Outcome(e, t, "failed", message=f"ray unit: {message}") for e in unit.encoders for t in task_names]
    for line in out["log"]:
        log(line)
    outcomes = [Outcome(**o) for o in out["outcomes"]]
    try:
        write_back(store, out["files"])
    except (OSError, ValueError) as exc:
        log(f"[{unit.base}] cannot store the unit's results: {exc}")
        return [Outcome(o.encoder, o.task, "failed", message=f"storing: {exc}") if o.status == "computed" else o
                for o in outcomes]
    return outcomes
