"""Ctrl-C during ``benchharness run``: one line that says what is kept and how to go on (exit 130),
never a traceback, and every result stored before the interruption still there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from benchharness.core.results import ResultStore


def test_ctrl_c_during_run_keeps_the_stored_results_and_says_so_in_one_line(project):
    # a model that is slow enough to be interrupted: the second encoder of the run
    (project / "slowmodel.py").write_text(
        textwrap.dedent(
            """
            import time
            import numpy as np

            def encode(sentences):
                open("started", "w").close()
                time.sleep(120)
                return np.ones((len(sentences), 4), dtype=np.float32)
            """
        )
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchharness.cli",
            "run",
            "--encoders",
            "glove-50d,python:slowmodel:encode",
            "--tasks",
            "SICKRelatedness-trial",
            "--no-cache",
            "--quiet",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(project)},
    )
    try:
        deadline = time.monotonic() + 120
        while not (project / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    said = (
        "benchharness: interrupted; what was stored before is kept (each result, each finished run, the last "
        "checkpoint); rerun the same command to compute the rest"
    )
    assert lines == [said], err
    stored = ResultStore(project / "results").load("glove-50d", "SICKRelatedness-trial")
    assert stored is not None and stored.main_score > 0
