"""What every encoder of the ``vectors`` family shares, whatever kind of model computed its rows:
the rows looked up by sentence and role (a sentence without a row fails naming the file, never
replaced), the identity of the files' contents, and no embedding cache."""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from benchharness.core.digests import remembered, sha256_file
from benchharness.core.encoder import Encoder
from benchharness.core.errors import UserError
from benchharness.core.prompts import Role
from benchharness.encoders.vectors.layout import RoleKey, quote, role_key, role_text
from benchharness.encoders.vectors.readers import RowIndex, check_target

#: missing sentences quoted in the error (the count says how many more there are)
SHOWN_MISSING = 3

T = TypeVar("T", bound=RowIndex)


class MissingVectorsError(UserError):
    """Sentences asked for that the file has no vector for: the tasks that asked fail with this
    message instead of being scored from part of their sentences."""


class ServedRows(Encoder, Generic[T]):
    """Serves rows computed elsewhere, looked up by sentence and role; encodes nothing.

    The files are read and checked when the encoder is built (``_read``), so that a bad file fails
    where the runner contains a broken encoder (each of its tasks failed with the message, the other
    encoders going on), not in the middle of a pass. Not cached: its rows are already on disk.
    """

    cacheable = False

    def __init__(self, name: str, path: str | Path) -> None:
        super().__init__(name)
        self.path = Path(path).expanduser()
        check_target(self.path)
        self.table: T = self._read()

    @abstractmethod
    def _read(self) -> T:
        """The checked table of ``self.path``."""

    @property
    @abstractmethod
    def files(self) -> list[Path]:
        """The files the rows come from (the sentences and the rows, for a folder)."""

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

    def positions(self, sentences: Sequence[str], role: Role) -> np.ndarray:
        """The rows of ``sentences`` for ``role`` (the default role's rows for every role when the file
        has no others); ``MissingVectorsError`` if any has none."""
        table = self.table
        key = role_key(role) if table.has_roles else (None, None)
        rows = table.rows.get(key, {})
        missing = [s for s in dict.fromkeys(sentences) if s not in rows]
        if missing:
            raise MissingVectorsError(self._missing(missing, len(sentences), key))
        return np.fromiter((rows[s] for s in sentences), dtype=np.intp, count=len(sentences))

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
