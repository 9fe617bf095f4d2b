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

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the model comes from the tests' helpers

from beir_versus_st import (  # noqa: E402
    evaluator_inputs,
    measure,
    metric_lines,
    run_benchharness,
    spawn,
    timing_lines,
    write_folder,
)
from machine import SMOKE, data_root, header, report  # noqa: E402

TASK = "multi-vector-stsb"
#: the tasks whose sentences are the distractors, in order (about 25,000 distinct sentences)
DISTRACTORS = ("STS12", "STS13", "STS14", "STS15", "STS16", "SICKRelatedness")


def worker_sentence_transformers(model: Path, folder: Path, device: str) -> dict:
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.multi_vector_encoder.evaluation import MultiVectorInformationRetrievalEvaluator

    from benchharness.tasks.files.beir import read_beir

    evaluator = MultiVectorInformationRetrievalEvaluator(**evaluator_inputs(read_beir(folder, "test")))
    scores = evaluator(MultiVectorEncoder(str(model), local_files_only=True, device=device))
    return {key.removeprefix("maxsim_"): 100.0 * value for key, value in scores.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=int, default=20_000, help="documents in the corpus (STS-B's and distractors)")
    parser.add_argument("--memory", type=float, default=1024.0, help="benchharness's memory bound (MiB)")
    parser.add_argument("--device", default="cpu", help="where both tools encode and score (default cpu)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs per tool; the best is kept")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(corpus=120)
    args = parser.parse_args()
    if args.worker == "benchharness":
        root = data_root().root
        measure(lambda: run_benchharness(args.model, args.folder, TASK, root, args.device, args.memory), args.device)
        return 0
    if args.worker:
        measure(lambda: worker_sentence_transformers(args.model, args.folder, args.device), args.device)
        return 0
    from tests.helpers import MINILM_L3
    from tests.multi_vector_helpers import make_colbert

    with tempfile.TemporaryDirectory(prefix="multi-vector-retrieval-") as scratch:
        model = make_colbert(Path(scratch) / "colbert", MINILM_L3)
        folder = Path(scratch) / "beir"
        counts = write_folder(folder, data_root(), args.corpus, DISTRACTORS, pairs=100 if SMOKE else None)
        common = ["--model", str(model), "--folder", str(folder), "--device", args.device, "--memory", str(args.memory)]
        runs: dict[str, list[dict]] = {"st": [], "benchharness": []}
        for _ in range(args.repeats):
            for tool, results in runs.items():
                results.append(spawn(__file__, ["--worker", tool, *common]))
    st, bh = (min(runs[tool], key=lambda x: x["seconds"]) for tool in ("st", "benchharness"))
    compared, worst = metric_lines(bh["metrics"], st["metrics"])
    m = bh["metrics"]
    lines = [
        header(),
        (
            "model: ColBERT-style MultiVectorEncoder on MiniLM-L3 (seeded 128-d projection, queries expanded to 32 "
            f"tokens), device {args.device}, cpu threads: {os.cpu_count()}"
        ),
        (
            f"data: STS-B test as BEIR ({counts['judged_queries']} scored queries) + {counts['distractors']:,} "
            f"distractor sentences of {', '.join(DISTRACTORS)}: {counts['corpus']:,} documents"
        ),
        *compared,
        (
            f"token vectors (float32, benchharness's facts): {m['bytes_per_document']:,.0f} bytes per document "
            f"({m['tokens_per_document']:.1f} tokens x {m['token_dimension']} x 4), "
            f"{m['index_bytes'] / 2**20:,.1f} MiB for the corpus; {m['tokens_per_query']:.0f} tokens per query"
        ),
        *timing_lines(
            {
                "sentence-transformers MultiVectorInformationRetrievalEvaluator:": st,
                f"benchharness evaluate (memory bound {args.memory:g} MiB):": bh,
            },
            args.repeats,
        ),
        f"metrics agree within 0.01 (x100 scale): {worst < 0.01} (largest difference {worst:.5f})",
    ]
    report("multi_vector_retrieval", lines)
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
