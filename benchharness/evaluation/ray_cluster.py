"""Ray, for sweeps and sharded encoding: joined where a session is already open (a notebook, a test
cluster), else started (locally, or at ``address``) and shut down whatever happens.

Ray reports usage statistics to its makers unless told not to; machines without internet stall on
it, so it is told not to. Workers get the driver's working folder (where ``benchharness.toml`` and
relative paths point) and its settings of this harness and of the Hugging Face libraries.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from benchharness.core.errors import UserError

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


@contextlib.contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """The ``ray`` module with a session open; one this function opened is closed on the way out."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    try:
        ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                 logging_level="warning", runtime_env={"env_vars": worker_environment()})
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
