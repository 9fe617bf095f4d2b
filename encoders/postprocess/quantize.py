"""Embedding quantization: int8, uint8 and binary codes of the base encoder's vectors, scored as
sentence-transformers scores them.

The semantics are those of sentence-transformers 6 (``quantize_embeddings`` and
``EmbeddingSimilarityEvaluator(precision=)``):

- vectors are L2-normalised first (the evaluator encodes with ``normalize_embeddings=True`` when a
  precision is given), after any ``+truncate``;
- ``int8``/``uint8``: per dimension, 256 buckets between the minimum and maximum of a calibration
  set, ``clip(floor((x - min) / ((max - min) / 255)), 0, 255)``, less 128 for int8 (a dimension
  with max = min gets a step of 1). The calibration set is, by default, every vector the task
  encodes, both sides of its pairs together, as the evaluator calibrates; ``calibration=<corpus>``
  calibrates once on a named corpus instead (recorded in the identity, like a fit corpus);
- ``binary``/``ubinary``: one bit per dimension, ``x > 0``, packed 8 to a byte (the last byte
  padded with zeros); the evaluator compares packed codes by unpacking them and taking the cosine
  of the 0/1 vectors, and so does this stage: its rows are the unpacked bits. ``similarity=hamming``
  returns the bits as -1/+1 instead, whose cosine is ``1 - 2 h / d`` for a Hamming distance ``h``:
  an exact affine function of the distance a binary index ranks by, so every rank and correlation
  is the Hamming distance's.

Rows come back as float32 holding the integer codes (the tasks compute cosines); ``bytes_per_vector``
is the size of the packed code. In a run, a task-calibrated stage's base vectors are encoded once
for all tasks and each task's codes made from its own (``for_task``); such a stage must be the
last of a composition (what came after it would see uncalibrated vectors). Calibrated on a
corpus, it is an ordinary stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT
from benchharness.encoders.postprocess.fitting import FitCorpus, PostProcessor
from benchharness.scoring.quantization import normalise, ranges_of, scalar_codes

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
SIMILARITIES = ("cosine", "hamming")
#: calibration on the vectors each task encodes (both sides together), as sentence-transformers does
TASK = "task"


def binary_codes(vectors: np.ndarray, similarity: str) -> np.ndarray:
    """The bits ``x > 0``: unpacked from their packed bytes (0/1, padded to a multiple of 8) for
    the cosine of sentence-transformers' evaluator, or as -1/+1 (unpadded) for the Hamming distance."""
    bits = np.asarray(vectors) > 0
    if similarity == "hamming":
        return np.where(bits, np.float32(1), np.float32(-1))
    return np.unpackbits(np.packbits(bits, axis=-1), axis=-1).astype(np.float32)


class Quantize(PostProcessor):
    """int8/uint8/binary codes of the L2-normalised base vectors (``float32``: normalised only)."""

    kind = "quantize"

    def __init__(
        self,
        base: Encoder,
        name: str,
        precision: str,
        calibration: str = TASK,
        similarity: str = "cosine",
        data_dir: str | Path | None = None,
    ) -> None:
        super().__init__(base, name)
        if precision not in PRECISIONS:
            raise InvalidInputError(f"{name}: quantize takes precision={'|'.join(PRECISIONS)}, got {precision!r}")
        if similarity not in SIMILARITIES:
            raise InvalidInputError(f"{name}: quantize takes similarity={'|'.join(SIMILARITIES)}, got {similarity!r}")
        scalar = precision in ("int8", "uint8")
        if similarity == "hamming" and precision not in ("binary", "ubinary"):
            raise InvalidInputError(f"{name}: similarity=hamming compares binary codes; use precision=binary")
        if calibration != TASK and not scalar:
            raise InvalidInputError(f"{name}: only int8 and uint8 are calibrated; {precision} takes no calibration=")
        self.precision, self.similarity = precision, similarity
        self.calibration = FitCorpus(calibration, data_dir) if calibration != TASK else None
        self.ranges: np.ndarray | None = None
        self.width: int | None = None  # the dimensions quantized, once seen

    @property
    def cacheable(self) -> bool:
        return False

    @property
    def calibrated_per_task(self) -> bool:
        return self.precision in ("int8", "uint8") and self.calibration is None

    @property
    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"precision": self.precision, "normalised": "l2"}
        if self.precision in ("int8", "uint8"):
            params["calibration"] = TASK if self.calibration is None else "corpus"
        if self.precision in ("binary", "ubinary"):
            params["similarity"] = self.similarity
        return params

    def corpora(self) -> dict[str, FitCorpus]:
        return {} if self.calibration is None else {"calibration": self.calibration}

    @classmethod
    def recorded_width(cls, params: Mapping[str, Any], step: Mapping[str, Any], width: int | None) -> int | None:
        """The base's width; binary codes for the cosine are padded to whole bytes."""
        binary = params.get("precision") in ("binary", "ubinary")
        if width is not None and binary and params.get("similarity") == "cosine":
            return -(-width // 8) * 8
        return width

    def _fit(self) -> None:
        if self.calibration is not None:
            self.ranges = ranges_of(normalise(self.base.encode_role(self.calibration.sentences, DEFAULT)))

    def _transform(self, sentences: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        x = normalise(vectors)
        self.width = x.shape[1]
        if self.precision == "float32":
            return x
        if self.precision in ("binary", "ubinary"):
            return binary_codes(x, self.similarity)
        # outside a run (``encode`` on a list), uncalibrated codes take the list's own range, as
        # ``quantize_embeddings`` does without ranges; a run calibrates on each task (``for_task``)
        return scalar_codes(x, self.ranges if self.ranges is not None else ranges_of(x), self.precision)

    def for_task(self, vectors: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The codes of one task's base vectors, calibrated on ``vectors``: every vector the task
        asks for, whatever its role (both sides of the pairs together)."""
        x = normalise(vectors)
        self.width = x.shape[1]
        ranges = ranges_of(x)
        return lambda rows: scalar_codes(normalise(rows), ranges, self.precision)

    def bytes_per_vector(self, width: int) -> float:
        dims = self.width if self.width is not None else width
        if self.precision in ("binary", "ubinary"):
            return float(-(-dims // 8))
        return float(dims if self.precision in ("int8", "uint8") else 4 * dims)
