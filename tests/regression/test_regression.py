"""Regression: rerun the stored STS results of the fast encoders and compare every metric.

The stored files under ``results/`` were produced by ``benchharness run``; a change in a loader,
the pooling, the metric code or the model files shows up here as a difference beyond rounding.
minilm-l6 is left to the benchmark (it doubles the suite's time for no extra code path).
"""

import json
from pathlib import Path

import pytest

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.results import ResultStore
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.evaluation.verify import TOLERANCE  # measured float noise x2; the measurement is quoted there

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module")
def resolver(data_dir):
    """One resolver for the module's tests: a worker loads each encoder once, not once a task."""
    return Resolver(settings=RunSettings(data_dir=data_dir))


#: one test a task, so that the suite's two workers share a MiniLM's seven tasks (as one test it was
#: the suite's longest, and the other worker sat idle at the end)
@pytest.mark.parametrize("task", tasks.resolve("sts"))
@pytest.mark.parametrize("encoder", ["glove-50d", "minilm-l3"])
def test_stored_sts_results_reproduce(encoder, task, data_dir, tmp_path, resolver):
    old = json.loads((RESULTS / encoder / f"{task}.json").read_text())
    fresh_store = ResultStore(tmp_path)
    summary = run(
        [encoder],
        [tasks.get(task)],
        resolver.get,
        DataRoot(data_dir),
        fresh_store,
        RunSettings(),
    )
    assert [o.status for o in summary.outcomes] == ["computed"]
    fresh = json.loads(fresh_store.path(encoder, task).read_text())
    assert fresh["encoder_identity"]["hash"] == old["encoder_identity"]["hash"], f"{encoder} changed identity"
    assert fresh["data"]["sha256"] == old["data"]["sha256"]
    assert set(fresh["metrics"]) == set(old["metrics"])
    for key, value in old["metrics"].items():
        assert fresh["metrics"][key] == pytest.approx(value, abs=TOLERANCE), f"{encoder}/{task}/{key}"
