"""The precision rule (core.devices.check_precision) is the one every encoder and trainer follows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchharness.core import devices
from benchharness.core.errors import InvalidInputError

CPU = torch.device("cpu")


def test_native_bf16_read_from_cpu_flags(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert not devices.has_native_bf16(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert devices.has_native_bf16(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 amx_bf16 amx_tile\n")
    assert devices.has_native_bf16(cpuinfo)
    assert not devices.has_native_bf16(tmp_path / "absent")


def test_cpu_bf16_needs_native_bf16_and_cpu_fp16_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "has_native_bf16", lambda: False)
    with pytest.raises(InvalidInputError, match="avx512_bf16 or amx_bf16"):
        devices.check_precision("bf16", CPU)
    monkeypatch.setattr(devices, "has_native_bf16", lambda: True)
    assert devices.check_precision("bf16", CPU) == "bf16"
    with pytest.raises(InvalidInputError, match="needs a CUDA device"):  # native bf16 does not make fp16 fast
        devices.check_precision("fp16", CPU)
    with pytest.raises(InvalidInputError, match="unknown precision 'fp8'"):
        devices.check_precision("fp8", CPU)
    assert devices.check_precision("fp32", None) == "fp32"  # type: ignore[arg-type]  # fp32 needs no device


def test_encoders_and_training_follow_the_rule_of_core_devices(
    monkeypatch: pytest.MonkeyPatch, tiny_bert, tmp_path: Path
) -> None:
    """Patching the CPU check in core.devices alone changes what both an encoder and a training run
    accept: there is no second copy of the rule."""
    from benchharness.encoders.huggingface import HFEncoder
    from benchharness.training.harness import preflight
    from tests.helpers import training

    config = training(tiny_bert, tmp_path / "run", precision="bf16", device="cpu")
    monkeypatch.setattr(devices, "has_native_bf16", lambda: False)
    with pytest.raises(InvalidInputError, match="avx512_bf16 or amx_bf16"):
        HFEncoder("t", str(tiny_bert), pooling="avg", device="cpu", precision="bf16")
    with pytest.raises(InvalidInputError, match="avx512_bf16 or amx_bf16"):
        preflight(*config)
    monkeypatch.setattr(devices, "has_native_bf16", lambda: True)
    assert HFEncoder("t", str(tiny_bert), pooling="avg", device="cpu", precision="bf16").precision == "bf16"
    preflight(*config)  # accepted
