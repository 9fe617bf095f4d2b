"""Training data for the methods: unlabeled sentences and NLI pairs, in the formats of the field.

Unlabeled sentences: a named corpus of ``benchharness.data.corpora`` (``sts-unlabeled``, the corpus of
ConSERT and PaSeR...) or ``text:<path>`` / a path to a ``.txt`` file, one sentence per line
(SimCSE's ``wiki1m_for_simcse.txt`` is of this form).

NLI pairs (supervised variants), one :class:`NLIPair` per premise/hypothesis:

- SNLI/MNLI jsonl as distributed (``sentence1``, ``sentence2``, ``gold_label``; ``-`` = no
  consensus, dropped as every reference does);
- SimCSE's ``nli_for_simcse.csv`` (``sent0,sent1,hard_neg``: entailment pairs plus a
  contradiction; expanded to an entailment and a contradiction pair);
- SentEval's SNLI folder (``s1.<split>``, ``s2.<split>``, ``labels.<split>``; only dev and test
  exist in the shared data).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from benchharness.core.data_root import DataError, DataRoot, default_data
from benchharness.data.corpora import CORPORA, load_corpus
from benchharness.data.readers import json_lines

NLI_LABELS = ("entailment", "neutral", "contradiction")
#: the ``data`` option of a run whose sentences a caller holds in memory (``benchharness.train(sentences=[...])``):
#: not a corpus anything can load again; the recipe pins the sentences by their sha256
IN_MEMORY = "<in-memory sentences>"


@dataclass(frozen=True)
class NLIPair:
    premise: str
    hypothesis: str
    label: int  # index into NLI_LABELS


def _label(text: str, where: str) -> int | None:
    text = text.strip().lower()
    if text == "-":  # SNLI/MNLI: annotators did not agree; no gold label
        return None
    if text not in NLI_LABELS:
        raise DataError(f"{where}: unknown NLI label {text!r}; expected one of {', '.join(NLI_LABELS)}")
    return NLI_LABELS.index(text)


def load_sentences(spec: str, data: DataRoot | None = None, unique: bool = False) -> list[str]:
    """Unlabeled training sentences from a corpus name, ``text:<path>`` or a ``.txt`` path."""
    if spec not in CORPORA and not spec.startswith("text:") and Path(spec).suffix == ".txt":
        spec = f"text:{spec}"
    sentences = load_corpus(spec, data, unique=unique)
    if not sentences:
        raise DataError(f"training data {spec!r} holds no sentences")
    return sentences


def read_nli_jsonl(path: Path) -> list[NLIPair]:
    """SNLI/MNLI ``.jsonl``: one object per line with sentence1, sentence2, gold_label."""
    pairs = []
    for lineno, row in json_lines(path):
        try:
            premise, hypothesis = row["sentence1"], row["sentence2"]
            label = _label(row["gold_label"], f"{path}:{lineno}")
        except KeyError as exc:
            raise DataError(
                f"{path}:{lineno}: missing field {exc.args[0]!r} (need sentence1, sentence2, gold_label)"
            ) from None
        if label is not None:
            pairs.append(NLIPair(premise.strip(), hypothesis.strip(), label))
    return pairs


def read_simcse_nli_csv(path: Path) -> list[NLIPair]:
    """SimCSE's ``nli_for_simcse.csv`` (header ``sent0,sent1,hard_neg``): each row is an
    entailment pair (sent0, sent1) and a contradiction pair (sent0, hard_neg)."""
    pairs = []
    with open(path, encoding="utf8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:3]] != ["sent0", "sent1", "hard_neg"]:
            raise DataError(f"{path}:1: expected the header sent0,sent1,hard_neg, got {header}")
        for row in reader:
            if len(row) < 3:
                raise DataError(f"{path}:{reader.line_num}: expected 3 columns (sent0,sent1,hard_neg), got {len(row)}")
            pairs.append(NLIPair(row[0], row[1], NLI_LABELS.index("entailment")))
            pairs.append(NLIPair(row[0], row[2], NLI_LABELS.index("contradiction")))
    return pairs


def read_senteval_snli(folder: Path, split: str) -> list[NLIPair]:
    """SentEval's SNLI files ``s1.<split>``, ``s2.<split>``, ``labels.<split>`` (line-aligned)."""
    files = [folder / f"{name}.{split}" for name in ("s1", "s2", "labels")]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise DataError(
            f"SentEval SNLI split {split!r} missing: {', '.join(missing)}\n  SentEval's "
            "get_transfer_data.bash writes them to data/downstream/SNLI; online, `benchharness data "
            "download senteval` fetches SentEval's data tree into the data root"
        )
    s1, s2, labels = (f.read_text(encoding="utf8").splitlines() for f in files)
    if not len(s1) == len(s2) == len(labels):
        raise DataError(f"{folder}: s1/s2/labels.{split} have {len(s1)}/{len(s2)}/{len(labels)} lines; they must align")
    pairs = []
    for lineno, (a, b, lab) in enumerate(zip(s1, s2, labels), 1):
        label = _label(lab, f"{files[2]}:{lineno}")
        if label is not None:
            pairs.append(NLIPair(a.strip(), b.strip(), label))
    return pairs


def load_nli(spec: str, data: DataRoot | None = None) -> list[NLIPair]:
    """NLI pairs from ``senteval-snli:<split>`` (the data root's SentEval SNLI), a ``.jsonl``
    (SNLI/MNLI), a ``.csv`` (SimCSE) or a SentEval-style folder as ``<folder>:<split>``;
    several sources joined with ``+``."""
    pairs: list[NLIPair] = []
    for part in spec.split("+"):
        part = part.strip()
        if part.startswith("senteval-snli:"):
            root = (data or default_data()).root
            pairs += read_senteval_snli(root / "senteval" / "SNLI", part.split(":", 1)[1])
            continue
        path = Path(part).expanduser()
        if path.suffix == ".jsonl":
            reader = read_nli_jsonl
        elif path.suffix == ".csv":
            reader = read_simcse_nli_csv
        elif ":" in part and Path(part.rsplit(":", 1)[0]).expanduser().is_dir():
            folder, split = part.rsplit(":", 1)
            pairs += read_senteval_snli(Path(folder).expanduser(), split)
            continue
        else:
            raise DataError(
                f"unknown NLI source {part!r}: give a .jsonl (SNLI/MNLI), a .csv (SimCSE nli), "
                "senteval-snli:<split>, or <SentEval SNLI folder>:<split>"
            )
        if not path.exists():
            raise DataError(f"NLI file not found: {path} (download: `benchharness data download nli`)")
        pairs += reader(path)
    if not pairs:
        raise DataError(f"NLI data {spec!r} holds no labelled pairs")
    return pairs
