"""Built-in encoder names as a ``catalogues`` plugin: the MiniLMs every comparison here starts
from, GloVe 6B 50d, and today's published embedders (e5, bge, gte) with their model cards'
prompts. Consulted first (order 0), before the configuration's ``[encoders.*]``, the trained
recipes and the published checkpoints, as any catalogue: one way for a name to mean a model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from benchharness.core.specs import Catalogue, EncoderSpec, Resolved

#: hub ids of the MiniLMs every comparison here starts from (one place for the resolver and benchmarks)
MINILMS: dict[str, str] = {
    "minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
    "minilm-l3": "sentence-transformers/paraphrase-MiniLM-L3-v2",
}


@dataclass(frozen=True)
class BuiltIn:
    spec: EncoderSpec
    description: str


BUILTINS: dict[str, BuiltIn] = {
    "minilm-l6": BuiltIn(
        {"type": "st", "model": MINILMS["minilm-l6"]},
        "all-MiniLM-L6-v2 as sentence-transformers defines it (mean pooling, normalize)",
    ),
    "minilm-l3": BuiltIn(
        {"type": "st", "model": MINILMS["minilm-l3"]},
        "paraphrase-MiniLM-L3-v2 as sentence-transformers defines it (mean pooling)",
    ),
    "glove-50d": BuiltIn(
        {"type": "glove", "file": "glove-50d"},
        "average of GloVe 6B 50d vectors (lowercased whitespace tokens, OOV skipped)",
    ),
    "bm25": BuiltIn(
        {"type": "bm25", "method": "lucene"},  # type: ignore[typeddict-unknown-key]
        "BM25 by bm25s with its documented defaults (lucene, k1 1.5, b 0.75; bm25s.tokenize); a first stage",
    ),
}

#: the e5 model cards: "query: " on queries and on symmetric tasks (STS), "passage: " on documents
E5_PROMPTS = {"prompt": "query: ", "query_prompt": "query: ", "document_prompt": "passage: "}
#: the bge v1.5 model cards: the retrieval instruction on queries only, nothing elsewhere
BGE_PROMPTS = {"query_prompt": "Represent this sentence for searching relevant passages: "}


def _published(model: str, prompts: dict[str, str], card: str) -> BuiltIn:
    spec: EncoderSpec = {"type": "st", "model": model, **prompts}  # type: ignore[typeddict-item]
    shown = ", ".join(f"{k}={v!r}" for k, v in prompts.items()) or "no prompts"
    return BuiltIn(spec, f"{model} with its documented prompts ({shown}; {card})")


#: published embedders of today, by their model cards' prompts (downloaded from the hub when first used)
BUILTINS.update(
    {
        **{
            f"e5-{size}-v2": _published(f"intfloat/e5-{size}-v2", E5_PROMPTS, "e5 model card")
            for size in ("small", "base", "large")
        },
        **{
            f"bge-{size}-en-v1.5": _published(f"BAAI/bge-{size}-en-v1.5", BGE_PROMPTS, "bge model card")
            for size in ("small", "base", "large")
        },
        **{
            f"gte-{size}": _published(f"thenlper/gte-{size}", {}, "gte model card: no instruction")
            for size in ("small", "base", "large")
        },
    }
)


def _resolve(name: str, **_: Any) -> Resolved | None:
    builtin = BUILTINS.get(name)
    return None if builtin is None else Resolved(dict(builtin.spec))  # type: ignore[arg-type]


def _rows() -> list[dict[str, str]]:
    return [
        {"name": n, "source": "built-in", "settings": json.dumps(b.spec), "description": b.description}
        for n, b in BUILTINS.items()
    ]


CATALOGUE = Catalogue(resolve=_resolve, rows=_rows, order=0)
