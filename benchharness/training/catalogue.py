"""Trained recipes as a ``catalogues`` plugin: a recipe's name (``paser``, ``defsent-plus-r2``,
``recipe:<key>``) resolves to the encoder its run saved, trained first when it has no run yet and
training is allowed (``benchharness.training.on_demand``), with the settings of the run that asks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchharness.core.specs import Catalogue, Resolved
from benchharness.training.on_demand import names_a_recipe, trained_encoder
from benchharness.training.recipes import load_book

if TYPE_CHECKING:
    from benchharness.evaluation.run_settings import RunSettings


def _resolve(name: str, *, settings: RunSettings, train: bool = True) -> Resolved | None:
    """The recipe's encoder, trained first with the run's ``settings`` (device, data root) when missing."""
    found = trained_encoder(name, train=train, settings=settings)
    return None if found is None else Resolved(*found)


def _rows() -> list[dict[str, str]]:
    book = load_book()
    rows = []
    for name in book.names():
        entry = book.source(name)
        rows.append(
            {
                "name": name,
                "source": book.path.name,
                "settings": f"benchharness train {entry['method']}"
                + ("" if name == entry["method"] else f" --recipe {name}"),
                "description": f"recipe, trained on demand: {entry.get('description', '')}",
            }
        )
    return rows


CATALOGUE = Catalogue(resolve=_resolve, rows=_rows, on_demand=names_a_recipe, order=100)
