"""What every SentEval classification task shares: its reference, SentEval's line reader and
``TransferTask`` (metadata under a classifier config, and per-item outputs from the classifier's
predictions). The seven of ``transfer``, and SST5, SICK-E, SNLI and the probing tasks, build on it.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError
from benchharness.core.task import BoardColumn, Embed, Evaluation, Metrics, Task, TaskMetadata
from benchharness.data.readers import undecodable_message
from benchharness.tasks.senteval.config import BOARDS, TRANSFER_GROUP, ClassifierConfig

REFERENCE = "SentEval (Conneau & Kiela 2018), facebookresearch/SentEval"


def read_lines(path, encoding: str) -> list[str]:
    """``f.read().splitlines()``: every line including blank ones (SentEval's binary loader)."""
    try:
        with open(path, encoding=encoding) as fh:
            return fh.read().splitlines()
    except UnicodeDecodeError as exc:
        with open(path, encoding=encoding, errors="surrogateescape") as fh:
            raise DataError(undecodable_message(path, fh.read().splitlines(), exc)) from None


class TransferTask(Task):
    """A SentEval classification task under one classifier config."""

    def __init__(
        self,
        name: str,
        description: str,
        n_samples: int | None,
        validation: str,
        config: ClassifierConfig,
        nclasses: int,
        extra: dict[str, Any] | None = None,
        group: str = TRANSFER_GROUP,
        family: str = "transfer",
        protocol: str = "senteval-logreg",
        header: str | None = None,
    ) -> None:
        """``group``, ``family`` and ``protocol`` name the suite a task belongs to (``transfer``, the
        seven the papers report, by default); the config's name is appended to group and protocol.
        ``header``: the task's column header on the leaderboard (None: its name)."""
        super().__init__()
        self.config = config
        self.nclasses = nclasses
        suffix = "" if config.name == "default" else f"-{config.name}"
        self.metadata = TaskMetadata(
            name=name + suffix,
            family=family,
            description=description,
            split="test",
            main_score="acc",
            protocol=f"{protocol}-{config.name}",
            reference=REFERENCE,
            groups=(group + suffix,),
            n_samples=n_samples,
            protocol_details={
                "config": config.name,
                "classifier": config.to_dict(),
                "validation": validation,
                "text": "whitespace tokens re-joined by single spaces",
                "seed_classifier": "run seed",
                "accuracy": "test accuracy % (dev accuracy recorded as devacc)",
                **(extra or {}),
            },
            board=BOARDS[group],
            board_columns=(BoardColumn(header, published=name if BOARDS[group].published_csv else None),),
            on_board=config.name == "default",
        )

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        """The classifier's outcome under the task's validation scheme: ``acc`` and the other
        metrics, ``yhat`` (a prediction per test item) and, for outer k-fold tasks, ``fold``."""
        raise NotImplementedError

    def _check(self, n: int, what: str) -> None:
        if self.metadata.n_samples is not None and n != self.metadata.n_samples:
            raise DataError(
                f"{self.name}: read {n} {what} from {', '.join(map(str, self.files))}, "
                f"expected {self.metadata.n_samples}; the files are not SentEval's"
            )

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics, and per test item the prediction and gold label (in the task's sample order);
        outer k-fold tasks (every item tested once) add each item's outer fold."""
        t0 = time.perf_counter()
        out = self._classify(embed, seed)
        labels = np.int8 if self.nclasses <= 127 else np.int16  # WordContent has 1000 classes
        items = {"pred": np.asarray(out.pop("yhat")).astype(labels), "gold": self._test_labels().astype(labels)}
        if "fold" in out:
            items["fold"] = out.pop("fold")
        metrics = {**out, "config": self.config.name, "classifier_seconds": round(time.perf_counter() - t0, 3)}
        return Evaluation(metrics, items, "classification")

    @abstractmethod
    def _test_labels(self) -> np.ndarray:
        """Gold labels of the test items, in the order the classifier predicts them."""


def sorted_samples(texts: list[list[str]], labels: list[int]) -> tuple[list[str], np.ndarray]:
    """SentEval's order: stable sort by (token count, label); texts re-joined by single spaces."""
    order = sorted(zip(texts, labels), key=lambda z: (len(z[0]), z[1]))
    return [" ".join(t) for t, _ in order], np.array([y for _, y in order])
