"""What ``benchharness.evaluate`` returns: the stored-result records of a run, with the outcome of
every (encoder, task) pair, printable as a table and convertible to a pandas DataFrame."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from benchharness.core.results import Result
from benchharness.evaluation.runner import Outcome

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Results:
    """The results of one ``evaluate`` call, in (encoder, task) order.

    ``results`` are the full records (metrics, protocol, identity, versions, intervals);
    ``outcomes`` say for every pair whether it was computed, reused from the results folder, or
    failed and why. ``pinned`` is False when a model had no identity (a plain callable without
    ``identity=``): such results were returned but neither cached nor stored.
    """

    results: list[Result] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    pinned: bool = True

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def get(self, encoder: str, task: str) -> Result:
        for result in self.results:
            if result.encoder == encoder and result.task == task:
                return result
        raise KeyError(f"no result for {encoder!r} on {task!r}")

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
