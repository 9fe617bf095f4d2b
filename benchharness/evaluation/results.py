"""What ``benchharness.evaluate`` returns, and what ``benchharness.load_results`` reads back: result
records with the outcome of every (encoder, task) pair, printable as a table, convertible to a
pandas DataFrame, and comparable with ``benchharness.compare`` (their per-item outputs travel with
them, or are read from the folder they were stored in)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.lists import split_outside_brackets
from benchharness.core.results import Result, ResultStore, items_of
from benchharness.core.task import Evaluation
from benchharness.evaluation.means import GroupMean, declared_means, group_mean
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
    def from_outcomes(cls, outcomes: list[Outcome], pinned: bool = True, store: ResultStore | None = None) -> Results:
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
            raise InvalidInputError(
                f"no results of encoder {encoder!r}; these are of {', '.join(self.encoders) or 'none'}"
            )
        return Results(
            [r for r in self.results if keep(r.encoder, r.task)],
            [o for o in self.outcomes if keep(o.encoder, o.task)],
            self.pinned,
            self.store,
        )

    @classmethod
    def concat(cls, *parts: Results) -> Results:
        """The results of several calls as one (``a + b``), for one ``compare`` or ``to_pandas`` over
        all of them. A pair (encoder, task) in two parts must be the same result (same identity,
        data and protocol), else it is refused: which one is meant would be a guess. Results that
        come from different folders carry their per-item outputs with them, read now."""
        stores = {id(p.store): p.store for p in parts if p.store is not None}
        store = next(iter(stores.values())) if len(stores) == 1 else None
        results: dict[tuple[str, str], Result] = {}
        outcomes: dict[tuple[str, str], Outcome] = {}
        for part in parts:
            for result in part.results:
                key = (result.encoder, result.task)
                kept = results.get(key)
                if kept is not None and kept.fingerprint() != result.fingerprint():
                    raise InvalidInputError(
                        f"{result.encoder} on {result.task} is in two of the results joined, computed differently "
                        "(identity, data or protocol): select one of them first (Results.select)"
                    )
                if kept is None:
                    if (
                        len(stores) > 1
                        and result.per_item is None
                        and part.store is not None
                        and part.store.has_items(result)
                    ):
                        result = replace(result, per_item=part.store.load_items(result))
                    results[key] = result
            for outcome in part.outcomes:
                outcomes.setdefault((outcome.encoder, outcome.task), outcome)
        return cls(list(results.values()), list(outcomes.values()), all(p.pinned for p in parts), store)

    def __add__(self, other: Results) -> Results:
        if not isinstance(other, Results):
            return NotImplemented
        return Results.concat(self, other)

    def items(self, result: Result) -> Evaluation:
        """The per-item outputs of one of these results: carried in memory, else read from the store."""
        return items_of(result, self.store)

    def mean(self, group: str | Sequence[str], encoder: str | None = None) -> GroupMean:
        """An encoder's unweighted mean of main scores over a group of tasks (a group name such as
        ``"nanobeir"``, else task names), with its 95% interval, each task's items resampled within
        the task (``evaluation.means``); ``encoder`` may be left out when these results are of one."""
        from benchharness import tasks as task_registry

        if encoder is None:
            if len(self.encoders) != 1:
                raise InvalidInputError(
                    f"these results are of {len(self.encoders)} encoders ({', '.join(self.encoders) or 'none'}): "
                    "say which with encoder="
                )
            encoder = self.encoders[0]
        if isinstance(group, str):
            groups = task_registry.groups()
            names = groups.get(group) or split_outside_brackets(group)
            label = group
        else:
            names, label = list(group), "mean"
        return group_mean(label, names, encoder, self.results, self.items)

    def means(self) -> list[GroupMean]:
        """The mean of every group that the task plugins declare a score (NanoBEIR's) and whose every
        task these results hold for an encoder, with its interval."""
        return [
            group_mean(group, names, encoder, self.results, self.items)
            for group, names, encoder in declared_means(self.encoders, self.results)
        ]

    def main_scores(self) -> dict[tuple[str, str], float]:
        return {(r.encoder, r.task): r.main_score for r in self.results}

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per pair, in outcome order: names, main score and its interval, status,
        identity and the outcome's message; a pair without a result (failed: the message says why)
        has a NaN score."""
        results = {(r.encoder, r.task): r for r in self.results}
        rows = [
            _row(o.encoder, o.task, results.pop((o.encoder, o.task), None), o.status, o.message) for o in self.outcomes
        ]
        return rows + [_row(r.encoder, r.task, r, "", "") for r in results.values()]

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            self.rows(),
            columns=[
                "encoder",
                "task",
                "main_metric",
                "main_score",
                "ci_low",
                "ci_high",
                "status",
                "identity",
                "message",
            ],
        )

    def table(self) -> str:
        from tabulate import tabulate

        rows = [
            [o.encoder, o.task, o.status, "" if o.main_score is None else f"{o.main_score:.2f}", o.message]
            for o in self.outcomes
        ]
        rows += [
            [m.encoder, f"{m.group} (mean of {len(m.tasks)})", "mean", f"{m.mean:.2f}", m.note()] for m in self.means()
        ]
        return tabulate(rows, headers=["encoder", "task", "status", "main score", "note"], tablefmt="github")

    def __str__(self) -> str:
        note = "" if self.pinned else "\n(unpinned: a model without identity; nothing was cached or stored)"
        return self.table() + note

    def _repr_markdown_(self) -> str:  # notebooks render the table
        return str(self)


