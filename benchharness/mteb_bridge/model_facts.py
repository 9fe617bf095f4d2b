"""What a model's own files say about it, read offline, for the ``ModelMeta`` of a model that mteb's
registry does not list (a hub model it lacks, a trained run, a post-processed encoder).

mteb's own ``ModelMeta.from_hub`` asks the Hub for these facts; an export must work offline and
describe the weights its results were computed with, so they are read from the files the encoder
identity names: the hub cache at the recorded commit, a local folder, or the run a trained recipe
(``recipe:<key>``) left in the runs folder. Nothing is downloaded and no tensor is loaded: the
parameter count comes from the safetensors headers, the width and token limit from the
configuration files (most of them recorded in the identity itself), licence and languages from
the model card's front matter. A file that is missing leaves its field None.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

#: a Hugging Face hub id (``owner/name``); local paths and ``recipe:<key>`` names are not
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
#: families whose identity names a folder of weights (in the hub cache, on disk or in the runs folder)
FOLDER_FAMILIES = ("sentence-transformers", "hf")
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
#: pickled weights: their parameter count is not read (unpickling runs code), so it stays unknown
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class ModelFacts:
    """The ``ModelMeta`` fields a model's files give; None where they do not say."""

    n_parameters: int | None = None
    embed_dim: int | None = None
    max_tokens: int | None = None
    license: str | None = None
    languages: list[str] | None = None
    release_date: str | None = None
    #: the training datasets the card declares, as Hugging Face dataset ids: not ``ModelMeta``'s
    #: ``training_datasets``, which names mteb tasks, and no card id names an mteb task's dataset
    card_datasets: tuple[str, ...] = ()

    def known(self) -> dict[str, Any]:
        """The ``ModelMeta`` fields found, by field name."""
        return {key: value for key, value in asdict(self).items() if value is not None and key != "card_datasets"}


def model_facts(
    identity_info: Mapping[str, Any],
    metadata: Mapping[str, Any] | None = None,
    training: Mapping[str, Any] | None = None,
) -> ModelFacts:
    """The facts of the encoder an identity describes. A composition's come from its innermost
    base's files, its width from the post-processors on top (``metadata``: the stored result's
    ``encoder_metadata``, which records what a fit decided, such as whitening's kept dimensions);
    ``training``: a trained run's manifest, for its date."""
    base = innermost(identity_info)
    folder = model_folder(base)
    config = transformer_config(base, folder)
    card = model_card(folder) if folder is not None else {}
    return ModelFacts(
        n_parameters=parameter_count(folder, str(base.get("family"))) if folder is not None else None,
        embed_dim=output_width(identity_info, metadata or {}, base_width(base, config)),
        max_tokens=token_limit(base, config),
        license=card_license(card),
        languages=card_languages(card),
        release_date=release_date(training),
        card_datasets=card_datasets(card),
    )


def innermost(identity_info: Mapping[str, Any]) -> Mapping[str, Any]:
    """The identity of the encoder a chain of post-processors wraps (each nests its ``base``)."""
    stages = postprocessors(identity_info)
    return stages[0]["base"] if stages else identity_info


# ------------------------------------------------------------------------------------------------
# where the files are


def model_folder(base: Mapping[str, Any]) -> Path | None:
    """The folder of the weights ``base`` was computed with, found without downloading: None when
    it is not on this machine, or when its weights are not the ones the identity fingerprinted
    (a folder overwritten since, another run of the recipe), whose facts would describe another model."""
    model = base.get("model")
    if base.get("family") not in FOLDER_FAMILIES or not isinstance(model, str):
        return None
    folder = local_folder(model)
    if folder is None:
        folder = hub_snapshot(model, base.get("revision")) if HUB_ID.fullmatch(model) else trained_folder(model)
    return folder if folder is not None and same_weights(folder, base.get("weights_sha256")) else None


def local_folder(model: str) -> Path | None:
    """``model`` as a folder on this machine (an ad-hoc ``hf:<path>``, a run resolved by its folder)."""
    path = Path(model).expanduser()
    try:
        return path if path.is_dir() else None
    except OSError:  # a name too long to be a path
        return None


def hub_snapshot(model: str, revision: object) -> Path | None:
    """The hub cache's snapshot of ``model`` at the commit that was run (``local_files_only``: the
    cache only, whatever the offline setting), or None."""
    if not isinstance(revision, str):
        return None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    from benchharness.core.settings import default_hub

    try:
        return Path(snapshot_download(model, revision=revision, cache_dir=default_hub().cache, local_files_only=True))
    except (HFValidationError, LocalEntryNotFoundError):
        return None


def trained_folder(model: str) -> Path | None:
    """The model folder of a trained recipe's run (``recipe:<key>[-r<k>]``: the name a stored result
    gives it), as the resolver finds it without training: None when the runs folder lacks it."""
    from benchharness.core.errors import UserError
    from benchharness.evaluation.resolver import Resolver

    try:
        spec = Resolver(train_missing=False).spec_for(model)
    except UserError:  # not trained here, not a name at all
        return None
    return local_folder(spec["model"]) if isinstance(spec.get("model"), str) else None


