"""The ``openai`` family's protocol, against a tiny scripted HTTP server in this process (the score
against a real server is ``tests/fidelity/test_openai_server.py``): batching and the order rows come
back in, concurrency, retries of 429 and 5xx (with Retry-After) and not of 4xx, time-outs, the API
key from the environment and nowhere else, the identity and how it is pinned, and the one-line
errors for answers that cannot be used."""

from __future__ import annotations

import base64
import json
import logging
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.specs import UnknownEncoderError
from benchharness.encoders.openai_api import PROBE, OpenAIEncoder
from benchharness.encoders.openai_client import EmbeddingServerError, backoff, retry_after
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_resolver import caching

MODEL = "fake-embedder"


def vector_of(text: str) -> list[float]:
    """What the fake server embeds ``text`` as: its length, a checksum of its characters, 1."""
    return [float(len(text)), float(sum(map(ord, text)) % 997), 1.0]


Reply = tuple[int, dict[str, str], Any]


class Fake:
    """A scripted ``/v1`` server: ``replies`` answer the embeddings requests in turn (a callable
    gets the request body; after the script, every request is answered properly) and every request
    is recorded with its headers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.replies: list[Reply | Callable[[dict], Reply]] = []
        self.models: Any = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tests"}]}
        self.served_as = MODEL
        self.delay = 0.0
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    def answer(self, body: dict) -> Reply:
        texts = body["input"]
        data = []
        for i, text in enumerate(texts):
            vector = vector_of(text)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        return 200, {}, {"object": "list", "model": self.served_as, "data": data[::-1]}  # out of order, by index

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def embedding_requests(self) -> list[Any]:
        return [body for method, path, _, body in self.requests if path.endswith("/embeddings")]


@pytest.fixture
def fake() -> Iterator[Fake]:
    state = Fake()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, headers: dict[str, str], body: Any) -> None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                # the client gave up waiting (the timeout tests make it): its answer has nowhere to go.
                # Left to the server, the traceback went to whatever sys.stderr was by then, which
                # may be a later test's captured command-line output
                pass

        def do_GET(self) -> None:
            state.requests.append(("GET", self.path, dict(self.headers), None))
            if isinstance(state.models, int):
                self._reply(state.models, {}, {"detail": "no listing here"})
            else:
                self._reply(200, {}, state.models)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append(("POST", self.path, dict(self.headers), body))
                reply = state.replies.pop(0) if state.replies and body["input"] != [PROBE] else None
                state.in_flight += 1
                state.most_in_flight = max(state.most_in_flight, state.in_flight)
            try:
                time.sleep(state.delay)
                status, headers, out = (reply(body) if callable(reply) else reply) if reply else state.answer(body)
            finally:
                # before the answer goes out: once the client has it, it may send the next request
                # (on another server thread) before this one would get here
                with state.lock:
                    state.in_flight -= 1
            self._reply(status, headers, out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.server = server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def encoder(fake: Fake, **spec: Any) -> OpenAIEncoder:
    return OpenAIEncoder("fake", MODEL, base_url=fake.url, **{"identity": "pinned", **spec})


SENTENCES = [f"sentence {'x' * (i * 7 % 23)} number {i}" for i in range(50)]


# ---- batching, order, concurrency ------------------------------------------------------------------
def test_rows_come_back_in_input_order_whatever_order_the_batches_and_answers_take(fake):
    fake.delay = 0.02  # requests overlap, so the concurrency bound is reached
    vectors = encoder(fake, max_batch=7, max_concurrency=3).encode(SENTENCES)
    assert vectors.dtype == np.float32 and vectors.shape == (50, 3)
    np.testing.assert_array_equal(vectors, np.asarray([vector_of(s) for s in SENTENCES], dtype=np.float32))
    batches = [body["input"] for body in fake.embedding_requests() if body["input"] != [PROBE]]
    assert sorted(len(b) for b in batches) == [1] + [7] * 7  # 50 = 7 x 7 + 1
    assert sorted(s for b in batches for s in b) == sorted(SENTENCES)  # each sentence sent once
    lengths = [len(s) for b in sorted(batches, key=lambda b: -len(b[0])) for s in b]
    assert lengths == sorted(lengths, reverse=True)  # longest first: similar lengths share a request
    assert fake.most_in_flight == 3


def test_one_request_at_a_time_when_max_concurrency_is_1(fake):
    fake.delay = 0.01
    encoder(fake, max_batch=5, max_concurrency=1).encode(SENTENCES[:20])
    assert fake.most_in_flight == 1


def test_float_and_base64_answers_give_the_same_float32_rows(fake):
    as_base64 = encoder(fake, encoding_format="base64").encode(SENTENCES[:9])
    as_float = encoder(fake, encoding_format="float").encode(SENTENCES[:9])
    np.testing.assert_array_equal(as_base64, as_float)
    formats = [body.get("encoding_format") for body in fake.embedding_requests()]
    assert "base64" in formats and None in formats  # float is OpenAI's default: not sent


def test_no_sentences_give_an_empty_array_of_the_models_width(fake):
    vectors = encoder(fake).encode([])
    assert vectors.shape == (0, 3) and vectors.dtype == np.float32


# ---- retries and time-outs -------------------------------------------------------------------------
def test_429_is_retried_after_the_wait_retry_after_asks_for(fake):
    fake.replies = [(429, {"Retry-After": "0.3"}, {"error": {"message": "Rate limit reached"}})]
    start = time.monotonic()
    vectors = encoder(fake).encode(["a b c"])
    assert time.monotonic() - start >= 0.3
    np.testing.assert_array_equal(vectors, [vector_of("a b c")])
    assert len(fake.embedding_requests()) == 3  # probe, the 429, the retry


def test_5xx_is_retried_and_fails_in_one_line_once_the_retries_are_spent(fake):
    fake.replies = [(503, {"Retry-After": "0"}, {"detail": "overloaded"})] * 3
    with pytest.raises(EmbeddingServerError) as caught:
        encoder(fake, retries=2).encode(["a b c"])
    message = str(caught.value)
    assert message == (
        f"the embeddings server at {fake.url}/embeddings answered 503 Service Unavailable: overloaded (3 tries)"
    )
    assert "\n" not in message and len(fake.embedding_requests()) == 1 + 3


def test_an_empty_answer_is_a_dropped_connection_and_retried(fake):
    """What a server killed as it answers may leave: a 2xx with an empty body, no error of its own."""
    fake.replies = [(200, {}, b"")] * 2
    with pytest.raises(EmbeddingServerError) as caught:
        encoder(fake, retries=1).encode(["a b c"])
    assert str(caught.value) == (
        f"cannot reach the embeddings server at {fake.url}/embeddings (it closed without an answer) (2 tries)"
    )
    fake.replies = [(200, {}, b"")]
    np.testing.assert_array_equal(encoder(fake, retries=1).encode(["a b c"]), [vector_of("a b c")])


def test_a_400_is_not_retried_and_quotes_the_server(fake):
    fake.replies = [(400, {}, {"error": {"message": "This model's maximum context length is 8192 tokens"}})]
    with pytest.raises(
        EmbeddingServerError,
        match=r"refused the request \(400 Bad Request: This model's maximum "
        r"context length is 8192 tokens\)$",
    ):
        encoder(fake).encode(["a b c"])
    assert len(fake.embedding_requests()) == 2  # probe, then the one refused request


def test_a_refused_empty_sentence_is_named_as_the_likely_cause(fake):
    fake.replies = [(400, {}, {"error": {"message": "'$.input' is invalid"}})]
    with pytest.raises(EmbeddingServerError, match=r"held an empty sentence, which some servers refuse\)$"):
        encoder(fake).encode(["", "b"])


def test_a_server_that_does_not_answer_in_time_fails_in_one_line(fake):
    fake.delay = 1.0
    start = time.monotonic()
    with pytest.raises(EmbeddingServerError, match=r"did not answer within 0.2 s \(timeout=\)$"):
        encoder(fake, timeout=0.2, retries=0).encode(["a"])
    assert time.monotonic() - start < 0.9


def _slow(body: dict) -> Reply:
    time.sleep(1.5)
    return (
        200,
        {},
        {"model": MODEL, "data": [{"index": i, "embedding": vector_of(t)} for i, t in enumerate(body["input"])]},
    )


def test_a_request_that_fails_for_good_ends_the_pass_without_waiting_for_the_others(fake):
    fake.replies = [_slow, (400, {}, {"detail": "bad input"}), (503, {"Retry-After": "30"}, {})]
    start = time.monotonic()
    with pytest.raises(EmbeddingServerError, match=r"\(400 Bad Request: bad input\)$"):
        encoder(fake, max_batch=2, max_concurrency=3).encode(SENTENCES[:6])
    assert time.monotonic() - start < 1.0  # neither the slow answer nor the 30 s retry wait was waited for


def test_a_server_that_is_not_there_cannot_be_reached(fake):
    url = fake.url
    fake.server.shutdown()
    fake.server.server_close()
    with pytest.raises(EmbeddingServerError) as caught:
        OpenAIEncoder("gone", MODEL, base_url=url, retries=1).encode(["a"])
    assert str(caught.value) == f"cannot reach the embeddings server at {url}/models (Connection refused) (2 tries)"
    assert isinstance(caught.value, UserError)


def test_retry_after_in_seconds_milliseconds_and_as_a_date():
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = datetime(2030, 1, 1, tzinfo=UTC)
    now = (when - timedelta(seconds=7)).timestamp()
    assert retry_after({"retry-after": format_datetime(when, usegmt=True)}, now=now) == pytest.approx(7.0)
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_backoff_doubles_from_half_a_second_up_to_30_with_at_most_a_quarter_of_jitter():
    for attempt, base in ((1, 0.5), (2, 1.0), (3, 2.0), (7, 30.0), (12, 30.0)):
        waits = [backoff(attempt) for _ in range(50)]
        assert all(base <= w <= base * 1.25 for w in waits)


# ---- the API key -----------------------------------------------------------------------------------
def test_the_key_is_read_from_the_named_variable_and_kept_nowhere(fake, monkeypatch):
    monkeypatch.setenv("MY_EMBEDDINGS_KEY", "sk-secret-123")
    model = encoder(fake, api_key_env="MY_EMBEDDINGS_KEY")
    model.encode(["a"])
    assert {headers.get("Authorization") for _, _, headers, _ in fake.requests} == {"Bearer sk-secret-123"}
    kept = repr(model) + json.dumps(model.identity_record()) + json.dumps(model.metadata) + str(pickle.dumps(model))
    assert "sk-secret-123" not in kept and model.identity_info()["model"] == MODEL


def test_openais_key_is_not_sent_to_another_server_unasked(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    encoder(fake).encode(["a"])
    assert all("Authorization" not in headers for _, _, headers, _ in fake.requests)
    assert OpenAIEncoder("o", "text-embedding-3-small").api_key_env == "OPENAI_API_KEY"


def test_a_named_key_variable_that_is_not_set_is_refused_before_any_request(fake, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(
        InvalidInputError, match="api_key_env=NO_SUCH_KEY names an environment variable that is not set"
    ):
        encoder(fake, api_key_env="NO_SUCH_KEY")
    assert fake.requests == []


def test_a_refused_key_names_the_variable(fake, monkeypatch):
    monkeypatch.setenv("MY_EMBEDDINGS_KEY", "wrong")
    fake.replies = [(401, {}, {"detail": "Unauthorized"})]
    with pytest.raises(
        EmbeddingServerError,
        match=r"\(401 Unauthorized: Unauthorized\); set the environment "
        "variable MY_EMBEDDINGS_KEY to a valid key$",
    ):
        encoder(fake, api_key_env="MY_EMBEDDINGS_KEY").encode(["a"])


# ---- identity --------------------------------------------------------------------------------------
def test_identity_pins_the_served_name_and_width_with_the_users_label(fake):
    first, second = encoder(fake, identity="l3-2024"), encoder(fake, identity="l3-2024")
    assert first.pinned and first.identity_info() == {
        "family": "openai",
        "model": MODEL,
        "dimensions": 3,
        "identity": "l3-2024",
    }
    assert first.identity == second.identity != encoder(fake, identity="other").identity
    assert first.metadata["server"] == fake.url.removesuffix("/v1") and first.metadata["pinned"] is True


def test_without_a_label_or_revision_the_identity_is_this_objects_alone(fake, caplog):
    with caplog.at_level(logging.WARNING, logger="benchharness.encoders.openai_api"):
        first = OpenAIEncoder("fake", MODEL, base_url=fake.url)
        assert not first.pinned
    second = OpenAIEncoder("fake", MODEL, base_url=fake.url)
    assert first.identity != second.identity and first.identity == first.identity
    assert not first.cacheable and encoder(fake, identity="l3").cacheable  # the cache would never be read
    assert caching(None)(first) is first  # a run's resolver leaves it out of the embedding cache
    assert "reports no revision of model 'fake-embedder'" in caplog.text and "identity=<label>" in caplog.text


def test_a_revision_the_server_reports_pins_the_identity(fake):
    fake.models = {"data": [{"id": MODEL, "owned_by": "tei", "model_sha": "abc123"}]}
    first, second = (OpenAIEncoder("fake", MODEL, base_url=fake.url) for _ in range(2))
    assert first.pinned and first.identity == second.identity
    assert first.identity_info() == {"family": "openai", "model": MODEL, "dimensions": 3, "revision": "abc123"}


def test_the_name_the_server_answers_under_is_the_identitys(fake):
    fake.served_as = "fake-embedder-v2"
    info = encoder(fake).identity_info()
    assert info["model"] == "fake-embedder-v2" and info["requested_model"] == MODEL


def test_a_model_the_server_does_not_list_is_refused(fake):
    with pytest.raises(EmbeddingServerError, match=r"serves no model 'other' \(GET /models lists: fake-embedder\)$"):
        OpenAIEncoder("x", "other", base_url=fake.url).identity_info()


@pytest.mark.parametrize("status", [404, 403])
def test_a_server_without_a_models_route_or_that_hides_it_is_asked_by_the_probe_alone(fake, status):
    fake.models = status
    assert encoder(fake).identity_info()["model"] == MODEL


def test_a_model_that_changes_under_the_run_fails_it(fake):
    model = encoder(fake)
    model.identity_info()
    fake.served_as = "someone-else"
    with pytest.raises(
        EmbeddingServerError,
        match="answered with model 'someone-else', not 'fake-embedder' as at the start of this run",
    ):
        model.encode(["a"])


def test_answers_that_name_no_model_are_used_with_one_warning_that_the_check_cannot_be_made(fake, caplog):
    fake.served_as = None
    with caplog.at_level("WARNING", logger="benchharness.encoders.openai_api"):
        vectors = encoder(fake, max_batch=2).encode(SENTENCES[:6])
    np.testing.assert_array_equal(vectors, np.asarray([vector_of(s) for s in SENTENCES[:6]], dtype=np.float32))
    warnings = [r.getMessage() for r in caplog.records if "name no model" in r.getMessage()]
    assert len(warnings) == 1 and "'fake-embedder' through the run cannot be checked" in warnings[0]


# ---- answers that cannot be used -------------------------------------------------------------------
def test_an_answer_larger_than_its_vectors_can_take_is_refused_before_it_fills_memory(fake):
    """Three vectors of three values cannot take 3 MB: the read stops at the request's bound."""
    fake.replies = [(200, {}, b" " * (3 * 2**20))]
    with pytest.raises(EmbeddingServerError, match=r"answered more than 1,048,864 bytes"):
        encoder(fake, retries=0).encode(["a", "b", "c"])


