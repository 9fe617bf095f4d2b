"""A real embeddings server (infinity-emb, ``tests/embedding_server.py``) that dies in the middle of
a run: the results finished before are kept, the encoder whose pass it cut fails in one line, the
vectors it had committed to the embedding cache stay there, and once a server is back the run
encodes only the rest and scores what the uninterrupted encoder scored."""

from __future__ import annotations

import pytest

import benchharness
from benchharness.evaluation import cache
from tests.embedding_server import MODEL, EmbeddingServer, missing_reason
from tests.helpers import needs_data

pytestmark = [
    needs_data("senteval/SICK"),
    pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason())),
]

TASK = "SICKRelatedness-trial"
#: SICK trial's unique sentences, and the rows the embedding cache commits at a time here
#: (``cache.ENCODE_CHUNK``, 2048 in a run, made smaller so that a short task spans two chunks)
UNIQUE, CHUNK = 924, 512
#: sentences per request, one request at a time: the cache's first chunk takes CHUNK / BATCH requests
BATCH = 16


def config(folder, base_url: str) -> None:
    """A project whose benchharness.toml names two encoders of one server: ``whole``, which will
    finish, and ``cut``, whose pass the server's death interrupts (their own identity labels keep
    their cached vectors apart; ``cut`` sends small requests one at a time, so the kill lands
    between two of them)."""
    server = f"openai:{MODEL}?base_url={base_url}&retries=1&timeout=20"
    (folder / "benchharness.toml").write_text(
        '[paths]\ncache_dir = "cache"\nresults_dir = "results"\n'
        f'[encoders.whole]\nspec = "{server}&max_batch=64&max_concurrency=2&identity=l3-whole"\n'
        f'[encoders.cut]\nspec = "{server}&max_batch={BATCH}&max_concurrency=1&identity=l3-cut"\n'
    )


def test_a_server_killed_mid_run_keeps_what_was_done_and_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cache, "ENCODE_CHUNK", CHUNK)
    with EmbeddingServer(tmp_path / "server.log") as server:
        config(tmp_path, server.base_url)
        # whole: a probe and its two chunks in requests of 64; cut: a probe, the first chunk, then 4 more
        whole_requests = 1 + -(-CHUNK // 64) + -(-(UNIQUE - CHUNK) // 64)
        server.kill_after(whole_requests + 1 + CHUNK // BATCH + 4)
        results = benchharness.evaluate(["whole", "cut"], TASK, results_dir="results", cache_dir="cache", errors="keep")
        assert server.process.poll() is not None, "the server outlived the run: the kill did not happen"
    (failed,) = results.failed
    assert (failed.encoder, failed.task) == ("cut", TASK)
    assert failed.message.startswith(f"encoding: cannot reach the embeddings server at {server.base_url}/embeddings (")
    assert "\n" not in failed.message and failed.message.endswith("(2 tries)")
    whole = results.get("whole", TASK)
    assert benchharness.load_results("results").get("whole", TASK).main_score == whole.main_score  # stored

    with EmbeddingServer(tmp_path / "server-again.log") as again:  # back, on another port: the same identity
        config(tmp_path, again.base_url)
        rerun = benchharness.evaluate(["whole", "cut"], TASK, results_dir="results", cache_dir="cache")
    assert [o.status for o in rerun.outcomes] == ["reused", "computed"]
    cut = rerun.get("cut", TASK)
    assert cut.timings["sentences_not_from_cache"] == UNIQUE - CHUNK  # the committed chunk was kept
    assert cut.main_score == pytest.approx(whole.main_score, abs=1e-9)
