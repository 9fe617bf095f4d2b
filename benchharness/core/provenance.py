"""What produced a number: the harness version, the git commit of its code, library versions, time.

One "dirty" rule for everything that records a commit (results and training manifests): the code
is dirty when a tracked file under the code folders differs from HEAD. Results, runs and caches
written by the harness itself never make it dirty, and untracked scratch files do not either.
"""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from typing import TypedDict

from benchharness.core.checkout import CHECKOUT
from benchharness.core.version import __version__

#: the folders (and files) whose state defines the code that computed a number
CODE_PATHS = ("benchharness", "encoders", "tasks", "pyproject.toml")
#: libraries whose versions every result and manifest records
LIBRARIES = ("torch", "transformers", "sentence-transformers", "numpy", "scipy", "scikit-learn", "faiss-cpu")


class GitState(TypedDict):
    commit: str | None
    dirty: bool


@functools.cache
def git_state() -> GitState:
    """The checkout's commit and whether its code differs from it; cached, so a long training run
    records the code this process loaded, not what the checkout holds hours later. Installed from a
    wheel there is no checkout, and no commit."""
    if CHECKOUT is None:
        return {"commit": None, "dirty": False}
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=CHECKOUT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS],
            cwd=CHECKOUT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": False}
    return {"commit": commit, "dirty": bool(changed)}


def git_commit() -> str | None:
    """The commit with a ``-dirty`` suffix when the code differs from it (None outside a checkout)."""
    state = git_state()
    if state["commit"] is None:
        return None
    return state["commit"] + ("-dirty" if state["dirty"] else "")


def library_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for lib in LIBRARIES:
        try:
            out[lib] = importlib_metadata.version(lib)
        except importlib_metadata.PackageNotFoundError:
            out[lib] = None
    return out


def versions() -> dict[str, str | None]:
    """Everything a result records about the software that computed it."""
    return {
        "benchharness": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        **library_versions(),
        "git_commit": git_commit(),
    }


def now() -> str:
    """UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")
