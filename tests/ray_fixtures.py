"""Fixtures of the Ray tests, a plugin of the root conftest (a ``conftest.py`` beside the Ray tests
would shadow the ``conftest`` module that other tests import helpers from).

One Ray cluster for every distributed test (starting one takes seconds): a head that runs no work
(0 CPUs) and two worker nodes of one CPU each, all on this host, so a test can remove a node. Ray is
told not to report usage (no internet here) and is shut down however the session ends. A test that
hangs (a Ray call that can never be scheduled, say) dumps every thread's stack and ends the test
run, instead of holding CI until its time limit."""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

import pytest

RAY_TESTS = Path(__file__).parent / "unit" / "distributed"
#: a distributed test that runs longer than this is a hang (the longest takes about 15 s here)
HANG_SECONDS = 300


@pytest.fixture
def hang_guard():
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def ray_cluster():
    """(ray, cluster) with the head and two one-CPU worker nodes."""
    ray = pytest.importorskip("ray", reason="the 'distributed' extra (ray) is not installed")
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    root = str(RAY_TESTS.parents[2])  # workers import tests.fakes and ray_fakes as the tests do
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(RAY_TESTS), root, os.environ.get("PYTHONPATH")) if p)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
        },
    )
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, logging_level="warning")
        cluster.wait_for_nodes()
        yield ray, cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
