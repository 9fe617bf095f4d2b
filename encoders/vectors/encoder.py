"""The ``vectors`` family, ``vectors:<folder>`` or ``vectors:<file>``: an encoder that serves rows
computed elsewhere (``benchharness.encoders.vectors``) and encodes nothing. A folder's files say
which kind of model computed them (``layout.KIND_FILES``): dense vectors are served to the runner's
shared pass, a sparse model's rows and a multi-vector model's token vectors to their kind's view."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchharness.core.kinds import DENSE, MULTI_VECTOR, SPARSE
from benchharness.core.prompts import DEFAULT, Role
from benchharness.core.specs import BuildContext, EncoderSpec, Family, Params
from benchharness.encoders.vectors.kind_encoders import PrecomputedSparse, PrecomputedTokens
from benchharness.encoders.vectors.layout import SENTENCES, VECTORS
from benchharness.encoders.vectors.readers import VectorTable, check_target, folder_kind, read_vectors
from benchharness.encoders.vectors.served import MissingVectorsError, ServedRows

__all__ = ["FAMILY", "MissingVectorsError", "PrecomputedVectors", "open_vectors"]


class PrecomputedVectors(ServedRows[VectorTable]):
    """Dense rows computed elsewhere. Of ``vectors.npy`` only the rows asked for are read into
    memory (``VectorTable.take``). Uncached, it is asked for a whole pass at once, so a
    missing-vector error counts them all."""

    def _read(self) -> VectorTable:
        return read_vectors(self.path)

    @property
    def files(self) -> list[Path]:
        return [self.path / SENTENCES, self.path / VECTORS] if self.path.is_dir() else [self.path]

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        return self.encode_role(sentences, DEFAULT)

    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        """The stored rows of ``sentences`` for ``role``, as float32 (``ServedRows.positions``)."""
        positions = self.positions(sentences, role)
        if not sentences:
            return np.zeros((0, self.table.vectors.shape[1]), dtype=np.float32)
        return self.table.take(positions)


#: the encoder of each kind of folder
_BY_KIND: dict[str, type[ServedRows]] = {
    DENSE: PrecomputedVectors,
    SPARSE: PrecomputedSparse,
    MULTI_VECTOR: PrecomputedTokens,
}


def open_vectors(name: str, path: str | Path) -> ServedRows:
    """The encoder of the rows at ``path``: of the kind its files say for a folder, dense for a
    keyed file (``.jsonl``, ``.parquet``)."""
    path = Path(path).expanduser()
    return _BY_KIND[folder_kind(path) if path.is_dir() else DENSE](name, path)


def build(name: str, spec: Params, context: BuildContext) -> ServedRows:
    return open_vectors(name, spec["path"])


def _check(spec: EncoderSpec) -> None:
    check_target(Path(str(spec.get("path", ""))).expanduser())


FAMILY = Family.of(
    "vectors", build, target="path", usage="vectors:<folder|file.jsonl|file.parquet>", accepts=(), check=_check
)
