"""Ctrl-C during ``benchharness train``: one line that says what is kept and how to go on (exit 130,
the shell's status for an interrupted command), never a traceback; and the folder it leaves,
named as an encoder, reads as an unfinished run rather than an unknown name."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchharness.training.authoring import load_base, run_loop, seed_everything
from benchharness.training.methods.simcse.model import SimCSE
from benchharness.training.resume import Interrupted
from tests.helpers import cli, one_line_error, training

CORPUS = "a man is playing a guitar .\nthe red car hit a bus\ntwo dogs run in the field\na child reads a book\n"


def flags(base: Path) -> list[str]:
    """A run far longer than the test (a checkpoint every 500 steps: with --eval-every 0 the loop's default)."""
    return [
        "train", "simcse", "--base", str(base), "--out", "out", "--data", "corpus.txt", "--batch-size", "2",
        "--max-steps", "100000", "--eval-every", "0", "--threads", "1", "--quiet",
    ]  # fmt: skip


def logged_steps(folder: Path) -> list[int]:
    path = folder / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.is_file() else []


def test_ctrl_c_during_train_says_what_is_kept_and_the_folder_says_how_to_resume(project, tiny_bert):
    (project / "corpus.txt").write_text(CORPUS)
    assert cli(project, *flags(tiny_bert), "--stop-after", "2").returncode == 0  # a checkpoint at step 2
    seen = len(logged_steps(project / "out"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchharness.cli", *flags(tiny_bert)],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(logged_steps(project / "out")) < seen + 2:  # training again: two more logged steps
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    m = re.fullmatch(
        r"benchharness: interrupted after step (\d+); the checkpoint of step (\d+) is kept in out; "
        r"rerun the same command to resume",
        lines[-1],
    )
    assert m is not None and len(lines) == 1, err
    step, kept = int(m[1]), int(m[2])
    on_disk = torch.load(project / "out" / "checkpoint" / "state.pt", weights_only=True)["state"]["step"]
    assert kept == on_disk and step >= max(logged_steps(project / "out")) >= kept

    named = cli(project, "run", "--encoders", "out", "--tasks", "STSBenchmark", "--quiet", "--no-cache")
    one_line_error(named, "encoder 'out': out is an unfinished run", "rerun the train command to resume it")

    resumed = cli(project, *flags(tiny_bert)[:-1], "--stop-after", str(kept + 1))  # not --quiet: its log line
    assert resumed.returncode == 0 and f"resuming out at step {kept}/100000" in resumed.stderr, resumed.stderr


class Interrupting(SimCSE):
    """SimCSE whose ``at``-th forward is cut short by a Ctrl-C (KeyboardInterrupt, as Python raises it)."""

    at = 0

    def forward(self, batch):
        self.at -= 1
        if self.at == 0:
            raise KeyboardInterrupt
        return super().forward(batch)


def interrupting(base: Path, at: int) -> Interrupting:
    seed_everything(42)
    encoder, tokenizer, _ = load_base(str(base))
    method = Interrupting(encoder, tokenizer)
    method.at = at
    return method


TEXTS = [f"sentence {i} about {w} ." for i, w in enumerate(["cats", "dogs", "rain", "tea", "snow", "salt"] * 4)]


@pytest.mark.parametrize("checkpoint_every", [None, 2])
def test_an_interrupted_loop_says_which_checkpoint_its_folder_keeps(project, tiny_bert, checkpoint_every):
    """The 6th forward is cut short: 5 steps done; with a checkpoint every 2 steps, step 4's is on disk."""
    options, settings, plan = training(
        tiny_bert, project / "run", batch_size=4, max_steps=50, eval_every=None, eval_at_start=False,
        log_every=1, threads=1, checkpoint_every=checkpoint_every,
    )  # fmt: skip
    with pytest.raises(Interrupted) as raised:
        run_loop(interrupting(tiny_bert, 6), TEXTS, options, settings, plan, data={})
    assert (raised.value.step, raised.value.checkpoint) == (5, None if checkpoint_every is None else 4)
    state = project / "run" / "checkpoint" / "state.pt"
    if checkpoint_every is None:
        assert not state.exists()
        assert str(raised.value) == (
            f"interrupted after step 5, before the run's first checkpoint (one every 500 steps): nothing in "
            f"{project / 'run'} to resume; rerun the same command with --overwrite to start again"
        )
        named = cli(project, "run", "--encoders", "run", "--tasks", "STSBenchmark", "--quiet", "--no-cache")
        one_line_error(named, "encoder 'run': run is an unfinished run with no checkpoint", "--overwrite")
    else:
        assert torch.load(state, weights_only=True)["state"]["step"] == 4
