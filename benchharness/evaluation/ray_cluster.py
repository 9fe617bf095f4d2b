"""Ray, for sweeps and sharded encoding: joined where a session is already open (a notebook, a test
cluster), else started (locally, or at ``address``) and shut down whatever happens.

Ray reports usage statistics to its makers unless told not to; machines without internet stall on
it, so it is told not to. Workers get the driver's working folder (where ``benchharness.toml`` and
relative paths point) and its settings of this harness and of the Hugging Face libraries.

A cluster at an address must accept a connection to its head within ``CONNECT_TIMEOUT`` (10 s);
otherwise the session fails with one line naming the address (``ray.init`` alone would retry forever).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchharness.core.errors import InvalidInputError, UserError

#: environment a worker needs to resolve names as the driver does
_PASSED_ON = ("BENCHHARNESS_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "NLTK_DATA", "PYTHONPATH")


def import_ray() -> Any:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise UserError("Ray is not installed; install the extra: pip install 'benchharness[distributed]'") from None
    return ray


def worker_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ON)} | {"RAY_USAGE_STATS_ENABLED": "0"}


#: seconds a Ray cluster's head has to accept a connection before it counts as unreachable
CONNECT_TIMEOUT = 10.0
#: addresses that name no host: Ray finds (``auto``) or starts (``local``) the cluster itself
_NO_HOST = ("auto", "local")
#: an HTTP/2 client preface and an empty SETTINGS frame: a Ray head (its GCS, or the Ray client server of
#: ray://) speaks gRPC, over HTTP/2, and answers with its own SETTINGS frame (frame type 4)
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse an ``--address`` that is no ``host:port``, or where no Ray head answers within ``timeout``
    seconds (no connection, or no gRPC answer to an HTTP/2 preface): ``ray.init`` itself keeps
    retrying such an address without end (a run printed nothing for ten minutes), so it is asked
    only once a head answers there."""
    if address in _NO_HOST:
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInputError(f"Ray address {address!r} is not host:port (or ray://host:port, auto, local)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
            conn.sendall(_H2_PREFACE)
            answer = b""  # the server's preface: a SETTINGS frame, its type the 4th byte of its header
            while len(answer) < 4 and (chunk := conn.recv(9 - len(answer))):
                answer += chunk
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise UserError(
            f"cannot reach a Ray cluster at {address!r}: {reason} (its head must answer within {timeout:g} s)"
        ) from None
    if len(answer) < 4 or answer[3] != _H2_SETTINGS:
        raise UserError(
            f"cannot reach a Ray cluster at {address!r}: something answers there, but not a Ray head "
            "(no gRPC); give the address of the head's GCS port (6379 unless set)"
        )


@contextlib.contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """The ``ray`` module with a session open; one this function opened is closed on the way out.
    An ``address`` (else ``RAY_ADDRESS``) is checked first (:func:`check_reachable`), so an unreachable one fails in
    seconds with one line instead of hanging."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    target = address or os.environ.get("RAY_ADDRESS")  # ray.init reads RAY_ADDRESS when given none
    if target:
        check_reachable(target)
    try:
        ray.init(
            address=address,
            num_cpus=None if address else num_cpus,
            include_dashboard=False,
            logging_level="warning",
            runtime_env={"env_vars": worker_environment()},
        )
    except ConnectionError as exc:
        raise UserError(f"cannot reach a Ray cluster at {address!r}: {exc}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def slot(ray: Any) -> dict[str, float]:
    """What one unit of work asks for: a GPU when the cluster has one, else a CPU."""
    return {"num_gpus": 1} if ray.cluster_resources().get("GPU", 0) >= 1 else {"num_cpus": 1}


def enter_driver_folder(folder: str) -> None:
    """Work where the driver works when this node sees that folder (one host, or a shared file
    system mounted at the same path); elsewhere names resolve from this node's own folder."""
    if Path(folder).is_dir():
        os.chdir(folder)
