"""The model a training run starts from, and the one rule that says what a ``--base`` names.

A base is a Hugging Face hub id, a model folder, a trained run folder (``manifest.json`` beside its
model's files, or above ``model/`` in a run written before) or the registered name of such a run. A
run stands for its saved model, so a run can continue another (ConSERT's sup-unsup and joint-unsup,
supervised PaSeR from an unsupervised run). Every method resolves its base through
:func:`base_folder`, so they all accept the same names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from benchharness.core.errors import InvalidInputError
from benchharness.core.settings import HubSettings
from benchharness.encoders import hub
from benchharness.encoders.checkpoint import load_complete, refuse_missing_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class Base(NamedTuple):
    """A loaded base model: the encoder (``AutoModel``), its tokenizer and where they came from."""

    encoder: PreTrainedModel
    tokenizer: Any
    source: hub.ModelSource


def base_folder(base: str, runs_dir: Path) -> str:
    """The model folder a base name stands for; hub ids and plain model folders pass unchanged.

    A run folder gives the model its manifest's encoder spec points to; a name that is not a path
    but names a run under the runs folder ``runs_dir`` gives that
    run's model.
    """
    folder = Path(base).expanduser()
    manifest = folder / "manifest.json"
    if manifest.is_file():
        return str(_run_model(folder, manifest))
    if folder.exists():
        return base
    from benchharness.core.manifests import registered_runs

    run = registered_runs(runs_dir).get(base)
    if run is not None:
        return str(_run_model(run, run / "manifest.json"))
    return base


def _run_model(folder: Path, manifest: Path) -> Path:
    """The trained model folder of a run; a run that is not one (a tuned chain) is refused."""
    try:
        spec = json.loads(manifest.read_text()).get("encoder")
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{manifest}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(spec, dict) or spec.get("type") != "hf":
        raise InvalidInputError(
            f"{manifest}: encoder {spec!r} is not a trained Hugging Face model, so the run "
            "cannot be a training base; pass a model folder or hub id"
        )
    model = folder / spec.get("model", "model")
    if not model.is_dir():
        raise InvalidInputError(f"{manifest}: the run's model folder {model} is missing")
    return model


def load_base(base: str, settings: HubSettings | None = None) -> Base:
    """The base encoder (``AutoModel``), its tokenizer and where they came from. ``base`` is a hub
    id or a model folder (:func:`base_folder` turns a run's folder or name into its model folder
    first); ``settings``: the Hugging Face cache and offline mode (default: the environment's, with
    no configuration file).

    Loaded by the rule every encoder loads by (``checkpoint.load_complete``): a base without a
    tokenizer, or with encoder weights transformers would initialise at random, is refused before
    training starts from it. Only the pooler may be missing (paraphrase-MiniLM-L3-v2 has none):
    a method either trains it (DefSent+) or pools without it.
    """
    from transformers import AutoTokenizer

    source = hub.resolve(base, settings)
    refuse_missing_tokenizer(source.path, source.name)
    model = load_complete(source.path, source.name)
    tokenizer = AutoTokenizer.from_pretrained(str(source.path))
    return Base(model, tokenizer, source)
