"""Which kind of model a sentence-transformers folder holds, read from its files as
sentence-transformers 6 reads them, so that ``st:`` loads each kind as what it is and never converts
one into another (``SentenceTransformer(<a CrossEncoder folder>)`` would: a dense model of other
weights, scored with no error).

The rule, in order:

1. ``config_sentence_transformers.json``'s ``model_type``: ``SentenceTransformer``, ``SparseEncoder``,
   ``CrossEncoder``, ``MultiVectorEncoder`` (PyLate's ``ColBERT`` is a multi-vector encoder);
2. ``config.json``'s ``architectures``: ``HF_ColBERT`` (Stanford ColBERT) is a multi-vector encoder;
   a ``...ForSequenceClassification`` model with no ``modules.json`` is a cross-encoder (the
   ``cross-encoder/...`` checkpoints on the hub predate sentence-transformers' own folders);
3. anything else is a dense encoder (older sentence-transformers folders say no type).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import CROSS_ENCODER, DENSE, MULTI_VECTOR, SPARSE

#: sentence-transformers' ``model_type`` values, by the kind they are
MODEL_TYPES = {
    "SentenceTransformer": DENSE,
    "SparseEncoder": SPARSE,
    "CrossEncoder": CROSS_ENCODER,
    "MultiVectorEncoder": MULTI_VECTOR,
    "ColBERT": MULTI_VECTOR,
}


def _json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{what}: cannot read {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def declared_kind(folder: Path, name: str) -> str:
    """The kind of the model in ``folder`` (``core.kinds``: dense, sparse, multi-vector, cross-encoder);
    a ``model_type`` no version of sentence-transformers writes is refused in one line."""
    st_config = folder / "config_sentence_transformers.json"
    if st_config.is_file():
        model_type = _json(st_config, name).get("model_type")
        if model_type is not None:
            if model_type not in MODEL_TYPES:
                raise InvalidInputError(
                    f"{name}: {st_config} declares model_type {model_type!r}; benchharness knows "
                    f"{', '.join(MODEL_TYPES)}"
                )
            return MODEL_TYPES[model_type]
    hf_config = folder / "config.json"
    architectures = _json(hf_config, name).get("architectures") or [] if hf_config.is_file() else []
    if "HF_ColBERT" in architectures:
        return MULTI_VECTOR
    if not (folder / "modules.json").is_file() and any(
        str(a).endswith("ForSequenceClassification") for a in architectures
    ):
        return CROSS_ENCODER
    return DENSE
