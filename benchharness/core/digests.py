"""Digests of large files, remembered across runs for as long as the files provably stay the same.

A model's identity includes a sha256 over its weight files (87 MiB for MiniLM-L6, 16 MiB for the
GloVe subset), and computing it was a fixed cost of every run, even one whose vectors all come
from the cache. ``remembered`` stores each digest with, per file, the resolved path, size,
``mtime_ns``, ``ctime_ns``, inode and device, and returns it again only while all of those are
unchanged. Writing to a file moves its ctime, which (unlike mtime) no tool can set back, and
replacing it gives another inode, so an edited or re-downloaded file is always hashed again; the
value returned is always what ``compute`` would return now.

Two guards keep a digest from being stored for content it may not describe: the files are
stat-ed again after hashing (a file changed meanwhile is not remembered), and a file changed
less than ``RACY_NS`` before hashing began is not remembered either (a second write within the
same timestamp tick would leave every stat field as it was, as git's "racily clean" entries).

The store is one JSON file, ``digests.json`` beside the embedding cache's identity folders,
replaced atomically. It is read and written only inside ``remembering(store)``, which a run with an
embedding cache opens (``benchharness run``, ``evaluate(..., cache_dir=...)``): a call that stores
nothing writes no digest either (``run --verify``, ``evaluate`` with its defaults), and simply
hashes. A missing, damaged or read-only store only means hashing again.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

STORE_NAME = "digests.json"
FORMAT = 1
#: a file changed this recently (ns) before hashing began is hashed, not remembered
RACY_NS = 2_000_000_000
#: entries kept in the store (the most recently written); enough for every model of a machine
MAX_ENTRIES = 512


_STORE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("benchharness_digest_store", default=None)


@contextlib.contextmanager
def remembering(cache_dir: Path) -> Iterator[None]:
    """Digests computed meanwhile are remembered in (and read from) ``cache_dir/digests.json``."""
    token = _STORE.set(Path(cache_dir) / STORE_NAME)
    try:
        yield
    finally:
        _STORE.reset(token)


def store_path() -> Path | None:
    """The digest store of the current ``remembering`` scope; None outside one."""
    return _STORE.get()


def _signature(path: str) -> list[int | str]:
    real = os.path.realpath(path)
    st = os.stat(real)
    return [real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _load(store: Path) -> dict[str, Any]:
    """The stored entries (key -> JSON object, as read: ``remembered`` checks each one it uses)."""
    try:
        if store.exists() and not store.is_file():  # a FIFO would block the read for ever
            return {}
        raw = json.loads(store.read_text())
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deeply: digests afresh
        return {}
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("entries"), dict):
        return {}
    entries: dict[str, Any] = raw["entries"]
    return entries


def _save(store: Path, entries: dict[str, Any]) -> None:
    from benchharness.core.atomic import write_json

    if len(entries) > MAX_ENTRIES:
        entries = dict(list(entries.items())[-MAX_ENTRIES:])
    with contextlib.suppress(OSError):  # a read-only cache folder: the digest is simply computed again next time
        write_json(store, {"format": FORMAT, "entries": entries}, indent=None)


def remembered(kind: str, files: Sequence[str | Path], compute: Callable[[], str], store: Path | None = None) -> str:
    """``compute()``, a digest of the contents of ``files`` (and of nothing else but their names
    as given), or the value it returned before while every file is provably unchanged.

    ``kind`` names the digest (two digests of the same files can differ: ``weights-sha256`` also
    hashes the file names). ``store`` defaults to the current ``remembering`` scope's; without
    one, ``compute()`` is simply called. Raises what ``os.stat`` raises for a missing file.
    """
    names = [os.path.abspath(f) for f in files]
    key = f"{kind}:" + "\n".join(names)
    before = [_signature(f) for f in names]
    store = store_path() if store is None else Path(store)
    if store is None:
        return compute()
    entry = _load(store).get(key)
    stored = entry.get("sha256") if isinstance(entry, dict) and entry.get("files") == before else None
    if isinstance(stored, str):
        return stored
    started = time.time_ns()
    digest = compute()
    racy = any(max(int(sig[2]), int(sig[3])) > started - RACY_NS for sig in before)  # [2], [3]: mtime, ctime (ns)
    if not racy and [_signature(f) for f in names] == before:
        entries = _load(store)  # re-read: keep what another process stored meanwhile
        entries.pop(key, None)  # re-inserted last: the newest entries survive the bound
        entries[key] = {"files": before, "sha256": digest}
        _save(store, entries)
    return digest


def update_with_file(digest: Any, path: str | Path) -> None:
    """Feed one file's bytes to ``digest`` (a hashlib object), streamed in 8 MiB chunks."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(8 << 20), b""):
            digest.update(chunk)


def sha256_file(path: str | Path) -> str:
    """sha256 of one file's bytes."""
    digest = hashlib.sha256()
    update_with_file(digest, path)
    return digest.hexdigest()
