"""The ``vectors`` family, ``vectors:<folder>`` or ``vectors:<file>``: an encoder that serves rows
computed elsewhere (``benchharness.encoders.vectors``) and encodes nothing."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.digests import remembered, sha256_file
from benchharness.core.encoder import Encoder
from benchharness.core.errors import UserError
from benchharness.core.prompts import DEFAULT, Role
from benchharness.core.specs import BuildContext, EncoderSpec, Family, Params
from benchharness.encoders.vectors.layout import SENTENCES, VECTORS, RoleKey, quote, role_key, role_text
from benchharness.encoders.vectors.readers import check_target, read_vectors

#: missing sentences quoted in the error (the count says how many more there are)
SHOWN_MISSING = 3


class MissingVectorsError(UserError):
    """Sentences asked for that the file has no vector for: the tasks that asked fail with this
    message instead of being scored from part of their sentences."""


class PrecomputedVectors(Encoder):
    """Serves rows computed elsewhere, looked up by sentence and role; encodes nothing.

    The file is read and checked when the encoder is built, so that a bad file fails where the
    runner contains a broken encoder (each of its tasks failed with the message, the other
    encoders going on), not in the middle of a pass. Of ``vectors.npy`` only the rows asked for
    are read into memory (``VectorTable.take``). Not cached: its rows are already on disk, and
    uncached it is asked for a whole pass at once, so a missing-vector error counts them all.
    """

    cacheable = False

    def __init__(self, name: str, path: str | Path) -> None:
        super().__init__(name)
        self.path = Path(path).expanduser()
        check_target(self.path)
        self.table = read_vectors(self.path)

    @property
    def files(self) -> list[Path]:
        """The files the vectors come from (both, for a folder)."""
        return [self.path / SENTENCES, self.path / VECTORS] if self.path.is_dir() else [self.path]

    @property
    def role_aware(self) -> bool:  # type: ignore[override]
        """A file with query or document rows answers each role with its own rows: the runner must
        ask for every role separately."""
        return self.table.has_roles

    def vector_key(self, role: Role) -> str:
        """One key per (role, instruction) when the file has roles; else one for all roles."""
        if not self.role_aware:
            return ""
        name, instruction = role_key(role)
        return f"{name or 'default'}\x1f{instruction or ''}"

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        return self.encode_role(sentences, DEFAULT)

    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        """The stored rows of ``sentences`` for ``role`` (the default role's rows for every role when
        the file has no others), as float32; ``MissingVectorsError`` if any has none."""
        table = self.table
        key = role_key(role) if table.has_roles else (None, None)
        rows = table.rows.get(key, {})
        missing = [s for s in dict.fromkeys(sentences) if s not in rows]
        if missing:
            raise MissingVectorsError(self._missing(missing, len(sentences), key))
        if not sentences:
            return np.zeros((0, table.vectors.shape[1]), dtype=np.float32)
        return table.take(np.fromiter((rows[s] for s in sentences), dtype=np.intp, count=len(sentences)))

    def _missing(self, missing: list[str], asked: int, key: RoleKey) -> str:
        shown = ", ".join(quote(s) for s in missing[:SHOWN_MISSING])
        more = f" and {len(missing) - SHOWN_MISSING:,} more" if len(missing) > SHOWN_MISSING else ""
        side = f" as {role_text(key)}" if self.table.has_roles else ""
        return (
            f"{self.table.where} has no vector for {len(missing):,} of {asked:,} sentences asked for{side}: "
            f"{shown}{more}; write the sentences of these tasks with `benchharness sentences --tasks ... --out "
            "DIR` and encode all its lines"
        )

    def identity_info(self) -> dict[str, Any]:
        # the files' contents, not their place or name: a moved folder keeps its stored results and cache
        layout = "folder" if self.path.is_dir() else self.path.suffix.lstrip(".")
        return {
            "family": "vectors",
            "layout": layout,
            "sha256": [remembered("sha256", [f], functools.partial(sha256_file, f)) for f in self.files],
        }

    @property
    def metadata(self) -> dict[str, Any]:
        return {**super().metadata, "pooling": "computed elsewhere", "base_model": self.path.name}


def build(name: str, spec: Params, context: BuildContext) -> PrecomputedVectors:
    return PrecomputedVectors(name, spec["path"])


def _check(spec: EncoderSpec) -> None:
    check_target(Path(str(spec.get("path", ""))).expanduser())


FAMILY = Family.of(
    "vectors", build, target="path", usage="vectors:<folder|file.jsonl|file.parquet>", accepts=(), check=_check
)
