"""Training throughput of a recipe: seconds per optimizer step and sentences per second, and how
far a step is from its floor.

Runs a recipe (``encoders/methods/recipes.toml``) through its method's own command for a few steps
in a temporary folder and prints one JSON line, ready for the recipe file's ``[[throughput]]``
table, from which ``benchharness run`` estimates how long training on demand takes. Only the
optimizer steps are timed (the loop's own clock): the dev evaluation is skipped and loading the
data and model is not counted. Each recipe should run in its own process (peak RSS is the
process maximum)::

    python benchmarks/train_throughput.py --recipe paser --steps 20 [--floor]

With ``--floor``, one forward and backward pass of the method on a real batch (the first
``batch_size`` training examples, as the loop collates them) is run under
``torch.utils.flop_counter.FlopCounterMode``, which counts its FLOPs, and under a dispatch mode
that records every matrix product (``mm``, ``addmm``, ``bmm``, ``baddbmm``) and CPU attention
kernel with its arguments' shapes (FlopCounterMode does not count that kernel: its FLOPs are added
with torch's own SDPA formulas). Each recorded op is then replayed alone on random tensors of its
shapes (best of several repeats, in this run, on this machine): the sum is the step's floor, the
time its products alone need at the rate this machine reaches on exactly those shapes. The JSON
line gains ``flops_per_step``, ``floor_seconds`` (with the GFLOP/s it implies) and
``ratio_to_floor`` = measured seconds per step / floor. The optimizer update is not in the floor
(it has no matrix product), so a ratio of 1 is out of reach by its cost.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from datetime import date
from pathlib import Path

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from benchharness.core.settings import apply_environment, load_config


class SkippedDev:
    """A dev evaluation that scores nothing: the benchmark times optimizer steps only."""

    task_name = "none (throughput benchmark)"

    def __call__(self, encoder: nn.Module) -> float:
        return float("nan")


#: the ops whose time is the floor: matrix products, and the CPU attention kernel (one fused op for
#: QK^T, softmax and PV, which torch's FlopCounterMode does not count: counted here with its formulas)
_PRODUCTS = {"mm", "addmm", "bmm", "baddbmm"}
_CPU_ATTENTION = {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward"}


class FloorOps(TorchDispatchMode):
    """Records every matrix product and CPU attention call: the op and its arguments' shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[object, tuple[object, ...], dict]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ in _PRODUCTS | _CPU_ATTENTION:
            meta = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
            self.calls.append((func, meta, dict(kwargs)))
        return func(*args, **kwargs)


def _attention_flops(func, meta) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    shapes = [m[0] for m in meta if isinstance(m, tuple) and len(m) == 2 and isinstance(m[1], torch.dtype)]
    if func.overloadpacket.__name__.endswith("_backward"):
        grad_out, query, key, value = shapes[0], shapes[1], shapes[2], shapes[3]
        return sdpa_backward_flop_count(grad_out, query, key, value)
    return sdpa_flop_count(shapes[0], shapes[1], shapes[2])


def _replay_seconds(func, meta, kwargs, repeats: int = 7) -> float:
    """Best time of the op alone on fresh random tensors of the recorded shapes."""
    import time

    args = [torch.randn(m[0], dtype=m[1]) if isinstance(m, tuple) and len(m) == 2 and isinstance(m[1], torch.dtype)
            else m for m in meta]
    func(*args, **kwargs)  # warm the kernel choice
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        func(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return best


def floor(method: nn.Module, examples, batch_size: int) -> dict[str, float]:
    """FLOPs of one forward+backward on a real batch, and the time its matrix products and attention
    kernels alone need at their own shapes."""
    from torch.utils.flop_counter import FlopCounterMode

    batch = method.collate(list(examples[:batch_size]))
    method.train()
    ops = FloorOps()
    with FlopCounterMode(display=False) as counter, ops:
        method(batch).loss.backward()
    method.zero_grad(set_to_none=True)
    flops = counter.get_total_flops() + sum(_attention_flops(f, m) for f, m, _ in ops.calls
                                            if f.overloadpacket.__name__ in _CPU_ATTENTION)
    timed: dict[str, float] = {}
    total = 0.0
    with torch.no_grad():
        for func, meta, kwargs in ops.calls:
            key = repr((func, meta, sorted(kwargs.items())))
            if key not in timed:
                timed[key] = _replay_seconds(func, meta, kwargs)
            total += timed[key]
    return {"flops_per_step": flops, "floor_ops": len(ops.calls), "floor_distinct_shapes": len(timed),
            "floor_seconds": round(total, 4), "floor_gflops_per_second": round(flops / total / 1e9, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", required=True, help="a recipe name of encoders/methods/recipes.toml")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device")
    parser.add_argument("--floor", action="store_true", help="also count the step's FLOPs and time its matrix "
                        "products alone at their own shapes (see the module docstring)")
    parser.add_argument("--machine", default=f"{platform.machine()} {torch.get_num_threads()} threads",
                        help="how the throughput table names this machine")
    args = parser.parse_args()
    apply_environment(load_config())

    from benchharness.training.on_demand import device_kind, train_into
    from benchharness.training.recipes import load_book

    recipe = load_book().get(args.recipe)
    if recipe.base_recipe is not None:
        parser.error(f"{args.recipe} continues {recipe.base_recipe.display_name}: time that recipe instead")
    runtime = {"stop_after": args.steps, "quiet": True, "device": args.device, "threads": args.threads}
    captured: dict[str, object] = {}
    if args.floor:  # keep the method and its examples, which the method's command builds, for the floor
        from benchharness.encoders.methods import launch

        inner = launch.train

        def keeping(method, examples, config, **kw):
            captured.update(method=method, examples=examples, batch_size=config.batch_size)
            return inner(method, examples, config, **kw)

        launch.train = keeping
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        train_into(recipe, out, dev=lambda method, config: SkippedDev(),
                   runtime={k: v for k, v in runtime.items() if v is not None})
        state_file = (out if recipe.rounds is None else out.with_name("run-r1")) / "checkpoint" / "state.pt"
        state = torch.load(state_file, map_location="cpu", weights_only=True)["state"]
    seconds = state["train_seconds"]
    extra: dict[str, object] = {}
    if args.floor:
        extra = floor(captured["method"], captured["examples"], captured["batch_size"])  # type: ignore[arg-type]
        extra["ratio_to_floor"] = round(seconds / state["step"] / extra["floor_seconds"], 2)
    print(json.dumps({"recipe": args.recipe, "method": recipe.method, "base": recipe.base,
                      "device": device_kind(args.device), "batch_size": recipe.options["batch_size"],
                      "max_length": recipe.options["max_length"], "steps": state["step"],
                      "seconds_per_step": round(seconds / state["step"], 2),
                      "sentences_per_second": round(state["sentences"] / seconds, 2), **extra,
                      "machine": args.machine, "date": date.today().isoformat(),
                      "command": f"python benchmarks/train_throughput.py --recipe {args.recipe} --steps {args.steps}"
                                 + (" --floor" if args.floor else "")}))


if __name__ == "__main__":
    main()
