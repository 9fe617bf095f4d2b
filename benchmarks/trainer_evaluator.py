"""benchharness's evaluator inside sentence-transformers' trainer, against ``benchharness run`` on the
checkpoints the trainer saved.

paraphrase-MiniLM-L3-v2 is trained for ``--steps`` steps (default 200) with
``SentenceTransformerTrainer`` and ``MultipleNegativesRankingLoss`` on identical pairs of STS-B train
+ SICK train sentences (unsupervised SimCSE's objective, dropout the only difference between the
two views), batch 32, lr 3e-5; ``benchharness.STSEvaluator`` scores STS-B dev every ``--every``
steps and the trainer saves a checkpoint at the same steps. Then each checkpoint is scored by the
command line, ``benchharness run --encoders st:<checkpoint> --tasks STSBenchmark-dev`` in a fresh
process, and the two scores are printed side by side (they must agree to 0.01).

    python benchmarks/trainer_evaluator.py [--steps 200] [--every 50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from machine import SMOKE, cli_command

MODEL = "sentence-transformers/paraphrase-MiniLM-L3-v2"
#: the dev task (smoke mode: SICK-R's 500 trial pairs)
TASK = "SICKRelatedness-trial" if SMOKE else "STSBenchmark-dev"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=50)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(steps=2, every=2)
    args = parser.parse_args()

    from datasets import Dataset
    from huggingface_hub import snapshot_download
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    import benchharness
    from benchharness.data.corpora import load_corpus

    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    sentences = load_corpus("train-splits", unique=True)[: args.steps * 32]
    model = SentenceTransformer(snapshot_download(MODEL, local_files_only=True), device="cpu")
    evaluator = benchharness.STSEvaluator(TASK)
    with tempfile.TemporaryDirectory(prefix="trainer-evaluator-") as out:
        trainer = SentenceTransformerTrainer(
            model=model,
            train_dataset=Dataset.from_dict({"anchor": sentences, "positive": sentences}),
            loss=MultipleNegativesRankingLoss(model),
            evaluator=evaluator,
            args=SentenceTransformerTrainingArguments(
                output_dir=out,
                max_steps=args.steps,
                per_device_train_batch_size=32,
                learning_rate=3e-5,
                eval_strategy="steps",
                eval_steps=args.every,
                save_steps=args.every,
                logging_steps=args.every,
                report_to=[],
                use_cpu=True,
                seed=42,
                dataloader_drop_last=True,
            ),
        )
        t0 = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - t0
        print(f"trained {args.steps} steps in {train_seconds:.1f} s (evaluations included)")
        print(f"{'step':>5s} {'evaluator':>10s} {'run':>10s} {'|diff|':>8s}")
        worst = 0.0
        for step, results in evaluator.history:
            if step < 0:
                continue
            folder = Path(out) / f"checkpoint-{step}"
            with tempfile.TemporaryDirectory() as results_dir:
                run = cli_command("run", "--encoders", f"st:{folder}", "--tasks", TASK, "--no-cache", "--quiet")
                subprocess.run(
                    [*run, "--results-dir", results_dir],
                    check=True,
                    capture_output=True,
                )
                [stored] = Path(results_dir).glob(f"*/{TASK}.json")
                cli = json.loads(stored.read_text())["main_score"]
            ours = results.results[0].main_score
            worst = max(worst, abs(ours - cli))
            print(f"{step:5d} {ours:10.4f} {cli:10.4f} {abs(ours - cli):8.4f}")
    print(f"largest difference {worst:.4f} (x100); required at most 0.01")


if __name__ == "__main__":
    main()
