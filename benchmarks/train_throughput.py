"""Training throughput of a recipe: seconds per optimizer step and sentences per second, how far
a step is from its floor, where the rest of its time goes, and sentence-transformers' trainer on
the same loss.

Runs a recipe (``benchharness/training/recipes.toml``) through its method's ``train`` for a few steps
in a temporary folder and prints one JSON line, ready for the recipe file's ``[[throughput]]``
table, from which ``benchharness run`` estimates how long training on demand takes. The optimizer
steps are timed by the loop's own clock (``seconds_per_step``); one STS-B dev evaluation of the
encoder is timed as the loop makes it (``seconds_per_evaluation``); the rest of the method's run
(loading the data and the model, the checkpoint) is ``seconds_setup``: the estimate's three terms.
Each recipe should run in its own process (peak RSS is the process maximum)::

    python benchmarks/train_throughput.py --recipe paser --steps 20 [--floor] [--profile] [--versus]
        [--precision bf16]
    python benchmarks/train_throughput.py --table ../old --table . --steps 20 [--repeats 2]  # old and new

With ``--floor``, the timed steps are measured against their FLOP floor (``floors.py``): the mean,
over the very batches the steps trained on (the loop's order, collated as it collates them), of the
time a forward and backward pass's matrix products and attention kernels alone need at their own
shapes, on this machine, in this run (``--floor-samples K``: K batches spread over the first epoch
instead, for runs longer than the timed steps).
The JSON line gains ``flops_per_step``, ``floor_seconds`` (with the GFLOP/s it implies) and
``ratio_to_floor`` = measured seconds per step / floor. The optimizer update, dropout draws,
normalisation, activations and the collation of the batch are not in the floor (no matrix
product), so a ratio of 1 is out of reach by their cost; ``--profile`` shows them: the steps run
under ``torch.profiler`` (which slows them: its step times are not the measurement) and the line
gains milliseconds per step in collate, forward, backward, clipping and the optimizer, and the
forward and backward's self time per op group.

``--versus`` also trains with sentence-transformers' ``SentenceTransformerTrainer`` on the loss
equivalent to the recipe's, in the same run, where one exists: ``MultipleNegativesRankingLoss`` on
identical pairs for SimCSE. ``--precision bf16`` trains under bf16 autocast (a CPU with native
bf16); the floor is then replayed in the dtypes autocast chose.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import torch
from machine import SMOKE, config, data_root
from torch import nn

from benchharness.cli.process import configure


class SkippedDev:
    """A dev evaluation that scores nothing: the benchmark times optimizer steps only."""

    task_name = "none (throughput benchmark)"

    def __call__(self, encoder: nn.Module) -> float:
        return float("nan")


def floor(method: nn.Module, batches: list[list], precision: str = "fp32") -> dict[str, float]:
    """FLOPs of one forward+backward, and the time its matrix products and attention kernels alone
    need at their own shapes (and dtypes: under bf16 autocast the products are bf16) (``floors.py``),
    averaged over ``batches`` (lists of examples, collated as the loop collates them)."""
    from floors import Floor

    from benchharness.core.devices import autocast

    method.train()
    device = next(method.parameters()).device
    total = Floor()
    for examples_of_batch in batches:
        batch = method.collate(examples_of_batch)

        def step(batch=batch) -> None:
            with autocast(device, precision):
                loss = method(batch).loss
            loss.backward()

        total.add(step)
        method.zero_grad(set_to_none=True)
    n = len(batches)
    return {
        "flops_per_step": round(total.flops / n),
        "floor_ops": round(total.ops / n),
        "floor_distinct_shapes": total.replayed,
        "floor_seconds": round(total.seconds / n, 4),
        "floor_gflops_per_second": round(total.flops / total.seconds / 1e9, 1),
        "floor_batches": n,
    }


def epoch_batches(examples, options, epoch: int) -> list[list]:
    """The batches of one epoch of a run, in the loop's own order."""
    from benchharness.training.loop import batch_order

    order = batch_order(len(examples), options.batch_size, options.drop_last, options.seed, epoch)
    return [[examples[int(j)] for j in rows] for rows in order]