def _row(encoder: str, task: str, result: Result | None, status: str, message: str) -> dict[str, Any]:
    """One row of ``Results.rows``: a pair without a result keeps its place, with a NaN score."""
    low, high = ((result.confidence or {}).get("main") if result is not None else None) or (None, None)
    return {
        "encoder": encoder,
        "task": task,
        "main_metric": None if result is None else result.main_metric,
        "main_score": float("nan") if result is None else result.main_score,
        "ci_low": low,
        "ci_high": high,
        "status": status,
        "identity": None if result is None else result.encoder_identity.get("hash"),
        "message": message,
    }


class EvaluationFailedError(UserError, RuntimeError):
    """Raised by ``evaluate`` (``errors="raise"``) once every pair is done, when some failed: one
    line per failed pair, with its cause (one line in all when one failed). Nothing computed is
    lost: ``results`` holds the whole call (the results computed, every outcome), and with a
    ``results_dir`` they are stored already."""

    def __init__(self, results: Results) -> None:
        self.results = results
        failed = results.failed
        done = len(results.outcomes) - len(failed)
        kept = f", stored in {results.store.root}" if results.store is not None and len(results) else ""
        hint = (
            f"the {done} other(s) are in this error's .results{kept}; " if done else ""
        ) + "errors='keep' returns failures as rows"
        lines = [f"{o.encoder} on {o.task}: {' '.join(o.message.split())}" for o in failed]
        super().__init__(
            f"evaluation failed, {lines[0]} ({hint})"
            if len(lines) == 1
            else f"{len(failed)} of {len(results.outcomes)} evaluations failed ({hint}):\n" + "\n".join(lines)
        )

    def __reduce__(self) -> tuple[type, tuple[Results]]:  # rebuilt from its results (a worker's error, pickled)
        return type(self), (self.results,)


def load_results(folder: str | Path) -> Results:
    """Every result stored under ``folder`` (a ``results_dir``), ready for ``compare`` and
    ``to_pandas``; a damaged file raises naming it."""
    root = Path(folder)
    if not root.is_dir():
        raise InvalidInputError(
            f"{root}: no such results folder (results are stored by `benchharness run` or "
            "evaluate(..., results_dir=...))"
        )
    store = ResultStore(root)
    results = list(store)
    return Results(
        results, [Outcome(r.encoder, r.task, "stored", r.main_score, result=r) for r in results], True, store
    )
