"""The ``openai`` family against a real server: STS-B test through infinity-emb's OpenAI-compatible
API (paraphrase-MiniLM-L3-v2 on the loopback address, started by ``tests/embedding_server.py``)
against ``minilm-l3`` run in this process.

Reported: both scores and their difference (and the largest per-pair cosine difference), the largest
difference between the server's vectors and the local ones normalised (infinity returns unit
vectors), and the encoding throughput of STS-B's unique sentences (sentences/s, best of
``--repeats`` after one warm-up pass) at ``max_concurrency`` 1, 2, 4 and 8, each as a ratio to the
local encoder's. Server and client share this machine's cores, so the ratio says what the HTTP hop
and the server's own batching cost on one machine, not what a remote GPU server would give.

    python benchmarks/openai_server.py [--repeats 3] [--max-batch 64]

Writes ``results/benchmarks/openai_server.txt``. Needs the server's environment
(``.ci/embedding_server_env``); without it the script says so and exits (smoke mode included).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.embedding_server: the server launcher the tests use
sys.path.insert(0, str(ROOT / "benchmarks"))  # the STS-B-as-BEIR builder

from machine import SMOKE, data_root, header, report

from tests.embedding_server import MODEL, EmbeddingServer, missing_reason, server_env

#: the task scored and whose unique sentences are timed (smoke mode: SICK-R's 500 trial pairs)
TASK = "SICKRelatedness-trial" if SMOKE else "STSBenchmark"
LEVELS = (1, 2) if SMOKE else (1, 2, 4, 8)


def unique_sentences(task_name: str) -> list[str]:
    from benchharness.evaluation.evaluate import resolve_tasks

    (task,) = resolve_tasks(task_name)
    task.load(data_root())
    return list(dict.fromkeys(task.sentences()))


def rates(encode: Callable[[list[str]], np.ndarray], sentences: list[str], repeats: int) -> tuple[float, float]:
    """Best and median sentences/s of ``repeats`` timed passes, after one untimed warm-up pass."""
    encode(sentences)
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        encode(sentences)
        seconds.append(time.perf_counter() - t0)
    return len(sentences) / min(seconds), len(sentences) / statistics.median(seconds)


def stsb_retrieval(spec: str, scratch: Path) -> str:
    """nDCG@10 of STS-B test as a BEIR task (``benchmarks/beir_stsb.py``) through the server and in
    process: queries and documents go through the same ``encode_role`` path as any retrieval task."""
    from beir_stsb import write_stsb_beir

    import benchharness
    from benchharness import tasks
    from benchharness.tasks.files.declarations import register_file_task

    stsb = tasks.get("STSBenchmark")
    stsb.load(data_root())
    ((first, second, gold),) = stsb.subsets.values()
    if SMOKE:
        first, second, gold = first[:80], second[:80], gold[:80]
    write_stsb_beir(scratch / "stsb-beir", first, second, np.asarray(gold))
    register_file_task("stsb-beir", scratch / "stsb-beir", kind="retrieval")
    through, here = (benchharness.evaluate(name, "stsb-beir").results[0] for name in (spec, "minilm-l3"))
    return (
        f"stsb-beir (STS-B test as BEIR) nDCG@10: openai: {through.main_score:.4f}, minilm-l3 {here.main_score:.4f}, "
        f"difference {through.main_score - here.main_score:+.5f}; MAP@100 {through.metrics['map@100']:.4f} vs "
        f"{here.metrics['map@100']:.4f}"
    )


def infinity_version() -> str:
    found = sorted(server_env().glob("lib/python*/site-packages/infinity_emb-*.dist-info"))
    return found[0].name.removeprefix("infinity_emb-").removesuffix(".dist-info") if found else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-batch", type=int, default=64, help="sentences per request in the concurrency sweep")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(repeats=1)
    args = parser.parse_args()
    reason = missing_reason()
    if reason is not None:
        print(f"openai_server: not run: {reason}")
        return
    logging.getLogger("benchharness").setLevel(logging.ERROR)
    import benchharness
    from benchharness.evaluation.models import as_encoder

    lines = [header()]
    sentences = unique_sentences(TASK)
    if SMOKE:
        sentences = sentences[:64]
    local = as_encoder("minilm-l3")
    with (
        tempfile.TemporaryDirectory(prefix="openai-server-") as scratch,
        EmbeddingServer(Path(scratch) / "server.log") as server,
    ):
        spec = f"openai:{MODEL}?base_url={server.base_url}&identity=paraphrase-MiniLM-L3-v2"
        lines.append(
            f"{TASK}: {len(sentences):,} unique sentences timed; server: infinity-emb {infinity_version()} "
            f"(torch engine, CPU) on 127.0.0.1, sharing the machine's cores with this client"
        )
        through, here = benchharness.evaluate(spec, TASK), benchharness.evaluate("minilm-l3", TASK)
        api_score, local_score = through.results[0].main_score, here.results[0].main_score
        cosines = [np.asarray(r.items(r.results[0]).items["cosine"]) for r in (through, here)]
        lines.append(
            f"{TASK} spearman x100: openai: {api_score:.4f}, minilm-l3 {local_score:.4f}, difference "
            f"{api_score - local_score:+.5f} (largest per-pair cosine difference "
            f"{np.abs(cosines[0] - cosines[1]).max():.1e})"
        )
        lines.append(stsb_retrieval(spec, Path(scratch)))
        remote_rows = as_encoder(spec).encode(sentences)
        local_rows = local.encode(sentences)
        normalised = local_rows / np.linalg.norm(local_rows, axis=1, keepdims=True)
        lines.append(f"vectors: largest |server - local normalised| = {np.abs(remote_rows - normalised).max():.1e}")
        print("\n".join(lines), flush=True)

        lines.append(
            f"encoding throughput, sentences/s (best and median of {args.repeats} after a warm-up pass; "
            f"client max_batch={args.max_batch}):"
        )
        best_local, median_local = rates(local.encode, sentences, args.repeats)
        lines.append(f"  {'local minilm-l3 (in process)':50s} {best_local:8.1f} {median_local:8.1f}")
        settings = [(f"max_concurrency={c}", f"&max_batch={args.max_batch}&max_concurrency={c}") for c in LEVELS]
        settings.append(
            (
                "max_concurrency=4, encoding_format=float",
                f"&max_batch={args.max_batch}&max_concurrency=4&encoding_format=float",
            )
        )
        settings.append(("max_concurrency=4, max_batch=256 (defaults)", ""))
        for label, keys in settings:
            encoder = as_encoder(spec + keys)
            best, median = rates(encoder.encode, sentences, args.repeats)
            lines.append(f"  {'openai: ' + label:50s} {best:8.1f} {median:8.1f}   {best / best_local:.2f}x local")
            print(lines[-1], flush=True)
    agree = abs(api_score - local_score) <= 0.01
    lines.append(f"scores agree within 0.01 (x100 scale): {agree}")
    report("openai_server", lines)


if __name__ == "__main__":
    main()
