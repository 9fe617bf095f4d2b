"""The HTTP side of the ``openai`` family: one ``/embeddings`` or ``/models`` request to an
OpenAI-compatible server, with the retries and the one-line errors a long evaluation needs.

Why the standard library (``urllib``) and not an HTTP client package: a request here is one POST of
a JSON body, the dependency would be for every user of the harness, and the encoder's threads
(``openai_api``) already give the concurrency. Each request opens its own connection.

What is retried, as OpenAI's own client retries: 429 (rate limited) and 5xx answers, a connection
refused, reset or closed without an answer, and a request that timed out; each waits
``backoff(try)`` seconds (exponential, with jitter) or what the server's ``Retry-After`` asks for.
Anything else (400, 401, 404...) is the user's to fix and fails at once. Every failure is an
``EmbeddingServerError``: one line naming the server, what happened and what to check.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import http.client
import json
import logging
import os
import random
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from benchharness.core.errors import UserError

logger = logging.getLogger(__name__)

#: the longest wait between two tries: a Retry-After beyond it is cut to it (with a warning)
MAX_WAIT_S = 60.0
#: the server's own words quoted in an error are cut to this many characters
QUOTE_CHARS = 300
#: bytes a row of an embeddings answer may take per dimension (a float as JSON text, with room to
#: spare; base64 takes under 6); an answer beyond its bound is refused before it fills memory
BYTES_PER_VALUE = 32
#: the widest embedding assumed before the server has said (the first request of a run)
MAX_DIMENSIONS = 65536
#: what an answer may take besides its rows, and the bound of a ``/models`` listing
ANSWER_SLACK = 2**20
LISTING_BYTES = 16 * 2**20


def answer_bound(rows: int, dimensions: int | None) -> int:
    """The most bytes an embeddings answer of ``rows`` vectors may take."""
    return rows * (dimensions or MAX_DIMENSIONS) * BYTES_PER_VALUE + ANSWER_SLACK


class EmbeddingServerError(UserError):
    """The embeddings server could not be reached, refused a request or answered nonsense."""


def host_of(base_url: str) -> str:
    """``scheme://host:port`` of ``base_url``, without user name, password, path or query: what a
    result may record of the server (a URL can carry credentials)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), "", "", ""))


