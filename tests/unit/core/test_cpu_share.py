"""Torch threads give cores back to a busy neighbour (core.cpu_share)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchharness.core import cpu_share


def _fake_proc(tmp_path: Path, running: int, own_states: list[str]) -> tuple[Path, Path]:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"0.50 0.40 0.30 {running}/120 4242\n")
    tasks = tmp_path / "task"
    for i, state in enumerate(own_states):
        (tasks / str(100 + i)).mkdir(parents=True)
        # a command name with spaces and parentheses, as a thread may carry
        (tasks / str(100 + i) / "stat").write_text(f"{100 + i} (python (x) R y) {state} 1 2 3 4\n")
    return loadavg, tasks


def test_others_are_the_runnable_threads_not_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loadavg, tasks = _fake_proc(tmp_path, running=5, own_states=["R", "S", "R", "D"])
    monkeypatch.setattr(cpu_share, "_LOADAVG", loadavg)
    monkeypatch.setattr(cpu_share, "_TASKS", tasks)
    assert cpu_share.others_runnable() == 3  # 5 runnable, 2 of them ours
    monkeypatch.setattr(cpu_share, "usable_cpus", lambda: 2)
    assert cpu_share.free_cpus() == 1  # never below one: our own work must go on


def test_unreadable_proc_measures_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_share, "_LOADAVG", tmp_path / "absent")
    assert cpu_share.others_runnable() is None
    assert cpu_share.free_cpus() is None


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="needs Linux /proc")
@pytest.mark.skipif(cpu_share.usable_cpus() != 2, reason="the expected counts are for a 2-CPU machine")
def test_a_busy_process_takes_a_thread_and_leaving_gives_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        with cpu_share.shared_threads("cpu") as share:
            assert share.current == 1 and torch.get_num_threads() == 1
            # the neighbour gone (seen as no other runnable thread), the next look takes both back
            monkeypatch.setattr(cpu_share, "others_runnable", lambda: 0)
            assert share.adjust() == 2 and torch.get_num_threads() == 2
            monkeypatch.setattr(cpu_share, "others_runnable", lambda: 1)
            assert share.adjust() == 1
        assert torch.get_num_threads() == 2  # restored on leaving
    finally:
        spinner.kill()
        spinner.wait()
        torch.set_num_threads(before)


def test_gpu_work_is_left_alone() -> None:
    share = cpu_share.ThreadShare("cuda:0")
    threads = torch.get_num_threads()
    assert share.adjust() == threads and torch.get_num_threads() == threads


def test_kept_threads_restores_the_count_a_call_changed() -> None:
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2

    @cpu_share.kept_threads()
    def trains(threads: int) -> int:
        torch.set_num_threads(threads)
        return torch.get_num_threads()

    try:
        assert trains(other) == other and torch.get_num_threads() == before
        with pytest.raises(RuntimeError), cpu_share.kept_threads():  # restored on an error as well
            torch.set_num_threads(other)
            raise RuntimeError("diverged")
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
