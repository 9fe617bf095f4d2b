"""The ``vectors`` family's encoders of a sparse and of a multi-vector model's outputs computed
elsewhere (``kind_readers``): each is its kind's model (``core.kind_models``), so the runner scores it
through its kind's view (sparse products, MaxSim) exactly as a model that encodes inside the harness,
its rows looked up by sentence and role as dense rows are (``served.ServedRows``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from benchharness.core.kind_models import MultiVectorModel, SparseModel
from benchharness.core.prompts import DEFAULT, Role
from benchharness.encoders.vectors.kind_readers import (
    ScoredIndex,
    SparseTable,
    TokenTable,
    read_sparse_folder,
    read_token_folder,
)
from benchharness.encoders.vectors.layout import KIND_FILES, SENTENCES
from benchharness.encoders.vectors.served import ServedRows

S = TypeVar("S", bound=ScoredIndex)


class _ScoredRows(ServedRows[S]):
    """A folder of a kind's outputs, compared by the similarity its ``similarity.json`` names, which
    its identity pins beside the files' contents."""

    def __init__(self, name: str, path: str | Path) -> None:
        super().__init__(name, path)
        self.similarity = self.table.similarity

    @property
    def files(self) -> list[Path]:
        return [self.path / name for name in (SENTENCES, *KIND_FILES[self.model_kind])]

    def identity_info(self) -> dict[str, Any]:
        return {**super().identity_info(), "similarity": self.table.similarity}


class PrecomputedSparse(_ScoredRows[SparseTable], SparseModel):
    """A sparse model's rows (``vectors.npz``), compared by dot product or cosine."""

    def __init__(self, name: str, path: str | Path) -> None:
        super().__init__(name, path)

    def _read(self) -> SparseTable:
        return read_sparse_folder(self.path)

    def encode_sparse(self, sentences: Sequence[str], role: Role = DEFAULT) -> Any:
        return self.table.take(self.positions(sentences, role))

    @property
    def vocabulary_size(self) -> int:
        return int(self.table.matrix.shape[1])


class PrecomputedTokens(_ScoredRows[TokenTable], MultiVectorModel):
    """A multi-vector model's token vectors (``tokens.npy``, ``token_offsets.npy``), compared by
    MaxSim, or by mean-MaxSim (divided by the query's token count) when it says ``meanmaxsim``."""

    def __init__(self, name: str, path: str | Path) -> None:
        super().__init__(name, path)

    def _read(self) -> TokenTable:
        return read_token_folder(self.path)

    def encode_tokens(self, sentences: Sequence[str], role: Role = DEFAULT) -> list[np.ndarray]:
        return self.table.take(self.positions(sentences, role))