def shown_url(base_url: str) -> str:
    """``base_url`` without user name and password, for messages."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, host_of(base_url).split("://", 1)[1], parts.path, "", ""))


def backoff(attempt: int) -> float:
    """Seconds before try ``attempt + 1`` after ``attempt`` failed tries: 0.5, 1, 2, 4... up to
    30, each stretched by up to a quarter so that concurrent requests do not retry in step."""
    return min(30.0, 0.5 * 2 ** (attempt - 1)) * (1 + random.random() / 4)


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """The wait a 429 or 503 answer asks for: ``retry-after-ms`` (OpenAI), or ``Retry-After`` in
    seconds or as an HTTP date; None when there is none (or it cannot be read)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _server_words(body: bytes) -> str:
    """The message in an error body (OpenAI's ``error.message``, FastAPI's ``detail``), else the
    body itself, on one line and cut short."""
    text = body.decode("utf8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        found = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
        found = found or parsed.get("detail") or parsed.get("message")
        if found:
            text = found if isinstance(found, str) else json.dumps(found)
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "..."


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit: what the API key is bound to."""
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


class _CrossOrigin(Exception):
    """A redirect to another origin, which the key must never follow."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the server's origin; refuses one to another (scheme, host, port),
    where urllib would send the ``Authorization`` header too (httpx, OpenAI's client, drops it)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if origin(newurl) != origin(req.full_url):
            fp.close()
            raise _CrossOrigin(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Wire:
    """The socket of one request in flight, cut (shut down) when its time is up or the run is
    cancelled: a server that answers a byte at a time defeats a per-read timeout, and a blocked
    read ends only when its socket does."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.cut = False
        self.lock = threading.Lock()

    def attach(self, sock: socket.socket) -> None:
        with self.lock:
            self.sock = sock
            if self.cut:
                self._shut()

    def sever(self) -> None:
        with self.lock:
            self.cut = True
            self._shut()

    def _shut(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):  # already closed
                self.sock.shutdown(socket.SHUT_RDWR)


#: the wire of the request this thread is making (its connection attaches its socket to it)
_CURRENT = threading.local()


class _WiredHTTP(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _CURRENT.wire.attach(self.sock)


class _WiredHTTPS(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _CURRENT.wire.attach(self.sock)


class _WiredHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WiredHTTP, req)


class _WiredHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WiredHTTPS, req, context=self._context)  # type: ignore[attr-defined]


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_SameOriginRedirects, _WiredHTTPHandler, _WiredHTTPSHandler)


@dataclass
class _Failure:
    """One failed try: whether another may follow, how long it should wait, and the message."""

    retry: bool
    message: str
    wait: float | None = None


@dataclass
class Client:
    """Requests to one server. The API key is read from the environment variable
    ``api_key_env`` at each request and kept nowhere else (not in the object, so not in a pickle,
    a repr or a result)."""

    base_url: str
    api_key_env: str | None = None
    timeout: float = 60.0
    retries: int = 4
    #: set to stop every retry loop at once (the encoder sets it when one batch failed for good)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self._opener = _opener()
        self._wires: set[_Wire] = set()
        self._wires_lock = threading.Lock()

    def redacted(self, text: str) -> str:
        """``text`` with the API key replaced, wherever a server echoed it back into its words."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return text.replace(key, "<the key in $" + str(self.api_key_env) + ">") if key else text

    def cancel(self) -> None:
        """Stop every retry loop and cut every request in flight now (a failed pass, Ctrl-C): the
        threads making them end at once instead of at their deadline."""
        self.stop.set()
        with self._wires_lock:
            wires = list(self._wires)
        for wire in wires:
            wire.sever()

    def post_embeddings(self, body: dict[str, Any], dimensions: int | None = None) -> dict[str, Any]:
        """The parsed answer of ``POST {base_url}/embeddings`` with ``body``, whose rows have
        ``dimensions`` values (None: not known yet), read up to ``answer_bound`` bytes."""
        return self._request("POST", "/embeddings", body, limit=answer_bound(len(body["input"]), dimensions))

    def get_models(self) -> dict[str, Any] | None:
        """The server's ``GET /models`` list, or None when it has no such route (404, 405) or does not
        show it to this key (401, 403: OpenAI's restricted keys may embed without listing models;
        a key that cannot embed either is refused by the embeddings request that follows)."""
        try:
            return self._request("GET", "/models", None, absent_ok=True, limit=LISTING_BYTES)
        except _Absent:
            return None

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "benchharness"}
        if has_body:
            headers["Content-Type"] = "application/json"
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, absent_ok: bool = False, limit: int = LISTING_BYTES
    ) -> dict[str, Any]:
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode()
        where = shown_url(url)
        attempt = 0
        while True:
            attempt += 1
            failure = self._try(method, url, data, where, absent_ok, limit)
            if isinstance(failure, dict):
                return failure
            failure.message = self.redacted(failure.message)
            if not failure.retry or attempt > self.retries:
                tries = f" ({attempt} tries)" if failure.retry and attempt > 1 else ""
                raise EmbeddingServerError(failure.message + tries)
            wait = backoff(attempt) if failure.wait is None else failure.wait
            if wait > MAX_WAIT_S:
                logger.warning("%s: the server asks to wait %.0f s; waiting %.0f s", where, wait, MAX_WAIT_S)
                wait = MAX_WAIT_S
            logger.warning(
                "%s; retrying in %.1f s (try %d of %d)", failure.message, wait, attempt + 1, self.retries + 1
            )
            if self.stop.wait(wait):
                raise EmbeddingServerError(failure.message + " (given up: another request failed)")

    def _try(
        self, method: str, url: str, data: bytes | None, where: str, absent_ok: bool, limit: int
    ) -> dict[str, Any] | _Failure:
        """One try: the parsed JSON answer, or what went wrong."""
        request = urllib.request.Request(url, data=data, method=method, headers=self._headers(data is not None))
        wire = _Wire()
        _CURRENT.wire = wire
        with self._wires_lock:
            self._wires.add(wire)
        # ``timeout`` bounds the whole request, not each read: the wire is cut when it is up
        deadline = threading.Timer(self.timeout, wire.sever)
        deadline.daemon = True
        deadline.start()
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                raw = answer.read(limit + 1)
        except _CrossOrigin as exc:
            return _Failure(
                False,
                f"the embeddings server at {where} redirects to another origin ({shown_url(exc.target)}); "
                "the request and its API key are not sent there: give that address as base_url if you trust it",
            )
        except urllib.error.HTTPError as exc:
            if wire.cut:
                return self._ended(where)
            return self._http_failure(exc, where, absent_ok)
        except TimeoutError:
            return self._ended(where)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError) or wire.cut:
                return self._ended(where)
            # refused, reset, unreachable: the server may come back; a name that does not resolve or a
            # certificate that does not verify will not
            transient = isinstance(reason, OSError) and not isinstance(reason, socket.gaierror | ssl.SSLError)
            return _Failure(transient, f"cannot reach the embeddings server at {where} ({_reason(reason)})")
        except (http.client.HTTPException, ConnectionError, OSError) as exc:  # closed mid-answer, reset
            if wire.cut:
                return self._ended(where)
            return _Failure(True, f"cannot reach the embeddings server at {where} ({_reason(exc)})")
        finally:
            deadline.cancel()
            with self._wires_lock:
                self._wires.discard(wire)
        if wire.cut:  # an answer without a length, cut short
            return self._ended(where)
        if not raw:  # a 2xx with nothing in it: a server that died as it answered, so try again
            return _Failure(True, f"cannot reach the embeddings server at {where} (it closed without an answer)")
        if len(raw) > limit:
            return _Failure(
                False,
                f"the embeddings server at {where} answered more than {limit:,} bytes, more than the request's "
                "vectors can take; is base_url an embeddings server?",
            )
        try:
            parsed = json.loads(raw)
        except ValueError:
            return _Failure(
                False,
                f"the embeddings server at {where} answered with something other than JSON: {_server_words(raw)!r}",
            )
        if not isinstance(parsed, dict):
            return _Failure(
                False, f"the embeddings server at {where} answered with a JSON {type(parsed).__name__}, not an object"
            )
        return parsed

    def _ended(self, where: str) -> _Failure:
        """A request cut at its deadline (retried), or by ``cancel`` (not)."""
        if self.stop.is_set():
            return _Failure(False, f"the request to the embeddings server at {where} was cancelled")
        return _Failure(True, f"the embeddings server at {where} did not answer within {self.timeout:g} s (timeout=)")

    def _http_failure(self, exc: urllib.error.HTTPError, where: str, absent_ok: bool) -> _Failure:
        try:
            words = _server_words(exc.read())
        except (OSError, http.client.HTTPException):
            words = ""
        status = f"{exc.code} {exc.reason}".strip()
        said = f": {words}" if words else ""
        if absent_ok and exc.code in (401, 403, 404, 405):
            raise _Absent
        if exc.code == 429 or exc.code >= 500:
            return _Failure(True, f"the embeddings server at {where} answered {status}{said}", retry_after(exc.headers))
        if exc.code in (401, 403):
            hint = (
                f"set the environment variable {self.api_key_env} to a valid key"
                if self.api_key_env
                else "name the environment variable holding the key with api_key_env="
            )
            return _Failure(False, f"the embeddings server at {where} refused the request ({status}{said}); {hint}")
        if exc.code == 404:
            return _Failure(
                False,
                f"the embeddings server at {where} answered {status}{said}; check base_url (it "
                "usually ends in /v1) and the model name",
            )
        return _Failure(False, f"the embeddings server at {where} refused the request ({status}{said})")


class _Absent(Exception):
    """A route the server does not have (only ``get_models`` asks for this)."""


def _reason(reason: Any) -> str:
    """An exception as a short phrase: ``Connection refused``, not ``[Errno 111] Connection refused``."""
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    text = str(reason) or type(reason).__name__
    return " ".join(text.split())


def decode_embedding(value: Any) -> np.ndarray | None:
    """One ``data[i].embedding``: a list of numbers, or base64 of little-endian float32 (what
    ``encoding_format=base64`` returns); None when it is neither."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            return None
        if len(raw) % 4:
            return None
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if isinstance(value, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        return np.asarray(value, dtype=np.float32)
    return None
