"""The configuration is read once, at the edge, and travels as a value: ``evaluate(config=...)``
and ``evaluate(settings=...)``, one read of benchharness.toml per command or call, and families
built with the run's typed ``BuildContext``."""

from __future__ import annotations

from pathlib import Path

import pytest

import benchharness
from benchharness.cli import main
from benchharness.core.errors import InvalidInputError
from benchharness.core.settings import Config, load_config
from benchharness.core.specs import BuildContext, Family, UnknownEncoderError
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import RunSettings
from tests.fakes import HashEncoder

TASK = "SICKRelatedness-trial"


def reads_of_the_config(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every read of a file named benchharness.toml from now on."""
    real, seen = Path.read_text, []

    def read_text(self: Path, *args, **kwargs) -> str:
        if self.name == "benchharness.toml":
            seen.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    return seen


@pytest.fixture
def elsewhere(tmp_path, data_dir) -> Path:
    """A project folder that is not the working directory, registering ``hashed`` (a fake family)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "benchharness.toml").write_text(
        f'[paths]\ndata_dir = "{data_dir}"\n\n[encoders.hashed]\nspec = "fake-hash:16"\n'
    )
    return folder


@pytest.fixture
def fake_family(register_plugin) -> list[BuildContext]:
    """A family ``fake-hash:<dim>`` whose builder keeps the context it was given."""
    contexts: list[BuildContext] = []

    def build(name: str, params: dict, context: BuildContext) -> HashEncoder:
        contexts.append(context)
        return HashEncoder(name, dim=int(params["dim"]))

    register_plugin("families", "fake-hash", Family.of("fake-hash", build, target="dim", accepts=()))
    return contexts


def test_evaluate_takes_the_configuration_by_path_or_value_not_from_the_working_directory(
    elsewhere, fake_family, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # no benchharness.toml here or above: "hashed" is unknown here
    monkeypatch.delenv("BENCHHARNESS_DATA")
    with pytest.raises(UnknownEncoderError, match=r"unknown encoder 'hashed'"):
        benchharness.evaluate("hashed", TASK)
    config = load_config(elsewhere / "benchharness.toml")
    by_path = benchharness.evaluate("hashed", TASK, config=elsewhere / "benchharness.toml")
    by_value = benchharness.evaluate("hashed", TASK, config=config)
    expected = benchharness.evaluate(HashEncoder("hashed", dim=16), TASK, data_dir=config.data_dir)
    assert by_path.results[0].main_score == by_value.results[0].main_score == expected.results[0].main_score
    with pytest.raises(InvalidInputError, match=r"configuration file .*missing.toml \(config=\) does not exist"):
        benchharness.evaluate("hashed", TASK, config=tmp_path / "missing.toml")


def test_settings_stand_for_every_run_keyword_and_one_beside_them_is_refused(elsewhere, fake_family, monkeypatch):
    monkeypatch.chdir(elsewhere.parent)
    settings = RunSettings(batch_size=7, seed=3, config=load_config(elsewhere / "benchharness.toml"))
    results = benchharness.evaluate("hashed", TASK, settings=settings)
    assert results.results[0].task == TASK
    assert fake_family[-1].batch_size == 7 and fake_family[-1].device is None
    with pytest.raises(InvalidInputError, match="settings= holds the run's settings; leave out seed, results_dir"):
        benchharness.evaluate("hashed", TASK, settings=settings, seed=4, results_dir="x")
    with pytest.raises(InvalidInputError, match=r"give a benchharness\.RunSettings"):
        benchharness.evaluate("hashed", TASK, settings={"seed": 3})


def test_families_get_the_runs_device_batch_size_data_root_and_hub_cache(elsewhere, fake_family, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")  # else the environment's cache wins, as for huggingface_hub itself
    hub_cache = tmp_path / "hub"
    hub_cache.mkdir()
    config = load_config(elsewhere / "benchharness.toml")
    config = Config(**{**config.__dict__, "hf_hub_cache": hub_cache})
    settings = RunSettings(device="cpu", batch_size=5, data_dir=tmp_path / "data", config=config)
    Resolver(settings=settings).get("fake-hash:8")
    context = fake_family[-1]
    assert (context.device, context.batch_size, context.data_root) == ("cpu", 5, tmp_path / "data")
    assert context.hub.cache == hub_cache
    assert context.sizes() == {"device": "cpu", "batch_size": 5}


def test_one_run_command_and_one_evaluate_call_each_read_the_configuration_once(elsewhere, monkeypatch):
    monkeypatch.chdir(elsewhere)
    run = ["run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache", "--quiet"]
    assert main(run) == 0  # imports and caches first: what is counted is a command's own reads
    seen = reads_of_the_config(monkeypatch)
    assert main(run) == 0
    assert seen == [elsewhere / "benchharness.toml"]
    seen.clear()
    benchharness.evaluate("glove-50d", TASK)
    assert seen == [elsewhere / "benchharness.toml"]


def test_a_default_run_settings_reads_the_configuration_when_made(elsewhere, monkeypatch):
    monkeypatch.chdir(elsewhere)
    settings = RunSettings()
    assert settings.config.file == elsewhere / "benchharness.toml"
    assert settings.config.encoders["hashed"] == {"spec": "fake-hash:16"}
    assert settings.but(seed=2).config is settings.config  # the value travels; nothing reads the file again
