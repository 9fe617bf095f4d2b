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

The provider here also registers SentEval's other tasks: SST5 and SICKEntailment
(``senteval_split``), SICKRelatedness-sup and STSBenchmark-sup (``relatedness``), SNLI (``snli``)
and the ten probing tasks (``probing``), in groups ``senteval-extra`` and ``probing`` (``-fast``
for the prototyping config) and ``senteval-all`` (STS12-16, the seven, and all of those), so that
``transfer`` keeps meaning what papers mean by it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.task import Embed, Task, TaskProvider
from benchharness.tasks.probing import ProbingTask
from benchharness.tasks.relatedness import RelatednessTask
from benchharness.tasks.senteval_base import TransferTask, read_lines, sorted_samples
from benchharness.tasks.senteval_config import (
    ALL_GROUP,
    CONFIGS,
    EXTRA_GROUP,
    PAPER_NAMES,
    PROBING_GROUP,
    PROBING_TASKS,
    TRANSFER_GROUP,
    ClassifierConfig,
)
from benchharness.tasks.senteval_split import SST5, SICKEntailment
from benchharness.tasks.snli import SNLI

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
        from benchharness.tasks.senteval_classifier import inner_kfold  # torch and scikit-learn: only to classify

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
        from benchharness.tasks.senteval_classifier import split_select

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
        from benchharness.tasks.senteval_classifier import kfold_then_test

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

        from benchharness.tasks.senteval_classifier import kfold_then_test

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


#: SentEval's tasks beyond the seven, in the order its task list gives them: name -> task class.
#: The relatedness regressor takes no classifier config, so those two exist once, in the default
#: and the fast groups alike (built from a config, those two from their name).
EXTRA: dict[str, Callable[..., Task]] = {
    "SST5": SST5,
    "SICKEntailment": SICKEntailment,
    "SICKRelatedness-sup": RelatednessTask,
    "STSBenchmark-sup": RelatednessTask,
    "SNLI": SNLI,
}
UNCONFIGURED = ("SICKRelatedness-sup", "STSBenchmark-sup")
#: SentEval's unsupervised STS tasks (the ``sts`` provider's), part of ``senteval-all``
STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
ALIASES = {
    "SICK-E": "SICKEntailment",
    "SICKE": "SICKEntailment",
    **{f"{name}-fast": name for name in UNCONFIGURED},
    **PAPER_NAMES,
}


def factories() -> dict[str, tuple[Callable[[], Task], tuple[str, ...]]]:
    """Every SentEval task here under every config: name -> (factory, groups). ``transfer`` is the
    seven the papers report; ``senteval-extra`` and ``probing`` the others; ``-fast`` groups hold
    the prototyping config's."""
    out: dict[str, tuple[Callable[[], Task], tuple[str, ...]]] = {}
    for cfg in CONFIGS.values():
        suffix = "" if cfg.name == "default" else f"-{cfg.name}"
        group = (TRANSFER_GROUP + suffix,)
        for name, (files, n, desc) in BINARY.items():
            out[name + suffix] = (partial(BinaryTask, name, files, n, cfg, desc), group)
        for name, cls in (("SST2", SST2), ("TREC", TREC), ("MRPC", MRPC)):
            out[name + suffix] = (partial(cls, cfg), group)
        for name, extra in EXTRA.items():
            if name in UNCONFIGURED:
                if cfg.name == "default":
                    out[name] = (partial(extra, name), (EXTRA_GROUP,))
            else:
                out[name + suffix] = (partial(extra, cfg), (EXTRA_GROUP + suffix,))
        for name in PROBING_TASKS:
            out[name + suffix] = (partial(ProbingTask, name, cfg), (PROBING_GROUP + suffix,))
    return out


def _groups(table: dict[str, tuple[Callable[[], Task], tuple[str, ...]]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for name, (_, names) in table.items():
        for group in names:
            groups.setdefault(group, []).append(name)
    for cfg in CONFIGS.values():
        suffix = "" if cfg.name == "default" else f"-{cfg.name}"
        extra = [name if name in UNCONFIGURED else name + suffix for name in EXTRA]
        groups[EXTRA_GROUP + suffix] = extra
        groups[ALL_GROUP + suffix] = [
            *STS_YEARS,
            *groups[TRANSFER_GROUP + suffix],
            *extra,
            *groups[PROBING_GROUP + suffix],
        ]
    return groups


def _provider() -> TaskProvider:
    table = factories()
    return TaskProvider(
        tasks={name: factory for name, (factory, _) in table.items()}, groups=_groups(table), aliases=ALIASES, order=20
    )


TASKS = _provider()
