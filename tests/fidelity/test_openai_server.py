"""The ``openai`` family against a real OpenAI-compatible server: infinity-emb serving
paraphrase-MiniLM-L3-v2 on the loopback address (``tests/embedding_server.py``). Through the HTTP
API, STS-B test scores what ``minilm-l3`` (the same checkpoint run here by sentence-transformers)
scores; the server's vectors are the local model's, normalised (infinity returns unit vectors,
which leaves every cosine as it was)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

import benchharness
from benchharness.core.errors import UserError
from benchharness.evaluation.models import as_encoder
from tests.embedding_server import MODEL, EmbeddingServer, missing_reason
from tests.helpers import ROOT, needs_data

#: skipped without the server's environment; one worker for the module under ``pytest -n 2 --dist
#: loadgroup``, so that the server (a model load) starts once
pytestmark = [
    pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason())),
    pytest.mark.xdist_group("embedding-server"),
]

TASK = "STSBenchmark"
SENTENCES = [
    "a man is playing a guitar .",
    "two dogs run across a snowy field",
    "the cat sleeps",
    "a woman slices an onion with a large knife",
    "rain",
    "",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> EmbeddingServer:
    with EmbeddingServer(tmp_path_factory.mktemp("embedding-server") / "server.log") as running:
        yield running


def spec(server: EmbeddingServer, **keys: object) -> str:
    return f"openai:{MODEL}?base_url={server.base_url}" + "".join(f"&{k}={v}" for k, v in keys.items())


@needs_data("senteval/STS/STSBenchmark")
def test_stsb_through_the_server_scores_what_minilm_l3_scores(server):
    stored = json.loads((ROOT / "results" / "minilm-l3" / f"{TASK}.json").read_text())["main_score"]
    results = benchharness.evaluate(spec(server, identity="paraphrase-MiniLM-L3-v2", max_concurrency=2), TASK)
    result = results.results[0]
    items = results.items(result).items
    assert result.main_score == pytest.approx(100 * spearmanr(items["cosine"], items["gold"])[0], abs=1e-9)
    assert result.main_score == pytest.approx(stored, abs=0.01)  # minilm-l3's stored 82.40
    assert result.encoder_identity["model"] == MODEL and result.encoder_metadata["server"] == server.base_url[:-3]


def test_the_servers_vectors_are_the_local_models_normalised(server):
    from sentence_transformers import SentenceTransformer

    local = SentenceTransformer(MODEL, device="cpu").encode(SENTENCES, convert_to_numpy=True)
    remote = as_encoder(spec(server, identity="l3", max_batch=4)).encode(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(remote, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(remote, local / np.linalg.norm(local, axis=1, keepdims=True), atol=2e-5)


def test_the_identity_is_the_served_name_and_width_and_no_server_address(server):
    first = as_encoder(spec(server, identity="l3"))
    info = first.identity_info()
    assert info == {"family": "openai", "model": MODEL, "dimensions": 384, "identity": "l3"}
    assert str(server.port) not in json.dumps(first.identity_record())
    assert first.metadata["server_model"]["owned_by"] == "infinity"
    unpinned = as_encoder(spec(server))  # infinity reports no revision: the name alone pins nothing
    assert not unpinned.pinned and unpinned.identity != as_encoder(spec(server)).identity


def test_a_model_the_server_does_not_serve_is_refused(server):
    with pytest.raises(UserError, match=rf"serves no model 'text-embedding-3-small' \(GET /models lists: {MODEL}\)$"):
        as_encoder(f"openai:text-embedding-3-small?base_url={server.base_url}").identity_info()


@needs_data("senteval/SICK")
def test_the_cli_scores_through_the_server(server, tmp_path: Path):
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchharness.cli",
            "run",
            "--encoders",
            spec(server, identity="l3"),
            "--tasks",
            "SICKRelatedness-trial",
            "--no-cache",
            "--quiet",
            "--results-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (stored,) = benchharness.load_results(tmp_path).results
    assert stored.task == "SICKRelatedness-trial" and stored.encoder_identity["identity"] == "l3"
