"""``benchharness.evaluate``: any model on any tasks, with the exact protocols of the command line.

The command line's ``run`` calls :func:`evaluate_with` with the settings it builds from its
arguments; :func:`evaluate` builds the same settings from its keywords. So a score from Python and
a score from the shell come from one code path. Results come back as objects, per-item outputs
attached. Nothing is written anywhere unless asked: ``results_dir`` stores results (one JSON per
encoder and task, and reuses what is stored), ``cache_dir`` caches embeddings.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchharness import tasks as task_registry
from benchharness.core.data_root import DataRoot
from benchharness.core.encoder import Encoder, identity_scope
from benchharness.core.environment import kept_environment
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import progress_shown
from benchharness.core.results import ResultStore
from benchharness.core.settings import Config, configuration
from benchharness.core.task import Task
from benchharness.evaluation.models import ModelLike, as_encoder, check_call, is_transformers_model
from benchharness.evaluation.results import EvaluationFailedError, Results
from benchharness.evaluation.run_resolver import cache_at, caching, resolver_for
from benchharness.evaluation.run_settings import DEFAULT_MEMORY_MIB, DEFAULT_SEED, RunSettings
from benchharness.evaluation.runner import run

logger = logging.getLogger(__name__)

TaskLike = Any  # a name, a group, a comma list of them, or a Task object

#: what ``evaluate`` does when a pair fails: raise once every other pair is done, or return it as a row
ERRORS = ("raise", "keep")


def resolve_tasks(tasks: TaskLike | Sequence[TaskLike], config: Config | None = None) -> list[Task]:
    """The Task objects of a selection, each name resolved once (given Task objects are used as
    they are); duplicates are dropped, order kept. ``config``: the configuration whose ``[tasks.*]``
    are known by name (None: none are)."""
    if tasks is None or isinstance(tasks, (bytes, int, float)):
        raise InvalidInputError(
            f"tasks={tasks!r}: give task or group names (see `benchharness list tasks`) or Task objects"
        )
    items = [tasks] if isinstance(tasks, (str, Task)) else list(tasks)
    selected: dict[str, Task] = {}
    for item in items:
        if isinstance(item, Task):
            selected.setdefault(item.name, item)
        elif isinstance(item, str):
            for task in task_registry.select(item, config):
                selected.setdefault(task.name, task)
        else:
            raise InvalidInputError(f"tasks: {item!r} is neither a task name nor a Task object")
    if not selected:
        raise InvalidInputError(
            f"tasks={tasks!r} names no task; give task or group names (see `benchharness list tasks`) or Task objects"
        )
    return list(selected.values())


def _models(model: ModelLike | Sequence[ModelLike]) -> list[ModelLike]:
    """One model, or several: a list or tuple of models, or a comma list of names (each name
    expanded into the variants its ``|`` lists, ``expand_variants``)."""
    if isinstance(model, str):
        from benchharness.core.specs import encoder_list

        names = encoder_list(model)
        if not names:
            raise InvalidInputError(f"{model!r} names no encoder; see `benchharness list encoders`")
        return names
    from benchharness.core.specs import expand_variants

    models = list(model) if isinstance(model, (list, tuple)) else [model]
    if not models:
        raise InvalidInputError("model=[] names no model; give a name, a spec, a model object or a list of them")
    return [v for m in models for v in (expand_variants(m) if isinstance(m, str) else [m])]


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
    intervals: bool = True,
    embedding_memory_mib: float = DEFAULT_MEMORY_MIB,
    encode_actors: int = 0,
    ray_address: str | None = None,
    errors: str = "raise",
    config: Config | str | Path | None = None,
    settings: RunSettings | None = None,
) -> Results:
    """Evaluate ``model`` on ``tasks`` and return the results.

    ``model``: a resolver name or spec (``"minilm-l6+whitening"``, ``"hf:<id>?pooling=avg"``, a
    trained recipe such as ``"paser"``), an ``Encoder``, a ``SentenceTransformer``, a transformers
    model with ``tokenizer=`` and ``pooling=``, or a callable from a list of sentences to vectors
    (numpy, torch or nested lists; pinned by ``identity=``); or a list of these. ``name`` names a
    single in-memory model in the results. ``tasks``: names, groups (``"sts"``, ``"transfer"``), a
    comma list of them, or Task objects. The harness batches for the caller (``batch_size``).

    Nothing is written unless asked. ``results_dir`` stores each result (with its per-item outputs)
    and reuses stored ones as ``overwrite`` says (``reuse``, ``stale``, ``always``); ``cache_dir``
    caches embeddings. ``intervals=False`` skips the bootstrap intervals (a training loop's frequent
    evaluations). ``embedding_memory_mib`` bounds the memory of one encoder's vectors: a larger pass
    (a big retrieval corpus) is written to a file beside the cache (or in the temporary folder) and
    read back a block at a time, with the same scores. ``encode_actors`` encodes what the cache
    lacks with that many Ray actors (needs ``cache_dir``), at ``ray_address`` or on a local Ray.
    Messages go to the ``benchharness`` logger; ``show_progress`` shows progress bars.

    ``config``: the configuration (a ``benchharness.toml`` path or a loaded ``Config``; default: the
    one found from the working directory, read once for the whole call). ``settings``: a whole
    ``RunSettings`` instead of the keywords above (given both, the keywords are refused).

    A pair (model, task) that fails does not stop the others. Once all are done, ``errors="raise"``
    (the default) raises ``EvaluationFailedError`` naming each failed pair and its cause (the
    results computed are on the error, and already stored when ``results_dir`` is given);
    ``errors="keep"`` returns them, failures included (``failed``; rows of ``to_pandas()`` with a
    NaN score and their ``message``).
    """
    given = locals()  # the keywords only: nothing else is bound yet
    if settings is not None:
        return evaluate_with(
            _settings_alone(settings, given),
            model,
            tasks,
            name=name,
            tokenizer=tokenizer,
            pooling=pooling,
            identity=identity,
            errors=errors,
        )
    _check_keywords(given)
    device = _device_name(device)
    settings = RunSettings(
        device=device,
        batch_size=batch_size,
        seed=seed,
        overwrite=overwrite,
        results_dir=_folder(results_dir),
        cache_dir=_folder(cache_dir),
        data_dir=_folder(data_dir),
        verify_data=verify_data,
        train=train,
        add_items=add_items,
        show_progress=show_progress,
        intervals=intervals,
        embedding_memory_mib=embedding_memory_mib,
        encode_actors=encode_actors,
        ray_address=ray_address,
        config=configuration(config),
    )
    return evaluate_with(
        settings, model, tasks, name=name, tokenizer=tokenizer, pooling=pooling, identity=identity, errors=errors
    )


#: the keywords of ``evaluate`` that ``settings=`` replaces, with their defaults
_SETTINGS_KEYWORDS = {
    "batch_size": None,
    "device": None,
    "seed": DEFAULT_SEED,
    "overwrite": "reuse",
    "results_dir": None,
    "cache_dir": None,
    "data_dir": None,
    "verify_data": True,
    "train": True,
    "add_items": False,
    "show_progress": False,
    "intervals": True,
    "embedding_memory_mib": DEFAULT_MEMORY_MIB,
    "encode_actors": 0,
    "ray_address": None,
    "config": None,
}


def _settings_alone(settings: RunSettings, given: dict[str, Any]) -> RunSettings:
    """``settings=`` stands for every run keyword: one given beside it is refused (which should win
    would be a guess)."""
    if not isinstance(settings, RunSettings):
        raise InvalidInputError(f"settings={settings!r}: give a benchharness.RunSettings")
    both = [k for k, default in _SETTINGS_KEYWORDS.items() if given[k] is not default and given[k] != default]
    if both:
        raise InvalidInputError(
            f"settings= holds the run's settings; leave out {', '.join(both)} (or set them on it: settings.but(...))"
        )
    return settings


def _folder(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


def _check_keywords(given: dict[str, Any]) -> None:
    """The keywords that ``RunSettings`` and the model checks do not cover, each refused in one
    line before anything loads: a wrong type there would surface as a bare TypeError deep in a run,
    or, worse, be taken for true (``intervals="no"``)."""
    for key in ("verify_data", "train", "add_items", "show_progress", "intervals"):
        if not isinstance(given[key], bool):
            raise InvalidInputError(f"{key}={given[key]!r}: must be True or False")
    for key in ("results_dir", "cache_dir", "data_dir"):
        value = given[key]
        if value is not None and (not isinstance(value, (str, os.PathLike)) or not str(value).strip()):
            raise InvalidInputError(f"{key}={value!r}: must be a folder (a str or a Path)")
    for key, kinds in (("embedding_memory_mib", (int, float)), ("encode_actors", (int,))):
        if isinstance(given[key], bool) or not isinstance(given[key], kinds):
            raise InvalidInputError(f"{key}={given[key]!r}: must be a number")
    if given["ray_address"] is not None and not isinstance(given["ray_address"], str):
        raise InvalidInputError(f"ray_address={given['ray_address']!r}: must be a string (host:port)")


def _device_name(device: Any) -> str | None:
    """``device`` as the string the run takes: a ``torch.device`` is accepted as its name."""
    if device is None or isinstance(device, str):
        return device
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        return str(device)
    raise InvalidInputError(f"device={device!r}: give a device name such as 'cpu', 'cuda' or 'cuda:1'")


def evaluate_with(
    settings: RunSettings,
    model: ModelLike | Sequence[ModelLike],
    tasks: TaskLike | Sequence[TaskLike],
    *,
    name: str | None = None,
    tokenizer: Any = None,
    pooling: str | None = None,
    identity: str | None = None,
    errors: str = "raise",
) -> Results:
    """``evaluate`` with its settings already built (the command line builds them from its flags,
    and keeps failures: ``errors="keep"``)."""
    if errors not in ERRORS:
        raise InvalidInputError(f"errors={errors!r}: must be one of {', '.join(map(repr, ERRORS))}")
    selected = resolve_tasks(tasks, settings.config)
    models = _models(model)
    check_call(models, name=name, tokenizer=tokenizer, pooling=pooling, identity=identity)
    if settings.device is not None:  # before any model loads: a typo or a missing GPU fails here
        from benchharness.core.devices import pick_device

        pick_device(settings.device)
    if settings.results_dir is not None and settings.results_dir.exists() and not settings.results_dir.is_dir():
        raise InvalidInputError(f"results folder {settings.results_dir} is a file; give a folder")
    data = settings.data()
    cache = None if settings.cache_dir is None else cache_at(settings.cache_dir)
    pools = None
    if settings.encode_actors:
        from benchharness.evaluation.encode_pool import ActorPools

        pools = ActorPools(settings)
    try:
        with kept_environment(), progress_shown(settings.show_progress), identity_scope(), _digest_store(settings):
            results = _evaluate(
                settings,
                models,
                selected,
                data,
                cache,
                pools,
                name=name,
                tokenizer=tokenizer,
                pooling=pooling,
                identity=identity,
            )
    finally:
        if pools is not None:
            pools.close()
    if errors == "raise" and results.failed:
        raise EvaluationFailedError(results)
    return results


def _refuse_shared_names(names: list[str], built: dict[str, Encoder]) -> None:
    """Two models of one call under one name would share its results (and the second would be
    scored twice, in place of both): refused, naming the way to tell them apart."""
    for n in built:
        if names.count(n) > 1:
            raise InvalidInputError(
                f"{names.count(n)} models of this call are named {n!r}; give each its own name "
                "with benchharness.as_encoder(model, name=...)"
            )


def _digest_store(settings: RunSettings) -> contextlib.AbstractContextManager[None]:
    """Weight-file digests are remembered beside the embedding cache, when the run has one: a run
    that stores nothing writes nothing (``benchharness.core.digests``)."""
    from benchharness.core import digests

    return contextlib.nullcontext() if settings.cache_dir is None else digests.remembering(settings.cache_dir)


def _evaluate(
    settings: RunSettings,
    models: list[ModelLike],
    selected: list[Task],
    data: DataRoot,
    cache: Any,
    pools: Any,
    *,
    name: str | None,
    tokenizer: Any,
    pooling: str | None,
    identity: str | None,
) -> Results:
    """``evaluate`` once its tasks, cache and actor pools are set up."""
    resolver = resolver_for(settings, data, cache, pools)
    built: dict[str, Encoder] = {}
    names: list[str] = []
    for m in models:
        if isinstance(m, str):
            resolver.check(m)  # every name is checked before any model loads
            names.append(m)
            continue
        held = is_transformers_model(m)  # tokenizer= and pooling= are its alone
        encoder = as_encoder(
            m,
            name=name,
            tokenizer=tokenizer if held else None,
            pooling=pooling if held else None,
            identity=identity,
            batch_size=settings.batch_size,
            device=settings.device,
        )
        if encoder.pinned and cache is not None:
            encoder = caching(cache)(encoder)
        built[encoder.name] = encoder
        names.append(encoder.name)
    _refuse_shared_names(names, built)
    pinned = all(e.pinned for e in built.values())
    store = None
    if settings.results_dir is not None:
        if pinned:
            store = ResultStore(settings.results_dir, configured=settings.config.results_dir)
        else:
            logger.warning(
                "a model without identity (a callable without identity=) is evaluated but not stored: "
                "nothing is written to %s",
                settings.results_dir,
            )
    summary = run(names, selected, lambda n: built[n] if n in built else resolver.get(n), data, store, settings)
    return Results.from_outcomes(summary.outcomes, pinned, store)
