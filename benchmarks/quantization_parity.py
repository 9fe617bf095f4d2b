"""Truncated and quantized vectors scored by benchharness against sentence-transformers' own
``EmbeddingSimilarityEvaluator(truncate_dim=, precision=)``, and what scoring many sizes from one
encoding saves.

1. The parity table: paraphrase-MiniLM-L3-v2 on STSBenchmark (SICK's trial split in smoke mode),
   at every d in full, 256, 128, 64, 32 and every precision in float32, int8, uint8, binary,
   ubinary: benchharness's ``minilm-l3+truncate(d=)+quantize(precision=)`` (one run of every
   variant, value lists) against the evaluator on one loaded ``SentenceTransformer``, Spearman x100.
   Every cell must agree within 0.01.
2. Encoding counts and time: ``minilm-l3+truncate(d=32|64|128|256)`` in one run (the base encoded
   once, through a fresh embedding cache) against four separate runs without a cache, and against
   four evaluator calls, one per ``truncate_dim``::

    python benchmarks/quantization_parity.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from machine import SMOKE, config, data_root, header, report

FULL = "full"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    task_name = "SICKRelatedness-trial" if SMOKE else "STSBenchmark"
    dims = [FULL, 32] if SMOKE else [FULL, 256, 128, 64, 32]
    precisions = ["float32", "int8", "binary"] if SMOKE else ["float32", "int8", "uint8", "binary", "ubinary"]

    from benchharness.core.settings import apply_environment

    apply_environment(config())  # this script owns its process: the offline hub cache, before the hub loads
    head = header()  # the load before this script's own work
    from huggingface_hub import snapshot_download
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    import benchharness
    from benchharness import tasks

    task = tasks.get(task_name)
    task.load(data_root())
    ((first, second, gold),) = task.subsets.values()
    model = SentenceTransformer(
        snapshot_download("sentence-transformers/paraphrase-MiniLM-L3-v2", local_files_only=True), device="cpu"
    )

    def spec(d: object, precision: str) -> str:
        return (
            "minilm-l3"
            + (f"+truncate(d={d})" if d != FULL else "")
            + (f"+quantize(precision={precision})" if precision != "float32" else "")
        )

    names = [spec(d, p) for d in dims for p in precisions]
    with tempfile.TemporaryDirectory() as cache:  # the base encoded once, every variant from the cache
        ours = benchharness.evaluate(names, task_name, data_dir=data_root().root, cache_dir=cache, intervals=False)
    lines = [head, f"1. {task_name}, Spearman x100: benchharness / sentence-transformers (difference)"]
    lines.append(f"{'d':>6} " + " ".join(f"{p:>24}" for p in precisions))
    largest = 0.0
    for d in dims:
        cells = []
        for precision in precisions:
            evaluator = EmbeddingSimilarityEvaluator(
                list(first),
                list(second),
                list(gold),
                main_similarity="cosine",
                truncate_dim=None if d == FULL else int(d),
                precision=None if precision == "float32" else precision,
                batch_size=64,
            )
            theirs = 100 * evaluator(model)[f"{evaluator.primary_metric}"]
            mine = ours.get(spec(d, precision), task_name)
            largest = max(largest, abs(mine.main_score - theirs))
            cells.append(f"{mine.main_score:6.2f}/{theirs:6.2f} ({mine.main_score - theirs:+.4f})")
        lines.append(f"{d!s:>6} " + " ".join(f"{c:>24}" for c in cells))
    lines.append(f"largest difference {largest:.4f}: every cell within 0.01: {largest < 0.01}")
    lines += exact_ties(model, first, second, gold, ours, spec, task_name, [d for d in dims if d != FULL])
    bytes_row = {p: ours.get(spec(FULL, p), task_name).embedding_stats["bytes_per_vector"] for p in precisions}
    lines.append("bytes per vector at full width: " + ", ".join(f"{p} {b:g}" for p, b in bytes_row.items()))

    sizes = [32, 64] if SMOKE else [32, 64, 128, 256]
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        one = benchharness.evaluate(
            f"minilm-l3+truncate(d={'|'.join(map(str, sizes))})",
            task_name,
            data_dir=data_root().root,
            cache_dir=Path(cache),
            intervals=False,
        )
        one_s = time.perf_counter() - t0
    encoded_once = [r.timings["sentences_not_from_cache"] for r in one.results]
    t0 = time.perf_counter()
    for d in sizes:
        benchharness.evaluate(f"minilm-l3+truncate(d={d})", task_name, data_dir=data_root().root, intervals=False)
    separate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for d in sizes:
        EmbeddingSimilarityEvaluator(list(first), list(second), list(gold), truncate_dim=d, batch_size=64)(model)
    st_s = time.perf_counter() - t0
    unique = len(set(first) | set(second))
    title = f"2. {len(sizes)} truncations (d = {', '.join(map(str, sizes))}) of minilm-l3 on {task_name}"
    lines += [
        f"{title} ({unique:,} unique sentences, {2 * len(gold):,} encoded by the evaluator per call)",
        f"  one run, value list, fresh cache: sentences encoded per variant {encoded_once} in {one_s:6.2f} s",
        f"  {len(sizes)} separate runs, no cache: {len(sizes)} x {unique:,} sentences in {separate_s:6.2f} s",
        f"  {len(sizes)} EmbeddingSimilarityEvaluator calls: {len(sizes)} x {2 * len(gold):,} in {st_s:6.2f} s",
        f"  one run against separate runs: {separate_s / one_s:.2f}x; against the evaluator calls: {st_s / one_s:.2f}x",
    ]
    report("quantization_parity", lines)


def exact_ties(model, first, second, gold, ours, spec, task_name: str, dims: list) -> list[str]:
    """Binary codes' cosines computed exactly: with d bits, a cosine is dot / sqrt(|a| |b|) of
    integers, and many pairs share one value. Spearman then depends on how those ties are broken:
    averaged when exact; split at random by rounding when each implementation computes it in its
    own floating point (sentence-transformers in float32, benchharness in float64)."""
    from fractions import Fraction

    import numpy as np
    from scipy.stats import spearmanr
    from sentence_transformers.util import pairwise_cos_sim

    lines = ["binary codes with exact ties (integer dot products, ranks of equal cosines averaged):"]
    for d in dims:
        codes = [
            np.unpackbits(model.encode(list(side), truncate_dim=d, normalize_embeddings=True, precision="ubinary"), 1)
            for side in (first, second)
        ]
        dot, na, nb = (codes[0] * codes[1]).sum(1), codes[0].sum(1), codes[1].sum(1)
        exact = [Fraction(int(x) ** 2, int(p) * int(q)) if p * q else Fraction(0) for x, p, q in zip(dot, na, nb)]
        rank = {value: i for i, value in enumerate(sorted(set(exact)))}
        truth = 100 * spearmanr([rank[v] for v in exact], gold)[0]
        theirs = pairwise_cos_sim(*(c.astype(np.float32) for c in codes)).numpy()
        mine = ours.get(spec(d, "binary"), task_name).main_score  # binary and ubinary: the same bits
        lines.append(
            f"  d={d}: {len(rank)} distinct cosines (sentence-transformers' float32 makes {len(set(theirs.tolist()))} "
            f"of them); exact {truth:.4f}: benchharness {mine - truth:+.4f}, "
            f"sentence-transformers {100 * spearmanr(theirs, gold)[0] - truth:+.4f}"
        )
    return lines


if __name__ == "__main__":
    main()
