"""Training throughput of the contrastive methods: sentences per second and peak memory.

Runs the shared loop for a few steps on the STS unlabeled corpus, without dev evaluation, with the
methods' CPU presets (or the flags given), and prints one JSON line per method. Peak RSS is the
process maximum, so each method runs in its own process::

    python benchmarks/train_throughput.py --method consert --base sentence-transformers/paraphrase-MiniLM-L3-v2
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchharness.config import apply_environment, load_config
from benchharness.registry import MINILMS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=["consert", "simcse"], required=True)
    parser.add_argument("--base", default=MINILMS["minilm-l3"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device")
    parser.add_argument("--precision", default="fp32")
    args = parser.parse_args()
    apply_environment(load_config())

    from encoders.methods import consert, simcse
    from encoders.methods.data import load_sentences
    from benchharness.seeding import seed_everything
    from encoders.methods.training import TrainConfig, load_base, train

    sentences = load_sentences("sts-unlabeled")
    with tempfile.TemporaryDirectory() as tmp:
        config = TrainConfig(base=args.base, out=Path(tmp) / "run", batch_size=args.batch_size,
                             max_length=args.max_length, max_steps=args.steps, eval_every=None, eval_at_start=False,
                             threads=args.threads, device=args.device, precision=args.precision, progress=False)
        seed_everything(config.seed)
        encoder, tokenizer, source = load_base(args.base)
        if args.method == "consert":
            preset = consert.PRESETS["unsup-cpu"]
            method = consert.ConSERT(encoder, tokenizer, view1=preset["view1"], rate1=preset["rate1"],
                                     view2=preset["view2"], no_dropout=True, max_length=args.max_length)
        else:
            method = simcse.SimCSE(encoder, tokenizer, max_length=args.max_length)
        result = train(method, sentences, config, data={"name": "sts-unlabeled"}, base_source=source)
    t = result.manifest["training"]
    print(json.dumps({"method": args.method, "base": args.base, "steps": t["steps"], "batch_size": args.batch_size,
                      "max_length": args.max_length, "train_seconds": t["train_seconds"],
                      "sentences_per_second": t["sentences_per_second"], "peak_rss_mib": t["peak_rss_mib"],
                      **({"peak_cuda_mib": t["peak_cuda_mib"]} if "peak_cuda_mib" in t else {}),
                      "device": t["device"], "threads": t["torch_threads"]}))


if __name__ == "__main__":
    main()
