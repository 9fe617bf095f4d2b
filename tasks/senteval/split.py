"""SentEval tasks with fixed train/dev/test splits and its ``SplitClassifier``: SST5, SICKEntailment.

``SplitTask`` is the shared part (SNLI and the probing tasks build on it): features per split, a
label per item, and SentEval's split protocol (every L2 of the grid trains on train with early
stopping on dev, the best rounded dev accuracy picks it, test accuracy of that model) through the
batched classifier of ``senteval.classifier``.

Readers follow SentEval's loaders (``sst.py``, ``sick.py``) line for line, so that the sample order,
which the classifier's mini-batch permutations index into, is SentEval's:

- SST5 (``SST/fine/sentiment-<split>``): utf-8, ``label sentence`` per line, split at the first
  space; labels 0..4; each split sorted by (token count, label), stably.
- SICKEntailment (``SICK/SICK_<split>.txt``, the same files as SICK-R): utf-8, a header line,
  sentences in columns 1 and 2, ``entailment_judgment`` in column 4 mapped CONTRADICTION 0,
  NEUTRAL 1, ENTAILMENT 2; train 4500 / trial (dev) 500 / test 4927; each split sorted by (tokens of
  A, tokens of B, label). Features ``[|u-v|, u*v]``, as SentEval's ``SICKEntailmentEval.run``
  builds them (docs/PROTOCOLS.md: not ``[u, v, |u-v|, u*v]``, which is SNLI's).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.task import Embed
from benchharness.data.readers import undecodable_message
from benchharness.tasks.senteval.base import TransferTask, sorted_samples
from benchharness.tasks.senteval.config import EXTRA_GROUP, L2_GRID, ClassifierConfig

SPLITS = ("train", "dev", "test")
SICK_LABELS = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}
SICK_SPLIT_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def file_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """The lines of ``for line in open(path)`` (universal newlines: ``\\n``, ``\\r\\n`` and ``\\r``
    end a line, nothing else does), as SentEval's ``io.open`` loops read them; newlines removed."""
    try:
        with open(path, encoding=encoding) as fh:
            return [line.rstrip("\n") for line in fh]
    except UnicodeDecodeError as exc:
        with open(path, encoding=encoding, errors="surrogateescape") as fh:
            raise DataError(undecodable_message(path, list(fh), exc)) from None


def read_sst_fine(path: Path) -> tuple[list[list[str]], list[int]]:
    """``label sentence`` lines: SentEval's ``line.strip().split(' ', 1)``, label in 0..4."""
    texts, labels = [], []
    for lineno, line in enumerate(file_lines(path), 1):
        fields = line.strip().split(" ", 1)
        if len(fields) < 2 or fields[0] not in ("0", "1", "2", "3", "4"):
            raise DataError(f"{path}:{lineno}: expected '<label 0-4> <sentence>', got {line[:60]!r}")
        labels.append(int(fields[0]))
        texts.append(fields[1].split())
    return texts, labels


def read_sick_entailment(path: Path) -> tuple[list[list[str]], list[list[str]], list[int]]:
    """SICK's tab-separated file, header skipped: sentences A and B, entailment label id."""
    a, b, labels = [], [], []
    for lineno, line in enumerate(file_lines(path)[1:], 2):
        fields = line.strip().split("\t")
        if len(fields) < 5 or fields[4] not in SICK_LABELS:
            raise DataError(
                f"{path}:{lineno}: expected 'pair_ID<TAB>sentence_A<TAB>sentence_B<TAB>score<TAB>"
                f"{'|'.join(SICK_LABELS)}', got {line[:60]!r}"
            )
        a.append(fields[1].split())
        b.append(fields[2].split())
        labels.append(SICK_LABELS[fields[4]])
    return a, b, labels


def sorted_pairs(
    a: list[list[str]], b: list[list[str]], labels: Sequence[Any]
) -> tuple[list[str], list[str], list[Any]]:
    """SentEval's pair order: stable sort by (tokens of A, tokens of B, label); texts re-joined."""
    order = sorted(zip(a, b, labels), key=lambda z: (len(z[0]), len(z[1]), z[2]))
    return [" ".join(x) for x, _, _ in order], [" ".join(y) for _, y, _ in order], [z for _, _, z in order]