def same_weights(folder: Path, fingerprint: object) -> bool:
    """Whether ``folder`` holds the weights the identity fingerprinted (the sha256 encoders record)."""
    from benchharness.core.errors import MissingFileError
    from benchharness.encoders.hub import weights_fingerprint

    try:
        return weights_fingerprint(str(folder)) == fingerprint
    except MissingFileError:  # no weight file at all
        return False


def read_json(path: Path) -> Any:
    """A configuration file's JSON value; None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_object(path: Path) -> dict[str, Any]:
    """A configuration file's JSON object; empty when it is missing or holds no object."""
    value = read_json(path)
    return value if isinstance(value, dict) else {}


# ------------------------------------------------------------------------------------------------
# parameters


def parameter_count(folder: Path, family: str) -> int | None:
    """The parameters in the weight files the encoder loads: the transformer's (``hf``), plus each
    sentence-transformers module's own (a Dense layer keeps its weights in its folder). None when
    one of them is pickled only. A post-processor's fitted statistics (whitening's mean and
    matrix) are not counted: they are not in any weight file."""
    folders = [folder] if family == "hf" else module_folders(folder)
    counts = [weights_in(f) for f in folders]
    if any(count is None for count in counts):
        return None
    return sum(c for c in counts if c is not None) or None


def module_folders(folder: Path) -> list[Path]:
    """The folders of a sentence-transformers model's modules (``modules.json``; the root alone
    when it has none)."""
    listed = read_json(folder / "modules.json")
    paths = {str(m.get("path", "")) for m in listed if isinstance(m, dict)} if isinstance(listed, list) else set()
    return [folder / p for p in sorted(paths)] if paths else [folder]


def weights_in(folder: Path) -> int | None:
    """The parameters of one folder's safetensors weights (one file, or the shards its index
    lists); 0 with no weights (pooling, normalisation); None for pickled weights alone."""
    if (folder / SAFETENSORS).is_file():
        files = [folder / SAFETENSORS]
    elif (folder / SAFETENSORS_INDEX).is_file():
        shards = read_object(folder / SAFETENSORS_INDEX).get("weight_map") or {}
        files = [folder / name for name in sorted(set(shards.values()))]
    else:
        return None if any((folder / name).is_file() for name in PICKLED) else 0
    counts = [safetensors_parameters(f) for f in files]
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def safetensors_parameters(path: Path) -> int | None:
    """The elements of a safetensors file's floating-point tensors, read from its header alone
    (memory-mapped, no tensor loaded). Integer tensors are buffers, not parameters (BERT's
    ``position_ids``): mteb's registry leaves them out too (all-MiniLM-L6-v2: 22,713,216, its
    file's float tensors). None for a damaged file."""
    from safetensors import SafetensorError, safe_open

    total = 0
    try:
        with safe_open(str(path), framework="numpy") as weights:
            for name in weights.keys():  # noqa: SIM118 (a safetensors handle is not a dict)
                tensor = weights.get_slice(name)
                if tensor.get_dtype().startswith(("F", "BF")):
                    total += math.prod(tensor.get_shape())
    except (SafetensorError, OSError):
        return None
    return total


# ------------------------------------------------------------------------------------------------
# width and token limit


def transformer_config(base: Mapping[str, Any], folder: Path | None) -> Mapping[str, Any]:
    """The transformer's configuration (``hidden_size``, ``max_position_embeddings``): as the
    identity records it (a sentence-transformers module folder's ``config.json``), else the model
    folder's ``config.json``."""
    for config in module_configs(base):
        if "hidden_size" in config:
            return config
    return read_object(folder / "config.json") if folder is not None else {}


