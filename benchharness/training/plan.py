"""What one call trains and where it goes: a :class:`Plan`, built once per call beside the settings.

The settings (``settings.py``) say how a run goes; the plan says what it trains and where it
writes: the recipe (method, base, every option), the model it starts from, the output folder (None:
in memory) and the run's name, and the sentences a caller holds in memory. ``benchharness train``,
``benchharness.train`` and on-demand training each build one and hand both values to
``train.train_with``; a method that trains in stages (DefSent+'s rounds) gets one plan per stage
(:meth:`Plan.stage`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.training.settings import RECORDED, TrainSettings

if TYPE_CHECKING:
    from benchharness.training.recipes import Recipe


@dataclass(frozen=True)
class Plan:
    """One run's what and where. ``base``: the model it starts from (a hub id or a model folder;
    a base that is another recipe's run is filled in once that run is trained); ``out``: its output
    folder, None to train in memory and write nothing; ``name``: the name in its manifest, in results
    and tables; ``register``: also register ``name`` in the runs folder (``benchharness train --out d
    --name N``); ``sentences``: training sentences held in memory, standing for the options' data;
    ``round``: the stage of a method that trains in stages (None: the whole run)."""

    base: str
    recipe: Recipe | None = None
    out: Path | None = None
    name: str | None = None
    register: bool = False
    sentences: tuple[str, ...] | None = None
    round: int | None = None

    @classmethod
    def of(cls, recipe: Recipe, **where: Any) -> Plan:
        """The plan of ``recipe``: from the model its base names (found when the recipe was built), named
        after the recipe unless ``where`` names it, going where ``where`` says (``out``, ``sentences``...)."""
        name = where.pop("name", None) or recipe.run_name
        return cls(base=recipe.base_path or recipe.base, recipe=recipe, name=name, **where)

    def stage(self, round: int) -> Plan:
        """The plan of one stage (DefSent+'s round ``round``): its own folder ``<out>-r<k>`` and name."""
        return replace(
            self,
            out=None if self.out is None else self.out.with_name(f"{self.out.name}-r{round}"),
            name=None if self.name is None else f"{self.name}-r{round}",
            round=round,
        )

    def folders(self) -> list[Path]:
        """The folders the run writes (one, or one per DefSent+ round); none in memory."""
        out = self.out
        if out is None:
            return []
        rounds = None if self.recipe is None else self.recipe.rounds
        return [out] if rounds is None else [out.with_name(f"{out.name}-r{r}") for r in range(1, rounds + 1)]

    def recipe_record(self) -> dict[str, Any] | None:
        """The recipe as this run's (or stage's) manifest records it; None for a run without one."""
        if self.recipe is None:
            return None
        from benchharness.training.recipes import round_recipe

        return round_recipe(self.recipe, self.round or 1).record()

    def record(self, settings: TrainSettings) -> dict[str, Any]:
        """The run-time keys a checkpoint records beside the options, as it has always recorded them
        (a resumed run compares them: only ``settings.RESUMABLE`` may differ)."""
        values = {"base": self.base, "out": None if self.out is None else str(self.out), "name": self.name}
        return {k: values[k] if k in values else getattr(settings, k) for k in RECORDED}
