"""A real OpenAI-compatible embeddings server for the tests and the benchmark of the ``openai``
family: infinity-emb serving paraphrase-MiniLM-L3-v2 from the shared Hugging Face cache (offline),
on the loopback address and a free port.

The server runs from a virtual environment of its own, which ``.ci/embedding_server_env`` creates
(``.ci/run`` calls it): infinity-emb pins sentence-transformers < 4, numpy < 2 and transformers
< 5, which the harness's own environment cannot hold. Where it is absent, ``missing_reason`` says
so and the tests that need it skip with that reason.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self

ROOT = Path(__file__).resolve().parents[1]
#: where the server's environment is: this variable, else beside the checkout (as ../shared is)
ENV_VAR = "BENCHHARNESS_EMBEDDING_SERVER_ENV"
MODEL = "sentence-transformers/paraphrase-MiniLM-L3-v2"
#: what the access log writes for each answered embeddings request
SERVED_LINE = '"POST /v1/embeddings HTTP/1.1" 200'


def serve_arguments(model: str, port: int) -> list[str]:
    """The arguments of ``infinity_emb`` that serve ``model`` as the guide's recipe shows
    (``docs/guide/retrieval-and-prompts.md``, checked against this by a test)."""
    return [
        "v2",
        "--model-id",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--url-prefix",
        "/v1",
        "--device",
        "cpu",
    ]


def server_env() -> Path:
    return Path(os.environ.get(ENV_VAR) or ROOT.parent / "embedding-server-env")


def missing_reason() -> str | None:
    """Why no server can be started here, or None."""
    program = server_env() / "bin" / "infinity_emb"
    if not program.exists():
        return (
            f"no embeddings server environment at {server_env()} (no {program.name}): run "
            f".ci/embedding_server_env to create it, or point {ENV_VAR} at one"
        )
    hub = Path(os.environ.get("HF_HUB_CACHE") or ROOT.parent / "shared" / "hf" / "hub")
    if not (hub / f"models--{MODEL.replace('/', '--')}").is_dir():
        return f"{MODEL} is not in the Hugging Face cache {hub}"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class EmbeddingServer:
    """One server process (its own process group, so that ``kill`` ends all of it at once), with
    its output in ``log``. Use as a context manager: it is up on entry and gone on exit."""

    def __init__(self, log: Path, model: str = MODEL, extra: tuple[str, ...] = ()) -> None:
        self.log, self.model, self.extra = log, model, extra
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180) -> Self:
        hub = os.environ.get("HF_HUB_CACHE") or str(ROOT.parent / "shared" / "hf" / "hub")
        env = {
            "PATH": f"{server_env() / 'bin'}:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"),
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": hub,
            "DO_NOT_TRACK": "1",
            "INFINITY_ANONYMOUS_USAGE_STATS": "0",
            "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        command = [
            str(server_env() / "bin" / "infinity_emb"),
            *serve_arguments(self.model, self.port),
            "--no-model-warmup",
            *self.extra,
        ]
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the embeddings server exited ({self.process.returncode}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the embeddings server did not answer within {timeout} s:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def requests_served(self) -> int:
        """Embeddings requests answered so far, from the access log."""
        return self.log.read_text(errors="replace").count(SERVED_LINE) if self.log.exists() else 0

    def kill(self) -> None:
        """The server dies (SIGKILL to its process group): no goodbye to the requests in flight."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def kill_after(self, requests: int) -> threading.Thread:
        """Kill the server, from a thread, once it has answered ``requests`` embeddings requests."""

        def watch() -> None:
            while self.process is not None and self.process.poll() is None:
                if self.requests_served() >= requests:
                    self.kill()
                    return
                time.sleep(0.005)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