def _nan_for_b(body: dict) -> Reply:
    raw = base64.b64encode(np.asarray([1.0, float("nan"), 0.0], dtype="<f4").tobytes()).decode()
    data = [{"index": i, "embedding": raw if t == "b" else vector_of(t)} for i, t in enumerate(body["input"])]
    return 200, {}, {"model": MODEL, "data": data}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (_nan_for_b, r"a non-finite value \(nan\) in the vector of 'b'$"),
        (lambda body: (200, {}, {"model": MODEL, "data": []}), r"request of 2 sentence\(s\) with 0 embeddings$"),
        (
            lambda body: (200, {}, {"model": MODEL, "data": [{"index": 0, "embedding": [1.0, 2.0, 3.0]}] * 2}),
            r"indices that are not 0..1 once each$",
        ),
        (
            lambda body: (200, {}, {"model": MODEL, "data": [{"index": i, "embedding": [1.0, 2.0]} for i in range(2)]}),
            r"a 2-dimensional vector where model 'fake-embedder' gave 3 dimensions$",
        ),
        (
            lambda body: (
                200,
                {},
                {"model": MODEL, "data": [{"index": i, "embedding": "not base64!"} for i in range(2)]},
            ),
            r"an embedding that is neither a list of numbers nor base64 float32$",
        ),
        (lambda body: (200, {}, b"<html>gateway</html>"), r"answered with something other than JSON: '<html>gateway"),
    ],
)
def test_an_answer_that_cannot_be_used_fails_in_one_line(fake, reply, message):
    fake.replies = [reply]
    with pytest.raises(EmbeddingServerError, match=message):
        encoder(fake).encode(["a", "b"])


