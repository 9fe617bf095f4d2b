"""Shared fixtures: the shared data and HF cache beside the checkout, and tiny random BERTs.

Tests never touch the network: HF_HUB_OFFLINE is forced, and models are either the two MiniLMs of
the shared cache or tiny randomly initialised BERTs built from a config with the MiniLM vocabulary.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers import DATA, HF_CACHE, make_tiny_bert, slow_because

if TYPE_CHECKING:
    from benchharness.core.data_root import DataRoot

#: the Ray tests' session cluster and hang guard (tests/ray_fixtures.py), started only when asked for
pytest_plugins = ["tests.ray_fixtures"]

# no per-user configuration of the machine running the tests leaks into them
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="benchharness-tests-config-")
os.environ.pop("BENCHHARNESS_CONFIG", None)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_CACHE", str(HF_CACHE))
os.environ.setdefault("BENCHHARNESS_DATA", str(DATA))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the workers of ``pytest -n N`` share the machine's cores: each keeps to its share of threads (torch
# sizes its OpenMP pool from this at import, and the command-line tests' processes inherit it), since
# N pools of every core each spin against one another
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))


#: the option that runs the tests marked ``benchmark_smoke`` (skipped without it, saying how)
SMOKE_OPTION = "--benchmark-smoke"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        SMOKE_OPTION,
        action="store_true",
        help="also run every benchmark script in smoke mode (tests marked benchmark_smoke; CI's second step)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses what makes a test slow (``tests.helpers.slow_because``),
    put the tests of the Ray cluster on one xdist worker (``-n 2 --dist loadgroup``): the cluster
    is a session fixture, and two of them would share two cores with everything else; and skip
    the benchmark scripts' smoke runs unless ``--benchmark-smoke`` asks for them: they check the
    measuring tools, not the harness, and would double the suite's time."""
    smoke = config.getoption(SMOKE_OPTION)
    for item in items:
        if not smoke and item.get_closest_marker("benchmark_smoke") is not None:
            item.add_marker(pytest.mark.skip(reason=f"a benchmark script's smoke run: pytest {SMOKE_OPTION} runs it"))
        if slow_because(item) is not None:
            item.add_marker(pytest.mark.slow)
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.exists():
        pytest.skip(f"shared data not found at {DATA}")
    return DATA


@pytest.fixture(scope="session")
def training_corpora(data_dir) -> DataRoot:
    """The shared data root, for a test that reads a recipe's whole training corpus (all of SNLI and
    MNLI, the dictionaries): tens of seconds, so the test is ``slow``."""
    from benchharness.core.data_root import DataRoot

    return DataRoot(data_dir)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """Folder of a tiny random BERT (2 layers, hidden 32), usable as ``hf:<folder>``."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture
def project(tmp_path, monkeypatch, data_dir):
    """A fresh project folder as the working directory: its own benchharness.toml (cache inside
    it, results in ./results) and the shared data root."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHHARNESS_DATA", str(data_dir))
    (tmp_path / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n')
    return tmp_path


@pytest.fixture
def register_plugin():
    """``register_plugin(kind, name, plugin)`` adds a plugin for one test, removed afterwards."""
    from benchharness.core.plugins import PLUGINS

    added: list[tuple[str, str]] = []

    def add(kind: str, name: str, plugin: object) -> None:
        PLUGINS.register(kind, name, plugin)
        added.append((kind, name))

    yield add
    for kind, name in added:
        PLUGINS.unregister(kind, name)
