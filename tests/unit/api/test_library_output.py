"""A library prints nothing: a failing ``evaluate`` in a fresh interpreter that configured no logging
leaves standard error empty (Python's last-resort handler used to print the library's errors there,
a traceback included), while an application that configures logging still gets every message."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT

FAILING_CALL = """
import benchharness
{setup}
def broken(sentences):
    raise RuntimeError("the model is broken")
try:
    benchharness.evaluate(broken, "STSBenchmark-dev", identity="broken-v1")
except benchharness.EvaluationFailedError as exc:
    print("raised:", exc)
"""


def _run(project, setup: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", FAILING_CALL.format(setup=setup)],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_failing_evaluate_writes_nothing_to_standard_error(project):
    done = _run(project)
    assert done.returncode == 0, done.stderr
    assert "raised: evaluation failed" in done.stdout and "the model is broken" in done.stdout
    assert done.stderr == ""


def test_an_application_that_configures_logging_gets_the_librarys_messages(project):
    done = _run(project, setup="import logging; logging.basicConfig(format='%(name)s: %(message)s')")
    assert done.returncode == 0, done.stderr
    assert "benchharness.evaluation.runner: [callable:broken] encoding failed: the model is broken" in done.stderr
