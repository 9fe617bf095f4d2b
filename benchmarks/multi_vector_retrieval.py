"""Time MaxSim retrieval over a corpus of real sentences through benchharness and through
sentence-transformers' ``MultiVectorInformationRetrievalEvaluator``, on the same model and data.

The model is the tests' seeded ColBERT-style ``MultiVectorEncoder`` on MiniLM-L3
(``tests.multi_vector_helpers``: "[Q] "/"[D] " prompts, queries expanded to 32 tokens, 128
dimensions), saved once to a temporary folder. The data is a BEIR folder: STS-B test as
``benchmarks/beir_stsb.py`` builds it (first sentences as queries, second sentences as the corpus,
gold >= 4 relevant), its corpus grown to ``--corpus`` documents with the other distinct sentences of
STS12-16 and SICK-R as distractors (``benchmarks/beir_versus_st.py``). Each tool runs in its own
fresh process (model load, encoding and search inside the timing, no embedding cache), so that its
wall time and peak memory are its own:

- benchharness: ``benchharness.evaluate("st:<folder>", <the BEIR folder as a retrieval task>)``,
  the corpus encoded and searched a block at a time within ``--memory`` MiB (``scoring.maxsim``);
- sentence-transformers: the evaluator on the same queries, corpus and judgements (corpus ids
  named in corpus order, so both break ties alike), its default chunks of 5,000 documents.

Both encode 32 texts a batch on ``--device``. The script prints both times and peak memories, the
speed ratio, the bytes per document benchharness reports, and checks that nDCG@10, MRR@10, MAP@100
and recall@100 agree within 0.01 (x100).

    python benchmarks/multi_vector_retrieval.py [--corpus 20000] [--memory 1024] [--device cpu] [--repeats 1]

Writes ``results/benchmarks/multi_vector_retrieval.txt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the model comes from the tests' helpers

from beir_versus_st import Versus, evaluator_inputs, main  # noqa: E402


def make_model(folder: Path) -> Path:
    from tests.helpers import MINILM_L3
    from tests.multi_vector_helpers import make_colbert

    return make_colbert(folder, MINILM_L3)


def run_evaluator(model: Path, folder: Path, device: str) -> dict:
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.multi_vector_encoder.evaluation import MultiVectorInformationRetrievalEvaluator

    from benchharness.tasks.files.beir import read_beir

    evaluator = MultiVectorInformationRetrievalEvaluator(**evaluator_inputs(read_beir(folder, "test")))
    scores = evaluator(MultiVectorEncoder(str(model), local_files_only=True, device=device))
    return {key.removeprefix("maxsim_"): 100.0 * value for key, value in scores.items()}


def facts(m: dict) -> str:
    return (
        f"token vectors (float32, benchharness's facts): {m['bytes_per_document']:,.0f} bytes per document "
        f"({m['tokens_per_document']:.1f} tokens x {m['token_dimension']} x 4), "
        f"{m['index_bytes'] / 2**20:,.1f} MiB for the corpus; {m['tokens_per_query']:.0f} tokens per query"
    )


MULTI_VECTOR = Versus(
    name="multi_vector_retrieval",
    task="multi-vector-stsb",
    model=("ColBERT-style MultiVectorEncoder on MiniLM-L3 (seeded 128-d projection, queries expanded to 32 tokens)"),
    make_model=make_model,
    evaluator="MultiVectorInformationRetrievalEvaluator",
    run_evaluator=run_evaluator,
    facts=facts,
    corpus=20_000,
    smoke_corpus=120,
)


if __name__ == "__main__":
    sys.exit(main(MULTI_VECTOR, __doc__, __file__))