def module_configs(base: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The module configurations a sentence-transformers identity records, in module order (the
    ``modules`` entry: ``<path>/config.json`` and ``sentence_bert_config.json`` files, or each
    in-memory module's ``get_config_dict``)."""
    modules = base.get("modules")
    if not isinstance(modules, Mapping):
        return []
    return [config for key, config in modules.items() if key != "modules" and isinstance(config, Mapping)]


def base_width(base: Mapping[str, Any], config: Mapping[str, Any]) -> int | None:
    """The width of the base encoder's vectors: what a served model says it returns; for a
    sentence-transformers model, its last module that sets one (a Dense layer's ``out_features``,
    else the Pooling's, times its concatenated modes); else the transformer's hidden size (every
    ``hf`` pooling keeps it)."""
    if isinstance(base.get("dimensions"), int):
        return int(base["dimensions"])
    widths = [w for w in map(module_width, module_configs(base)) if w is not None]
    if widths:
        return widths[-1]
    hidden = config.get("hidden_size")
    return hidden if isinstance(hidden, int) else None


def module_width(config: Mapping[str, Any]) -> int | None:
    """The output width one sentence-transformers module sets, or None when it keeps its input's."""
    if isinstance(config.get("out_features"), int):
        return int(config["out_features"])
    width = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    if not isinstance(width, int):
        return None
    mode = config.get("pooling_mode")  # sentence-transformers 6; before it, one flag per mode
    if mode is None:
        modes = sum(1 for key, on in config.items() if key.startswith("pooling_mode_") and on is True) or 1
    else:
        modes = 1 if isinstance(mode, str) else len(mode)
    return width * modes


def output_width(identity_info: Mapping[str, Any], metadata: Mapping[str, Any], width: int | None) -> int | None:
    """``width`` through the post-processors of a composition, innermost first. Each stage's
    recorded step (``metadata['post_processing']``, innermost first) is used when the two lists
    match: whitening at its rank records the dimensions it kept only there."""
    stages = postprocessors(identity_info)
    steps = list(metadata.get("post_processing") or [])
    recorded = steps if len(steps) == len(stages) else [{}] * len(stages)
    for stage, step in zip(stages, recorded):
        width = stage_width(stage, step, width)
    return width


def postprocessors(identity_info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The post-processor identities of a composition, innermost first."""
    stages = []
    info = identity_info
    while isinstance(info.get("base"), Mapping):
        stages.append(info)
        info = info["base"]
    return stages[::-1]


def stage_width(stage: Mapping[str, Any], step: Mapping[str, Any], width: int | None) -> int | None:
    """The width after one post-processor, as the installed post-processor of that kind reads its
    record (``PostProcessor.recorded_width``); unknown for a kind not installed here, or for a
    plugin that is no ``PostProcessor``."""
    from benchharness.core.plugins import PLUGINS

    kind = stage.get("postprocessor")
    if not isinstance(kind, str) or kind not in PLUGINS.names("postprocessors"):
        return None
    factory = PLUGINS.get("postprocessors", kind)
    reader = getattr(factory, "recorded_width", None)
    return reader(stage.get("params") or {}, step, width) if callable(reader) else None


def token_limit(base: Mapping[str, Any], config: Mapping[str, Any]) -> int | None:
    """The most tokens the encoder reads of a sentence: its truncation length (an ``hf`` encoder's
    ``max_length``, a sentence-transformers model's ``max_seq_length``), at most the transformer's
    positions (``max_position_embeddings``): either alone when the other is not known."""
    truncation = base.get("max_length")
    for module in module_configs(base):
        truncation = module.get("max_seq_length", truncation)
    limits = [v for v in (truncation, config.get("max_position_embeddings")) if isinstance(v, int)]
    return min(limits) if limits else None


# ------------------------------------------------------------------------------------------------
# card and date


def model_card(folder: Path) -> dict[str, Any]:
    """The YAML front matter of the folder's model card (``README.md``), empty without one."""
    import yaml  # type: ignore[import-untyped]
    from huggingface_hub.repocard import metadata_load

    try:
        return metadata_load(folder / "README.md") or {}
    except (OSError, ValueError, yaml.YAMLError):  # no card, not UTF-8, broken front matter
        return {}


def card_license(card: Mapping[str, Any]) -> str | None:
    """The card's licence when it is one of mteb's licence names (``ModelMeta`` accepts no other;
    ``other`` says nothing)."""
    from mteb.types import Licenses

    value = card.get("license")
    return value if isinstance(value, str) and value in get_args(Licenses) else None


def card_languages(card: Mapping[str, Any]) -> list[str] | None:
    """The card's languages in mteb's codes (``en`` -> ``eng-Latn``), converted as mteb's own
    ``ModelMeta.from_hub`` converts a card's: ISO 639-1 or 639-3 codes get the language's default
    script from mteb's tables, ``xxx-Xxxx`` codes stay; a code those tables do not map (a
    region such as ``pt-br``, ``multilingual``) is dropped. None when none is left."""
    from mteb.languages.iso_mappings import _hf_langs_to_iso_lang_scripts

    return _hf_langs_to_iso_lang_scripts(card_strings(card, "language"))


def card_datasets(card: Mapping[str, Any]) -> tuple[str, ...]:
    """The card's ``datasets`` list (Hugging Face ids), as written."""
    return tuple(card_strings(card, "datasets"))


def card_strings(card: Mapping[str, Any], key: str) -> list[str]:
    """A card field that is one string or a list of them, as a list (other values left out)."""
    value = card.get(key)
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [v for v in values if isinstance(v, str)]


def release_date(training: Mapping[str, Any] | None) -> str | None:
    """The day a trained run's manifest says it was made (its ``date``). A hub model's is not in
    its offline files (mteb asks the Hub for its first commit; model cards have no date field), and
    a stored result's own date is when it was evaluated, not when the model was released: both
    stay None."""
    recorded = (training or {}).get("date")
    if not isinstance(recorded, str):
        return None
    try:
        return datetime.fromisoformat(recorded).date().isoformat()
    except ValueError:
        return None
