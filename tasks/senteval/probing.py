"""SentEval's ten probing tasks (Conneau et al. 2018, "What you can cram into a single vector").

Data: the files of SentEval's ``data/probing/`` folder, under ``probing/`` of the data root
(``benchharness data download probing`` fetches them). Each line is tab-separated: the split
(``tr``/``va``/``te``), the label, ..., the tokenized sentence last. SentEval's loader
(``probing.py``) is followed: utf-8, ``line.rstrip().split('\\t')``, label ids from the sorted
distinct labels of the train split, each split sorted by (token count, label id), stably.

Classifier, as SentEval's README describes the probing protocol: under the ``default`` config an MLP
(``senteval.mlp``: Sigmoid, nhid in {50, 100, 200}, dropout in {0, 0.1, 0.2}, each point with the
L2 grid, all chosen on dev) trained with the default config's settings (Adam, batch 64, tenacity 5,
epoch size 4); WordContent always uses logistic regression, since SentEval's ``probing.py`` sets
``nhid = 0`` for it. Under ``fast`` the prototyping config SentEval's examples run the probing
tasks with: logistic regression (``nhid = 0``), RMSprop, batch 128, tenacity 3, epoch size 2.
Score: test accuracy of the model the dev set chose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.tasks.senteval.base import sorted_samples
from benchharness.tasks.senteval.config import (
    PAPER_NAMES,
    PROBING_DROPOUT,
    PROBING_GROUP,
    PROBING_NHID,
    PROBING_TASKS,
    ClassifierConfig,
)
from benchharness.tasks.senteval.split import SPLITS, SentenceSplitTask, file_lines, split_arrays

SPLIT_TOKENS = {"tr": "train", "va": "dev", "te": "test"}
#: per config: the (nhid values, dropout values) the dev set chooses from
MLP_POINTS: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {
    "default": (PROBING_NHID, PROBING_DROPOUT),
    "fast": ((0,), (0.0,)),
}


def read_probing(path: Path) -> tuple[dict[str, tuple[list[list[str]], list[int]]], list[str]]:
    """The three splits of a probing file (tokens, label id) in file order, and the label names
    (sorted; id = position). A dev or test label the train split lacks is an error (SentEval's
    loader fails on it with a KeyError)."""
    raw: dict[str, tuple[list[list[str]], list[str], list[int]]] = {s: ([], [], []) for s in SPLITS}
    for lineno, line in enumerate(file_lines(path), 1):
        fields = line.rstrip().split("\t")
        if len(fields) < 3 or fields[0] not in SPLIT_TOKENS:
            raise DataError(f"{path}:{lineno}: expected 'tr|va|te<TAB>label<TAB>...<TAB>sentence', got {line[:60]!r}")
        texts, labels, lines = raw[SPLIT_TOKENS[fields[0]]]
        texts.append(fields[-1].split())
        labels.append(fields[1])
        lines.append(lineno)
    empty = [s for s in SPLITS if not raw[s][0]]
    if empty:
        raise DataError(f"{path}: no {' or '.join(empty)} lines (first column tr/va/te): not a SentEval probing file?")
    names = sorted(set(raw["train"][1]))
    ids = {name: i for i, name in enumerate(names)}
    out = {}
    for split, (texts, labels, lines) in raw.items():
        unknown = next(((n, lab) for n, lab in zip(lines, labels) if lab not in ids), None)
        if unknown is not None:
            raise DataError(f"{path}:{unknown[0]}: label {unknown[1]!r} of the {split} split never occurs in train")
        out[split] = (texts, [ids[lab] for lab in labels])
    return out, names


class ProbingTask(SentenceSplitTask):
    """One probing task under one classifier config."""

    def __init__(self, name: str, config: ClassifierConfig) -> None:
        self.file, probes = PROBING_TASKS[name]
        nhids, dropouts = MLP_POINTS[config.name] if name != "WordContent" else ((0,), (0.0,))
        self.nhids, self.dropouts = nhids, dropouts
        classifier = (
            "logistic regression (nhid=0)"
            if nhids == (0,)
            else f"MLP Linear-Dropout-Sigmoid-Linear, nhid in {list(nhids)}, dropout in {list(dropouts)}"
        )
        super().__init__(
            name,
            f"SentEval probing task: {probes}; 100k train / 10k dev / 10k test",
            None,
            "nhid, dropout and L2 picked on dev (early stopping on dev); test accuracy",
            config,
            0,  # known once the file is read: the distinct labels of its train split
            {
                "model": classifier,
                "data": f"probing/{self.file} (SentEval data/probing)",
                "labels": "ids of the train split's sorted distinct labels",
            },
            group=PROBING_GROUP,
            family="probing",
            protocol="senteval-probing",
            header={task: short for short, task in PAPER_NAMES.items()}.get(name),  # the paper's short name
        )

    def _load(self, data: DataRoot) -> None:
        splits, self.label_names = read_probing(self._path(data, f"probing/{self.file}", "probing"))
        self.nclasses = len(self.label_names)
        self.splits = {}
        for split, (texts, labels) in splits.items():
            self.splits[split] = sorted_samples(texts, labels)

    def _select(self, x: dict[str, np.ndarray], y: dict[str, np.ndarray], seed: int) -> dict[str, Any]:
        from benchharness.tasks.senteval.mlp import mlp_split_select  # torch: only to classify

        out = mlp_split_select(
            *split_arrays(x, y), self.nclasses, self.config, seed, nhids=self.nhids, dropouts=self.dropouts
        )
        return {**out, "nclasses": self.nclasses}
