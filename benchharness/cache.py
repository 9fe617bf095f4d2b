"""On-disk embedding cache keyed by encoder identity and sentence text.

Each encoder identity owns a folder of shards (``shard-<n>.npz`` holding sha1 keys and a float32
matrix). A run encodes only the sentences no shard has and adds one new shard, written atomically,
so an interrupted run loses nothing that was already encoded and a rerun encodes nothing twice.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchharness.encoder import Encoder


def sentence_key(sentence: str) -> bytes:
    return hashlib.sha1(sentence.encode("utf8")).digest()


class EmbeddingCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _folder(self, identity: str) -> Path:
        return self.root / identity

    def load(self, identity: str) -> dict[bytes, np.ndarray]:
        """All cached rows of one encoder identity."""
        rows: dict[bytes, np.ndarray] = {}
        folder = self._folder(identity)
        for shard in sorted(folder.glob("shard-*.npz")) if folder.is_dir() else []:
            try:
                with np.load(shard) as data:
                    keys, vecs = data["keys"], data["vectors"]
            except (OSError, ValueError, KeyError):
                continue  # a damaged shard only costs re-encoding its sentences
            for key, vec in zip(keys, vecs):
                rows[bytes(key)] = vec
        return rows

    def add(self, identity: str, sentences: Sequence[str], vectors: np.ndarray) -> None:
        if len(sentences) == 0:
            return
        folder = self._folder(identity)
        folder.mkdir(parents=True, exist_ok=True)
        keys = np.frombuffer(b"".join(sentence_key(s) for s in sentences), dtype="S20")
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, keys=keys, vectors=np.asarray(vectors, dtype=np.float32))
        n = len(list(folder.glob("shard-*.npz")))
        while (folder / f"shard-{n:05d}.npz").exists():
            n += 1
        os.replace(tmp, folder / f"shard-{n:05d}.npz")


class CachingEncoder(Encoder):
    """Serves what the cache holds and encodes (then stores) only the rest.

    It is transparent: name, identity, metadata and mask token are the wrapped encoder's, so a
    post-processor built on top of it fits on cached base vectors.
    """

    def __init__(self, inner: Encoder, cache: EmbeddingCache) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.cache = cache
        self._rows: dict[bytes, np.ndarray] | None = None
        self.encoded = 0  # sentences actually encoded (not served from the cache)

    def encode(self, sentences: Sequence[str], show_progress: bool = False) -> np.ndarray:
        identity = self.inner.identity
        if self._rows is None:
            self._rows = self.cache.load(identity)
        keys = [sentence_key(s) for s in sentences]
        missing = list(dict.fromkeys(s for s, k in zip(sentences, keys) if k not in self._rows))
        if missing:
            vecs = self.inner.encode(missing, show_progress=show_progress)
            self.cache.add(identity, missing, vecs)
            self.encoded += len(missing)
            for s, v in zip(missing, vecs):
                self._rows[sentence_key(s)] = v
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._rows[k] for k in keys]).astype(np.float32, copy=False)

    def identity_info(self) -> dict[str, Any]:
        return self.inner.identity_info()

    @property
    def metadata(self) -> dict[str, Any]:
        return self.inner.metadata

    @property
    def mask_token(self) -> str | None:
        return self.inner.mask_token

    def __getattr__(self, item: str) -> Any:
        # reached only for attributes CachingEncoder lacks (e.g. a tokenizer): delegate
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)
