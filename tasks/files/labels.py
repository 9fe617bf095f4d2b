"""The ``labels`` kind of task from files: sentences with class labels, under SentEval's logistic
regression with nested stratified k-fold as MR (``tasks.senteval.transfer.BinaryTask``) with n
classes. Labels are strings or integers; class ids follow their sorted order (numeric when every
label is an integer), recorded in the protocol."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError
from benchharness.core.task import Embed
from benchharness.data.readers import excerpt
from benchharness.tasks.files.base import GROUP, Declaration, FileTask, Row, sentence
from benchharness.tasks.senteval.config import ClassifierConfig
from benchharness.tasks.senteval.transfer import BinaryTask

#: the protocol variant, + "-<config>" as the transfer tasks' senteval-logreg-<config>; the
#: leaderboard finds file tasks by their ``file-`` prefix
LABELS_PROTOCOL = "file-senteval-logreg"
#: the classification items store class ids as int8 (``TransferTask.evaluate_items``)
MAX_CLASSES = 127
INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Labelled:
    texts: list[str]
    labels: list[int]  # class ids
    classes: list[int | str]  # the label of each class id

    @property
    def n(self) -> int:
        return len(self.texts)


def _label(path: Path, line: int, value: Any, column: str) -> int | str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise DataError(f"{path}:{line}: label {excerpt(value)} in {column!r}; a label is non-empty text or an integer")


def class_labels(labels: list[int | str]) -> list[int | str]:
    """Each label as its class is named: an integer when every label is one (``7`` or ``"7"``, so
    that 2 sorts before 10), else text."""
    if all(isinstance(v, int) or INTEGER.fullmatch(v) for v in labels):
        return [int(v) for v in labels]
    return [str(v) for v in labels]


def _check_classes(path: Path, labels: list[int | str], config: ClassifierConfig) -> None:
    counts = Counter(labels)
    if not 2 <= len(counts) <= MAX_CLASSES:
        raise DataError(f"{path}: {len(counts)} class(es); a labelled task needs 2 to {MAX_CLASSES}")
    label, fewest = min(counts.items(), key=lambda kv: kv[1])
    if fewest < config.kfold:
        raise DataError(
            f"{path}: class {excerpt(label)} has {fewest} sentence(s); the {config.kfold}-fold "
            f"cross-validation of the {config.name!r} config needs at least {config.kfold} per class"
        )


class FileLabelTask(FileTask, BinaryTask):
    """Labelled sentences, under MR's protocol (nested stratified k-fold) with n classes."""

    def __init__(self, decl: Declaration) -> None:
        self.decl = decl
        # the family's metadata (classifier config, validation scheme); the file completes it
        super().__init__(
            decl.name,
            (decl.path.name, decl.path.name),
            0,
            decl.config,
            f"sentences with class labels from {decl.path}, SentEval logistic regression",
        )
        self.metadata = replace(
            self._declared,
            name=decl.name,
            split="all",
            groups=(GROUP,),
            protocol=f"{LABELS_PROTOCOL}-{decl.config.name}",
        )

    def _read(self, rows: list[Row]) -> Labelled:
        path, cols = self.decl.path, self.decl.columns
        text_col, label_col = cols["text"], cols["label"]
        texts, written = [], []
        for line, rec in rows:  # row by row: the first problem in the file is the one reported
            texts.append(sentence(path, line, rec[text_col], text_col))
            written.append(_label(path, line, rec[label_col], label_col))
        labels = class_labels(written)
        _check_classes(path, labels, self.decl.config)
        classes: list[int | str] = sorted(set(labels))  # all int or all str
        ids = {label: i for i, label in enumerate(classes)}
        return Labelled(texts, [ids[label] for label in labels], classes)

    def _use(self, content: Labelled) -> None:
        self.texts, self.labels, self.nclasses = content.texts, np.asarray(content.labels), len(content.classes)

    def _details(self, content: Labelled) -> dict[str, Any]:
        return {"labels": content.classes, "class_ids": "the labels' sorted order"}

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        """``BinaryTask._classify`` with this file's number of classes (MR's is fixed at 2)."""
        from benchharness.tasks.senteval.classifier import inner_kfold  # torch and scikit-learn: only to classify

        out = inner_kfold(embed(self.texts), self.labels, self.nclasses, self.config, seed)
        return {**out, "ndev": len(self.texts), "ntest": len(self.texts)}