def timed_batches(examples, options, steps: int) -> list[list]:
    """The batches of a run's first ``steps`` steps: the work that was timed."""
    chosen: list[list] = []
    epoch = 0
    while len(chosen) < steps:
        chosen += epoch_batches(examples, options, epoch)[: steps - len(chosen)]
        epoch += 1
    return chosen


def spread_batches(examples, options, samples: int) -> list[list]:
    """``samples`` batches spread evenly over the run's first epoch."""
    first = epoch_batches(examples, options, 0)
    picks = sorted({round(i * (len(first) - 1) / max(1, samples - 1)) for i in range(samples)})
    return [first[i] for i in picks]


#: how the profile groups the ops of a step's forward and backward: (group, names it holds)
OP_GROUPS = [
    ("matrix products", ("mm", "addmm", "bmm", "baddbmm", "linear", "matmul")),
    (
        "attention kernel",
        ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward"),
    ),
    (
        "embedding backward",
        ("embedding_dense_backward", "embedding_backward", "index_add_", "index_put_", "_index_put_impl_"),
    ),
    (
        "softmax / cross-entropy",
        (
            "_log_softmax",
            "_log_softmax_backward_data",
            "nll_loss",
            "nll_loss_forward",
            "nll_loss_backward",
            "_softmax",
            "_softmax_backward_data",
        ),
    ),
    ("layer norm", ("native_layer_norm", "native_layer_norm_backward")),
    ("gelu / tanh", ("gelu", "gelu_backward", "tanh", "tanh_backward")),
    ("dropout", ("bernoulli_", "native_dropout", "native_dropout_backward", "mul", "div_")),
]


