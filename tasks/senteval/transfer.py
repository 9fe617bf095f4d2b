"""SentEval transfer tasks: MR, CR, SUBJ, MPQA, SST2, TREC, MRPC with SentEval's classifier.

Readers take SentEval's files as they are and build exactly the sample order SentEval hands its
classifier, because the folds (StratifiedKFold with shuffle, seed 1111) and the mini-batch
permutations index into that order:

- MR/CR/SUBJ/MPQA (``binary.py``): ``f.read().splitlines()`` of each file as latin-1, so blank
  lines are samples (an empty sentence): CR has 3775 and MPQA 10606, as SentEval counts them;
  positives (SUBJ: ``subj.objective``) get label 1 and come first; then the stable sort by
  (number of tokens, label) that SentEval does "to reduce padding".
- SST2 (``sst.py``): ``sentence \\t label`` per line (utf-8), each split sorted the same way.
- TREC (``trec.py``): latin-1, coarse label = text before ``:``, the fine label word dropped;
  labels ABBR DESC ENTY HUM LOC NUM = 0..5.
- MRPC (``mrpc.py``): utf-8 lines, the header (with its BOM) dropped, columns 0/3/4, sorted by
  (tokens of A, tokens of B, label); features ``[|u-v|, u*v]``; F1 of the positive class.

The encoder receives ``' '.join(tokens)`` of each whitespace-split line, as SentEval's batchers
(SimCSE's included) do. Every task exists under the ``default`` config (the literature's numbers;
group ``transfer``) and under ``fast`` (model selection only; names ``<task>-fast``, group
``transfer-fast``); each result records its config. The classifier (torch, scikit-learn) is
imported when a task classifies, not when the tasks are built or listed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.task import Embed
from benchharness.tasks.senteval.base import TransferTask, read_lines, sorted_samples
from benchharness.tasks.senteval.config import (
    ClassifierConfig,
)

TREC_LABELS = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}

Tokens = list[str]


def read_binary_file(path) -> list[Tokens]:
    return [line.split() for line in read_lines(path, "latin-1")]


def read_sst(path) -> tuple[list[Tokens], list[int]]:
    texts, labels = [], []
    for lineno, line in enumerate(read_lines(path, "utf-8"), 1):
        fields = line.strip().split("\t")
        if len(fields) < 2 or fields[1] not in ("0", "1"):
            raise DataError(f"{path}:{lineno}: expected 'sentence<TAB>0|1', got {line[:60]!r}")
        texts.append(fields[0].split())
        labels.append(int(fields[1]))
    return texts, labels


def read_trec(path) -> tuple[list[Tokens], list[int]]:
    texts, labels = [], []
    for lineno, line in enumerate(read_lines(path, "latin-1"), 1):
        target, sep, rest = line.strip().partition(":")
        words = rest.split(" ", 1)
        if not sep or target not in TREC_LABELS or len(words) < 2:
            raise DataError(f"{path}:{lineno}: expected 'COARSE:fine question', got {line[:60]!r}")
        texts.append(words[1].split())  # the fine label word goes
        labels.append(TREC_LABELS[target])
    return texts, labels


def read_mrpc(path) -> tuple[list[Tokens], list[Tokens], list[int]]:
    a, b, labels = [], [], []
    for lineno, line in enumerate(read_lines(path, "utf-8")[1:], 2):  # header (with BOM) dropped
        fields = line.strip().split("\t")
        if len(fields) < 5 or fields[0] not in ("0", "1"):
            raise DataError(f"{path}:{lineno}: expected 'Quality<TAB>id<TAB>id<TAB>s1<TAB>s2', got {line[:60]!r}")
        a.append(fields[3].split())
        b.append(fields[4].split())
        labels.append(int(fields[0]))
    return a, b, labels


class BinaryTask(TransferTask):
    """MR, CR, SUBJ, MPQA: nested stratified k-fold over one labelled set."""

    def __init__(self, name: str, files: tuple[str, str], n: int, config: ClassifierConfig, desc: str) -> None:
        super().__init__(
            name,
            desc,
            n,
            f"nested stratified {config.kfold}-fold (inner {config.kfold}-fold "
            "picks L2, refit with 5% validation); mean outer test accuracy",
            config,
            2,
        )
        self.rel = files  # (label 1, label 0)

    def _load(self, data: DataRoot) -> None:
        pos = read_binary_file(self._path(data, f"senteval/{self.rel[0]}", "senteval"))
        neg = read_binary_file(self._path(data, f"senteval/{self.rel[1]}", "senteval"))
        self.texts, self.labels = sorted_samples(pos + neg, [1] * len(pos) + [0] * len(neg))
        self._check(len(self.texts), "samples (blank lines included, as SentEval)")

    def sentences(self) -> list[str]:
        return self.texts

    def _test_labels(self) -> np.ndarray:
        return np.asarray(self.labels)

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        from benchharness.tasks.senteval.classifier import inner_kfold  # torch and scikit-learn: only to classify

        out = inner_kfold(embed(self.texts), self.labels, 2, self.config, seed)
        return {**out, "ndev": len(self.texts), "ntest": len(self.texts)}


class SST2(TransferTask):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__(
            "SST2",
            "Stanford Sentiment Treebank binary, fixed splits 67349/872/1821",
            1821,
            "L2 picked on dev (early stopping on dev); test accuracy",
            config,
            2,
        )

    def _load(self, data: DataRoot) -> None:
        self.splits = {}
        for split in ("train", "dev", "test"):
            texts, labels = read_sst(self._path(data, f"senteval/SST/binary/sentiment-{split}", "senteval"))
            self.splits[split] = sorted_samples(texts, labels)
        self._check(len(self.splits["test"][0]), "test sentences")

    def sentences(self) -> list[str]:
        return [s for texts, _ in self.splits.values() for s in texts]

    def _test_labels(self) -> np.ndarray:
        return np.asarray(self.splits["test"][1])

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        from benchharness.tasks.senteval.classifier import split_select

        (tr, ytr), (dv, ydv), (te, yte) = (self.splits[s] for s in ("train", "dev", "test"))
        out = split_select(embed(tr), ytr, embed(dv), ydv, embed(te), yte, 2, self.config, seed)
        return {**out, "ntrain": len(tr), "ndev": len(dv), "ntest": len(te)}


class TREC(TransferTask):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__(
            "TREC",
            "TREC question type, 6 coarse classes, train 5452 / test 500",
            500,
            f"stratified {config.kfold}-fold on train picks L2, refit on train with 5% validation; test accuracy",
            config,
            6,
            {"labels": list(TREC_LABELS)},
        )

    def _load(self, data: DataRoot) -> None:
        self.train = sorted_samples(*read_trec(self._path(data, "senteval/TREC/train_5500.label", "senteval")))
        self.test = sorted_samples(*read_trec(self._path(data, "senteval/TREC/TREC_10.label", "senteval")))
        if len(self.train[0]) != 5452:
            raise DataError(f"{self.files[0]}: {len(self.train[0])} questions, expected 5452")
        self._check(len(self.test[0]), "test questions")

    def sentences(self) -> list[str]:
        return self.train[0] + self.test[0]

    def _test_labels(self) -> np.ndarray:
        return np.asarray(self.test[1])

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        from benchharness.tasks.senteval.classifier import kfold_then_test

        out = kfold_then_test(
            embed(self.train[0]), self.train[1], embed(self.test[0]), self.test[1], 6, self.config, seed
        )
        return {**out, "ntrain": len(self.train[0]), "ntest": len(self.test[0])}


class MRPC(TransferTask):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__(
            "MRPC",
            "Microsoft Research Paraphrase Corpus, train 4076 / test 1725",
            1725,
            f"stratified {config.kfold}-fold on train picks L2, refit on train with 5% "
            "validation; test accuracy and F1",
            config,
            2,
            {"features": "[|u-v|, u*v]"},
        )

    def _load(self, data: DataRoot) -> None:
        self.pairs = {}
        for split in ("train", "test"):
            a, b, y = read_mrpc(self._path(data, f"senteval/MRPC/msr_paraphrase_{split}.txt", "senteval"))
            order = sorted(zip(a, b, y), key=lambda z: (len(z[0]), len(z[1]), z[2]))
            self.pairs[split] = (
                [" ".join(x) for x, _, _ in order],
                [" ".join(x) for _, x, _ in order],
                np.array([z for _, _, z in order]),
            )
        if len(self.pairs["train"][2]) != 4076:
            raise DataError(f"{self.files[0]}: {len(self.pairs['train'][2])} pairs, expected 4076")
        self._check(len(self.pairs["test"][2]), "test pairs")

    def sentences(self) -> list[str]:
        return [s for a, b, _ in self.pairs.values() for s in (*a, *b)]

    def _test_labels(self) -> np.ndarray:
        return np.asarray(self.pairs["test"][2])

    def _features(self, embed: Embed, split: str) -> np.ndarray:
        a, b, _ = self.pairs[split]
        u, v = embed(a), embed(b)
        return np.c_[np.abs(u - v), u * v]

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        from sklearn.metrics import f1_score

        from benchharness.tasks.senteval.classifier import kfold_then_test

        ytr, yte = self.pairs["train"][2], self.pairs["test"][2]
        out = kfold_then_test(
            self._features(embed, "train"), ytr, self._features(embed, "test"), yte, 2, self.config, seed
        )
        f1 = round(100 * f1_score(yte, out["yhat"]), 2)
        return {**out, "f1": f1, "ntrain": len(ytr), "ntest": len(yte)}


BINARY = {
    "MR": (("MR/rt-polarity.pos", "MR/rt-polarity.neg"), 10662, "Movie review sentiment (Pang & Lee 2005)"),
    "CR": (("CR/custrev.pos", "CR/custrev.neg"), 3775, "Customer review sentiment (Hu & Liu 2004)"),
    "SUBJ": (
        ("SUBJ/subj.objective", "SUBJ/subj.subjective"),
        10000,
        "Subjectivity (Pang & Lee 2004); objective = label 1 as in SentEval",
    ),
    "MPQA": (("MPQA/mpqa.pos", "MPQA/mpqa.neg"), 10606, "MPQA opinion polarity (Wiebe et al. 2005)"),
}