def split_arrays(
    x: dict[str, np.ndarray], y: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each split's rows ``x`` and labels ``y`` in the order SentEval's ``SplitClassifier`` takes
    them (``classifier.split_select``, ``mlp.mlp_split_select``): train, dev, test, rows before labels."""
    return x["train"], y["train"], x["dev"], y["dev"], x["test"], y["test"]


def check_count(path: Path, n: int, expected: int, what: str) -> None:
    if n != expected:
        raise DataError(f"{path}: {n} {what}, expected {expected}; the file is not SentEval's")


class SplitTask(TransferTask):
    """A task with train/dev/test splits, classified by SentEval's ``SplitClassifier``."""

    #: the L2 values the dev set chooses from (SNLI: SentEval's ``noreg``)
    grid: tuple[float, ...] = L2_GRID
    #: the classifier config's fields this task overrides (SNLI: fewer epochs)
    overrides: ClassVar[dict[str, Any]] = {}

    @property
    def classifier_config(self) -> ClassifierConfig:
        return replace(self.config, **self.overrides) if self.overrides else self.config

    @abstractmethod
    def _features(self, embed: Embed, split: str) -> np.ndarray:
        """The classifier's input rows of ``split``, in the task's order."""

    @abstractmethod
    def _labels(self, split: str) -> np.ndarray: ...

    def _test_labels(self) -> np.ndarray:
        return self._labels("test")

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        x = {s: self._features(embed, s) for s in SPLITS}
        y = {s: self._labels(s) for s in SPLITS}
        return {**self._select(x, y, seed), **{f"n{s}": len(y[s]) for s in SPLITS}}

    def _select(self, x: dict[str, np.ndarray], y: dict[str, np.ndarray], seed: int) -> dict[str, Any]:
        """The classifier chosen on dev and its test score (SentEval's ``SplitClassifier``: L2 on
        ``grid``); a task with another search overrides this."""
        from benchharness.tasks.senteval.classifier import split_select  # torch: only to classify

        return split_select(*split_arrays(x, y), self.nclasses, self.classifier_config, seed, grid=self.grid)


class SentenceSplitTask(SplitTask):
    """One sentence per item: the features are its embedding."""

    splits: dict[str, tuple[list[str], np.ndarray]]

    def sentences(self) -> list[str]:
        return [s for split in SPLITS for s in self.splits[split][0]]

    def _features(self, embed: Embed, split: str) -> np.ndarray:
        return embed(self.splits[split][0])

    def _labels(self, split: str) -> np.ndarray:
        return np.asarray(self.splits[split][1])


class PairSplitTask(SplitTask):
    """Two sentences per item, combined into one feature row by ``combine(u, v)``."""

    pairs: dict[str, tuple[list[str], list[str], np.ndarray]]
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray]

    def sentences(self) -> list[str]:
        return [s for split in SPLITS for s in (*self.pairs[split][0], *self.pairs[split][1])]

    def _features(self, embed: Embed, split: str) -> np.ndarray:
        a, b, _ = self.pairs[split]
        return type(self).combine(embed(a), embed(b))

    def _labels(self, split: str) -> np.ndarray:
        return np.asarray(self.pairs[split][2])


def abs_diff_prod(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``[|u-v|, u*v]``: SentEval's pair features for MRPC, SICK-E, SICK-R and STS-B."""
    return np.c_[np.abs(u - v), u * v]


class SST5(SentenceSplitTask):
    SIZES: ClassVar[dict[str, int]] = {"train": 8544, "dev": 1101, "test": 2210}

    def __init__(self, config: ClassifierConfig, sizes: dict[str, int] | None = None) -> None:
        """``sizes``: the sentences expected per split (SentEval's files by default; a fixture's own)."""
        self.sizes = sizes or self.SIZES
        super().__init__(
            "SST5",
            "Stanford Sentiment Treebank fine-grained, 5 classes, fixed splits 8544/1101/2210",
            self.sizes["test"],
            "L2 picked on dev (early stopping on dev); test accuracy",
            config,
            5,
            {"labels": "0 very negative .. 4 very positive"},
            group=EXTRA_GROUP,
        )

    def _load(self, data: DataRoot) -> None:
        self.splits = {}
        for split in SPLITS:
            path = self._path(data, f"senteval/SST/fine/sentiment-{split}", "senteval")
            texts, labels = read_sst_fine(path)
            if max(labels) != 4:  # SentEval asserts it: a binary file read as fine-grained
                raise DataError(f"{path}: labels go up to {max(labels)}, expected 0..4; is this SST/binary?")
            check_count(path, len(labels), self.sizes[split], "sentences")
            self.splits[split] = sorted_samples(texts, labels)


class SICKEntailment(PairSplitTask):
    combine = staticmethod(abs_diff_prod)
    SIZES: ClassVar[dict[str, int]] = {"train": 4500, "dev": 500, "test": 4927}

    def __init__(self, config: ClassifierConfig, sizes: dict[str, int] | None = None) -> None:
        """``sizes``: the pairs expected per split (SentEval's files by default; a fixture's own)."""
        self.sizes = sizes or self.SIZES
        super().__init__(
            "SICKEntailment",
            "SICK entailment (SemEval-2014), 3 classes, train 4500 / trial 500 as dev / test 4927",
            self.sizes["test"],
            "L2 picked on dev (SICK trial, early stopping on dev); test accuracy",
            config,
            3,
            {"features": "[|u-v|, u*v]", "labels": dict(SICK_LABELS)},
            group=EXTRA_GROUP,
            header="SICK-E",
        )

    def _load(self, data: DataRoot) -> None:
        self.pairs = {}
        for split, name in SICK_SPLIT_FILES.items():
            path = self._path(data, f"senteval/SICK/{name}", "senteval")
            a, b, y = sorted_pairs(*read_sick_entailment(path))
            check_count(path, len(y), self.sizes[split], "pairs")
            self.pairs[split] = (a, b, np.array(y))
