"""benchharness: evaluate and train sentence encoders on the classic suite of the field.

The package is layered; each layer imports only from the layers below it
(``docs/ARCHITECTURE.md``, checked by ``tests/unit/test_architecture.py``):

1. ``core``: the contracts (encoder, task, result, plugins) and plumbing (settings, manifests,
   atomic writes, seeding, provenance, devices, digests);
2. ``data`` (data root, checksums, readers, corpora) and ``scoring`` (metrics, ranking,
   confidence intervals, paired statistics);
3. ``encoders`` (families, post-processors) and ``tasks``: the plugins;
4. ``evaluation``: name resolution, the runner, the embedding cache, verification;
5. ``training`` (the methods and their loop, recipes, run store, on-demand training, dev
   evaluation, ``train``), ``tuning``,
   ``reporting`` (leaderboard, compare, analysis) and ``mteb_bridge``;
6. ``cli``: one module per command; and this module, the Python face below.

From Python::

    import benchharness
    results = benchharness.evaluate("minilm-l6", "sts")          # or a SentenceTransformer, a callable...
    print(results); df = results.to_pandas()
    whitened = benchharness.evaluate("minilm-l6+whitening", "sts")
    print(benchharness.compare(results, whitened))                # paired tests, as `benchharness compare`
    mine = benchharness.train("simcse", sentences=my_sentences, max_steps=100)  # an Encoder, in memory
    benchharness.evaluate(mine, "sts"); mine.save("runs/mine")    # the folder `benchharness train --out` writes

Nothing is printed: messages go to the ``benchharness`` logger (silence them with
``logging.getLogger("benchharness").setLevel(logging.ERROR)``), and a call leaves the process
(environment, threads, verbosity) as it found it. The names below are loaded on first use, so
``import benchharness`` stays cheap.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from benchharness.core.version import __version__

# Where messages go is the application's choice (the command line adds its handler, cli/messages.py):
# without a handler of the library's own, a warning or an error would reach Python's last-resort
# handler, which prints it to standard error.
logging.getLogger(__name__).addHandler(logging.NullHandler())

if TYPE_CHECKING:  # what type checkers and editors see; at run time ``__getattr__`` imports each on first use
    from benchharness.core.encoder import Encoder
    from benchharness.core.plugins import PLUGINS
    from benchharness.core.results import Result
    from benchharness.core.task import Evaluation, Task, TaskMetadata, TaskProvider
    from benchharness.evaluation.evaluate import evaluate
    from benchharness.evaluation.models import PairScorer, as_encoder
    from benchharness.evaluation.results import EvaluationFailedError, Results, load_results
    from benchharness.evaluation.run_settings import RunSettings
    from benchharness.reporting.compare import Comparison, compare
    from benchharness.tasks import get as get_task
    from benchharness.tasks.files.declarations import register_file_task
    from benchharness.training.evaluators import EvaluationCallback, STSEvaluator
    from benchharness.training.train import train
    from benchharness.training.trained import TrainedEncoder

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
    "PairScorer": "benchharness.evaluation.models",
    # train, and evaluate inside a training loop
    "train": "benchharness.training.train",
    "TrainedEncoder": "benchharness.training.trained",
    "STSEvaluator": "benchharness.training.evaluators",
    "EvaluationCallback": "benchharness.training.evaluators",
    # writing a task or an encoder
    "get_task": "benchharness.tasks",
    "register_file_task": "benchharness.tasks.files.declarations",
    "Task": "benchharness.core.task",
    "TaskMetadata": "benchharness.core.task",
    "TaskProvider": "benchharness.core.task",
    "Evaluation": "benchharness.core.task",
    "Encoder": "benchharness.core.encoder",
    "PLUGINS": "benchharness.core.plugins",
}
#: exported under another name than the one its module gives it
_RENAMED = {"get_task": "get"}

#: spelled out (not built from ``_EXPORTS``) so that static tools read it; tests/unit/api/test_exports.py
#: checks that it, ``_EXPORTS`` and the imports above name the same things
__all__ = [
    "PLUGINS",
    "Comparison",
    "Encoder",
    "Evaluation",
    "EvaluationCallback",
    "EvaluationFailedError",
    "PairScorer",
    "Result",
    "Results",
    "RunSettings",
    "STSEvaluator",
    "Task",
    "TaskMetadata",
    "TaskProvider",
    "TrainedEncoder",
    "__version__",
    "as_encoder",
    "compare",
    "evaluate",
    "get_task",
    "load_results",
    "register_file_task",
    "train",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'benchharness' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), _RENAMED.get(name, name))


def __dir__() -> list[str]:
    return sorted(__all__)
