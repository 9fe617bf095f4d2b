"""Atomic file and folder writes: a reader, or a run killed mid-write, never sees half a file.

Everything the harness keeps (results, cache shards, run manifests, checkpoints, saved models) is
written through here: to a temporary sibling, flushed to disk, then renamed over the target in one
step. Temporary files get the permissions an ordinary ``open`` would give (``0666`` less the
umask), not ``mkstemp``'s private ``0600``, so that shared results and caches stay readable.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from benchharness.core.errors import InvalidInputError


def _renamed(exc: OSError, path: Path) -> OSError:
    """An error about the temporary sibling (or about no file: a full disk on ``write``) as one
    about ``path``, which is what the user named and what the one-line error must show."""
    if exc.filename is not None and not Path(exc.filename).name.startswith(f".{path.name}."):
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def is_temporary_of(name: str, target: str) -> bool:
    """Whether ``name`` is a temporary sibling that writing ``target`` here makes (``.<target>.<random>.tmp``,
    or the ``.<target>.old`` that ``atomic_dir`` moves the previous folder to): a write killed midway
    leaves one, and it belongs to whatever owns ``target``."""
    return name == f".{target}.old" or (name.startswith(f".{target}.") and name.endswith(".tmp"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on success it replaces ``path``."""
    if mode not in ("w", "wb"):
        raise InvalidInputError(f"atomic_file writes whole files: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _renamed(exc, path) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, encoding="utf8" if mode == "w" else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _renamed(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    with atomic_file(path, "w") as fh:
        fh.write(text)


def write_json(path: str | Path, obj: Any, indent: int | None = 2) -> None:
    """JSON with a final newline; NaN and infinities are refused (they are not JSON)."""
    write_text(path, json.dumps(obj, indent=indent, default=str, allow_nan=False) + "\n")


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Fill a temporary sibling folder; on success it replaces ``path`` (a saved model, say)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    except OSError as exc:
        raise _renamed(exc, path) from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _renamed(exc, path) from None
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        # safetensors (every saved model's writer) reports a failed write as its own error type,
        # with the OS error number in the text: "... I/O error: No space left on device (os error 28)"
        code = re.search(r"\(os error (\d+)\)", str(exc)) if isinstance(exc, Exception) else None
        if code:
            raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from None
        raise
