"""benchharness: evaluate and train sentence encoders on the classic suite of the field.

The package is layered; each layer imports only from the layers below it
(``docs/ARCHITECTURE.md``, checked by ``tests/unit/test_architecture.py``):

1. ``core``: the contracts (encoder, task, result, plugins) and plumbing (settings, manifests,
   atomic writes, seeding, provenance, devices, digests);
2. ``data`` (data root, checksums, readers, corpora) and ``scoring`` (metrics, ranking,
   confidence intervals, paired statistics);
3. ``encoders`` (families, post-processors, training methods) and ``tasks``: the plugins;
4. ``evaluation``: name resolution, the runner, the embedding cache, verification;
5. ``training`` (recipes, run store, on-demand training, dev evaluation), ``tuning``,
   ``reporting`` (leaderboard, compare, analysis) and ``mteb_bridge``;
6. ``cli``: one module per command; and this module, the Python face below.

From Python::

    import benchharness
    results = benchharness.evaluate("minilm-l6", "sts")          # or a SentenceTransformer, a callable...
    print(results); df = results.to_pandas()
    whitened = benchharness.evaluate("minilm-l6+whitening", "sts")
    print(benchharness.compare(results, whitened))                # paired tests, as `benchharness compare`

Nothing is printed: messages go to the ``benchharness`` logger (silence them with
``logging.getLogger("benchharness").setLevel(logging.ERROR)``), and a call leaves the process
(environment, threads, verbosity) as it found it. The names below are loaded on first use, so
``import benchharness`` stays cheap.
"""

from __future__ import annotations

from typing import Any

from benchharness.core.version import __version__

#: public name -> the module that defines it
_EXPORTS = {
    # evaluate, read back, compare
    "evaluate": "benchharness.evaluation.evaluate",
    "RunSettings": "benchharness.evaluation.run_settings",
    "Results": "benchharness.evaluation.results",
    "load_results": "benchharness.evaluation.results",
    "EvaluationFailedError": "benchharness.evaluation.results",
    "compare": "benchharness.reporting.compare",
    "Comparison": "benchharness.reporting.compare",
    "Result": "benchharness.core.results",
    "as_encoder": "benchharness.evaluation.models",
    # inside a training loop
    "STSEvaluator": "benchharness.training.evaluators",
    "EvaluationCallback": "benchharness.training.evaluators",
    # writing a task or an encoder
    "get_task": "benchharness.tasks",
    "register_file_task": "benchharness.tasks.from_files",
    "Task": "benchharness.core.task",
    "TaskMetadata": "benchharness.core.task",
    "TaskProvider": "benchharness.core.task",
    "Evaluation": "benchharness.core.task",
    "Encoder": "benchharness.core.encoder",
    "PLUGINS": "benchharness.core.plugins",
}
#: exported under another name than the one its module gives it
_RENAMED = {"get_task": "get"}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'benchharness' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), _RENAMED.get(name, name))


def __dir__() -> list[str]:
    return sorted(__all__)
