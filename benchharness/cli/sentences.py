"""``benchharness sentences``: the sentences of tasks in one file, to be encoded elsewhere.

For a model that cannot run inside the harness: ``sentences --tasks sts --out DIR`` writes
``DIR/sentences.jsonl`` (each sentence once per role it is asked for in), the user encodes its
lines wherever the model runs and saves ``DIR/vectors.npy`` (a sparse model ``DIR/vectors.npz``, a
multi-vector model ``DIR/tokens.npy`` and ``DIR/token_offsets.npy``), and ``run --encoders vectors:DIR``
scores them by the harness's own protocols (``benchharness.encoders.vectors``).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
from collections import Counter

from benchharness.core.errors import InvalidInputError

logger = logging.getLogger(__name__)

HELP = "write the sentences of tasks to DIR/sentences.jsonl, to encode them elsewhere (then run vectors:DIR)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", required=True, help="comma list of tasks or groups (see `list tasks`)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write sentences.jsonl into")
    p.add_argument("--overwrite", action="store_true", help="replace an existing DIR/sentences.jsonl")
    p.add_argument("--data-dir", help="data root (default: $BENCHHARNESS_DATA, else benchharness.toml, else ./data)")
    p.add_argument("--no-verify", action="store_true", help="do not check data files against pinned sha256")


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.options import check_output, data_root
    from benchharness.core.atomic import atomic_file
    from benchharness.encoders.vectors.layout import (
        KIND_FILES,
        SENTENCES,
        SENTENCES_DIGEST,
        SPARSE_VECTORS,
        TOKEN_OFFSETS,
        TOKENS,
        VECTORS,
    )
    from benchharness.encoders.vectors.writer import jsonl_line, sentence_records
    from benchharness.evaluation.evaluate import resolve_tasks

    if not args.tasks.strip(" ,"):
        raise InvalidInputError(
            f"--tasks {args.tasks!r} names no task; give a comma list of tasks or groups "
            "(see `benchharness list tasks`)"
        )
    out = check_output(args.out, "folder", "--out")
    target = out / SENTENCES
    if target.exists() and not args.overwrite:
        raise InvalidInputError(
            f"{target} exists; give --overwrite to replace it (the vectors computed for the old lines must then "
            "be computed again)"
        )
    tasks = resolve_tasks(args.tasks, args.configuration)
    data = data_root(args)
    for task in tasks:
        task.load(data)
    records = sentence_records(tasks)
    text = "".join(jsonl_line(r) for r in records)
    unchanged = target.is_file() and target.read_bytes() == text.encode("utf-8")
    if not unchanged:
        with atomic_file(target, "w") as fh:
            fh.write(text)
    with atomic_file(out / SENTENCES_DIGEST, "w") as fh:  # what vectors: checks the lines against
        fh.write(hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")
    roles = Counter(r["role"] for r in records)
    by_role = ", ".join(f"{n:,} {role}" for role, n in roles.items())
    print(
        f"{'unchanged' if unchanged else 'wrote'} {target}: {len(records):,} lines ({by_role}) for {len(tasks)} task(s)"
    )
    for path in (out / name for names in KIND_FILES.values() for name in names):
        if path.exists() and not unchanged:
            logger.warning("%s was computed for the lines just replaced: compute it again", path)
    print(
        f"next: write {out / VECTORS}: one float32 row per line, same order "
        f"(numpy.save, shape ({len(records)}, dim)); then: benchharness run --encoders vectors:{out} "
        f"--tasks {args.tasks}"
    )
    print(
        f"  (a sparse model's rows: {out / SPARSE_VECTORS}, scipy.sparse.save_npz, shape ({len(records)}, vocabulary); "
        f"a multi-vector model's: {out / TOKENS}, every line's token vectors stacked, and {out / TOKEN_OFFSETS}, "
        f"{len(records) + 1} int64 offsets: each line's first row, then the end)"
    )
    return 0
