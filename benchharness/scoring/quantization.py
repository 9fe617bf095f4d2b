"""Scalar quantization of embeddings, as sentence-transformers 6 computes it (``quantize_embeddings``):
L2 normalisation, calibration ranges, and the int8/uint8 codes of 256 buckets a dimension. Shared by
the ``+quantize`` stage, which scores tasks on the codes, and the quantized search of retrieval.
"""

from __future__ import annotations

import numpy as np

from benchharness.core.errors import InvalidInputError


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm, floored at 1e-12 (``torch.nn.functional.normalize``)."""
    x = np.asarray(vectors, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))


def ranges_of(vectors: np.ndarray) -> np.ndarray:
    """Per-dimension (minimum, maximum) of a calibration set, shape (2, d)."""
    if len(vectors) < 2:
        raise InvalidInputError(f"int8/uint8 calibration needs at least 2 vectors, got {len(vectors)}")
    return np.vstack((vectors.min(axis=0), vectors.max(axis=0))).astype(np.float32)


def scalar_codes(vectors: np.ndarray, ranges: np.ndarray, precision: str) -> np.ndarray:
    """int8 or uint8 codes of ``vectors`` in the buckets ``ranges`` defines, as float32."""
    starts = ranges[0]
    steps = (ranges[1] - starts) / np.float32(255)
    steps = np.where(steps == 0, np.float32(1), steps)
    codes = np.clip(np.floor((np.asarray(vectors, dtype=np.float32) - starts) / steps), 0, 255)
    return (codes - 128 if precision == "int8" else codes).astype(np.float32)


def bucket_starts(codes: np.ndarray, ranges: np.ndarray, precision: str) -> np.ndarray:
    """The float value each code stands for, the start of its bucket: how sentence-transformers
    dequantizes int8/uint8 candidates before rescoring them with a float query."""
    steps = (ranges[1] - ranges[0]) / np.float32(255)
    steps = np.where(steps == 0, np.float32(1), steps)
    shifted = codes.astype(np.float32) + (128 if precision == "int8" else 0)
    return (shifted * steps + ranges[0]).astype(np.float32)
