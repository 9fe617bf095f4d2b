"""STS-B test as a BEIR retrieval task from files: benchharness's metrics beside pytrec_eval's.

Builds the BEIR folder of ``stsb_beir.py`` from the STS-B test pairs of ``tasks/sts.py``
(SentEval's tokenized, lowercased text) in a temporary folder, declares it as a ``retrieval`` file
task, and for each encoder prints:

- the task's metrics through ``benchharness.evaluate`` (nDCG@10 with its bootstrap interval,
  MAP@100, MRR@10, recall@100);
- pytrec_eval's, on the task's own rankings (the same cosines: one encoding per role serves both
  the task's evaluation and its search), and the largest per-query difference between the two;
- how many adjacent scores in the top-100 lists are exactly equal (where a tie rule decides).

    python benchmarks/beir_stsb.py [--encoders minilm-l6,minilm-l3,glove-50d]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import SMOKE, data_root, header, report
from stsb_beir import encoded_once, exact_ties, pytrec_per_query, write_stsb_beir

TASK = "beir-stsb"
KEYS = ("ndcg@10", "map@100", "mrr@10", "recall@100")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoders", default="minilm-l6,minilm-l3,glove-50d")
    args = parser.parse_args()
    encoders = ["glove-50d"] if SMOKE else args.encoders.split(",")

    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())  # this script owns its process: the offline hub cache, before the hub loads
    import benchharness
    from benchharness import tasks
    from benchharness.evaluation.resolver import Resolver
    from benchharness.tasks.files.declarations import register_file_task

    stsb = tasks.get("STSBenchmark")
    stsb.load(data_root())
    ((first, second, gold),) = stsb.subsets.values()
    if SMOKE:
        first, second, gold = first[:80], second[:80], gold[:80]
    lines = [header()]
    with tempfile.TemporaryDirectory(prefix="beir-stsb-") as tmp:
        counts = write_stsb_beir(Path(tmp) / "stsb", first, second, np.asarray(gold))
        register_file_task(TASK, Path(tmp) / "stsb", kind="retrieval")
        lines.append(
            f"# STS-B test as BEIR: {counts['pairs']} pairs -> {counts['queries']} distinct first sentences "
            f"(queries), {counts['corpus']} distinct second sentences (corpus), {counts['relevant_pairs']} "
            f"relevant pairs (gold >= 4, relevance 1) judging {counts['judged_queries']} queries (scored)"
        )
        lines.append(
            "# x100; pytrec_eval on the task's own top-100 lists (same cosines); max|diff| over per-query "
            "values; ties = adjacent exactly equal scores in the top-100 lists"
        )
        lines.append(
            f"{'encoder':<11} {'nDCG@10 [95% CI]':<22} {'MAP@100':>8} {'MRR@10':>8} {'R@100':>8} | "
            f"{'pytrec: nDCG@10':>15} {'MAP@100':>8} {'MRR@10':>8} {'R@100':>8} | {'max|diff|':>9} "
            f"{'ties':>5} {'seconds':>8}"
        )
        for name in encoders:
            t0 = time.perf_counter()
            [result] = benchharness.evaluate(name, TASK)
            task = tasks.get(TASK)
            task.load(data_root())
            embed = encoded_once(Resolver().get(name), task)
            ours = task.evaluate_items(embed, 0).items
            scores, ids = task.search(embed)
            theirs = pytrec_per_query(task, scores, ids)
            diff = max(float(np.abs(ours[k] - theirs[k]).max()) for k in KEYS)
            low, high = result.confidence["main"]
            m = result.metrics
            lines.append(
                f"{name:<11} {m['ndcg@10']:6.2f} [{low:5.2f}, {high:5.2f}]{'':<5} {m['map@100']:8.2f} "
                f"{m['mrr@10']:8.2f} {m['recall@100']:8.2f} | {100 * theirs['ndcg@10'].mean():15.2f} "
                f"{100 * theirs['map@100'].mean():8.2f} {100 * theirs['mrr@10'].mean():8.2f} "
                f"{100 * theirs['recall@100'].mean():8.2f} | {diff:9.1e} {exact_ties(scores):5d} "
                f"{time.perf_counter() - t0:8.1f}"
            )
            # the evaluate() path and the once-encoded path score alike (same encoder, same task)
            lines.append(
                f"{'':<11} (evaluate nDCG@10 {m['ndcg@10']:.6f}; once-encoded {100 * ours['ndcg@10'].mean():.6f})"
            )
    report("beir_stsb", lines)


if __name__ == "__main__":
    main()
