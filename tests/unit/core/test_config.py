"""Online by default: the config's offline mode applies only where its offline cache exists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchharness.core import settings as config_mod


@pytest.fixture
def clean_env(monkeypatch):
    """No Hugging Face variables during the test, and the caller's restored after it (setenv first,
    so that monkeypatch also removes what apply_environment adds)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)


def write_config(folder: Path, cache: str, offline: bool) -> config_mod.Config:
    (folder / "benchharness.toml").write_text(
        f'[paths]\nhf_hub_cache = "{cache}"\nhf_offline = {str(offline).lower()}\n'
    )
    return config_mod.load_config(folder / "benchharness.toml")


def test_offline_only_where_the_configured_cache_exists(tmp_path, clean_env):
    (tmp_path / "shared-hub").mkdir()
    config_mod.apply_environment(write_config(tmp_path, "shared-hub", True))
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["HF_HUB_CACHE"] == str(tmp_path / "shared-hub")


def test_a_clone_elsewhere_gets_the_normal_hub(tmp_path, clean_env):
    config_mod.apply_environment(write_config(tmp_path, "../shared/hf/hub", True))
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
    assert "HF_HUB_CACHE" not in os.environ  # the default cache, not an empty folder created beside it
    assert not (tmp_path.parent / "shared" / "hf" / "hub").exists()


def test_online_config_keeps_its_chosen_cache(tmp_path, clean_env):
    config_mod.apply_environment(write_config(tmp_path, "my-hub", False))
    assert os.environ["HF_HUB_CACHE"] == str(tmp_path / "my-hub") and "HF_HUB_OFFLINE" not in os.environ
