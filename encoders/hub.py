"""Where a model's files are and which exact weights they hold.

A model is named either by a Hugging Face hub id (resolved through the hub cache and offline
mode of ``core.settings.hub_settings``: the environment, else benchharness.toml) or by a local
folder. ``resolve`` is the one place a hub id becomes a folder, and the only hub call of the
encoders: every loader after it reads that folder (``local_files_only=True``). Its fingerprint is the hub
revision when there is one and, always, a sha256 over the weight files: a fine-tuned folder has
no revision, and a revision alone would not catch an edited cache. That sha256 is remembered
across runs while the files are provably unchanged (``benchharness.core.digests``), so a rerun does
not read 87 MiB of weights to find the cache of vectors it already holds.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from benchharness.core.digests import remembered, update_with_file
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.local_paths import check_local_path
from benchharness.core.settings import HubSettings, default_hub

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class ModelSource:
    name: str  # what the user wrote: hub id or path
    path: Path  # local folder holding config, tokenizer and weights
    revision: str | None  # hub commit, when loaded from the hub cache

    @property
    def weights_sha256(self) -> str:
        return weights_fingerprint(str(self.path))


def cached_snapshot(repo_id: str, cache: Path | None = None) -> Path | None:
    """The folder ``snapshot_download(repo_id, local_files_only=True)`` returns, found by the same
    two reads (``refs/main``, then the ``snapshots/<commit>`` folder) without importing
    huggingface_hub's download machinery (0.3 s of every run); None whenever that function would do
    more, so that the caller asks it: no such ref or snapshot, or a cached tree listing
    (``trees/<commit>.json``) against which it checks that the snapshot is complete. ``cache``:
    the hub cache to look in (default: the environment's, ``HF_HUB_CACHE`` or huggingface_hub's own)."""
    from huggingface_hub import constants  # names only: milliseconds

    cache = (cache or default_hub().cache).resolve()
    storage = cache / constants.REPO_ID_SEPARATOR.join(["models", *repo_id.split("/")])
    try:
        commit = (storage / "refs" / constants.DEFAULT_REVISION).read_text()  # read as is, as it does
    except (OSError, ValueError):
        return None
    if not commit or not commit.isalnum():
        return None
    snapshot = storage / "snapshots" / commit
    if not os.path.exists(snapshot) or os.path.exists(storage / "trees" / f"{commit}.json"):
        return None
    return snapshot


def resolve(name_or_path: str, settings: HubSettings | None = None) -> ModelSource:
    """Find a model locally, downloading it only when the hub is reachable and allowed;
    ``settings``: the hub cache and offline mode (default: the environment's, with no configuration file)."""
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return ModelSource(name_or_path, p.resolve(), None)
    check_local_path(name_or_path, "model")  # a missing folder, not a hub id: say so
    settings = settings or default_hub()
    cached = cached_snapshot(name_or_path, settings.cache)
    if cached is not None:
        return ModelSource(name_or_path, cached, cached.name)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        folder = snapshot_download(name_or_path, cache_dir=settings.cache, local_files_only=True)
    except HFValidationError:
        hint = f"; without the prefix: {name_or_path.split(':', 1)[1]!r}" if ":" in name_or_path else ""
        raise InvalidInputError(
            f"model {name_or_path!r} is neither a local folder nor a Hugging Face hub id (owner/name){hint}"
        ) from None
    except LocalEntryNotFoundError:
        if settings.offline:
            raise MissingFileError(
                f"model {name_or_path!r} is neither a local folder nor in the Hugging Face cache "
                f"({settings.cache}); offline mode is on (HF_HUB_OFFLINE, or hf_offline in benchharness.toml), "
                "so it cannot be downloaded. Point HF_HUB_CACHE at a cache that holds it, or pass a folder."
            ) from None
        try:
            folder = snapshot_download(name_or_path, cache_dir=settings.cache)
        except Exception as exc:  # no network, unknown id, gated model: say which and what to do
            raise MissingFileError(
                f"model {name_or_path!r} is not in the Hugging Face cache "
                f"({settings.cache}) and could not be downloaded "
                f"({type(exc).__name__}). Set HF_HUB_CACHE to a cache that holds it, or pass a folder."
            ) from None
    folder_path = Path(folder)
    return ModelSource(name_or_path, folder_path, folder_path.name)


@lru_cache(maxsize=64)
def weights_fingerprint(folder: str) -> str:
    """sha256 over every weight file of a folder (in ``WEIGHT_FILES`` order): each file's name,
    then its bytes, streamed in 8 MiB chunks; remembered while the files stay the same."""
    files = [Path(folder) / f for f in WEIGHT_FILES if (Path(folder) / f).exists()]
    if not files:
        raise MissingFileError(f"no weight file ({', '.join(WEIGHT_FILES)}) in {folder}")

    def compute() -> str:
        digest = hashlib.sha256()
        for f in files:
            digest.update(f.name.encode())
            update_with_file(digest, f)
        return digest.hexdigest()

    return remembered("weights-sha256", files, compute)
