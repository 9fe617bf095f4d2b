"""The cost of two-stage retrieval: a run of pipelines (each first stage reranked by two rerankers at
two depths) against its parts run separately, and how often each first stage searched.

    python benchmarks/two_stage_cost.py [--corpus 20000] [--k 20,100] [--firsts minilm-l3,bm25] [--device cpu]

The data: STS-B test as a BEIR folder grown with distractor sentences (``benchmarks/beir_versus_st.py``).
The rerankers: two cross-encoders of MiniLM-L3 with seeded heads (``tests.helpers.make_cross_encoder``,
seeds 0 and 1; their scores mean nothing, their cost is a real cross-encoder's). Each run is a fresh
process (model loads, data and scoring timed, no embedding cache):

- the first stage alone: ``benchharness.evaluate(FIRST, task)``;
- each reranking alone: ``run:<FIRST's top K as a TREC run file>>>RERANKER?k=K``, a first stage read
  from a file, so the time is the reranker's;
- the pipelines together: ``FIRST>>R1?k=K1``, ``FIRST>>R1?k=K2``, ``FIRST>>R2?k=K1``, ``FIRST>>R2?k=K2``
  in one ``evaluate`` call, counting the first stage's searches (the log lines of
  ``benchharness.evaluation.kinds.first_stage``): one per first stage, however many rerankers and
  depths, its own metrics beside each pipeline's included.

The script prints each time (each a process of its own: its start and model loads included), the sum
of the parts (the first stage once, each reranking once) and the pipelines' run against it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the rerankers come from the tests' helpers

from beir_versus_st import BATCH_SIZE, write_folder  # noqa: E402
from machine import SMOKE, config, data_root, header, report  # noqa: E402
from versus_st import measure, spawn  # noqa: E402

TASK = "two-stage-stsb"


def _evaluate(names: list[str], folder: Path, device: str) -> dict:
    """Each name's main score on the folder, and how many first-stage searches the run made."""
    import benchharness
    from benchharness.tasks.files.declarations import register_file_task

    searches: list[str] = []

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "first stage:" in record.getMessage():
                searches.append(str(record.args[0]) if record.args else "")

    logger = logging.getLogger("benchharness.evaluation.kinds.first_stage")
    logger.addHandler(Count())
    logger.setLevel(logging.INFO)
    register_file_task(TASK, folder, kind="retrieval")
    results = benchharness.evaluate(
        names, TASK, data_dir=data_root().root, device=device, batch_size=BATCH_SIZE, intervals=False
    )
    return {"scores": {r.encoder: r.main_score for r in results}, "searches": searches}


def _write_run(first: str, folder: Path, depth: int, out: Path, device: str) -> dict:
    """``first``'s top ``depth`` of each query, as a TREC run file."""
    from benchharness.core.kinds import ViewSettings
    from benchharness.evaluation.kinds.first_stage import search_view
    from benchharness.evaluation.resolver import Resolver
    from benchharness.evaluation.run_settings import RunSettings
    from benchharness.tasks.files.beir import read_beir

    data = read_beir(folder, "test")
    model = Resolver(settings=RunSettings(device=device)).get(first)
    scores, ids = search_view(model, ViewSettings()).search(data.queries, data.documents, depth)
    with out.open("w") as fh:
        for query, row_s, row_i in zip(data.query_ids, scores, ids):
            for rank, (score, doc) in enumerate(((s, i) for s, i in zip(row_s, row_i) if i >= 0), start=1):
                fh.write(f"{query} Q0 {data.corpus_ids[doc]} {rank} {score:.9g} {first}\n")
    return {"lines": sum(1 for _ in out.open())}


def _pipelines(first: str, rerankers: list[Path], depths: list[int]) -> list[str]:
    """Every reranker at every depth over ``first``, one reranker's depths after the other's (the
    resolver keeps the parts of one pipeline for the next)."""
    return [f"{first}>>st:{reranker}?k={k}" for reranker in rerankers for k in depths]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=int, default=20_000, help="documents in the corpus (STS-B's and distractors)")
    parser.add_argument("--k", default="20,100", help="the depths reranked, a comma list")
    parser.add_argument("--firsts", default="minilm-l3,bm25", help="the first stages, a comma list")
    parser.add_argument("--device", default="cpu", help="where models encode and score (default cpu)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(corpus=120, k="3,5", firsts="minilm-l3")
    args = parser.parse_args()
    depths = [int(k) for k in args.k.split(",")]
    if args.worker == "evaluate":
        measure(lambda: _evaluate(args.names.split("|"), args.folder, args.device), args.device)
        return 0
    if args.worker == "run-file":
        measure(lambda: _write_run(args.names, args.folder, max(depths), args.out, args.device), args.device)
        return 0
    import importlib.util

    firsts = [f for f in args.firsts.split(",") if f != "bm25" or importlib.util.find_spec("bm25s")]
    from benchharness.core.settings import apply_environment
    from tests.helpers import make_cross_encoder

    apply_environment(config())  # this script owns its process: the offline hub cache the rerankers come from
    lines = [header()]
    with tempfile.TemporaryDirectory(prefix="two-stage-cost-") as scratch:
        rerankers = [make_cross_encoder(Path(scratch) / f"ce{seed}", seed=seed) for seed in (0, 1)]
        folder = Path(scratch) / "beir"
        counts = write_folder(folder, data_root(), args.corpus, pairs=100 if SMOKE else None)
        lines.append(
            f"data: STS-B test as BEIR ({counts['judged_queries']} scored queries) + {counts['distractors']:,} "
            f"distractors: {counts['corpus']:,} documents; rerankers: 2 cross-encoders of MiniLM-L3 (seeded heads); "
            f"depths {args.k}; device {args.device}, {os.cpu_count()} cpu threads; no embedding cache"
        )
        common = ["--folder", str(folder), "--device", args.device, "--k", args.k]

        def evaluate(names: list[str]) -> dict:
            return spawn(__file__, ["--worker", "evaluate", "--names", "|".join(names), *common])

        for first in firsts:
            run = Path(scratch) / f"{first}.trec"
            spawn(__file__, ["--worker", "run-file", "--names", first, "--out", str(run), *common])
            alone = evaluate([first])
            parts = {
                (reranker.name, k): evaluate([f"run:{run}>>st:{reranker}?k={k}"])
                for reranker in rerankers
                for k in depths
            }
            together = evaluate(_pipelines(first, rerankers, depths))
            searched = together["metrics"]["searches"]
            summed = alone["seconds"] + sum(p["seconds"] for p in parts.values())
            lines += [
                f"first stage {first}:",
                f"  alone: {alone['seconds']:8.1f} s (nDCG@10 {alone['metrics']['scores'][first]:.2f})",
                *(
                    f"  reranking alone, {name} at k={k} (its lists from a run file): {p['seconds']:8.1f} s"
                    for (name, k), p in parts.items()
                ),
                f"  sum of the parts (the first stage once, each reranking once): {summed:8.1f} s",
                (
                    f"  {len(rerankers) * len(depths)} pipelines in one run: {together['seconds']:8.1f} s "
                    f"(x{together['seconds'] / summed:.2f} the parts), peak RSS {together['peak_rss_mb']:.0f} MB; "
                    f"first stage searched {searched.count(first)} time(s) for them all"
                ),
            ]
    report("two_stage_cost", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
