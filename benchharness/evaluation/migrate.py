"""One-off migration of stores written by older versions: ``benchharness data migrate``.

Why a command and not a check on every lookup: the old layouts (``shard-*.npz`` files in an
embedding cache folder, result folders named by the lossy ``legacy_slug``) exist only in folders
an old version wrote, and looking for them on every cache lookup or result path cost a directory
scan on the hot path of every run forever. Running this once moves them to the current layout.
"""

from __future__ import annotations

import logging
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.results import RESERVED_FOLDERS, legacy_slug, read_result, slug
from benchharness.evaluation.cache import KEY_BYTES, CacheWriter, EmbeddingCache, quarantine

logger = logging.getLogger(__name__)

#: the file names of the embedding cache before it was one SQLite database per identity
SHARD_GLOB = "shard-*.npz"


@dataclass
class MigrationReport:
    """What a migration did: rows imported per cache identity, result folders renamed (old name,
    new name), and result folders left where they are, with the reason."""

    imported_rows: dict[str, int] = field(default_factory=dict)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)


def migrate(results_dir: Path | None, cache_dir: Path | None) -> MigrationReport:
    """Import the old shards of every identity under ``cache_dir`` and rename the legacy result
    folders under ``results_dir``; either may be None (or absent) to skip it."""
    report = MigrationReport()
    if cache_dir is not None and Path(cache_dir).is_dir():
        cache = EmbeddingCache(Path(cache_dir))
        for folder in sorted(p for p in Path(cache_dir).iterdir() if p.is_dir() and any(p.glob(SHARD_GLOB))):
            report.imported_rows[folder.name] = import_shards(cache, folder.name)
    if results_dir is not None and Path(results_dir).is_dir():
        migrate_results(Path(results_dir), report)
    return report


def import_shards(cache: EmbeddingCache, identity: str) -> int:
    """Import the ``shard-*.npz`` files of one identity into its database, then delete them;
    returns the rows added.

    Their keys are read as raw bytes, so digests that ended in NUL bytes (which numpy's ``S20``
    strips on access) come back whole and those rows are reused, not re-encoded. Non-finite rows
    are dropped; unreadable shards are quarantined.
    """
    added = 0
    with cache.writer(identity) as writer:
        for shard in sorted((cache.root / identity).glob(SHARD_GLOB)):
            added += _import_shard(shard, writer)
    return added


def _import_shard(shard: Path, writer: CacheWriter) -> int:
    try:
        with np.load(shard) as data:
            keys, vecs = data["keys"], np.asarray(data["vectors"], dtype=np.float32)
        if keys.dtype.itemsize != KEY_BYTES or vecs.ndim != 2 or len(keys) != len(vecs):
            raise InvalidInputError(f"keys {keys.dtype} x {len(keys)}, vectors {vecs.shape}")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        quarantine(shard, f"{type(exc).__name__}: {exc}")
        return 0
    raw = np.ascontiguousarray(keys).tobytes()
    finite = np.isfinite(vecs).all(axis=1)
    added = writer.add_keys([raw[i * KEY_BYTES : (i + 1) * KEY_BYTES] for i in np.flatnonzero(finite)], vecs[finite])
    shard.unlink()
    return added


def migrate_results(root: Path, report: MigrationReport) -> None:
    """Rename each result folder whose name is the ``legacy_slug`` of the one encoder all its
    results belong to, and not that encoder's ``slug``, to the ``slug``; per-item files move with
    it. A folder shared by several encoders, unreadable, or whose new name is taken stays."""
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in RESERVED_FOLDERS):
        files = sorted(folder.glob("*.json"))
        if not files:
            continue
        try:
            encoders = {read_result(p).encoder for p in files}
        except (InvalidInputError, OSError) as exc:
            report.kept.append((folder.name, f"unreadable result: {exc}"))
            continue
        if not any(folder.name == legacy_slug(e) != slug(e) for e in encoders):
            continue  # the current layout, or a folder this version never wrote
        if len(encoders) != 1:
            owners = ", ".join(sorted(encoders))
            report.kept.append((folder.name, f"holds results of {len(encoders)} encoders: {owners}"))
            continue
        (encoder,) = encoders
        new = slug(encoder)
        if (root / new).exists():
            report.kept.append((folder.name, f"{new} exists already"))
            continue
        folder.rename(root / new)
        logger.info("moved results %s to %s", folder, root / new)
        report.renamed.append((folder.name, new))
