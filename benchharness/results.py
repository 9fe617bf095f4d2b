"""One JSON file per (encoder, task), written atomically, with everything needed to reproduce it.

Layout: ``<results_dir>/<encoder slug>/<task>.json``. Top-level keys follow mteb's results files in
spirit: ``encoder``, ``task``, ``main_score`` (x100), ``metrics`` (every metric, x100 for scores),
then the protocol variant, the encoder's identity and metadata, the data checksum, versions, seed,
timings and date.

Existing results are never silently replaced; the overwrite strategy decides:
``reuse`` keeps any stored result, ``stale`` recomputes those whose encoder identity, data digest
or protocol differ from the current ones, ``always`` recomputes everything.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Iterator

from benchharness import __version__

OVERWRITE = ("reuse", "stale", "always")
LIBRARIES = ("torch", "transformers", "sentence-transformers", "numpy", "scipy", "scikit-learn", "faiss-cpu")


def slug(name: str) -> str:
    """A file-system-safe folder name for an encoder name or spec."""
    return re.sub(r"[^A-Za-z0-9._+=,()-]+", "_", name).strip("_")[:150] or "encoder"


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"benchharness": __version__, "python": sys.version.split()[0],
                                  "platform": platform.platform()}
    for lib in LIBRARIES:
        try:
            out[lib] = importlib_metadata.version(lib)
        except importlib_metadata.PackageNotFoundError:
            out[lib] = None
    out["git_commit"] = git_commit()
    return out


def git_commit() -> str | None:
    """The harness checkout's commit (with ``-dirty``), when it runs from a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Result:
    encoder: str
    task: str
    main_score: float
    main_metric: str
    metrics: dict[str, Any]
    protocol: dict[str, Any]
    encoder_identity: dict[str, Any]
    encoder_metadata: dict[str, Any]
    data: dict[str, Any]
    seed: int
    timings: dict[str, float]
    versions: dict[str, Any]
    date: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def fingerprint(self) -> tuple[str, str, str]:
        """What must match for a stored result to stand for a fresh one."""
        return fingerprint(self.encoder_identity.get("hash", ""), self.data.get("sha256", ""), self.protocol)


def fingerprint(identity: str, data_sha256: str, protocol: dict[str, Any]) -> tuple[str, str, str]:
    return identity, data_sha256, json.dumps(protocol, sort_keys=True, default=str)


class ResultStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, encoder: str, task: str) -> Path:
        return self.root / slug(encoder) / f"{task}.json"

    def load(self, encoder: str, task: str) -> Result | None:
        p = self.path(encoder, task)
        return read_result(p) if p.exists() else None

    def save(self, result: Result) -> Path:
        """Write to a temporary file in the same folder, fsync, then rename: never a half file."""
        p = self.path(result.encoder, result.task)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(result.to_dict(), fh, indent=2, sort_keys=False, default=str)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return p

    def __iter__(self) -> Iterator[Result]:
        for p in sorted(self.root.glob("*/*.json")):
            yield read_result(p)


def read_result(path: Path) -> Result:
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: corrupt result file ({exc.msg}); delete it to recompute") from None
    try:
        return Result(**raw)
    except TypeError as exc:
        raise ValueError(f"{path}: not a benchharness result ({exc})") from None
