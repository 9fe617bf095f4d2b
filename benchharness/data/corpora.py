"""Named unlabeled sentence corpora, for training methods and for fitting post-processors.

``sts-unlabeled`` is the corpus of ConSERT (its Table 1) and PaSeR: every sentence of every pair in
the STS12-16 input files (gold or not), STS-B train/dev/test and SICK train/trial/test, with
repeats kept: 6216 + 3000 + 7500 + 17000 + 18366 + 17256 + 19854 = 89,192 sentences. It contains
test sentences (no labels): a model trained or fitted on it is transductive, as in those papers,
and results record that choice. ``train-splits`` (STS-B train + SICK train) is the inductive
alternative. ``text:<path>`` reads one sentence per line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from benchharness.core.data_root import DataError, DataRoot, default_data
from benchharness.data.readers import (
    SICK_COLUMNS,
    STS_YEARS,
    STSB_COLUMNS,
    interleave,
    read_scored_tsv,
    read_sts_pairs,
    sick_file,
    sts_year_file,
    stsb_file,
)


def _sts_years(data: DataRoot) -> list[str]:
    out: list[str] = []
    for year, subsets in STS_YEARS.items():
        for subset in subsets:
            a, b, _ = read_sts_pairs(data.path(sts_year_file(year, subset, "input"), "senteval"))
            out += interleave(a, b)
    return out


def _scored_pairs(data: DataRoot, files: Iterable[str], columns: tuple[int, int, int], header: bool) -> list[str]:
    """Both sentences of every pair of the scored TSV ``files`` (STS-B's or SICK's splits), interleaved."""
    out: list[str] = []
    for file in files:
        a, b, _ = read_scored_tsv(data.path(file, "senteval"), columns, header=header, gold=False)
        out += interleave(a, b)
    return out


def _stsb(data: DataRoot, splits: tuple[str, ...]) -> list[str]:
    return _scored_pairs(data, map(stsb_file, splits), STSB_COLUMNS, header=False)


def _sick(data: DataRoot, splits: tuple[str, ...]) -> list[str]:
    return _scored_pairs(data, map(sick_file, splits), SICK_COLUMNS, header=True)


CORPORA: dict[str, tuple[str, Callable[[DataRoot], list[str]]]] = {
    "sts-unlabeled": (
        (
            "all sentences of STS12-16, STS-B (all splits), SICK (all splits); 89,192 with repeats; "
            "includes test sentences (transductive, as ConSERT/PaSeR)"
        ),
        lambda d: _sts_years(d) + _stsb(d, ("train", "dev", "test")) + _sick(d, ("train", "trial", "test")),
    ),
    "train-splits": (
        "STS-B train + SICK train sentences (no dev/test sentences)",
        lambda d: _stsb(d, ("train",)) + _sick(d, ("train",)),
    ),
    "stsb-train": ("STS-B train sentences", lambda d: _stsb(d, ("train",))),
    "stsb-dev": ("STS-B dev sentences (the model-selection split)", lambda d: _stsb(d, ("dev",))),
}


def load_corpus(name: str, data: DataRoot | None = None, unique: bool = False) -> list[str]:
    """Sentences of a named corpus (or ``text:<path>``), optionally de-duplicated in first-seen order."""
    data = data or default_data()
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


def sts_test_sentences(data: DataRoot) -> frozenset[str]:
    """Every sentence the ``sts`` task group evaluates: the scored pairs of STS12-16, STS-B test and
    SICK test (to count how many sentences of a fit corpus an evaluation also sees).

    Read once per data folder and process: every fitted post-processor of a chain reports its
    overlap, and rereading the 26 files each time cost a warm rerun ~0.2 s per corpus."""
    return _sts_test_sentences(data.root, data.verify)


@lru_cache(maxsize=4)
def _sts_test_sentences(root: Path, verify: bool) -> frozenset[str]:
    data = DataRoot(root, verify)
    out: set[str] = set()
    for year, subsets in STS_YEARS.items():
        for subset in subsets:
            a, b, _ = read_sts_pairs(
                data.path(sts_year_file(year, subset, "input"), "senteval"),
                data.path(sts_year_file(year, subset, "gs"), "senteval"),
            )
            out.update(a, b)
    for path, columns, header in ((stsb_file("test"), STSB_COLUMNS, False), (sick_file("test"), SICK_COLUMNS, True)):
        a, b, _ = read_scored_tsv(data.path(path, "senteval"), columns, header)
        out.update(a, b)
    return frozenset(out)
