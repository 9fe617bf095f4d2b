"""Which backend (and token budget) encodes the STS suite fastest: the measurements behind the
default of ``encoders/backends.py``.

All variants run in one process on the very same token batches (sentences of the STS suite,
tokenized once, batched by exact token length), interleaved batch by batch in rotating order, so a
load change on a shared machine hits every variant alike; ratios to eager fp32 are the result,
absolute seconds are only comparable on an idle machine. Setup (torch.compile's compilation, the
ONNX export and session creation, each with its first batch) is reported apart, since it is paid
once per process and belongs in an end-to-end time. Each variant's vectors are compared with eager
fp32 and with ``SentenceTransformer.encode`` (max abs difference; the identity threshold is 1e-5).

``--budgets`` compares token budgets for eager fp32 instead, in alternating whole passes, beside
``SentenceTransformer.encode`` (batch 64, padded) on the same sentences.

    python benchmarks/backends.py [--model minilm-l6] [--sentences 3000] [--backends eager,compile,onnx]
    python benchmarks/backends.py --budgets 1024,2048,4096,8192 [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import SMOKE, data_root

STS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
HUB_IDS = {
    "minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
    "minilm-l3": "sentence-transformers/paraphrase-MiniLM-L3-v2",
}


def sts_sentences(limit: int, seed: int = 0) -> list[str]:
    """The unique sentences of the STS suite (what a cold run encodes), or a seeded sample."""
    import numpy as np

    from benchharness import tasks

    unique: dict[str, None] = {}
    for name in STS:
        task = tasks.get(name)
        task.load(data_root())
        unique.update(dict.fromkeys(task.sentences()))
    sentences = list(unique)
    if 0 < limit < len(sentences):
        pick = np.sort(np.random.default_rng(seed).choice(len(sentences), limit, replace=False))
        sentences = [sentences[i] for i in pick]
    return sentences


class Variant:
    """One backend at one precision, with its accumulated times and output rows."""

    def __init__(self, backend: str, precision: str, st, head) -> None:
        from benchharness.encoders.backends import make_backend

        self.name = backend if precision == "fp32" else f"{backend}+{precision}"
        self.precision, self.head = precision, head
        self.backend = make_backend(backend, st[0].model)
        self.wall = self.cpu = self.setup = 0.0
        self.rows = None

    def run(self, features, device):
        import torch

        from benchharness.core.devices import autocast

        with torch.inference_mode():
            with autocast(device, self.precision):
                out = self.backend(features)
            return self.head(out, features).float().cpu().numpy()


def compare_backends(args, st, sentences: list[str]) -> None:
    import numpy as np
    import torch

    from benchharness.core.devices import has_native_bf16
    from benchharness.encoders.inference import batch_features, token_batches, tokenize
    from benchharness.encoders.sbert_forward import ModuleHead

    device = torch.device("cpu")
    tokens = tokenize(st.tokenizer, sentences, st[0].max_seq_length)
    batches = list(token_batches(tokens.lengths, args.budget))
    head = ModuleHead(st)
    precisions = ["fp32", "bf16"] if has_native_bf16() else ["fp32"]
    variants = [Variant(b, p, st, head) for p in precisions for b in args.backends.split(",")]
    feats = [batch_features(tokens, idx, device) for idx in batches]
    for v in variants:  # setup: compilation / export, with the first (longest) batch
        t0 = time.perf_counter()
        v.run(feats[0], device)
        v.setup = time.perf_counter() - t0
        v.rows = np.empty((len(sentences), st.get_embedding_dimension()), dtype=np.float32)
    for k, (idx, f) in enumerate(zip(batches, feats)):
        for j in range(len(variants)):
            v = variants[(k + j) % len(variants)]
            w0, c0 = time.perf_counter(), time.process_time()
            v.rows[idx] = v.run(f, device)
            v.wall += time.perf_counter() - w0
            v.cpu += time.process_time() - c0
    reference = st.encode(sentences, batch_size=64, convert_to_numpy=True)
    eager = variants[0]
    n_tok = int(tokens.lengths.sum())
    print(
        f"{len(sentences)} sentences, {n_tok} tokens, {len(batches)} batches (budget {args.budget} tokens), "
        f"threads {torch.get_num_threads()}, native bf16: {has_native_bf16()}"
    )
    print(
        f"{'variant':14s} {'wall s':>8s} {'cpu s':>8s} {'wall/eager':>10s} {'cpu/eager':>9s} {'setup s':>8s} "
        f"{'maxdiff eager':>13s} {'maxdiff st':>10s}"
    )
    results = []
    for v in variants:
        d_eager = float(np.abs(v.rows - eager.rows).max())
        d_st = float(np.abs(v.rows - reference).max())
        print(
            f"{v.name:14s} {v.wall:8.2f} {v.cpu:8.2f} {v.wall / eager.wall:10.3f} {v.cpu / eager.cpu:9.3f} "
            f"{v.setup:8.2f} {d_eager:13.2e} {d_st:10.2e}"
        )
        results.append(
            {
                "variant": v.name,
                "wall_s": v.wall,
                "cpu_s": v.cpu,
                "setup_s": v.setup,
                "maxdiff_eager": d_eager,
                "maxdiff_st": d_st,
            }
        )
    print("JSON " + json.dumps({"sentences": len(sentences), "tokens": n_tok, "results": results}))


def compare_budgets(args, st, sentences: list[str]) -> None:
    import numpy as np
    import torch

    from benchharness.encoders.inference import encode_tokens, tokenize
    from benchharness.encoders.sbert_forward import ModuleHead

    device = torch.device("cpu")
    tokens = tokenize(st.tokenizer, sentences, st[0].max_seq_length)
    head = ModuleHead(st)
    budgets = [int(b) for b in args.budgets.split(",")]
    names = ["st.encode(64)"] + [f"budget {b}" for b in budgets]
    times: dict[str, list[float]] = {n: [] for n in names}
    reference = None
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            t0 = time.perf_counter()
            if name == "st.encode(64)":
                vecs = st.encode(sentences, batch_size=64, convert_to_numpy=True)
                reference = vecs
            else:
                budget = int(name.split()[1])
                vecs = encode_tokens(
                    tokens,
                    lambda f: head(st[0].model(**{k: v for k, v in f.items() if k != "attention_mask"}), f),
                    device,
                    budget,
                )
            times[name].append(time.perf_counter() - t0)
            if reference is not None and name != "st.encode(64)":
                times.setdefault(f"{name} maxdiff", []).append(float(np.abs(vecs - reference).max()))
    base = min(times["st.encode(64)"])
    print(f"{len(sentences)} sentences, best of {args.rounds} alternating passes, threads {torch.get_num_threads()}")
    for name in names:
        best = min(times[name])
        diff = max(times.get(f"{name} maxdiff", [0.0]))
        print(f"{name:14s} {best:8.2f} s  speed-up vs st.encode {base / best:5.2f}x  maxdiff {diff:.2e}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6", choices=sorted(HUB_IDS))
    parser.add_argument("--sentences", type=int, default=3000, help="sample of the STS suite; 0 = all 26,289")
    parser.add_argument("--backends", default="eager,compile,onnx")
    parser.add_argument("--budget", type=int, default=4096, help="tokens per batch for --backends")
    parser.add_argument("--budgets", help="compare these token budgets (eager fp32) instead of backends")
    parser.add_argument("--rounds", type=int, default=3, help="alternating passes for --budgets")
    parser.add_argument(
        "--threads",
        type=int,
        help="intra-op threads (default: torch's, the physical cores); "
        "1 on a loaded machine, where OpenMP barriers wait on descheduled threads",
    )
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(model="minilm-l3", sentences=40, backends="eager", budget=512)
    args = parser.parse_args()

    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from sentence_transformers import SentenceTransformer

    if args.threads:
        torch.set_num_threads(args.threads)

    st = SentenceTransformer(HUB_IDS[args.model], device="cpu")
    sentences = sts_sentences(args.sentences)
    if args.budgets:
        compare_budgets(args, st, sentences)
    else:
        compare_backends(args, st, sentences)
    return 0


if __name__ == "__main__":
    sys.exit(main())
