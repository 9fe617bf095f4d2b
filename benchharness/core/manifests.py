"""Run manifests: the ``manifest.json`` a trained or tuned run leaves in its folder, and the runs
folder that registers them by name. Read by the resolver, by training (a run can be a base) and
by tuning (which writes one); written by training (``training.manifest``) and tuning.

One record type for both kinds of run, here at the bottom layer so that its writers and readers
share it. (No ``from __future__ import annotations``: ``TypedDict`` sees ``Required`` only in
evaluated annotations.)

The names a training run writes in its folder are declared here too (:data:`RUN_ENTRIES`, and its
model's :data:`MODEL_ENTRIES`), once: the loop writes them, the resolver tells an unfinished run by
them, and ``--overwrite`` deletes them and nothing else (:func:`clear_run`).
"""

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Required, TypedDict, cast

from benchharness.core.atomic import is_temporary_of
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.plugins import PLUGINS
from benchharness.core.specs import COMPOSE, EncoderSpec, split_composition

MANIFEST = "manifest.json"
#: the metrics log, one JSON object a line (``training.outputs``)
METRICS = "metrics.jsonl"
#: the folder of the resumable checkpoint, and its file (``training.resume``)
CHECKPOINT = "checkpoint"
CHECKPOINT_STATE = "state.pt"
#: where a run written before its model's files sat beside its manifest keeps them (and where a run
#: keeps its selected encoder while it trains, inside its checkpoint folder)
MODEL = "model"
#: what a run's model writes beside its manifest: the encoder and tokenizer as ``save_pretrained``
#: writes them (for the tokenizers of the field), and sentence-transformers' description of its pooling
MODEL_ENTRIES = (
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "chat_template.jinja",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
)
#: the model's other entries: weight shards, and sentence-transformers' module folders (``1_Pooling``...)
MODEL_PATTERN = re.compile(r"model-\d+-of-\d+\.safetensors|\d+_(Pooling|Dense|Normalize|WeightedLayerPooling)")
#: every other entry a training run writes in its output folder: the loop's four (``model/`` in runs
#: written before), then the figures of its entry space that DefSent+ adds
#: (``training.methods.defsent_plus``). A write killed midway may leave a temporary sibling of one of
#: them (``atomic.is_temporary_of``), which is the run's too.
RUN_ENTRIES = (MANIFEST, METRICS, CHECKPOINT, MODEL, "entry_space.png", "entry_space_after.png", *MODEL_ENTRIES)
#: foreign names listed in a refusal; the rest are counted
LISTED = 3


class CodeVersion(TypedDict):
    benchharness: str
    torch: str
    transformers: str
    git_commit: str | None
    git_dirty: bool


class Selection(TypedDict, total=False):
    rule: Required[str]
    best_step: Required[int | None]
    best_dev_spearman: float | None


class TrainingStats(TypedDict, total=False):
    steps: Required[int]
    epochs_completed: Required[int]
    batches_into_next_epoch: Required[int]
    stopped_early: Required[bool]
    train_seconds: Required[float]
    sentences: Required[int]
    sentences_per_second: Required[float]
    device: Required[str]
    precision: Required[str]
    torch_threads: Required[int]
    peak_rss_mib: Required[float]
    peak_cuda_mib: float


class RunManifest(TypedDict, total=False):
    """The ``manifest.json`` of a run. Every run names its ``encoder``; the rest depends on the kind.

    A trained run (``training.manifest.build_manifest``) holds every key up to ``training``: the spec
    ``{"type": "hf", "model": "model", "pooling": ..., "max_length": ...}`` that makes the folder an
    encoder, and its provenance (base model and weights, data, every hyper-parameter, the code
    version, the dev curve and how the saved weights were selected, what the training cost);
    training adds its ``recipe`` (with the ``command`` that trains it again), a method its own
    outputs (DefSent+'s plots and round times); ``date`` says when the weights were saved. A tuned
    run (``benchharness tune``) holds ``name``, ``encoder``, ``method``, ``base_model``, ``tuning``
    and ``date``.
    """

    encoder: Required[EncoderSpec]
    name: str
    method: str
    base_model: str
    # a trained run's record
    schema_version: int
    base_revision: str | None
    base_weights_sha256: str
    data: dict[str, Any]
    hyperparameters: dict[str, Any]
    code_version: CodeVersion
    dev_task: str | None
    dev_curve: list[list[float]]
    selection: Selection
    training: TrainingStats
    #: a trained run's recipe, with the ``command`` that trains it
    recipe: dict[str, Any]
    # written by a method after training (DefSent+'s rounds)
    entry_space_plot: str
    entry_space_after_plot: str
    round_seconds: dict[str, float]
    #: a tuned run's dev-set grid and choice (``benchharness tune``) and when it was registered
    tuning: dict[str, Any]
    date: str


