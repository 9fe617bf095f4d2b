"""A trained run as the folder that goes to the Hugging Face hub, and the upload.

The staged folder is what ``benchharness push`` uploads and what the tests check: the run's model
as a sentence-transformers model (converted here when the run predates that format), its
``manifest.json``, and the model card (``reporting.model_card``). Uploading needs the network and
a token (``huggingface-cli login`` or ``HF_TOKEN``); staging needs neither.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from benchharness.core.atomic import write_text
from benchharness.core.errors import InvalidInputError
from benchharness.core.manifests import CHECKPOINT, MANIFEST, METRICS, RunManifest, read_manifest
from benchharness.core.results import ResultStore


def run_folder(spec: dict) -> Path:
    """The run folder behind a trained encoder's spec (its ``model`` is the run folder, or
    ``<run>/model`` in runs written before the model's files sat beside the manifest)."""
    model = spec.get("model")
    runs = [Path(model), Path(model).parent] if spec.get("type") == "hf" and model else []
    found = next((folder for folder in runs if (folder / MANIFEST).is_file()), None)
    if found is None:
        raise InvalidInputError(
            "only a trained run can be pushed (a run folder, its registered name or a "
            f"recipe that has been trained); this encoder is {spec.get('type', '?')}:{model}"
        )
    return found


def stage(name: str, folder: Path, store: ResultStore, out: Path, repo_id: str | None = None) -> Path:
    """Fill ``out`` with the run ``folder`` as it is shared under ``name`` (its card names ``repo_id``,
    the hub repository it goes to, when known); returns ``out``."""
    from benchharness.encoders.sentence_transformers_format import save_as_sentence_transformer
    from benchharness.reporting.model_card import card

    manifest: RunManifest = read_manifest(folder)
    if out.exists() and any(out.iterdir()):
        raise InvalidInputError(f"{out} is not empty; stage into a new folder")
    model = folder / manifest["encoder"]["model"]
    records = shutil.ignore_patterns(MANIFEST, METRICS, CHECKPOINT, "*.png")  # the run's, beside its model's files
    shutil.copytree(model, out, dirs_exist_ok=True, ignore=records if model.resolve() == folder.resolve() else None)
    if not (out / "modules.json").is_file():
        save_as_sentence_transformer(out, dict(manifest["encoder"]))
    shutil.copy2(folder / MANIFEST, out / "benchharness_manifest.json")
    write_text(out / "README.md", card(name, manifest, store, repo_id) + "\n")
    return out


def push(staged: Path, repo_id: str, private: bool = False) -> str:
    """Upload ``staged`` to the hub repository ``repo_id`` (created if missing); its URL."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    commit = api.upload_folder(
        repo_id=repo_id, folder_path=str(staged), commit_message="Upload a benchharness-trained sentence encoder"
    )
    return str(getattr(commit, "commit_url", f"https://huggingface.co/{repo_id}"))
