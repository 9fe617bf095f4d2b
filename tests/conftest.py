"""Shared fixtures: the shared data and HF cache beside the checkout, and tiny random BERTs.

Tests never touch the network: HF_HUB_OFFLINE is forced, and models are either the two MiniLMs of
the shared cache or tiny randomly initialised BERTs built from a config with the MiniLM vocabulary.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

#: the Ray tests' session cluster and hang guard (tests/ray_fixtures.py), started only when asked for
pytest_plugins = ["ray_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("BENCHHARNESS_SHARED", ROOT.parent / "shared"))
DATA = Path(os.environ.get("BENCHHARNESS_DATA", SHARED / "data"))
HF_CACHE = Path(os.environ.get("HF_HUB_CACHE", SHARED / "hf" / "hub"))

# no per-user configuration of the machine running the tests leaks into them
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="benchharness-tests-config-")
os.environ.pop("BENCHHARNESS_CONFIG", None)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_CACHE", str(HF_CACHE))
os.environ.setdefault("BENCHHARNESS_DATA", str(DATA))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MINILM_L6 = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_L3 = "sentence-transformers/paraphrase-MiniLM-L3-v2"


def needs_data(*rels: str):
    missing = [r for r in rels if not (DATA / r).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"shared data missing: {missing}")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.exists():
        pytest.skip(f"shared data not found at {DATA}")
    return DATA


def make_tiny_bert(folder: Path, seed: int = 0, layers: int = 2, hidden: int = 32, dropout: float = 0.1) -> Path:
    """A randomly initialised BERT with the MiniLM (bert-base-uncased) vocabulary, saved to ``folder``
    (``dropout``: its hidden and attention dropout probabilities, BERT's 0.1 by default)."""
    import torch
    from huggingface_hub import snapshot_download
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(snapshot_download(MINILM_L3, local_files_only=True))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


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


#: the settings of ``TrainingContext`` that ``training`` takes besides the options
CONTEXT_KEYS = ("name", "device", "threads", "stop_after", "overwrite", "keep_checkpoint", "progress", "dev")


def training(base, out=None, options_class=None, **settings):
    """``(options, context)`` of one run of the training loop: ``settings`` split between the
    method's options (``options_class``, default: the shared ones) and the context (the shared data
    root and Hugging Face cache); ``out`` None trains in memory."""
    from benchharness.core.data_root import DataRoot
    from benchharness.core.settings import hub_settings
    from benchharness.training.method import TrainingContext
    from benchharness.training.options import TrainingOptions

    context = {k: settings.pop(k) for k in CONTEXT_KEYS if k in settings}
    options = (options_class or TrainingOptions)(**settings)
    return options, TrainingContext(
        base=str(base), data=DataRoot(DATA), hub=hub_settings(), out=None if out is None else Path(out), **context
    )
