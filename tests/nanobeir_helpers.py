"""Small NanoBEIR datasets for offline tests: rows shaped as the hub's (``sentence-transformers/NanoBEIR-en``:
subsets ``corpus`` and ``queries`` with ``_id`` and ``text``, ``qrels`` with ``query-id`` and
``corpus-id``), and data roots holding them as the task reads them, written by hand."""

from __future__ import annotations

import json
import random
from pathlib import Path

from benchharness.tasks.nanobeir import DATASETS

WORDS = ["river", "stone", "light", "garden", "music", "paper", "winter", "market", "silver", "forest"]
WORDS += ["engine", "letter", "window", "ocean", "bridge", "candle", "mirror", "orchard", "harbor", "meadow"]


def hub_rows(dataset: str, queries: int = 6, documents: int = 24, seed: int = 0) -> dict[str, list[dict]]:
    """A dataset's three subsets: each query about two words, one or two relevant documents that
    mention them among documents about random pairs of words."""
    rng = random.Random(f"{seed}:{dataset}")
    corpus = [
        {"_id": f"{dataset[:3]}-d{i}", "text": f"the {rng.choice(WORDS)} beside the {rng.choice(WORDS)}, page {i}"}
        for i in range(documents)  # each text its own: no two documents tie on any model
    ]
    rows_q, qrels = [], []
    for q in range(queries):
        a, b = rng.sample(WORDS, 2)
        rows_q.append({"_id": f"q{q}", "text": f"where is the {a} near a {b}"})
        for doc in rng.sample(range(documents), rng.choice((1, 2))):
            corpus[doc]["text"] = f"a {a} near the {b}, said {corpus[doc]['text']}"
            qrels.append({"query-id": f"q{q}", "corpus-id": corpus[doc]["_id"]})
    return {"corpus": corpus, "queries": rows_q, "qrels": qrels}


def write_data_root(root: Path, datasets: tuple[str, ...] = DATASETS, seed: int = 0) -> Path:
    """A data root with each dataset's folder as the task reads it: ``nanobeir/Nano<Name>/`` holding
    ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` (relevance 1)."""
    for dataset in datasets:
        rows = hub_rows(dataset, seed=seed)
        folder = root / "nanobeir" / f"Nano{dataset}"
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        for name in ("corpus", "queries"):
            (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows[name]))
        (folder / "qrels" / "test.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{r['query-id']}\t{r['corpus-id']}\t1\n" for r in rows["qrels"])
        )
    return root
