"""Small stand-ins for runner tests: an encoder whose vectors are a pure function of the text."""

from __future__ import annotations

import hashlib

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.task import Task, TaskMetadata


class HashEncoder(Encoder):
    """Deterministic pseudo-random vectors from a sentence hash; counts what it encodes."""

    def __init__(self, name: str = "hash", dim: int = 8, salt: str = "") -> None:
        super().__init__(name)
        self.dim, self.salt = dim, salt
        self.calls: list[list[str]] = []

    def encode(self, sentences):
        self.calls.append(list(sentences))
        rows = [
            np.random.default_rng(int(hashlib.md5((self.salt + s).encode()).hexdigest()[:8], 16)).normal(size=self.dim)
            for s in sentences
        ]
        return np.array(rows, dtype=np.float32).reshape(len(sentences), self.dim)

    def identity_info(self):
        return {"family": "hash", "dim": self.dim, "salt": self.salt}


class BrokenTask(Task):
    """A task whose evaluation raises, to show that failures stay contained."""

    metadata = TaskMetadata(
        name="Broken",
        family="test",
        description="always fails",
        split="test",
        main_score="x",
        protocol="none",
        reference="",
    )

    def _load(self, data):
        pass

    def sentences(self):
        return ["a broken sentence"]

    def evaluate(self, embed, seed):
        raise RuntimeError("boom")