def test_dimensions_is_sent_and_a_server_that_ignores_it_is_refused(fake):
    with pytest.raises(
        EmbeddingServerError,
        match=r"ignored dimensions=2: model 'fake-embedder' returned "
        r"3-dimensional vectors; leave dimensions= out$",
    ):
        encoder(fake, dimensions=2).identity_info()
    assert fake.embedding_requests()[0]["dimensions"] == 2


# ---- the spec --------------------------------------------------------------------------------------
def test_the_spec_is_parsed_and_built_by_the_resolver(fake):
    spec = f"openai:{MODEL}?base_url={fake.url}&max_batch=16&max_concurrency=2&timeout=5&retries=1&identity=7"
    model = Resolver().get(spec)
    assert isinstance(model, OpenAIEncoder)
    assert (model.max_batch, model.max_concurrency, model.timeout, model.retries) == (16, 2, 5.0, 1)
    assert model.identity_info()["identity"] == "7"


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ("max_batch=0", InvalidInputError, "max_batch=0 must be an integer of at least 1"),
        ("max_concurrency=2.5", InvalidInputError, "max_concurrency=2.5 must be an integer of at least 1"),
        ("timeout=0", InvalidInputError, "timeout=0 must be a number of at least 0.001"),
        ("timeout=nan", InvalidInputError, "timeout=nan must be a number of at least 0.001"),
        ("max_batch=inf", InvalidInputError, "max_batch=inf must be an integer of at least 1"),
        ("base_url=ftp://host/v1", InvalidInputError, "base_url='ftp://host/v1' must be an http(s) URL"),
        ("encoding_format=int8", InvalidInputError, "encoding_format='int8' must be one of base64, float"),
        ("max_batchs=3", UnknownEncoderError, "openai has no parameter 'max_batchs'. Did you mean 'max_batch'?"),
    ],
)
def test_a_bad_spec_is_refused_before_any_request(query, error, message):
    with pytest.raises(error) as caught:
        Resolver().check(f"openai:{MODEL}?{query}")
    assert message in str(caught.value)


def test_prompts_in_the_spec_go_in_front_of_each_sentence_sent_and_into_the_identity(fake):
    from benchharness.core.prompts import DOCUMENT, QUERY

    model = Resolver().get(
        f"openai:{MODEL}?base_url={fake.url}&identity=e5&query_prompt=query:%20&document_prompt=passage:%20"
    )
    queries, documents = model.encode_role(["a cat"], QUERY), model.encode_role(["a cat"], DOCUMENT)
    np.testing.assert_array_equal(queries, [vector_of("query: a cat")])
    np.testing.assert_array_equal(documents, [vector_of("passage: a cat")])
    sent = [body["input"] for body in fake.embedding_requests() if body["input"] != [PROBE]]
    assert sent == [["query: a cat"], ["passage: a cat"]]
    assert model.identity_record()["prompts"] == {"query_prompt": "query: ", "document_prompt": "passage: "}
