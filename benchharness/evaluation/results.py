"""What ``benchharness.evaluate`` returns, and what ``benchharness.load_results`` reads back: result
records with the outcome of every (encoder, task) pair, printable as a table, convertible to a
pandas DataFrame, and comparable with ``benchharness.compare`` (their per-item outputs travel with
them, or are read from the folder they were stored in)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from benchharness.core.errors import InvalidInputError
from benchharness.core.results import Result, ResultStore, items_of
from benchharness.core.task import Evaluation
from benchharness.evaluation.runner import Outcome

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Results:
    """The results of one ``evaluate`` call (or of a results folder), in (encoder, task) order.

    ``results`` are the full records (metrics, protocol, identity, versions, intervals);
    ``outcomes`` say for every pair whether it was computed, reused from the results folder, read
    from one (``stored``), or failed and why. ``pinned`` is False when a model had no identity (a
    plain callable without ``identity=``): such results were returned but neither cached nor
    stored. ``store`` is the folder the results were stored in or read from, if any.
    """

    results: list[Result] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    pinned: bool = True
    store: ResultStore | None = field(default=None, repr=False)

    @classmethod
    def from_outcomes(cls, outcomes: list[Outcome], pinned: bool = True,
                      store: ResultStore | None = None) -> Results:
        """The results a run's outcomes carry (computed and reused), with every outcome kept."""
        return cls([o.result for o in outcomes if o.result is not None], outcomes, pinned, store)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def encoders(self) -> list[str]:
        """The encoders these results are of, in order."""
        return list(dict.fromkeys(r.encoder for r in self.results))

    @property
    def tasks(self) -> list[str]:
        """The tasks these results are on, in order."""
        return list(dict.fromkeys(r.task for r in self.results))

    def get(self, encoder: str, task: str) -> Result:
        for result in self.results:
            if result.encoder == encoder and result.task == task:
                return result
        raise KeyError(f"no result for {encoder!r} on {task!r}")

    def select(self, encoder: str | None = None, task: str | None = None) -> Results:
        """The results of one encoder and/or on one task, with their outcomes and store."""
        def keep(e: str, t: str) -> bool:
            return (encoder is None or e == encoder) and (task is None or t == task)

        if encoder is not None and encoder not in self.encoders:
            raise InvalidInputError(f"no results of encoder {encoder!r}; these are of "
                                    f"{', '.join(self.encoders) or 'none'}")
        return Results([r for r in self.results if keep(r.encoder, r.task)],
                       [o for o in self.outcomes if keep(o.encoder, o.task)], self.pinned, self.store)

    def items(self, result: Result) -> Evaluation:
        """The per-item outputs of one of these results: carried in memory, else read from the store."""
        return items_of(result, self.store)

    def main_scores(self) -> dict[tuple[str, str], float]:
        return {(r.encoder, r.task): r.main_score for r in self.results}

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per result: names, main score and its interval, status, identity."""
        status = {(o.encoder, o.task): o.status for o in self.outcomes}
        rows = []
        for r in self.results:
            low, high = (r.confidence or {}).get("main") or (None, None)
            rows.append({"encoder": r.encoder, "task": r.task, "main_metric": r.main_metric,
                         "main_score": r.main_score, "ci_low": low, "ci_high": high,
                         "status": status.get((r.encoder, r.task), ""), "identity": r.encoder_identity.get("hash")})
        return rows

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=["encoder", "task", "main_metric", "main_score", "ci_low",
                                                  "ci_high", "status", "identity"])

    def table(self) -> str:
        from tabulate import tabulate

        rows = [[o.encoder, o.task, o.status, "" if o.main_score is None else f"{o.main_score:.2f}", o.message]
                for o in self.outcomes]
        return tabulate(rows, headers=["encoder", "task", "status", "main score", "note"], tablefmt="github")

    def __str__(self) -> str:
        note = "" if self.pinned else "\n(unpinned: a model without identity; nothing was cached or stored)"
        return self.table() + note

    def _repr_markdown_(self) -> str:  # notebooks render the table
        return str(self)


def load_results(folder: str | Path) -> Results:
    """Every result stored under ``folder`` (a ``results_dir``), ready for ``compare`` and
    ``to_pandas``; a damaged file raises naming it."""
    root = Path(folder)
    if not root.is_dir():
        raise InvalidInputError(f"{root}: no such results folder (results are stored by `benchharness run` or "
                                "evaluate(..., results_dir=...))")
    store = ResultStore(root)
    results = list(store)
    return Results(results, [Outcome(r.encoder, r.task, "stored", r.main_score, result=r) for r in results],
                   True, store)
