"""Encoders the Ray tests register by ``module:attribute`` (workers import this module from
PYTHONPATH): deterministic vectors, a pause per call so that a test can act while a unit runs, and
a marker file naming the Ray node and process of each call. Workers run in the driver's folder, so
the test steers them with ``ray_test.json`` there."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.fakes import HashEncoder


class SlowHash(HashEncoder):
    """HashEncoder that sleeps ``pause`` seconds per call and touches ``<marks>/<node id>-<pid>``."""

    def encode(self, sentences):
        steer = Path("ray_test.json")
        settings = json.loads(steer.read_text()) if steer.is_file() else {}
        if settings.get("marks"):
            import ray

            (Path(settings["marks"]) / f"{ray.get_runtime_context().get_node_id()}-{os.getpid()}").touch()
        time.sleep(settings.get("pause", 0))
        return super().encode(sentences)


def slow(name: str) -> SlowHash:
    return SlowHash(name)
