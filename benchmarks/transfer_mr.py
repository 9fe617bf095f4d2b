"""Time SentEval's MR protocol (nested k-fold logistic regression) with the batched classifier.

Reference point: the original SentEval, patched to run on CPU, spends about 18 minutes on MR under
the default config with 50-d GloVe vectors (410 sequential fits: 10 outer x 4 L2 x 10 inner + 10
refits; encoding takes under a second). This script encodes MR once (not timed), then times the
classifier stage alone and prints the time per fit, the speed-up over 18 minutes, and the accuracy.

    python benchmarks/transfer_mr.py [--encoder glove-50d] [--config default] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from machine import SMOKE, data_root

REFERENCE_SECONDS = 18 * 60  # original SentEval on CPU, MR, default config, glove 50d


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="glove-50d")
    parser.add_argument("--config", default="default", choices=["default", "fast"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of this many sentences (0: all)")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(config="fast", sample=300)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from benchharness import tasks
    from benchharness.core.settings import apply_environment, load_config
    from benchharness.evaluation.resolver import Resolver
    from benchharness.tasks.senteval.classifier import inner_kfold
    from benchharness.tasks.senteval.config import CONFIGS

    apply_environment(load_config())
    task = tasks.get("MR")
    task.load(data_root())
    sentences, labels = task.sentences(), np.asarray(task.labels)
    if 0 < args.sample < len(sentences):
        pick = np.sort(np.random.default_rng(0).choice(len(sentences), args.sample, replace=False))
        sentences, labels = [sentences[i] for i in pick], labels[pick]
    t0 = time.perf_counter()
    features = Resolver().get(args.encoder).encode(sentences)
    encode = time.perf_counter() - t0
    cfg = CONFIGS[args.config]
    t1 = time.perf_counter()
    out = inner_kfold(features, labels, 2, cfg, seed=1111, device=args.device)
    seconds = time.perf_counter() - t1
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(
        f"MR, {args.encoder} ({features.shape[1]}-d), config {cfg.name}, device {device}, "
        f"{torch.get_num_threads()} torch threads"
    )
    print(
        f"encoding {encode:.1f} s; classifier {seconds:.1f} s for {out['fits']} fits "
        f"= {1000 * seconds / out['fits']:.0f} ms per fit"
    )
    print(f"test accuracy {out['acc']:.2f} (dev {out['devacc']:.2f}); chosen L2 per fold {out['chosen_l2']}")
    if cfg.name == "default":
        print(
            f"speed-up over the original SentEval's ~{REFERENCE_SECONDS / 60:.0f} min: "
            f"{REFERENCE_SECONDS / seconds:.1f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