def profile_phases(steps: int, wrap) -> dict[str, object]:
    """Run ``steps`` optimizer steps under torch.profiler: milliseconds per step in collate, forward,
    backward, gradient clipping and the optimizer update (the loop's own calls, labelled), and the
    forward+backward self time of each op group (``OP_GROUPS``), the rest summed as "other ops"."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        wrap()
    events = prof.key_averages()
    phase_ms = {e.key: e.cpu_time_total / 1e3 / steps for e in events if e.key.startswith("step:")}
    total = sum(v for k, v in phase_ms.items() if k != "step:all")
    group_of = {name: group for group, names in OP_GROUPS for name in names}
    groups: dict[str, float] = {}
    for e in events:
        name = e.key.removeprefix("aten::")
        if e.key.startswith("step:") or not e.key.startswith("aten::"):
            continue
        group = group_of.get(name, "other ops")
        groups[group] = groups.get(group, 0.0) + e.self_cpu_time_total / 1e3 / steps
    others = sorted(
        (
            (e.self_cpu_time_total / 1e3 / steps, e.key)
            for e in events
            if e.key.startswith("aten::") and group_of.get(e.key.removeprefix("aten::"), "other ops") == "other ops"
        ),
        reverse=True,
    )
    return {
        "phases_ms_per_step": {k.removeprefix("step:"): round(v, 1) for k, v in phase_ms.items()},
        "top_other_ops_ms_per_step": {k: round(v, 1) for v, k in others[:12]},
        "labelled_ms_per_step": round(total, 1),
        "op_groups_ms_per_step": {k: round(v, 1) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
    }


def labelled(method: nn.Module) -> None:
    """Label the loop's calls for the profiler: the method's collate and forward, the optimizer's
    step and the gradient clipping (backward is the profiler's own ``autograd`` record)."""
    from torch.profiler import record_function

    def wrapped(label, fn):
        def call(*args, **kwargs):
            with record_function(f"step:{label}"):
                return fn(*args, **kwargs)

        return call

    method.collate = wrapped("collate", method.collate)
    method.forward = wrapped("forward", method.forward)
    from benchharness.training import loop

    make = loop.make_optimizer

    def make_labelled(module, options):
        optimizer = make(module, options)
        label = record_function("step:optimizer")  # the scheduler wraps step itself: label it by hooks
        optimizer.register_step_pre_hook(lambda *_: (label.__enter__(), None)[1])
        optimizer.register_step_post_hook(lambda *_: label.__exit__(None, None, None) and None)
        return optimizer

    loop.make_optimizer = make_labelled
    loop.clip_gradients = wrapped("clip", loop.clip_gradients)
    torch.Tensor.backward = wrapped("backward", torch.Tensor.backward)


def evaluation_seconds(method: nn.Module, options, settings) -> float:
    """One STS-B dev evaluation of the method's encoder as the loop makes it (the run's evaluator,
    built once and called again: the second call is timed)."""

    from benchharness.training.dev_eval import for_training

    evaluation = for_training(method, options, settings)
    evaluation(method.encoder)
    t0 = time.perf_counter()
    evaluation(method.encoder)
    return round(time.perf_counter() - t0, 2)


def versus_sentence_transformers(
    recipe, sentences: list[str], steps: int, device: str = "cpu", precision: str = "fp32"
) -> dict[str, object]:
    """sentence-transformers' own trainer on the loss equivalent to the recipe's, where one exists:
    ``MultipleNegativesRankingLoss`` on identical (anchor, positive) pairs is unsupervised SimCSE
    (in-batch InfoNCE over cosines at scale 1/temperature, dropout the only difference between the
    views). Same base, batch size, maximum length, learning rate and sentences; ``steps`` steps after
    one untimed warm-up step, timed around ``trainer.train()``."""

    if recipe.method != "simcse":
        return {"sentence_transformers": f"no equivalent loss for {recipe.method}"}
    if importlib.util.find_spec("datasets") is None:  # a machine with the project's dependencies only
        return {"sentence_transformers": "not run: SentenceTransformerTrainer needs the datasets package"}
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from benchharness.encoders import hub

    o = recipe.options
    model = SentenceTransformer(str(hub.resolve(recipe.base).path), device=device)
    model.max_seq_length = o["max_length"]
    batch = o["batch_size"]

    def trainer(n_steps: int, out: str) -> SentenceTransformerTrainer:
        data = sentences[: n_steps * batch]
        return SentenceTransformerTrainer(
            model=model,
            train_dataset=Dataset.from_dict({"anchor": data, "positive": data}),
            loss=MultipleNegativesRankingLoss(model, scale=1.0 / o["temperature"]),
            args=Arguments(
                output_dir=out,
                max_steps=n_steps,
                per_device_train_batch_size=batch,
                learning_rate=o["lr"],
                save_strategy="no",
                report_to=[],
                use_cpu=device == "cpu",
                bf16=precision == "bf16" and device != "cpu",
                seed=o["seed"],
                dataloader_drop_last=True,
                disable_tqdm=True,
                logging_strategy="no",
            ),
        )

    with tempfile.TemporaryDirectory() as out:
        trainer(1, out).train()  # warm-up: first-call allocations and kernel choices
        timed = trainer(steps, out)
        t0 = time.perf_counter()
        timed.train()
        if device != "cpu":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    return {
        "sentence_transformers": "SentenceTransformerTrainer + MultipleNegativesRankingLoss on identical pairs",
        "sentence_transformers_seconds_per_step": round(seconds / steps, 3),
        "sentence_transformers_sentences_per_second": round(steps * batch / seconds, 2),
    }


DEFAULT_RECIPES = ("simcse", "consert", "paser", "defsent-plus")


def table(checkouts: list[Path], steps: int, precision: str | None, repeats: int = 1) -> None:
    """Each default recipe of each checkout (its own ``.venv``, so its own code) in a fresh process
    with ``--floor`` (and ``--versus`` for SimCSE), then one table. Every checkout is timed by this
    script: one instrument for old and new (it drives the training API of ``benchharness.training``
    as it is from the commit that made training a library on: older checkouts need their own copy).
    The runs interleave (each recipe: every checkout in turn, ``repeats`` rounds), so a drift of
    the machine's speed touches old and new alike; with repeats,
    a last table gives each commit's median per recipe."""
    import statistics
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import header, report

    lines = [header()]
    rows = []
    script = str(Path(__file__).resolve())
    commits = {
        c: subprocess.run(
            ["git", "-C", str(c), "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
        for c in checkouts
    }
    for repeat in range(repeats):
        for name in DEFAULT_RECIPES:
            for checkout in checkouts:
                command = [str(checkout / ".venv" / "bin" / "python"), script, "--recipe", name]
                command += ["--steps", str(steps), "--floor"]
                command += ["--versus"] if name == "simcse" else []
                command += ["--precision", precision] if precision else []
                done = subprocess.run(command, capture_output=True, text=True, cwd=checkout)
                if done.returncode != 0:
                    raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["commit"], row["repeat"] = commits[checkout], repeat
                rows.append(row)
                lines.append(json.dumps(row))
                print(lines[-1], flush=True)
    lines += [
        "",
        (
            "| commit | recipe | precision | GFLOP/step | floor s | step s | ratio to floor | sentences/s | "
            "s/dev evaluation | sentence-transformers sentences/s |"
        ),
        "|---" * 10 + "|",
    ]
    order = {c: i for i, c in enumerate(commits.values())}
    rows.sort(key=lambda r: (order[r["commit"]], DEFAULT_RECIPES.index(r["recipe"]), r["repeat"]))
    for r in rows:
        versus = r.get("sentence_transformers_sentences_per_second")
        lines.append(
            f"| {r['commit']} | {r['recipe']} | {r.get('precision', 'fp32')} | {r['flops_per_step'] / 1e9:.1f} | "
            f"{r['floor_seconds']:.3f} | {r['seconds_per_step']:.3f} | {r['ratio_to_floor']:.2f} | "
            f"{r['sentences_per_second']:.1f} | {r.get('seconds_per_evaluation') or '-'} | "
            + (f"{versus:.1f} (ours {r['speed_vs_sentence_transformers']:.2f}x) |" if versus else "none |")
        )
    if repeats > 1:
        lines += [
            "",
            (
                "| commit | recipe | runs | median step s | median floor s | median ratio to floor | "
                "median speed vs sentence-transformers |"
            ),
            "|---" * 7 + "|",
        ]
        for commit in commits.values():
            for name in DEFAULT_RECIPES:
                mine = [r for r in rows if r["commit"] == commit and r["recipe"] == name]
                versus = [r["speed_vs_sentence_transformers"] for r in mine if "speed_vs_sentence_transformers" in r]
                step = statistics.median(r["seconds_per_step"] for r in mine)
                lines.append(
                    f"| {commit} | {name} | {len(mine)} | {step:.3f} | "
                    f"{statistics.median(r['floor_seconds'] for r in mine):.3f} | "
                    f"{statistics.median(r['ratio_to_floor'] for r in mine):.2f} | "
                    + (f"{statistics.median(versus):.2f}x |" if versus else "- |")
                )
    print("\n".join(lines[lines.index("") :]))
    report("train_throughput" + (f"_{precision}" if precision else ""), lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", help="a recipe name of benchharness/training/recipes.toml")
    parser.add_argument(
        "--table",
        action="append",
        type=Path,
        metavar="CHECKOUT",
        help="time the four default recipes of this checkout (its .venv; repeat for old and new) "
        "each in its own process with --floor, and print one table",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--repeats", type=int, default=1, help="with --table: rounds of runs, interleaved, and each commit's medians"
    )
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also count the step's FLOPs and time its matrix "
        "products alone at their own shapes (see the module docstring)",
    )
    parser.add_argument(
        "--floor-samples",
        type=int,
        metavar="K",
        help="with --floor: the mean floor of K batches spread over the run's first epoch "
        "(default: the batches of the timed steps)",
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        help="train with bf16 autocast (a CPU with native bf16, or CUDA); default: the recipe's",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recipe option for this run (e.g. dictionary=oxford-valid), its value read as the option's type",
    )
    parser.add_argument(
        "--versus",
        action="store_true",
        help="also time sentence-transformers' trainer on the "
        "equivalent loss, where one exists (SimCSE: MNRL on identical pairs), in this run",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the steps under torch.profiler and print "
        "where a step's time goes (collate, forward, backward, clipping, optimizer; op groups)",
    )
    parser.add_argument(
        "--machine",
        default=f"{platform.machine()} {torch.get_num_threads()} threads",
        help="how the throughput table names this machine",
    )
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(recipe="simcse", steps=2, floor=True)
    args = parser.parse_args()
    if args.table:
        table([c.resolve() for c in args.table], args.steps, args.precision, args.repeats)
        return
    if not args.recipe:
        parser.error("--recipe or --table is required")
    configure(sys.argv, config())  # as `benchharness train` sets up its process: the runs must be alike

    from dataclasses import replace

    from benchharness.training.estimate import device_kind
    from benchharness.training.plan import Plan
    from benchharness.training.recipes import load_book
    from benchharness.training.settings import TrainSettings
    from benchharness.training.train import train_with

    recipe = load_book().get(args.recipe)
    if recipe.base_recipe is not None:
        parser.error(f"{args.recipe} continues {recipe.base_recipe.display_name}: time that recipe instead")
    if args.precision:  # the same recipe's steps in another precision (its key does not matter here)
        recipe = replace(recipe, typed=replace(recipe.typed, precision=args.precision))
    if args.option:  # other options of the same recipe, as --precision
        changed = {}
        for item in args.option:
            key, _, value = item.partition("=")
            current = getattr(recipe.typed, key)
            changed[key] = value if current is None else type(current)(value)
        recipe = replace(recipe, typed=replace(recipe.typed, **changed))
    settings = TrainSettings(
        config=config(),
        data_dir=data_root().root,
        device=args.device,
        threads=args.threads,
        stop_after=args.steps,
        dev=lambda method, options, settings: SkippedDev(),
    )
    captured: dict[str, object] = {}
    # keep the method, its examples and options, which the harness builds
    from benchharness.training import harness

    inner = harness.run_loop

    def keeping(method, examples, options, settings, plan, **kw):
        captured.update(method=method, examples=examples, options=options)
        if args.profile:
            labelled(method)
            out: dict[str, object] = {}
            captured["profile"] = profile_phases(
                settings.stop_after, lambda: out.update(result=inner(method, examples, options, settings, plan, **kw))
            )
            return out["result"]
        result = inner(method, examples, options, settings, plan, **kw)
        if "seconds_per_evaluation" not in captured:
            t0 = time.perf_counter()
            captured["seconds_per_evaluation"] = evaluation_seconds(method, options, settings)
            captured["evaluation_wall"] = time.perf_counter() - t0
        return result

    harness.run_loop = keeping
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        train_with(settings, Plan.of(recipe, out=out))
        state_file = (out if recipe.rounds is None else out.with_name("run-r1")) / "checkpoint" / "state.pt"
        state = torch.load(state_file, map_location="cpu", weights_only=True)["state"]
        wall = time.perf_counter() - started
    seconds = state["train_seconds"]
    extra: dict[str, object] = {"seconds_per_evaluation": captured.get("seconds_per_evaluation")}
    if not args.profile:  # the rest of the method's command: data, model, checkpoint (not under the profiler)
        extra["seconds_setup"] = round(wall - seconds - float(captured.get("evaluation_wall", 0.0)), 1)  # type: ignore[arg-type]
    if args.profile:
        extra.update(captured["profile"])  # type: ignore[arg-type]
    if args.floor:
        extra.update(
            floor(
                captured["method"],  # type: ignore[arg-type]
                spread_batches(captured["examples"], captured["options"], args.floor_samples)
                if args.floor_samples
                else timed_batches(captured["examples"], captured["options"], state["step"]),
                args.precision or recipe.options["precision"],
            )
        )
        extra["ratio_to_floor"] = round(seconds / state["step"] / extra["floor_seconds"], 2)
    if args.versus:
        device = str(next(captured["method"].parameters()).device)  # type: ignore[attr-defined]
        precision = args.precision or recipe.options["precision"]
        extra.update(versus_sentence_transformers(recipe, captured["examples"], args.steps, device, precision))  # type: ignore[arg-type]
        if "sentence_transformers_sentences_per_second" in extra:
            extra["speed_vs_sentence_transformers"] = round(
                state["sentences"] / seconds / extra["sentence_transformers_sentences_per_second"], 2
            )
    print(
        json.dumps(
            {
                "recipe": args.recipe,
                "method": recipe.method,
                "base": recipe.base,
                "device": device_kind(args.device),
                "batch_size": recipe.options["batch_size"],
                "max_length": recipe.options["max_length"],
                "steps": state["step"],
                "seconds_per_step": round(seconds / state["step"], 3),
                "sentences_per_second": round(state["sentences"] / seconds, 2),
                **extra,
                "machine": args.machine,
                "date": date.today().isoformat(),
                "precision": args.precision or recipe.options["precision"],
                "command": "python benchmarks/train_throughput.py " + " ".join(sys.argv[1:]),
            }
        )
    )


if __name__ == "__main__":
    main()
