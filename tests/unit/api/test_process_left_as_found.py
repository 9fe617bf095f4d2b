"""A library call leaves the process as it found it (os.environ, torch's threads, oneDNN's
settings), and the checkout's benchharness.toml (shared hub cache, offline) still applies from
Python without any variable exported: it is passed to the hub calls instead.

Each check runs in a fresh interpreter inside this checkout with no Hugging Face variable set
(the test session exports them in conftest.py, which would hide what the library does itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import DATA, HF_CACHE, MINILM_L3, ROOT, needs_data

#: what the checks compare before and after each library call. The third-party libraries a call
#: loads are imported first: some set variables of their own at import (sklearn the KMP_* of
#: OpenMP, torch._dynamo TORCHINDUCTOR_CACHE_DIR), which says nothing about what benchharness does.
SNAPSHOT = """
import json, os, torch
import sentence_transformers, sklearn, torch._dynamo, transformers
def snapshot():
    return {"environ": dict(os.environ), "threads": torch.get_num_threads(),
            "interop": torch.get_num_interop_threads(), "mkldnn": torch.backends.mkldnn.enabled}
"""


def run_in_checkout(body: str) -> dict:
    """Run ``body`` (which prints one JSON line last) with the checkout as working directory and
    the variables a process owner would set removed."""
    owned = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "ONEDNN_", "BENCHHARNESS_CONFIG")
    env = {k: v for k, v in os.environ.items() if not k.startswith(owned)}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", SNAPSHOT + body], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def offline_checkout() -> None:
    if not (HF_CACHE / f"models--{MINILM_L3.replace('/', '--')}").is_dir():
        pytest.skip(f"{MINILM_L3} is not in the shared hub cache {HF_CACHE}")


EVALUATE = """
torch.set_num_threads(1)  # a user's choice, which the call must keep
before = snapshot()
results = benchharness.evaluate("glove-50d", "STSBenchmark-dev", results_dir={results!r}, cache_dir={cache!r})
got["evaluate"] = {{"before": before, "after": snapshot(), "tasks": [r.task for r in results]}}
"""

HUB = f"""
from benchharness.core.errors import MissingFileError
from benchharness.core.settings import load_config
from benchharness.encoders import hub
from benchharness.evaluation.resolver import Resolver
torch.set_num_threads(1)
before = snapshot()
vectors = Resolver().get("minilm-l3").encode(["a man plays a guitar .", "a dog runs ."])
via_hf = Resolver().get("hf:{MINILM_L3}?pooling=avg").encode(["a man plays a guitar ."])
try:
    hub.resolve("fake-org/not-in-any-cache", load_config().hub())
    missing = "downloaded?"
except MissingFileError as exc:
    missing = str(exc)
got["hub"] = {{"before": before, "after": snapshot(), "shape": list(vectors.shape), "hf_shape": list(via_hf.shape),
              "cache": str(load_config().hub().cache), "missing": missing}}
"""


@pytest.fixture(scope="module")
def calls(tmp_path_factory, offline_checkout) -> dict:
    """Both checks below in one fresh interpreter (its imports take about 10 s), each library call
    between its own two snapshots: ``evaluate`` of GloVe on STS-B dev (where the data is), then a
    hub encoder loaded through the resolver."""
    folder = tmp_path_factory.mktemp("left-as-found")
    evaluate = ""
    if all((DATA / rel).exists() for rel in ("senteval/STS/STSBenchmark/sts-dev.csv", "glove")):
        evaluate = EVALUATE.format(results=str(folder / "results"), cache=str(folder / "cache"))
    return run_in_checkout("import benchharness\ngot = {}\n" + evaluate + HUB + "print(json.dumps(got))\n")


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv", "glove")
def test_evaluate_leaves_environment_threads_and_onednn_as_found(calls):
    got = calls["evaluate"]
    assert got["tasks"] == ["STSBenchmark-dev"]
    assert got["after"] == got["before"]


def test_a_hub_encoder_loads_offline_from_the_configured_cache_and_leaves_the_process_as_found(calls):
    got = calls["hub"]
    assert got["shape"] == [2, 384] and got["hf_shape"] == [1, 384]
    assert got["cache"] == str(HF_CACHE.resolve())  # benchharness.toml's hf_hub_cache, not ~/.cache
    assert "offline mode is on" in got["missing"]  # refused at once: no download was tried
    assert got["after"] == got["before"]
    assert not any(k.startswith(("HF_", "TRANSFORMERS_", "TOKENIZERS_", "ONEDNN_")) for k in got["after"]["environ"])


def test_variables_third_party_imports_set_during_a_call_are_put_back(tmp_path, offline_checkout):
    """Without the pre-imports above: the call itself imports sentence-transformers (which sets
    TORCHINDUCTOR_CACHE_DIR) and scikit-learn (KMP_*), and the environment still comes back whole."""
    owned = (
        "HF_",
        "HUGGINGFACE_",
        "TRANSFORMERS_",
        "TOKENIZERS_",
        "ONEDNN_",
        "BENCHHARNESS_CONFIG",
        "KMP_",
        "TORCHINDUCTOR_",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(owned)}
    env["PYTHONPATH"] = str(ROOT)
    body = """
import json, os, sys
before = dict(os.environ)
import benchharness
benchharness.evaluate("minilm-l3", "SICKRelatedness-trial", intervals=False)
imported = [m for m in ("sentence_transformers", "sklearn", "torch._dynamo") if m in sys.modules]
print(json.dumps({"before": before, "after": dict(os.environ), "imported": imported}))
"""
    out = subprocess.run([sys.executable, "-c", body], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["imported"] == ["sentence_transformers", "sklearn", "torch._dynamo"]  # the setters ran
    assert got["after"] == got["before"]
