"""Time sparse (SPLADE) retrieval over a corpus of 100,000 real sentences through benchharness and
through sentence-transformers' ``SparseInformationRetrievalEvaluator``, on the same model and data.

The model is the tests' seeded tiny SPLADE (``tests.sparse_helpers``: a 2-layer BERT of width 64
with the MiniLM vocabulary of 30,522 terms and an MLM head set to act lexically, about 40 active
terms a sentence), saved once to a temporary folder. The data is a BEIR folder: STS-B test as
``benchmarks/beir_stsb.py`` builds it (first sentences as queries, second sentences as the corpus,
gold >= 4 relevant), its corpus grown to ``--corpus`` documents with the other distinct sentences of
the shared data's tasks (``DISTRACTOR_TASKS``, in order) as distractors (``benchmarks/beir_versus_st.py``).
Each tool runs in its own fresh process (model load, encoding and search inside the timing, no
cache), so that its wall time and peak memory (``ru_maxrss``) are its own:

- benchharness: ``benchharness.evaluate("st:<folder>", <the BEIR folder as a retrieval task>)``,
  the corpus encoded and searched a block of 65,536 documents at a time by sparse products, the
  scores of a block bounded by ``--memory`` MiB (``scoring.sparse``);
- sentence-transformers: the evaluator on the same queries, corpus and judgements (corpus ids named
  in corpus order, so both break ties alike), its default chunks of 50,000 documents.

Both encode 32 texts a batch on ``--device``. The script prints both times and peak memories, the
speed ratio, the sparsity figures both report, and checks that nDCG@10, MRR@10, MAP@100 and
recall@100 agree within 0.01 (x100).

    python benchmarks/sparse_retrieval.py [--corpus 100000] [--memory 1024] [--device cpu] [--repeats 1]

Writes ``results/benchmarks/sparse_retrieval.txt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the model comes from the tests' helpers

from beir_versus_st import DISTRACTORS, METRICS, Versus, evaluator_inputs, main  # noqa: E402

#: the sparsity figures both report, under sentence-transformers' names
FIGURES = ("query_active_dims", "corpus_active_dims", "avg_flops")
#: the tasks whose sentences are the distractors, in order: STS's, then SentEval's transfer tasks'
#: (about 137,000 distinct sentences)
DISTRACTOR_TASKS = (*DISTRACTORS, "MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC", "SST2")


def make_model(folder: Path) -> Path:
    from tests.sparse_helpers import make_tiny_splade

    return make_tiny_splade(folder)


def run_evaluator(model: Path, folder: Path, device: str) -> dict:
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.evaluation import SparseInformationRetrievalEvaluator

    from benchharness.tasks.files.beir import read_beir

    evaluator = SparseInformationRetrievalEvaluator(**evaluator_inputs(read_beir(folder, "test")))
    scores = evaluator(SparseEncoder(str(model), local_files_only=True, device=device))
    return {
        **{metric: 100.0 * scores[f"dot_{metric}"] for metric in METRICS},
        **{figure: float(scores[figure]) for figure in FIGURES},
    }


def facts(m: dict) -> str:
    return (
        f"corpus as CSR (benchharness's facts): {m['bytes_per_document']:,.0f} bytes per document, "
        f"{m['index_bytes'] / 2**20:,.1f} MiB in all"
    )


SPARSE = Versus(
    name="sparse_retrieval",
    task="sparse-stsb",
    model=(
        "tiny seeded SPLADE (SparseEncoder: 2-layer BERT, width 64, MiniLM vocabulary of 30,522 terms, "
        "MLM head + SpladePooling max)"
    ),
    make_model=make_model,
    evaluator="SparseInformationRetrievalEvaluator",
    run_evaluator=run_evaluator,
    facts=facts,
    corpus=100_000,
    smoke_corpus=300,
    distractors=DISTRACTOR_TASKS,
    figures=FIGURES,
)


if __name__ == "__main__":
    sys.exit(main(SPARSE, __doc__, __file__))