def read_manifest(folder: Path) -> RunManifest:
    path = folder / MANIFEST
    if path.exists() and not path.is_file():  # a FIFO would block the read for ever
        raise InvalidInputError(f"{path}: not a regular file")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:  # not UTF-8; nested too deeply; a 4,300+ digit int
        raise InvalidInputError(f"{path}: not a benchharness run manifest ({type(exc).__name__})") from None
    if not isinstance(manifest, dict) or "encoder" not in manifest:
        raise InvalidInputError(f"{path}: not a benchharness run manifest (no 'encoder' entry)")
    encoder = manifest["encoder"]
    if not isinstance(encoder, dict) or not isinstance(encoder.get("type"), str):
        raise InvalidInputError(f"{path}: 'encoder' must be an object with a 'type' string (a model family)")
    return cast(RunManifest, manifest)  # a JSON object whose one required entry, encoder, is checked above


def refuse_code(folder: Path, spec: EncoderSpec) -> None:
    """A manifest is data that may come from elsewhere (a shared runs folder, a downloaded run), so
    it may name only families that build a model from weights (``Family.from_manifest``: ``hf``,
    ``st``, ``glove``): one that imports code (``python``) or calls a server with a key from the
    environment (``openai``) is refused, for the whole spec or the base of a composition (a tuned
    run), before anything is imported. Only the installed family is consulted, never the code the
    spec names. The user's own ``benchharness.toml`` and command line may still name any family."""
    kind = spec["type"]
    if kind == COMPOSE:
        base = split_composition(str(spec.get("spec", "")))[0]
        kind = base.split(":", 1)[0] if ":" in base else ""
    if not kind:  # the base is a name (a catalogue's, the user's own), resolved as the user resolves it
        return
    entry = PLUGINS.entry("families", kind)
    if entry is None or not getattr(entry.load(), "from_manifest", False):
        raise InvalidInputError(
            f"{folder / MANIFEST}: names the {kind!r} family; a run manifest may name only the families "
            "that build a model from weights (hf, st, glove). Name other encoders (Python objects, "
            "served models) in your own benchharness.toml or on the command line instead"
        )


def manifest_spec(folder: Path, manifest: RunManifest) -> EncoderSpec:
    """A trained run's encoder spec with its model path made absolute. A run whose model is gone
    (the folder kept, its weights deleted) is refused here with the command that trains it again,
    before a model loader reads the path as a hub id. A spec that names code is refused (:func:`refuse_code`)."""
    spec: EncoderSpec = dict(manifest["encoder"])  # type: ignore[assignment]
    refuse_code(folder, spec)
    for key in ("model", "file"):
        if key in spec and not Path(spec[key]).is_absolute():
            path = folder / spec[key]
            if not path.exists() or (key == "model" and not _holds_model(path)):
                raise MissingFileError(
                    f"{folder}: the run's {key} is gone (deleted or moved); {_retrain_hint(folder, manifest)}"
                )
            spec[key] = str(path.resolve())
    return spec


def _holds_model(path: Path) -> bool:
    """Whether a run's model folder still holds a model: its configuration and its weights."""
    weights = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
    return path.is_file() or ((path / "config.json").is_file() and any((path / w).is_file() for w in weights))


