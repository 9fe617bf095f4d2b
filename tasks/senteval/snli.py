"""SNLI with SentEval's protocol (``snli.py``): the pair classifier on ``[u, v, u*v, |u-v|]``.

Data: SentEval's ``SNLI/`` folder, as its ``data/downstream/get_transfer_data.bash`` makes it from
https://nlp.stanford.edu/projects/snli/snli_1.0.zip (pairs labelled ``-`` dropped, columns gold
label, sentence 1, sentence 2, sentences PTB-tokenized): ``s1.<split>``, ``s2.<split>`` and
``labels.<split>`` for train, dev and test (549367 / 9842 / 9824 pairs). The loader reads the
sentence files as latin-1 and the labels as utf-8, ``read().splitlines()`` each, as SentEval does;
labels entailment 0, neutral 1, contradiction 2. Each split is sorted by (tokens of sentence 2,
tokens of sentence 1, label text), stably.

Classifier: SentEval's ``SplitClassifier`` with ``noreg`` (one L2 value, 1e-9) on a copy of the
config whose ``max_epoch`` is 15 and ``epoch_size`` 1; the rest of the config (optimizer, batch,
tenacity) is the run's (default or fast). Score: test accuracy, dev accuracy beside it.

The train split is some 550k pairs: its features are ``4 d`` floats per pair (3.4 GB in float32
for d = 384), held in memory as SentEval holds them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.tasks.senteval.base import read_lines
from benchharness.tasks.senteval.config import EXTRA_GROUP, NOREG_GRID, SNLI_OVERRIDES, ClassifierConfig
from benchharness.tasks.senteval.split import SPLITS, PairSplitTask, check_count

SNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
#: SentEval's file suffix per split, and the pairs each holds
SNLI_SPLITS = {"train": ("train", 549367), "dev": ("dev", 9842), "test": ("test", 9824)}
SNLI_SOURCE = (
    "SentEval's data/downstream/get_transfer_data.bash makes them from "
    "https://nlp.stanford.edu/projects/snli/snli_1.0.zip (its SNLI section: '-' labels dropped, columns 1, 6 "
    "and 7, PTB-tokenized)"
)


def snli_files(split: str) -> tuple[str, str, str]:
    """Data-root relative paths of (s1, s2, labels) of ``split``."""
    suffix = SNLI_SPLITS[split][0]
    return tuple(f"senteval/SNLI/{kind}.{suffix}" for kind in ("s1", "s2", "labels"))  # type: ignore[return-value]


def read_snli(s1: Path, s2: Path, labels: Path) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """One split's sentence token lists and label texts, checked for equal lengths and known labels."""
    first = [line.split() for line in read_lines(s1, "latin-1")]
    second = [line.split() for line in read_lines(s2, "latin-1")]
    gold = read_lines(labels, "utf-8")
    if not len(first) == len(second) == len(gold):
        raise DataError(f"{s1}, {s2}, {labels}: {len(first)}, {len(second)} and {len(gold)} lines; they must be equal")
    for lineno, label in enumerate(gold, 1):
        if label not in SNLI_LABELS:
            raise DataError(f"{labels}:{lineno}: label {label[:40]!r}, expected one of {', '.join(SNLI_LABELS)}")
    return first, second, gold


def uv_prod_absdiff(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``np.hstack((u, v, u*v, |u-v|))``: SentEval's SNLI features, in its order."""
    return np.hstack((u, v, u * v, np.abs(u - v)))


class SNLI(PairSplitTask):
    combine = staticmethod(uv_prod_absdiff)
    grid = NOREG_GRID
    overrides = SNLI_OVERRIDES

    def __init__(self, config: ClassifierConfig, sizes: dict[str, int] | None = None) -> None:
        """``sizes``: the pairs expected per split (SentEval's files by default; a fixture's own)."""
        self.sizes = sizes or {split: n for split, (_, n) in SNLI_SPLITS.items()}
        super().__init__(
            "SNLI",
            "Stanford Natural Language Inference, 3 classes, train 549367 / dev 9842 / test 9824",
            self.sizes["test"],
            "one L2 (SentEval's noreg, 1e-9), early stopping on dev, max_epoch 15 and epoch_size 1; test accuracy",
            config,
            3,
            {
                "features": "[u, v, u*v, |u-v|]",
                "labels": dict(SNLI_LABELS),
                "classifier_overrides": dict(SNLI_OVERRIDES),
                "l2_grid": list(NOREG_GRID),
            },
            group=EXTRA_GROUP,
        )

    def _load(self, data: DataRoot) -> None:
        every = [rel for split in SPLITS for rel in snli_files(split)]
        if data.root.is_dir():
            missing = [rel for rel in every if not (data.root / rel).exists()]
            if missing:
                raise DataError(
                    f"SNLI: missing {', '.join(missing)} under {data.root}; {SNLI_SOURCE}; put the files in "
                    f"{data.root / 'senteval/SNLI'} (or point --data-dir / $BENCHHARNESS_DATA at a root that has them)"
                )
        self.pairs = {}
        for split in SPLITS:
            paths = [self._path(data, rel, "senteval") for rel in snli_files(split)]
            first, second, gold = read_snli(*paths)
            check_count(paths[2], len(gold), self.sizes[split], "pairs")
            # SentEval sorts by sentence 2 first: zip(s2, s1, labels), key (len, len, label text)
            order = sorted(zip(second, first, gold), key=lambda z: (len(z[0]), len(z[1]), z[2]))
            self.pairs[split] = (
                [" ".join(x) for _, x, _ in order],
                [" ".join(x) for x, _, _ in order],
                np.array([SNLI_LABELS[z] for _, _, z in order]),
            )
