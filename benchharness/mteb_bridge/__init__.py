"""The mteb bridge: benchharness encoders as mteb models, mteb tasks run with them, and stored
results exported in mteb's results layout.

mteb is a neighbour, not a dependency of the core: nothing here is imported by the
runner, the resolver or the tasks, and this package imports nothing from mteb itself, so that
``import benchharness.mteb_bridge`` stays cheap. Each module imports mteb when it is imported:

- ``as_model``: ``MtebEncoder`` (an mteb ``AbsEncoder``) and ``model_meta`` (name and revision from
  the encoder identity);
- ``evaluate``: ``run_task`` runs one mteb task with a benchharness encoder and returns an
  ``MtebRecord``; ``MtebDataError`` names the dataset and revision missing offline;
- ``memory``: mteb tasks built in memory from given pairs or rankings (cross-checks, benchmarks);
- ``selection``: mteb benchmarks and tasks by name, with mteb's filters (``MTEB(eng, v2)``,
  ``STS22.v2[languages=eng]``), each task named by what it evaluates;
- ``as_task``: ``MtebTask``, an mteb task as a benchharness task for the runner (``mteb:<Name>``);
- ``provider``: the ``tasks`` plugin that builds ``MtebTask`` for any ``mteb:<Name>`` and expands
  a benchmark into its tasks;
- ``benchmarks``: which benchmarks stored results cover, and mteb's aggregation of them;
- ``published``: the models of an mteb results folder, for the leaderboard and ``compare``;
- ``model_facts``: a model's ``ModelMeta`` facts read from its own files, offline;
- ``export``: ``export_results`` writes stored results as ``<org__name>/<revision>/<Task>.json``
  plus ``model_meta.json``, for the tasks whose protocol equals an mteb task (``EXPORTABLE``) and
  says why the others are left out (``NOT_EXPORTED``).

Install with the ``mteb`` extra (``pip install 'benchharness[mteb]'``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from benchharness.core.errors import UserError

INSTALL = "pip install -e '.[mteb]'"


class MtebNotInstalledError(UserError, ImportError):
    """mteb is an optional extra; what needs it says how to install it."""


@contextlib.contextmanager
def mteb_needed(needed_for: str) -> Iterator[None]:
    """Around an import of a module of this package that imports mteb: without mteb, say that
    ``needed_for`` needs it and how to install it (rather than a bare ``No module named 'mteb'``)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "mteb":
            raise
        raise MtebNotInstalledError(
            f"{needed_for} needs mteb, which is not installed in this environment: "
            f"run {INSTALL} in the benchharness checkout"
        ) from None
