"""Models saved by sentence-transformers 0.3.x, unpacked and turned into a plain Hugging Face folder.

ConSERT (and other 2020-21 work) published its models as zip/tar archives of a folder written by
sentence-transformers 0.3.9::

    modules.json                 [{"idx": 0, "path": "0_Transformer",
                                   "type": "sentence_transformers.models.Transformer"},
                                  {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    config.json                  {"__version__": "0.3.9"}
    0_Transformer/               (``0_BERT/`` for the deprecated ``models.BERT`` alias)
        config.json, pytorch_model.bin, vocab.txt, tokenizer_config.json, special_tokens_map.json
        sentence_bert_config.json    {"max_seq_length": 64}
    1_Pooling/config.json

The first module is itself a transformers folder, so conversion copies its config, weights and
tokenizer into a clean folder, adding what current transformers needs and old ones did not write
(``model_type``). Pooling is not taken from ``1_Pooling``: a published checkpoint is evaluated with
the pooling its paper used (ConSERT saves mean pooling but evaluates with the last two layers).

Truncation: 0.3.x tokenised each sentence without special tokens and then called
``prepare_for_model(max_length=min(longest, max_seq_length, max_position_embeddings - 3) + 3)``,
so a sentence keeps up to ``max_seq_length + 1`` word pieces. ``max_length`` (special tokens
included) is therefore ``max_seq_length + 3``, which is what ``converted_max_length`` returns.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

from benchharness.core.atomic import atomic_dir, write_json
from benchharness.core.errors import InvalidInputError

#: module types of the 0.3.x transformer module (``models.BERT`` & co. are deprecated aliases)
TRANSFORMER_TYPES = ("Transformer", "BERT", "RoBERTa", "DistilBERT", "ALBERT", "XLMRoBERTa", "CamemBERT")
#: modules that do not change the vectors of a checkpoint evaluated with its own pooling
IGNORED_TYPES = ("Pooling",)
SBERT_CONFIG = "sentence_bert_config.json"
WEIGHTS = ("pytorch_model.bin", "model.safetensors")
TOKENIZER_FILES = (
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)
#: config.json ``architectures`` -> ``model_type``, for configs written before transformers 3
MODEL_TYPES = {
    "BertModel": "bert",
    "RobertaModel": "roberta",
    "DistilBertModel": "distilbert",
    "AlbertModel": "albert",
    "XLMRobertaModel": "xlm-roberta",
    "CamembertModel": "camembert",
}


class ArchiveError(InvalidInputError):
    pass


def unpack(archive: Path, dest: Path) -> None:
    """Extract a zip or tar (any compression) into ``dest``, refusing members that leave it."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            root = dest.resolve()
            for member in zf.namelist():
                if not (dest / member).resolve().is_relative_to(root):
                    raise ArchiveError(f"{archive}: member {member!r} would be written outside {dest}")
            zf.extractall(dest)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tf:
            try:
                tf.extractall(dest, filter="data")
            except tarfile.FilterError as exc:
                raise ArchiveError(f"{archive}: unsafe member: {exc}") from None
    else:
        raise ArchiveError(
            f"{archive} is neither a zip nor a tar archive (a download interrupted, or "
            "a web page saved instead of the file?); delete it and download it again"
        )


def model_root(folder: Path) -> Path:
    """The folder holding ``modules.json``: the archive's top or the shallowest one below it."""
    found = sorted(folder.rglob("modules.json"), key=lambda p: (len(p.parts), str(p)))
    if not found:
        raise ArchiveError(f"{folder}: no modules.json; not a sentence-transformers model archive")
    return found[0].parent


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ArchiveError(f"{path} is missing from the archive") from None
    except json.JSONDecodeError as exc:
        raise ArchiveError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def transformer_module(root: Path) -> Path:
    """The folder of the archive's transformer module, after checking the pipeline it sits in.

    A module that changes the vectors (Dense, Normalize, an MLP) would be silently dropped by
    evaluating the transformer alone, so any module besides the transformer and a pooling is refused.
    """
    version = _read_json(root / "config.json").get("__version__", "") if (root / "config.json").is_file() else ""
    if version and not version.startswith("0.3."):
        raise ArchiveError(
            f"{root / 'config.json'}: saved by sentence-transformers {version}, not 0.3.x; "
            "its truncation rule differs. Load it with st:<folder> instead."
        )
    modules = _read_json(root / "modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if not kinds or kinds[0] not in TRANSFORMER_TYPES:
        raise ArchiveError(
            f"{root / 'modules.json'}: the first module is {kinds[:1]}, expected a transformer "
            f"({', '.join(TRANSFORMER_TYPES)})"
        )
    extra = [k for k in kinds[1:] if k not in IGNORED_TYPES]
    if extra:
        raise ArchiveError(f"{root / 'modules.json'}: modules {extra} change the vectors and are not supported")
    return root / modules[0]["path"]


def convert(root: Path, out: Path) -> Path:
    """Write ``out``: the transformer module as a folder ``AutoModel``/``AutoTokenizer`` load."""
    module = transformer_module(root)
    config = _read_json(module / "config.json")
    if "model_type" not in config:
        archs = config.get("architectures") or []
        model_type = next((MODEL_TYPES[a] for a in archs if a in MODEL_TYPES), None)
        if model_type is None:
            raise ArchiveError(
                f"{module / 'config.json'}: no model_type, and architectures {archs} name no "
                f"known model ({', '.join(MODEL_TYPES)})"
            )
        config["model_type"] = model_type
    sbert = _read_json(module / SBERT_CONFIG)
    weights = [module / w for w in WEIGHTS if (module / w).is_file()]
    if not weights:
        raise ArchiveError(f"{module}: no weight file ({', '.join(WEIGHTS)})")
    with atomic_dir(out) as tmp:
        write_json(tmp / "config.json", config)
        write_json(tmp / SBERT_CONFIG, sbert)
        shutil.copyfile(weights[0], tmp / weights[0].name)
        for name in TOKENIZER_FILES:
            if (module / name).is_file():
                shutil.copyfile(module / name, tmp / name)
        if "do_lower_case" in sbert:  # the deprecated models.BERT kept it here, not in the tokenizer
            tok_path = tmp / "tokenizer_config.json"
            tok = _read_json(tok_path) if tok_path.is_file() else {}
            write_json(tok_path, {**tok, "do_lower_case": bool(sbert["do_lower_case"])})
    return out


def converted_max_length(folder: Path) -> int:
    """``max_length`` (special tokens included) that reproduces 0.3.x truncation; see the module doc."""
    sbert = _read_json(folder / SBERT_CONFIG)
    config = _read_json(folder / "config.json")
    try:
        max_seq = int(sbert["max_seq_length"])
    except (KeyError, TypeError, ValueError):
        raise ArchiveError(f"{folder / SBERT_CONFIG}: no integer max_seq_length") from None
    return min(max_seq, int(config.get("max_position_embeddings", 512)) - 3) + 3
