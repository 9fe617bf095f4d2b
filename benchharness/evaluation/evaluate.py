"""``benchharness.evaluate``: any model on any tasks, with the exact protocols of the command line.

The command line's ``run`` calls this function, so a score from Python and a score from the shell
come from one code path. By default nothing is written: results live in memory (``results_dir``
stores them, one JSON per encoder and task, and reuses what is stored) and no embedding is cached
(``cache_dir`` caches them, keyed by encoder identity).
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from benchharness import tasks as task_registry
from benchharness.core.data_root import DataRoot
from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.results import ResultStore
from benchharness.core.task import Task
from benchharness.evaluation.embeddings import DEFAULT_MEMORY_MIB
from benchharness.evaluation.models import ModelLike, as_encoder, default_name
from benchharness.evaluation.results import Results
from benchharness.evaluation.run_resolver import cache_at, caching, resolver_for
from benchharness.evaluation.runner import DEFAULT_SEED, run

TaskLike = Any  # a name, a group, a comma list of them, or a Task object


def _task_table(tasks: TaskLike | Sequence[TaskLike]) -> tuple[list[str], Callable[[str], Task]]:
    """Task names in order, and how to build each (given Task objects are used as they are)."""
    items = [tasks] if isinstance(tasks, (str, Task)) else list(tasks)
    given: dict[str, Task] = {}
    names: list[str] = []
    for item in items:
        if isinstance(item, Task):
            given[item.name] = item
            names.append(item.name)
        else:
            names.extend(n for n in task_registry.resolve(item) if n not in names)
    if not names:
        raise InvalidInputError(f"tasks={tasks!r} names no task; give task or group names (see `benchharness list "
                                "tasks`) or Task objects")
    return names, lambda name: given[name] if name in given else task_registry.get(name)


def _models(model: ModelLike | Sequence[ModelLike]) -> list[ModelLike]:
    """One model, or several: a list or tuple of models, or a comma list of names."""
    if isinstance(model, str):
        from benchharness.core.specs import split_outside_parentheses

        names = [n.strip() for n in split_outside_parentheses(model, ",") if n.strip()]
        if not names:
            raise InvalidInputError(f"{model!r} names no encoder; see `benchharness list encoders`")
        return names
    return list(model) if isinstance(model, (list, tuple)) else [model]


def evaluate(
    model: ModelLike | Sequence[ModelLike],
    tasks: TaskLike | Sequence[TaskLike] = "sts",
    *,
    name: str | None = None,
    tokenizer: Any = None,
    pooling: str | None = None,
    identity: str | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    seed: int = DEFAULT_SEED,
    overwrite: str = "reuse",
    results_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    verify_data: bool = True,
    train: bool = True,
    add_items: bool = False,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
    intervals: bool = True,
    embedding_memory_mib: float = DEFAULT_MEMORY_MIB,
    encode_actors: int = 0,
    ray_address: str | None = None,
) -> Results:
    """Evaluate ``model`` on ``tasks`` and return the results.

    ``model``: a resolver name or spec (``"minilm-l6+whitening"``, ``"hf:<id>?pooling=avg"``, a
    trained recipe such as ``"paser"``), an ``Encoder``, a ``SentenceTransformer``, a transformers
    model with ``tokenizer=`` and ``pooling=``, or a callable from a list of sentences to vectors
    (numpy, torch or nested lists; pinned by ``identity=``); or a list of these. ``name`` names a
    single in-memory model in the results. ``tasks``: names, groups (``"sts"``, ``"transfer"``), a
    comma list of them, or Task objects. The harness batches for the caller (``batch_size``).
    ``overwrite`` (``reuse``, ``stale``, ``always``) applies to results already in ``results_dir``.
    ``intervals=False`` skips the bootstrap intervals (a training loop's frequent evaluations).
    ``embedding_memory_mib`` bounds the memory of one encoder's vectors: a larger pass (a big
    retrieval corpus) is written to a file beside the cache (or in the temporary folder) and read
    back a block at a time, with the same scores. ``encode_actors`` encodes what the cache lacks
    with that many Ray actors (``benchharness.evaluation.encode_pool``; needs ``cache_dir``), at
    ``ray_address`` or on a local Ray started for the purpose.
    """
    if device is not None:  # before any model loads: a typo or a missing GPU fails here
        from benchharness.core.devices import pick_device

        pick_device(device)
    data = DataRoot(data_dir, verify=verify_data)
    cache = None if cache_dir is None else cache_at(cache_dir)
    settings = {"device": device, "batch_size": batch_size, "cache_dir": cache_dir, "train": train,
                "show_progress": show_progress, "data_dir": data_dir}
    pools = None
    if encode_actors:
        if cache is None:
            raise InvalidInputError("encode_actors= fills the embedding cache; give cache_dir= too")
        from benchharness.evaluation.encode_pool import ActorPools

        pools = ActorPools(encode_actors, {**settings, "data_dir": str(data.root)}, ray_address)
    try:
        return _evaluate(model, tasks, settings, data, cache, pools, name=name, tokenizer=tokenizer, pooling=pooling,
                         identity=identity, seed=seed, overwrite=overwrite, results_dir=results_dir,
                         add_items=add_items, log=log, intervals=intervals, embedding_memory_mib=embedding_memory_mib)
    finally:
        if pools is not None:
            pools.close()


def _evaluate(model: Any, tasks: Any, settings: dict[str, Any], data: DataRoot, cache: Any, pools: Any, *,
              name: str | None, tokenizer: Any, pooling: str | None, identity: str | None, seed: int, overwrite: str,
              results_dir: str | Path | None, add_items: bool, log: Callable[[str], None] | None, intervals: bool,
              embedding_memory_mib: float) -> Results:
    """``evaluate`` once its cache and actor pools are set up."""
    task_names, get_task = _task_table(tasks)
    batch_size, device, show_progress = settings["batch_size"], settings["device"], settings["show_progress"]
    resolver = resolver_for(settings, data, pools)
    models = _models(model)
    if name is not None and len(models) != 1:
        raise InvalidInputError("name= names one model; give each of several models as a name or an Encoder")
    built: dict[str, Encoder] = {}
    names: list[str] = []
    for m in models:
        if isinstance(m, str):
            resolver.check(m)  # every name is checked before any model loads
            names.append(m)
            continue
        encoder = as_encoder(m, name=name or default_name(m), tokenizer=tokenizer, pooling=pooling,
                             identity=identity, batch_size=batch_size, device=device)
        if encoder.pinned and cache is not None:
            encoder = caching(cache)(encoder)
        built[encoder.name] = encoder
        names.append(encoder.name)
    pinned = all(e.pinned for e in built.values())
    if not pinned and results_dir is not None:
        warnings.warn("a model without identity (a callable without identity=) is evaluated but not stored: "
                      f"nothing is written to {results_dir}", stacklevel=2)
    with tempfile.TemporaryDirectory(prefix="benchharness-results-") as scratch:
        store = ResultStore(Path(results_dir) if results_dir is not None and pinned else Path(scratch))
        summary = run(names, task_names, lambda n: built[n] if n in built else resolver.get(n), get_task, data,
                      store, overwrite=overwrite, seed=seed, show_progress=show_progress,
                      log=log or (lambda _: None), add_items=add_items, intervals=intervals,
                      memory_mib=embedding_memory_mib, scratch=None if cache is None else cache.root)
        results = [store.load(o.encoder, o.task) for o in summary.outcomes if o.status in ("computed", "reused")]
    return Results(results, summary.outcomes, pinned)
