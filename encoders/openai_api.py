"""The ``openai`` family: any server that speaks OpenAI's ``POST /v1/embeddings`` (OpenAI itself,
infinity, vLLM, llama.cpp's server, text-embeddings-inference, LiteLLM...), as
``openai:<model>?base_url=http://127.0.0.1:7997/v1&max_concurrency=8``.

Spec keys: ``base_url`` (default OpenAI's), ``api_key_env`` (the environment variable holding the
API key: ``OPENAI_API_KEY`` by default for OpenAI's URL only, so that a key meant for OpenAI is
never sent to another server unasked), ``max_batch`` (sentences per request, 256), ``max_concurrency``
(requests in flight at once, 4), ``timeout`` (seconds a request may wait for an answer, 60),
``retries`` (extra tries of a request answered 429 or 5xx, or unanswered, 4), ``dimensions`` (asked
of models that can shorten their vectors; a server that ignores it is refused), ``encoding_format``
(``base64``, the default, or ``float``: the same float32 values either way), ``identity`` (see
below), and the prompt keys every prompt-taking family takes (``prompt``, ``query_prompt``...: text put
in front of each sentence before it is sent, for models served without their prompts).

Identity. A server tells us less than a checkpoint does: the model's name, and at most a revision
(``revision`` or ``model_sha`` in its ``/models`` entry), never the weights. Before encoding, the
encoder asks ``GET /models`` (the model must be listed, where the server lists models) and sends one
probe sentence, whose answer gives the name the server served it under (OpenAI once answered
``text-embedding-ada-002-v2`` for ``text-embedding-ada-002``) and the width. Every later answer must
name the same model, or the encoding fails: the model changed under the run. The identity is then

* pinned by the server when it reports a revision (name + revision + width);
* pinned by the user with ``identity=<label>``: their promise that the name stands for fixed
  weights (name + label + width), as ``identity=`` pins a plain callable;
* otherwise unpinned: the name is all we know, and the weights behind it can change between two
  runs unnoticed (a redeployed server, a hosted model updated in place). Such vectors are tied to
  this encoder object alone (a fresh token in the identity), so a later run never reuses them from
  the embedding cache (which such an encoder is not put through: ``cacheable``) or a stored
  result; a warning says how to pin them.

The server's address goes into the metadata (scheme, host and port only), never into the
identity: the same weights served elsewhere are the same encoder. The API key goes nowhere.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from benchharness.core.encoder import Encoder, length_sorted_batches
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import shown
from benchharness.core.specs import BuildContext, EncoderSpec, Family, Params
from benchharness.encoders.openai_client import Client, EmbeddingServerError, decode_embedding, host_of, shown_url

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: the key variable used when none is named, and only for this host (OpenAI's)
DEFAULT_KEY_ENV, DEFAULT_KEY_HOST = "OPENAI_API_KEY", "api.openai.com"
ENCODING_FORMATS = ("base64", "float")
#: the sentence sent once, before encoding, to learn the served model's name and width
PROBE = "The identity probe of benchharness."
#: fields of a ``/models`` entry that name the weights' version (TEI's ``model_sha``), in preference order
REVISION_FIELDS = ("revision", "model_sha")
#: fields of a ``/models`` entry kept as description (not identity): they say who serves it, and how
DESCRIPTIVE_FIELDS = ("owned_by", "backend", "root")


def _positive(spec: EncoderSpec | dict[str, Any], key: str, kind: type, default: Any, minimum: float = 1) -> Any:
    """``spec[key]`` as a ``kind`` of at least ``minimum`` (``default`` when absent), else one line."""
    value = spec.get(key, default)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)  # nan passed the bound, inf broke int(): both are refused here
        or (kind is not float and value != int(value))
        or value < minimum
    ):
        what = "an integer" if kind is int else "a number"
        raise InvalidInputError(f"openai: {key}={value!r} must be {what} of at least {minimum:g}")
    return kind(value)


def check(spec: EncoderSpec | dict[str, Any]) -> None:
    """Every spec value checked without a request: URL, numbers, encoding, the key variable."""
    base_url = str(spec.get("base_url", DEFAULT_BASE_URL))
    parts = urlsplit(base_url)
    if parts.username is not None or parts.password is not None:
        raise InvalidInputError(
            f"openai: base_url={shown_url(base_url)!r} holds a user name or password (not shown): put the "
            "key in an environment variable and name it with api_key_env=; the URL names the encoder, "
            "its results and its cache, so it must hold no secret"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            f"openai: base_url={base_url!r} must be an http(s) URL such as http://127.0.0.1:7997/v1"
        )
    try:
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise InvalidInputError(f"openai: base_url={base_url!r} has a port that is not a number") from None
    for key, kind, default, minimum in (
        ("max_batch", int, 256, 1),
        ("max_concurrency", int, 4, 1),
        ("retries", int, 4, 0),
        ("dimensions", int, None, 1),
        ("timeout", float, 60.0, 1e-3),
    ):
        _positive(spec, key, kind, default, minimum)
    if spec.get("encoding_format", "base64") not in ENCODING_FORMATS:
        raise InvalidInputError(
            f"openai: encoding_format={spec.get('encoding_format')!r} must be one of {', '.join(ENCODING_FORMATS)}"
        )
    key_env = spec.get("api_key_env")
    if key_env is not None:
        if not isinstance(key_env, str) or not key_env:
            raise InvalidInputError(f"openai: api_key_env={key_env!r} must name an environment variable")
        if not os.environ.get(key_env):
            raise InvalidInputError(
                f"openai: api_key_env={key_env} names an environment variable that is not set; "
                f"export {key_env}=<your key>"
            )
    given = spec.get("identity")
    if given is not None and not str(given).strip():
        raise InvalidInputError("openai: identity= must not be empty; give a label that names the weights")


@dataclass(frozen=True)
class Served:
    """What the server said of the model, once, before encoding."""

    model: str
    width: int
    revision: str | None
    described: dict[str, Any]


class OpenAIEncoder(Encoder):
    """Sentences sent to an OpenAI-compatible ``/embeddings`` route, ``max_batch`` per request and
    up to ``max_concurrency`` requests at once (threads: the time is the server's, not ours);
    longest sentences first, so a request holds sentences of similar length (less padding on a
    server that pads per request). Rows come back in input order, by each answer's ``index``."""

    def __init__(
        self,
        name: str,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str | None = None,
        max_batch: int = 256,
        max_concurrency: int = 4,
        timeout: float = 60.0,
        retries: int = 4,
        dimensions: int | None = None,
        encoding_format: str = "base64",
        identity: str | None = None,
    ) -> None:
        super().__init__(name)
        settings = {
            "base_url": base_url,
            "api_key_env": api_key_env,
            "max_batch": max_batch,
            "max_concurrency": max_concurrency,
            "timeout": timeout,
            "retries": retries,
            "dimensions": dimensions,
            "encoding_format": encoding_format,
            "identity": identity,
        }
        check(settings)
        self.model = str(model)
        self.base_url = str(base_url).rstrip("/")
        self.api_key_env = api_key_env or (
            DEFAULT_KEY_ENV if urlsplit(self.base_url).hostname == DEFAULT_KEY_HOST else None
        )
        self.max_batch = _positive(settings, "max_batch", int, 256)
        self.max_concurrency = _positive(settings, "max_concurrency", int, 4)
        self.timeout = _positive(settings, "timeout", float, 60.0, 1e-3)
        self.retries = _positive(settings, "retries", int, 4, 0)
        self.dimensions = _positive(settings, "dimensions", int, None)
        self.encoding_format = encoding_format
        self.given_identity = None if identity is None else str(identity)
        self._served: Served | None = None
        self._unnamed_warned = False  # the warning that answers name no model, given once
        #: what ties an unpinned encoder's vectors to this object alone (see the module docstring)
        self._token = uuid.uuid4().hex

    def _client(self) -> Client:
        return Client(self.base_url, self.api_key_env, self.timeout, self.retries)

    @property
    def where(self) -> str:
        return shown_url(self.base_url)

    # ---- what the server serves ------------------------------------------------------------------
    def served(self) -> Served:
        """The model's name, width and revision as the server gives them (asked once)."""
        if self._served is None:
            self._served = self._ask_server()
        return self._served

    def _ask_server(self) -> Served:
        client = self._client()
        listing = client.get_models()
        entry = self._listed(listing) if listing is not None else None
        body = self._body([PROBE])
        answer = client.post_embeddings(body)
        served_as = answer.get("model")
        model = served_as if isinstance(served_as, str) and served_as else self.model
        width = self._rows(answer, [PROBE], None, None).shape[1]
        if self.dimensions is not None and width != self.dimensions:
            raise EmbeddingServerError(
                f"the embeddings server at {self.where} ignored dimensions={self.dimensions}: "
                f"model {model!r} returned {width}-dimensional vectors; leave dimensions= out"
            )
        entry = entry or {}
        revision = next((str(entry[f]) for f in REVISION_FIELDS if entry.get(f)), None)
        described = {f: entry[f] for f in DESCRIPTIVE_FIELDS if isinstance(entry.get(f), str | int | float)}
        if revision is None and self.given_identity is None:
            logger.warning(
                "%s: the server at %s reports no revision of model %r, so nothing pins the weights behind "
                "the name: its vectors and results are tied to this run and never reused; add "
                "identity=<label> to the spec to promise that the name stands for fixed weights",
                self.name,
                self.where,
                model,
            )
        return Served(model, width, revision, described)

    def _listed(self, listing: dict[str, Any]) -> dict[str, Any] | None:
        """This model's entry in a ``/models`` answer; an answer that lists others but not it is
        refused (a server with one model may serve it under any requested name: infinity does)."""
        data = listing.get("data")
        if not isinstance(data, list):
            return None
        entries = [e for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)]
        found = next((e for e in entries if e["id"] == self.model), None)
        if found is None and entries:
            names = ", ".join(e["id"] for e in entries[:10]) + (" ..." if len(entries) > 10 else "")
            raise EmbeddingServerError(
                f"the embeddings server at {self.where} serves no model {self.model!r} (GET /models lists: {names})"
            )
        return found

    # ---- encoding --------------------------------------------------------------------------------
    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        from tqdm.auto import tqdm

        served = self.served()
        out = np.empty((len(sentences), served.width), dtype=np.float32)
        if not sentences:
            return out
        batches = list(length_sorted_batches([len(s) for s in sentences], self.max_batch))
        client = self._client()
        pool = ThreadPoolExecutor(
            max_workers=min(self.max_concurrency, len(batches)), thread_name_prefix="openai-embeddings"
        )
        futures = {pool.submit(self._encode_batch, client, [sentences[i] for i in idx], served): idx for idx in batches}
        try:
            for future in tqdm(
                as_completed(futures),
                total=len(futures),
                desc=f"encode {self.name}",
                disable=not shown(),
                unit="request",
            ):
                out[futures[future]] = future.result()
        except BaseException as exc:
            # the pass has failed (or was interrupted): no retry waits on, nothing queued is sent, and
            # the requests in flight are cut, so their threads end now (the process can exit)
            client.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            if isinstance(exc, EmbeddingServerError):  # its words may quote the server's, key and all
                raise EmbeddingServerError(client.redacted(str(exc))) from None
            raise
        pool.shutdown()
        return out

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.encoding_format != "float":  # OpenAI's default; a server without base64 still answers floats
            body["encoding_format"] = self.encoding_format
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body

    def _encode_batch(self, client: Client, texts: list[str], served: Served) -> np.ndarray:
        try:
            answer = client.post_embeddings(self._body(texts), served.width)
        except EmbeddingServerError as exc:
            if "" in texts and "refused the request" in str(exc):
                raise EmbeddingServerError(
                    f"{exc} (the request held an empty sentence, which some servers refuse)"
                ) from None
            raise
        served_as = answer.get("model")
        if not (isinstance(served_as, str) and served_as) and not self._unnamed_warned:
            self._unnamed_warned = True
            logger.warning(
                "%s: the server's answers name no model: that the model stays %r through the run cannot be checked",
                self.where,
                served.model,
            )
        if isinstance(served_as, str) and served_as and served_as != served.model:
            raise EmbeddingServerError(
                f"the embeddings server at {self.where} answered with model {served_as!r}, "
                f"not {served.model!r} as at the start of this run: the model changed "
                "under the run"
            )
        return self._rows(answer, texts, served.width, served.model)

    def _rows(self, answer: dict[str, Any], texts: list[str], width: int | None, model: str | None) -> np.ndarray:
        """The answer's vectors as a float32 (len(texts), width) array in input order, or one line
        saying what is wrong with the answer."""
        bad = f"the embeddings server at {self.where} answered a request of {len(texts)} sentence(s) with"
        data = answer.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            got = f"{len(data)} embeddings" if isinstance(data, list) else "no 'data' list"
            raise EmbeddingServerError(f"{bad} {got}")
        indices = [item.get("index") if isinstance(item, dict) else None for item in data]
        if all(i is None for i in indices):
            indices = list(range(len(data)))  # no index given: the order of the inputs
        order = [i if isinstance(i, int) and not isinstance(i, bool) else -1 for i in indices]
        if sorted(order) != list(range(len(texts))):
            raise EmbeddingServerError(f"{bad} indices that are not 0..{len(texts) - 1} once each")
        rows = np.empty((len(texts), width or 0), dtype=np.float32) if width else None
        for item, index in zip(data, order):
            vector = decode_embedding(item.get("embedding"))
            if vector is None or not len(vector):
                raise EmbeddingServerError(f"{bad} an embedding that is neither a list of numbers nor base64 float32")
            if rows is None:
                width = len(vector)
                rows = np.empty((len(texts), width), dtype=np.float32)
            if len(vector) != width:
                raise EmbeddingServerError(
                    f"{bad} a {len(vector)}-dimensional vector where model "
                    f"{model or self.model!r} gave {width} dimensions"
                )
            if not np.isfinite(vector).all():
                first = next(float(v) for v in vector if not math.isfinite(v))
                shown_text = texts[index] if len(texts[index]) <= 60 else texts[index][:57] + "..."
                raise EmbeddingServerError(f"{bad} a non-finite value ({first}) in the vector of {shown_text!r}")
            rows[index] = vector
        assert rows is not None
        return rows

    # ---- identity --------------------------------------------------------------------------------
    @property
    def pinned(self) -> bool:
        """Whether a revision or the user's ``identity=`` ties the name to fixed weights (asks the
        server when it has not been asked yet)."""
        return self.given_identity is not None or self.served().revision is not None

    @property
    def cacheable(self) -> bool:
        """Unpinned vectors are never reused (their identity is this object's), so the embedding
        cache is left out rather than filled with a database no run will read."""
        return self.pinned

    def identity_info(self) -> dict[str, Any]:
        served = self.served()
        info: dict[str, Any] = {"family": "openai", "model": served.model, "dimensions": served.width}
        if served.model != self.model:
            info["requested_model"] = self.model
        if served.revision is not None:
            info["revision"] = served.revision
        if self.given_identity is not None:
            info["identity"] = self.given_identity
        if not self.pinned:
            info["unpinned"] = self._token
        return info

    @property
    def metadata(self) -> dict[str, Any]:
        revision = self._served.revision if self._served is not None else None
        facts: dict[str, Any] = {
            **super().metadata,
            "base_model": self.model,
            "server": host_of(self.base_url),
            "pinned": self.given_identity is not None or revision is not None,
            "max_batch": self.max_batch,
            "max_concurrency": self.max_concurrency,
            "encoding_format": self.encoding_format,
        }
        if self._served is not None:
            facts.update(
                served_model=self._served.model,
                dimensions=self._served.width,
                **({"server_model": self._served.described} if self._served.described else {}),
            )
        return facts

    def __repr__(self) -> str:
        return f"OpenAIEncoder({self.name!r}, model={self.model!r}, server={host_of(self.base_url)!r})"


def build(name: str, spec: Params, context: BuildContext) -> OpenAIEncoder:
    """The resolver's ``batch_size`` and ``device`` are a local model's: a server has its own."""
    return OpenAIEncoder(name, **spec)


FAMILY = Family.of(
    "openai", build, usage="openai:<model>?base_url=...", accepts=OpenAIEncoder, check=check, takes_prompts=True
)
