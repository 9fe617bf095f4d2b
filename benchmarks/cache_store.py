"""Which store should hold cached embeddings? npz shards vs SQLite (WAL) vs LMDB, by measurement.

The warm-rerun target is 2 s end to end when the cache holds every sentence, so
reading one encoder's whole cache and building its sentence lookup must stay well under 0.5 s.
The workload is the STS one for minilm-l6: 26,289 unique sentences x 384 float32, written in
chunks of 2,048 (as ``CachingEncoder`` commits them), then read back cold (handles dropped and
reopened) into one float32 matrix plus a ``key -> row`` dict. Keys are 20-byte sha1 digests.

Stores compared:

* ``npz``: one ``shard-*.npz`` per chunk, the layout the cache imports (no locking, no corruption checks).
* ``sqlite-rows``: one SQLite row per sentence (key BLOB PRIMARY KEY, vec BLOB, crc32), WAL mode;
  read with one ``SELECT``, one ``b"".join`` and ``np.frombuffer``, every row's crc32 checked.
* ``sqlite-chunks``: one SQLite row per committed chunk (keys and vectors as two blobs, a crc32).
* ``lmdb``: one LMDB record per sentence, read with a cursor (only if ``lmdb`` imports).
* ``benchharness``: the real ``EmbeddingCache`` (``add`` per chunk, then ``lookup``); also
  ``warm_encode_all``: a fresh ``CachingEncoder.encode`` of every sentence from a full cache.

The machine may be shared, so each store is measured ``--repeats`` times and the report gives
medians of wall and CPU time and the ratio of read CPU time to the fastest store's; absolute times
are for an idle machine to retake.

    python benchmarks/cache_store.py [--n 26289] [--dim 384] [--chunk 2048] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from machine import SMOKE

Workload = tuple[list[bytes], np.ndarray]


def workload(n: int, dim: int) -> Workload:
    rng = np.random.default_rng(0)
    keys = [hashlib.sha1(f"sentence {i}".encode()).digest() for i in range(n)]
    return keys, rng.standard_normal((n, dim), dtype=np.float32)


def chunks(n: int, size: int) -> list[slice]:
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


# --- npz shards (the layout the cache imports) -----------------------------------------------
def npz_write(folder: Path, keys: list[bytes], vecs: np.ndarray, size: int) -> None:
    for i, part in enumerate(chunks(len(keys), size)):
        raw = np.frombuffer(b"".join(keys[part]), dtype=np.uint8).reshape(-1, 20)
        np.savez(folder / f"shard-{i:05d}.npz", keys=raw, vectors=vecs[part])


def npz_read(folder: Path) -> tuple[dict[bytes, int], np.ndarray]:
    key_parts, vec_parts = [], []
    for shard in sorted(folder.glob("shard-*.npz")):
        with np.load(shard) as data:
            key_parts.append(data["keys"].tobytes())
            vec_parts.append(data["vectors"])
    return _key_index(b"".join(key_parts)), np.concatenate(vec_parts)


def _key_index(blob: bytes) -> dict[bytes, int]:
    """The row of each 20-byte key of a concatenation of keys (the npz shards' and SQLite chunks' form)."""
    return {blob[i : i + 20]: n for n, i in enumerate(range(0, len(blob), 20))}


# --- SQLite, one row per sentence ------------------------------------------------------------
def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA page_size=8192")  # 2 rows of 1.5 kB fit a 4 kB page, 5 fit 8 kB
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    return con


def _crc(key: bytes, value: bytes) -> int:
    """The checksum a SQLite record keeps: CRC-32 of its key, then of its value."""
    return zlib.crc32(value, zlib.crc32(key))


def _checked_records(folder: Path, query: str) -> list[tuple[bytes, bytes, int]]:
    """The (key, value, crc) records ``query`` selects from the folder's SQLite file; one whose
    checksum does not match raises, as a cache reading a damaged file must."""
    con = _connect(folder / "cache.sqlite")
    got = con.execute(query).fetchall()
    con.close()
    if any(_crc(k, v) != c for k, v, c in got):
        raise ValueError("checksum mismatch")
    return got


def rows_write(folder: Path, keys: list[bytes], vecs: np.ndarray, size: int) -> None:
    con = _connect(folder / "cache.sqlite")
    con.execute("CREATE TABLE rows (key BLOB PRIMARY KEY, vec BLOB NOT NULL, crc INTEGER NOT NULL)")
    for part in chunks(len(keys), size):
        con.execute("BEGIN IMMEDIATE")
        blobs = [v.tobytes() for v in vecs[part]]
        con.executemany(
            "INSERT OR IGNORE INTO rows VALUES (?, ?, ?)",
            [(k, b, _crc(k, b)) for k, b in zip(keys[part], blobs)],
        )
        con.execute("COMMIT")
    con.close()


def rows_read(folder: Path, dim: int) -> tuple[dict[bytes, int], np.ndarray]:
    got = _checked_records(folder, "SELECT key, vec, crc FROM rows")
    matrix = np.frombuffer(b"".join(v for _, v, _ in got), dtype=np.float32).reshape(-1, dim)
    return {k: i for i, (k, _, _) in enumerate(got)}, matrix


# --- SQLite, one row per chunk ---------------------------------------------------------------
def chunks_write(folder: Path, keys: list[bytes], vecs: np.ndarray, size: int) -> None:
    con = _connect(folder / "cache.sqlite")
    con.execute("CREATE TABLE chunks (keys BLOB NOT NULL, vecs BLOB NOT NULL, crc INTEGER NOT NULL)")
    for part in chunks(len(keys), size):
        k, v = b"".join(keys[part]), vecs[part].tobytes()
        con.execute("INSERT INTO chunks VALUES (?, ?, ?)", (k, v, _crc(k, v)))
    con.close()


def chunks_read(folder: Path, dim: int) -> tuple[dict[bytes, int], np.ndarray]:
    got = _checked_records(folder, "SELECT keys, vecs, crc FROM chunks")
    index = _key_index(b"".join(k for k, _, _ in got))
    return index, np.concatenate([np.frombuffer(v, dtype=np.float32) for _, v, _ in got]).reshape(-1, dim)


# --- LMDB, one record per sentence -----------------------------------------------------------
def lmdb_write(folder: Path, keys: list[bytes], vecs: np.ndarray, size: int) -> None:
    import lmdb

    env = lmdb.open(str(folder / "cache.lmdb"), map_size=1 << 32)
    for part in chunks(len(keys), size):
        with env.begin(write=True) as txn:
            for k, v in zip(keys[part], vecs[part]):
                txn.put(k, v.tobytes())
    env.close()


def lmdb_read(folder: Path, dim: int) -> tuple[dict[bytes, int], np.ndarray]:
    import lmdb

    env = lmdb.open(str(folder / "cache.lmdb"), readonly=True, lock=False)
    with env.begin() as txn:
        got = list(txn.cursor().iternext(keys=True, values=True))
    env.close()
    return (
        {k: i for i, (k, _) in enumerate(got)},
        np.frombuffer(b"".join(v for _, v in got), dtype=np.float32).reshape(-1, dim),
    )


# --- the real cache --------------------------------------------------------------------------
def harness_write(folder: Path, keys: list[bytes], vecs: np.ndarray, size: int) -> None:
    from benchharness.evaluation.cache import EmbeddingCache

    cache = EmbeddingCache(folder)
    with cache.writer("bench") as writer:
        for part in chunks(len(keys), size):
            writer.add_keys(keys[part], vecs[part])


def harness_read(folder: Path, dim: int) -> tuple[dict[bytes, int], np.ndarray]:
    from benchharness.evaluation.cache import EmbeddingCache

    keys: list[bytes] = []
    parts: list[np.ndarray] = []
    EmbeddingCache(folder).lookup("bench", lambda k, r: (keys.extend(k), parts.append(r)))
    return {k: i for i, k in enumerate(keys)}, np.concatenate(parts).reshape(-1, dim)


def warm_encode(n: int, dim: int, size: int, repeats: int) -> dict[str, float]:
    """``CachingEncoder.encode`` of every sentence from a full cache: what a warm rerun pays.

    Includes hashing the sentences, reading the database and gathering the rows, in a fresh
    wrapper each time (as in a new process); the inner encoder must never be called.
    """
    from benchharness.core.encoder import Encoder
    from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache

    class Refuses(Encoder):
        def encode(self, sentences):
            raise AssertionError("a warm rerun encoded something")

        def identity_info(self):
            return {"benchmark": "warm"}

    texts = [f"sentence {i} " + "word " * (i % 40) for i in range(n)]
    vecs = workload(n, dim)[1]
    folder = Path(tempfile.mkdtemp(prefix="cache-warm-"))
    try:
        cache = EmbeddingCache(folder)
        with cache.writer(Refuses("warm").identity) as writer:
            for part in chunks(n, size):
                writer.add(texts[part], vecs[part])
        walls, cpus = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            out = CachingEncoder(Refuses("warm"), cache).encode(texts)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            if not np.array_equal(out, vecs):
                raise AssertionError("warm encode returned other rows than were stored")
    finally:
        shutil.rmtree(folder)
    return {"wall_s": statistics.median(walls), "wall_min_s": min(walls), "cpu_s": statistics.median(cpus)}


def measure(
    name: str, write: Callable, read: Callable, data: Workload, dim: int, size: int, repeats: int
) -> dict[str, float]:
    keys, vecs = data
    writes, reads, read_cpu = [], [], []
    for _ in range(repeats):
        folder = Path(tempfile.mkdtemp(prefix=f"cache-{name}-"))
        try:
            t0 = time.perf_counter()
            write(folder, keys, vecs, size)
            writes.append(time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            index, matrix = read(folder, dim)
            reads.append(time.perf_counter() - t0)
            read_cpu.append(time.process_time() - c0)
            # a store that loses or mixes up rows is disqualified, however fast
            order = np.array([index[k] for k in keys])
            if not np.array_equal(matrix[order], vecs):
                raise AssertionError(f"{name}: rows read back differ from rows written")
            disk = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        finally:
            shutil.rmtree(folder)
    return {
        "write_s": statistics.median(writes),
        "read_s": statistics.median(reads),
        "read_min_s": min(reads),
        "read_cpu_s": statistics.median(read_cpu),
        "disk_mib": disk / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=26289, help="rows (unique STS sentences)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--chunk", type=int, default=2048, help="rows per committed chunk")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stores", nargs="*", help="measure only these (default: all available)")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(n=500, dim=16, chunk=100, repeats=1)
    args = parser.parse_args()

    stores: dict[str, tuple[Callable, Callable]] = {
        "npz": (npz_write, lambda folder, dim: npz_read(folder)),
        "sqlite-rows": (rows_write, rows_read),
        "sqlite-chunks": (chunks_write, chunks_read),
        "benchharness": (harness_write, harness_read),
    }
    try:
        import lmdb  # noqa: F401  (optional: measured only where installed)

        stores["lmdb"] = (lmdb_write, lmdb_read)
    except ImportError:
        pass
    if args.stores:
        stores = {name: stores[name] for name in args.stores}
    data = workload(args.n, args.dim)
    report = {name: measure(name, w, r, data, args.dim, args.chunk, args.repeats) for name, (w, r) in stores.items()}
    fastest = min(r["read_cpu_s"] for r in report.values())
    for r in report.values():
        r["read_cpu_vs_fastest"] = r["read_cpu_s"] / fastest
    warm = warm_encode(args.n, args.dim, args.chunk, args.repeats) if "benchharness" in stores else {}
    print(
        json.dumps(
            {
                "n": args.n,
                "dim": args.dim,
                "chunk": args.chunk,
                "repeats": args.repeats,
                "stores": {k: {m: round(v, 4) for m, v in r.items()} for k, r in report.items()},
                "warm_encode_all": {m: round(v, 4) for m, v in warm.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
