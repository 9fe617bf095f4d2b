"""The plugin registry: entry points of any installed distribution, lazy loading, and entries added
from Python, for every kind."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from benchharness.core.plugins import KINDS, PLUGINS, PluginError
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import RunSettings


@pytest.fixture
def outside_package(tmp_path, monkeypatch):
    """A distribution installed outside this checkout: a dist-info with entry points on sys.path."""
    (tmp_path / "bh_outside_plugin.py").write_text(
        textwrap.dedent('''
        import numpy as np
        from benchharness.core.encoder import Encoder

        LOADED = True


        class Doubled(Encoder):
            """Twice the base encoder's vectors."""

            def __init__(self, base, name):
                super().__init__(name)
                self.base = base

            def encode(self, sentences):
                return 2 * self.base.encode(sentences)

            def identity_info(self):
                return {"post": "double", "base": self.base.identity}


        def double(base, name):
            """doubles every vector"""
            return Doubled(base, name)
    ''')
    )
    info = tmp_path / "bh_outside_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bh-outside-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[benchharness.postprocessors]\ndouble = bh_outside_plugin:double\n"
        "[benchharness.tuners]\nbroken = bh_outside_plugin:nothing_here\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bh_outside_plugin", raising=False)
    PLUGINS.refresh()
    yield
    monkeypatch.undo()
    PLUGINS.refresh()


def test_every_kind_has_its_built_ins_installed():
    assert set(PLUGINS.names("families")) >= {"hf", "st", "glove", "st-archive"}
    assert set(PLUGINS.names("postprocessors")) >= {"whitening", "repal"}
    assert set(PLUGINS.names("catalogues")) >= {"recipes", "published"}
    assert set(PLUGINS.names("tasks")) >= {"sts", "transfer", "qqp", "askubuntu", "mteb"}
    assert set(PLUGINS.names("methods")) >= {"consert", "simcse", "paser", "defsent-plus"}
    assert set(PLUGINS.names("tuners")) >= {"repal", "whitening"}
    assert set(PLUGINS.names("model_kinds")) >= {"dense"}
    assert KINDS == ("families", "postprocessors", "catalogues", "tasks", "methods", "tuners", "model_kinds")


def test_a_plugin_of_another_distribution_is_found_and_loaded_only_when_asked_for(outside_package, data_dir):
    entry = PLUGINS.entry("postprocessors", "double")
    assert entry is not None and entry.source == "bh-outside-plugin" and not entry.loaded
    assert "bh_outside_plugin" not in sys.modules  # listing names imports nothing
    resolver = Resolver(settings=RunSettings(data_dir=data_dir))
    base, doubled = resolver.get("glove-50d"), resolver.get("glove-50d+double")
    sentences = ["a dog runs", "the cat sleeps"]
    np.testing.assert_array_equal(doubled.encode(sentences), 2 * base.encode(sentences))
    assert doubled.identity != base.identity


def test_a_broken_entry_names_itself_and_its_distribution(outside_package):
    with pytest.raises(
        PluginError,
        match=r"tuners plugin 'broken' = 'bh_outside_plugin:nothing_here' "
        r"\(from bh-outside-plugin\) cannot be loaded",
    ):
        PLUGINS.get("tuners", "broken")


def test_a_plugin_registered_from_python_wins_and_is_removed_again(register_plugin):
    register_plugin("postprocessors", "whitening", "math:sqrt")
    import math

    assert PLUGINS.get("postprocessors", "whitening") is math.sqrt
    PLUGINS.unregister("postprocessors", "whitening")
    assert PLUGINS.get("postprocessors", "whitening").__module__ == "benchharness.encoders.postprocess.whitening"


def test_an_unknown_kind_is_refused():
    with pytest.raises(PluginError, match="unknown plugin kind 'widgets'"):
        PLUGINS.names("widgets")


def test_the_example_plugin_package_adds_a_post_processor_to_the_command_line(tmp_path, data_dir):
    """docs/examples/abtt-plugin, installed as a user would (its own folder), used by `benchharness run`."""
    import json
    import os
    import subprocess
    from pathlib import Path

    example = Path(__file__).resolve().parents[3] / "docs" / "examples" / "abtt-plugin"
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(example),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "BENCHHARNESS_DATA": str(data_dir),
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchharness.cli",
            "run",
            "--encoders",
            "glove-50d+abtt(d=1)",
            "--tasks",
            "STSBenchmark",
            "--results-dir",
            str(tmp_path / "results"),
            "--no-cache",
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    [result] = (tmp_path / "results").glob("*/STSBenchmark.json")
    stored = json.loads(result.read_text())
    assert stored["encoder_identity"]["postprocessor"] == "abtt" and stored["encoder_identity"]["params"] == {"d": 1}