def _retrain_hint(folder: Path, manifest: RunManifest) -> str:
    import shlex

    recipe = manifest.get("recipe") or {}
    if "command" not in recipe:
        return f"train it again into {folder}, or delete the folder"
    return (
        f"train it again with: {recipe['command']} --out {shlex.quote(str(folder))} --overwrite "
        "(from the folder it was trained in), or delete the folder"
    )


def registered_runs(runs_dir: Path) -> dict[str, Path]:
    """Manifests under the runs folder, by the name they declare (else their folder name). A file
    that is no manifest (not a JSON object) is passed over: naming its folder gives its error."""
    runs: dict[str, Path] = {}
    if runs_dir.is_dir():
        for manifest in sorted(runs_dir.glob(f"*/{MANIFEST}")):
            if not manifest.is_file():  # a FIFO would block every command's lookup for ever
                continue
            try:
                record = json.loads(manifest.read_text())
            except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deeply: not a manifest
                continue
            if isinstance(record, dict):
                name = record.get("name")
                runs[name if isinstance(name, str) and name else manifest.parent.name] = manifest.parent
    return runs


def is_run_entry(name: str) -> bool:
    """Whether a run writes the entry ``name`` of its folder (or is the temporary of one)."""
    if MODEL_PATTERN.fullmatch(name) or re.fullmatch(rf"\.(?:{MODEL_PATTERN.pattern})\.(?:.+\.tmp|old)", name):
        return True
    return any(name == entry or is_temporary_of(name, entry) for entry in RUN_ENTRIES)


def foreign_entries(folder: Path) -> list[str]:
    """The entries of ``folder`` that no run writes, sorted; none when it is not a folder."""
    return sorted(p.name for p in folder.iterdir() if not is_run_entry(p.name)) if folder.is_dir() else []


def listed(names: list[str]) -> str:
    """The first few ``names``, and how many more there are."""
    shown = ", ".join(names[:LISTED])
    return shown if len(names) <= LISTED else f"{shown} and {len(names) - LISTED} more"


def check_clearable(folder: Path) -> None:
    """Refuse in one line to clear ``folder`` for a new run when that could delete what no run
    wrote: when it holds an entry no run writes (the user's own files), or is the working directory
    or one of its parents (a run's entry may be where the user stands)."""
    try:
        here = Path(os.getcwd()).resolve()
    except FileNotFoundError:  # the working directory was deleted: no folder can be it
        here = None
    where = folder.resolve()
    if here is not None and (where == here or where in here.parents):
        which = "the current folder" if where == here else f"a parent of the current folder ({here})"
        raise InvalidInputError(
            f"{folder} is {which}, which --overwrite never clears; train into a folder of its own (another --out)"
        )
    foreign = foreign_entries(folder)
    if foreign:
        raise InvalidInputError(
            f"{folder} holds {listed(foreign)}, which no run writes, and --overwrite deletes only what a run "
            f"wrote ({', '.join(e + '/' if e in (CHECKPOINT, MODEL) else e for e in RUN_ENTRIES[:6])} and its model's "
            "files): move the rest away or choose another --out"
        )


def clear_run(folder: Path) -> None:
    """Delete what a run wrote in ``folder`` (:data:`RUN_ENTRIES` and their temporaries) so that a new
    run starts there; refused, before anything is deleted, where :func:`check_clearable` refuses. The
    folder itself stays; a link among the entries is removed, never followed."""
    if not folder.exists():
        return
    check_clearable(folder)
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def unfinished_run(folder: Path) -> str | None:
    """What ``folder`` is when a training run began there and has not written its manifest yet, said
    with how to go on; None for anything else."""
    if not folder.is_dir() or (folder / MANIFEST).exists():
        return None
    if (folder / CHECKPOINT / CHECKPOINT_STATE).is_file():
        return "an unfinished run (a checkpoint, no manifest.json yet); rerun the train command to resume it"
    if (folder / METRICS).is_file():
        return (
            "an unfinished run with no checkpoint to resume (stopped before its first); rerun the train "
            "command with --overwrite to start it again"
        )
    return None
