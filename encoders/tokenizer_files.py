"""The special tokens a tokenizer folder declares, read from its JSON files without transformers.

RepAL's identity names the base tokenizer's mask token, and loading the tokenizer to ask for it
would load the whole model (sentence-transformers and transformers imports, weights: about 10 s)
even on a warm rerun that encodes nothing. transformers takes a tokenizer's ``mask_token`` from
the same two files, ``special_tokens_map.json`` and ``tokenizer_config.json`` (a plain string, or
an added-token object whose ``content`` is the string). Where neither declares it, or they
disagree, the answer is None and the caller loads the tokenizer, so the value never differs from
the loaded tokenizer's.
"""

from __future__ import annotations

import json
from pathlib import Path

FILES = ("special_tokens_map.json", "tokenizer_config.json")


def _token(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def declared_token(folder: Path, name: str = "mask_token") -> str | None:
    """``name`` as the tokenizer files of ``folder`` declare it; None if undeclared, unreadable
    or declared differently by the two files."""
    found = set()
    for file in FILES:
        path = Path(folder) / file
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf8"))
        except (OSError, ValueError):
            return None
        token = _token(data.get(name)) if isinstance(data, dict) else None
        if token is not None:
            found.add(token)
    return found.pop() if len(found) == 1 else None


def sentence_transformer_tokenizer_folder(folder: Path) -> Path | None:
    """The folder of a sentence-transformers model's Transformer module (``modules.json``), where
    its tokenizer files are; None when it cannot be told."""
    try:
        modules = json.loads((Path(folder) / "modules.json").read_text(encoding="utf8"))
    except (OSError, ValueError):
        return None
    for module in modules if isinstance(modules, list) else []:
        # "sentence_transformers.models.Transformer", or "...base.modules.transformer.Transformer" (v5+)
        if isinstance(module, dict) and str(module.get("type", "")).rsplit(".", 1)[-1] == "Transformer":
            return Path(folder) / str(module.get("path", ""))
    return None
