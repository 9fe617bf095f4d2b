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

The store is one JSON file, ``digests.json`` in the project's cache folder (``[paths] cache_dir``
of ``benchharness.toml``, beside the embedding cache's identity folders), replaced atomically. A
missing, damaged or read-only store only means hashing again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

STORE_NAME = "digests.json"
FORMAT = 1
#: a file changed this recently (ns) before hashing began is hashed, not remembered
RACY_NS = 2_000_000_000
#: entries kept in the store (the most recently written); enough for every model of a machine
MAX_ENTRIES = 512


def store_path() -> Path:
    """``digests.json`` in the cache folder of the project config (the embedding cache's root)."""
    from benchharness.core.settings import load_config

    return load_config().cache_dir / STORE_NAME


def _signature(path: str) -> list[int | str]:
    real = os.path.realpath(path)
    st = os.stat(real)
    return [real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _load(store: Path) -> dict[str, dict]:
    try:
        raw = json.loads(store.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("entries"), dict):
        return {}
    return raw["entries"]


def _save(store: Path, entries: dict[str, dict]) -> None:
    from benchharness.core.atomic import write_json

    if len(entries) > MAX_ENTRIES:
        entries = dict(list(entries.items())[-MAX_ENTRIES:])
    try:
        write_json(store, {"format": FORMAT, "entries": entries}, indent=None)
    except OSError:
        pass  # a read-only cache folder: the digest is simply computed again next time


def remembered(kind: str, files: Sequence[str | Path], compute: Callable[[], str], store: Path | None = None) -> str:
    """``compute()``, a digest of the contents of ``files`` (and of nothing else but their names
    as given), or the value it returned before while every file is provably unchanged.

    ``kind`` names the digest (two digests of the same files can differ: ``weights-sha256`` also
    hashes the file names). Raises what ``os.stat`` raises for a missing file.
    """
    names = [os.path.abspath(f) for f in files]
    key = f"{kind}:" + "\n".join(names)
    before = [_signature(f) for f in names]
    store = store_path() if store is None else Path(store)
    entry = _load(store).get(key)
    if isinstance(entry, dict) and entry.get("files") == before and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    started = time.time_ns()
    digest = compute()
    racy = any(max(sig[2], sig[3]) > started - RACY_NS for sig in before)  # type: ignore[operator]
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
