"""The ``benchharness`` command with a test-only encoder family, for the fault-injection tests.

Run as ``python tests/faults_plugin.py <cli args>`` (with the checkout on ``PYTHONPATH``). It
registers the family ``faults-hash`` (``faults-hash:<dim>``: ``tests.fakes.HashEncoder``'s
vectors, a pure function of each sentence, so any two runs agree row for row) through the
plugin registry (``PLUGINS.register``), then hands over to ``benchharness.cli.main``.

Faults are switched on by environment variables, so the same command, rerun without them, is the
clean resume:

- ``FAULTS_ENCODE_DELAY``: seconds to sleep in every ``encode`` call (one cache chunk), which
  leaves a test the time to kill the process between two committed chunks;
- ``FAULTS_HANG_AT_SAVE=k``: the k-th result file (1-based) is written half-way into its
  temporary file, then the process announces ``hanging`` in ``FAULTS_HANG_MARKER`` and sleeps,
  so that a SIGKILL lands in the middle of writing a result.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes, as the tests import it

from benchharness.core import results
from benchharness.core.plugins import PLUGINS
from benchharness.core.specs import BuildContext, EncoderSpec, Family
from tests.fakes import HashEncoder


class SlowHashEncoder(HashEncoder):
    """``HashEncoder`` with an optional sleep per call; the delay is not part of the identity."""

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        time.sleep(float(os.environ.get("FAULTS_ENCODE_DELAY", "0")))
        return super().encode(sentences)

    def identity_info(self) -> dict[str, Any]:
        return {"family": "faults-hash", "dim": self.dim}


def build(name: str, spec: EncoderSpec, context: BuildContext) -> SlowHashEncoder:
    return SlowHashEncoder(name, dim=int(spec["dim"]))  # type: ignore[typeddict-item]


def _hang_at_save(k: int, marker: Path) -> None:
    """Replace the result writer: the k-th file stops half-written in its temporary sibling."""
    from benchharness.core.atomic import atomic_file

    original = results.write_json
    count = 0

    def write_json(path: Any, obj: Any, indent: int | None = 2) -> None:
        nonlocal count
        count += 1
        if count < k:
            return original(path, obj, indent)
        import json

        text = json.dumps(obj, indent=indent, default=str, allow_nan=False)
        with atomic_file(path, "w") as fh:
            fh.write(text[: len(text) // 2])
            fh.flush()
            marker.write_text("hanging")
            time.sleep(600)

    results.write_json = write_json  # type: ignore[assignment]


if __name__ == "__main__":
    if os.environ.get("FAULTS_HANG_AT_SAVE"):
        _hang_at_save(int(os.environ["FAULTS_HANG_AT_SAVE"]), Path(os.environ["FAULTS_HANG_MARKER"]))
    from benchharness.cli import main

    PLUGINS.register("families", "faults-hash", Family.of("faults-hash", build, target="dim"))

    sys.exit(main())
