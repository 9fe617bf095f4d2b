"""Named unlabeled sentence corpora, for training methods and for fitting post-processors.

``sts-unlabeled`` is the corpus of ConSERT (its Table 1) and PaSeR: every sentence of every pair in
the STS12-16 input files (gold or not), STS-B train/dev/test and SICK train/trial/test, with
repeats kept: 6216 + 3000 + 7500 + 17000 + 18366 + 17256 + 19854 = 89,192 sentences. It contains
test sentences (no labels): a model trained or fitted on it is transductive, as in those papers,
and results record that choice. ``train-splits`` (STS-B train + SICK train) is the inductive
alternative. ``text:<path>`` reads one sentence per line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from benchharness.data import DataError, DataRoot
from tasks.sts import SUBSETS, senteval_text

def _sts_years(data: DataRoot) -> list[str]:
    out: list[str] = []
    for year, subsets in SUBSETS.items():
        for subset in subsets:
            path = data.path(f"senteval/STS/{year}-en-test/STS.input.{subset}.txt", "senteval")
            for line in path.read_text(encoding="utf8").splitlines():
                a, b = line.split("\t")[:2]
                out += [senteval_text(a), senteval_text(b)]
    return out

def _tsv_pairs(data: DataRoot, rel: str, cols: tuple[int, int], header: bool) -> list[str]:
    path = data.path(rel, "senteval")
    out: list[str] = []
    for i, line in enumerate(path.read_text(encoding="utf8").splitlines()):
        if header and i == 0:
            continue
        fields = line.strip().split("\t")
        out += [senteval_text(fields[cols[0]]), senteval_text(fields[cols[1]])]
    return out

def _stsb(data: DataRoot, splits: tuple[str, ...]) -> list[str]:
    return [s for sp in splits for s in _tsv_pairs(data, f"senteval/STS/STSBenchmark/sts-{sp}.csv", (5, 6), False)]

def _sick(data: DataRoot, files: tuple[str, ...]) -> list[str]:
    return [s for f in files for s in _tsv_pairs(data, f"senteval/SICK/{f}", (1, 2), True)]

SICK_ALL = ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")

CORPORA: dict[str, tuple[str, Callable[[DataRoot], list[str]]]] = {
    "sts-unlabeled": ("all sentences of STS12-16, STS-B (all splits), SICK (all splits); 89,192 with repeats; "
                      "includes test sentences (transductive, as ConSERT/PaSeR)",
                      lambda d: _sts_years(d) + _stsb(d, ("train", "dev", "test")) + _sick(d, SICK_ALL)),
    "train-splits": ("STS-B train + SICK train sentences (no dev/test sentences)",
                     lambda d: _stsb(d, ("train",)) + _sick(d, ("SICK_train.txt",))),
    "stsb-train": ("STS-B train sentences", lambda d: _stsb(d, ("train",))),
    "stsb-dev": ("STS-B dev sentences (the model-selection split)", lambda d: _stsb(d, ("dev",))),
}

def load_corpus(name: str, data: DataRoot | None = None, unique: bool = False) -> list[str]:
    """Sentences of a named corpus (or ``text:<path>``), optionally de-duplicated in first-seen order."""
    data = data or DataRoot()
    if name.startswith("text:"):
        path = Path(name[5:]).expanduser()
        if not path.exists():
            raise DataError(f"corpus file not found: {path} (expected one sentence per line)")
        sentences = [line.strip() for line in path.read_text(encoding="utf8").splitlines() if line.strip()]
    elif name in CORPORA:
        sentences = CORPORA[name][1](data)
    else:
        raise DataError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}, or text:<path>")
    return list(dict.fromkeys(sentences)) if unique else sentences
