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
6. ``cli``: one module per command.
"""

from benchharness.core.version import __version__

__all__ = ["__version__"]
