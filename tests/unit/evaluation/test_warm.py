"""A warm rerun: when the embedding cache holds every sentence, ``run --overwrite always``
recomputes every score without importing torch (or transformers, sentence-transformers, scipy,
scikit-learn, huggingface_hub's download machinery), without opening a weight file, and without
hashing one again; the digests it relies on are recomputed as soon as a file changes.

The encoders are real families (``st:`` by hub id through a hub cache laid out here, ``hf:`` by
folder, ``glove:``) on made-up model folders whose "weights" are a few random bytes: a run that
tried to load one would fail, so a passing run shows that nothing was loaded. The cache is filled
in this process with random vectors under each encoder's real identity; only the warm run is a
subprocess (``benchharness run``, with an audit hook recording every file it opens).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import DATA, ROOT, needs_data

TASK = "SICKRelatedness-trial"  # 500 pairs: the smallest STS task
HEAVY = ("torch", "transformers", "sentence_transformers", "scipy", "sklearn")
#: huggingface_hub modules that only resolving through snapshot_download (or loading) imports
HUB_MACHINERY = ("huggingface_hub.hf_api", "huggingface_hub.file_download", "huggingface_hub._snapshot_download")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
DIM = 8


def fake_st_folder(folder: Path) -> Path:
    """A sentence-transformers layout (modules, configs, vocabulary) whose weights are not a model."""
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": DIM}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64}))
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": DIM, "pooling_mode_mean_tokens": True})
    )
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    (folder / "model.safetensors").write_bytes(os.urandom(4096))
    return folder


def fake_hub(root: Path) -> Path:
    """A hub cache holding ``fake-org/tiny-st`` at COMMIT, as huggingface_hub lays one out."""
    repo = root / "models--fake-org--tiny-st"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    fake_st_folder(repo / "snapshots" / COMMIT)
    return root


def glove_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    words = ["a", "man", "is", "the", "woman", "dog", "playing", "and", "of", "in"]
    path.write_text("".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.normal(size=DIM))}\n" for w in words))
    return path


@pytest.fixture
def warm_project(project, monkeypatch):
    """The ``project`` fixture plus a hub cache and model files; digests are remembered at once
    (the files are seconds old, which the store would otherwise treat as racy)."""
    from benchharness.core import digests

    monkeypatch.setattr(digests, "RACY_NS", 0)
    hub = fake_hub(project / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))  # what hub.resolve reads (core.settings.hub_settings)
    fake_st_folder(project / "hf-model")
    glove_file(project / "vectors.txt")
    return project


def fill_cache(project: Path, spec: str) -> str:
    """Cache random vectors for every sentence of TASK under ``spec``'s identity; returns it."""
    from benchharness import tasks
    from benchharness.core import digests
    from benchharness.core.data_root import DataRoot
    from benchharness.evaluation.cache import EmbeddingCache
    from benchharness.evaluation.embeddings import unique_sentences
    from benchharness.evaluation.resolver import Resolver
    from benchharness.evaluation.run_settings import RunSettings

    with digests.remembering(project / ".cache"):  # as the run that filled the cache would have
        identity = Resolver(settings=RunSettings(data_dir=DATA)).get(spec).identity
    task = tasks.get(TASK)
    task.load(DataRoot(DATA))
    sentences = unique_sentences([task])
    vectors = np.random.default_rng(1).normal(size=(len(sentences), DIM)).astype(np.float32)
    EmbeddingCache(project / ".cache").add(identity, sentences, vectors)
    return identity


WARM_RUN = """
import contextlib, io, json, os, sys
opened = []
def audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path.endswith(WATCHED):
            opened.append(path)
sys.addaudithook(audit)
from benchharness.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["run", "--encoders", SPEC, "--tasks", TASK, "--overwrite", "always", "--quiet"])
print(json.dumps({"rc": rc, "opened": opened, "modules": sorted(sys.modules)}))
"""


def warm_run(project: Path, spec: str, watched: tuple[str, ...]) -> dict:
    script = f"WATCHED, SPEC, TASK = {watched!r}, {spec!r}, {TASK!r}\n" + WARM_RUN
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BENCHHARNESS_DATA": str(DATA),
        "HF_HUB_CACHE": str(project / "hub"),
        "HF_HUB_OFFLINE": "1",
    }
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_data("senteval/SICK/SICK_trial.txt")
@pytest.mark.parametrize(
    "spec, watched",
    [
        ("st:fake-org/tiny-st", ("model.safetensors",)),
        ("hf:./hf-model?pooling=avg", ("model.safetensors",)),
        ("glove:./vectors.txt", ("vectors.txt",)),
    ],
)
def test_warm_rerun_loads_no_model_imports_no_torch_and_hashes_nothing(warm_project, spec, watched):
    from benchharness.core.results import ResultStore

    identity = fill_cache(warm_project, spec)
    got = warm_run(warm_project, spec, watched)
    assert got["rc"] == 0
    loaded = {m.split(".")[0] for m in got["modules"]}
    assert sorted(loaded & set(HEAVY)) == []
    assert sorted(set(got["modules"]) & set(HUB_MACHINERY)) == []
    assert got["opened"] == []  # no weight file read: neither loaded nor hashed
    result = ResultStore(warm_project / "results").load(spec, TASK)
    assert result.encoder_identity["hash"] == identity
    assert result.timings["sentences_not_from_cache"] == 0
    assert result.encoder_metadata.get("device") is None  # no device was needed, so none was picked


# --- the digests a warm run relies on ----------------------------------------------------------


def weights_hash_by_hand(folder: Path) -> str:
    import hashlib

    digest = hashlib.sha256(b"model.safetensors")
    digest.update((folder / "model.safetensors").read_bytes())
    return digest.hexdigest()


def test_weights_digest_is_remembered_and_recomputed_when_a_weight_file_changes(project, monkeypatch):
    from benchharness.core import digests

    monkeypatch.setattr(digests, "store_path", lambda: project / ".cache" / digests.STORE_NAME)  # a run's scope
    from benchharness.encoders.hub import weights_fingerprint

    monkeypatch.setattr(digests, "RACY_NS", 0)
    folder = fake_st_folder(project / "model")
    weights = folder / "model.safetensors"

    def fingerprint() -> str:
        weights_fingerprint.cache_clear()  # the in-process memo; the store is what is tested
        return weights_fingerprint(str(folder))

    assert fingerprint() == weights_hash_by_hand(folder)
    store = digests.store_path()
    assert store.is_file() and store.parent == project / ".cache"

    def plant(value: str) -> None:  # what the store says, to see whether it is believed
        raw = json.loads(store.read_text())
        (entry,) = [e for k, e in raw["entries"].items() if k.startswith("weights-sha256:")]
        entry["sha256"] = value
        store.write_text(json.dumps(raw))

    plant("a" * 64)
    assert fingerprint() == "a" * 64  # unchanged files: the stored digest is used, nothing is read

    # same size, same mtime (set back), other bytes: ctime moved, so it is hashed again
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[0] ^= 0xFF
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    assert fingerprint() == weights_hash_by_hand(folder)

    plant("b" * 64)
    replacement = folder / "new.safetensors"  # a new download renamed into place: another inode
    replacement.write_bytes(os.urandom(4096))
    os.replace(replacement, weights)
    assert fingerprint() == weights_hash_by_hand(folder)

    plant("c" * 64)
    (folder / "pytorch_model.bin").write_bytes(b"more weights")  # another weight file: another digest
    assert fingerprint() not in ("c" * 64, weights_hash_by_hand(folder))


def test_a_digest_is_not_remembered_for_a_file_changed_just_before_hashing(tmp_path):
    from benchharness.core import digests

    path, store = tmp_path / "f", tmp_path / "digests.json"
    path.write_bytes(b"fresh")  # written now: within RACY_NS, a second write could keep every stat field
    calls = []

    def compute() -> str:
        calls.append(1)
        return digests.sha256_file(path)

    assert digests.remembered("sha256", [path], compute, store) == digests.remembered("sha256", [path], compute, store)
    assert len(calls) == 2 and not store.exists()


def test_a_damaged_or_unwritable_store_only_means_hashing_again(tmp_path, monkeypatch):
    from benchharness.core import digests

    monkeypatch.setattr(digests, "RACY_NS", 0)
    path = tmp_path / "f"
    path.write_bytes(b"content")
    expected = digests.sha256_file(path)
    store = tmp_path / "digests.json"
    store.write_text("{not json")
    assert digests.remembered("sha256", [path], lambda: digests.sha256_file(path), store) == expected
    assert json.loads(store.read_text())["format"] == digests.FORMAT  # replaced by a valid store
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert digests.remembered("sha256", [path], lambda: digests.sha256_file(path), blocked / "d.json") == expected


def test_glove_identity_keeps_the_sha256_of_its_file(project, monkeypatch):
    import hashlib

    from benchharness.core import digests
    from benchharness.encoders.glove import WordVectorAverage

    monkeypatch.setattr(digests, "RACY_NS", 0)
    path = glove_file(project / "vectors.txt")
    for _ in range(2):  # computed, then read from the store
        assert WordVectorAverage("g", path).identity_info()["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


# --- hub ids resolved without huggingface_hub's download machinery -----------------------------


def test_cached_snapshot_is_what_snapshot_download_returns(tmp_path, monkeypatch):
    from huggingface_hub import snapshot_download

    from benchharness.encoders.hub import cached_snapshot, resolve

    hub = fake_hub(tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))  # what hub.resolve reads (core.settings.hub_settings)
    expected = snapshot_download("fake-org/tiny-st", local_files_only=True, cache_dir=str(hub))
    assert str(cached_snapshot("fake-org/tiny-st")) == expected
    source = resolve("fake-org/tiny-st")
    assert (str(source.path), source.revision) == (expected, COMMIT)
    assert cached_snapshot("fake-org/absent") is None
    # a cached tree listing: snapshot_download checks the snapshot against it, so it is asked
    (hub / "models--fake-org--tiny-st" / "trees").mkdir()
    (hub / "models--fake-org--tiny-st" / "trees" / f"{COMMIT}.json").write_text("{}")
    assert cached_snapshot("fake-org/tiny-st") is None


@pytest.mark.parametrize(
    "model", ["sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/paraphrase-MiniLM-L3-v2"]
)
def test_cached_snapshot_of_the_shared_minilms(model):
    from huggingface_hub import snapshot_download

    from benchharness.encoders.hub import cached_snapshot

    try:
        expected = snapshot_download(model, local_files_only=True)
    except Exception:
        pytest.skip(f"{model} is not in the hub cache")
    assert str(cached_snapshot(model)) == expected


# --- seeding without importing torch -----------------------------------------------------------


def test_torch_is_seeded_when_first_imported_as_if_seeded_at_once():
    script = """
import json, sys
from benchharness.core.seeding import pending_torch_seed, seed_everything
seed_everything(3)
seed_everything(1111)  # the latest seed wins
imported_to_seed = "torch" in sys.modules
assert pending_torch_seed() == 1111
import torch
first = torch.rand(4).tolist()
torch.manual_seed(1111)
expected = torch.rand(4).tolist()
seed_everything(5)  # torch loaded: seeded at once
again = torch.rand(2).tolist()
torch.manual_seed(5)
print(json.dumps({"imported_to_seed": imported_to_seed, "same": first == expected,
                  "same_after": again == torch.rand(2).tolist(), "pending": pending_torch_seed(),
                  "loader": type(torch.__spec__.loader).__name__, "hooks": [type(f).__name__ for f in sys.meta_path]}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["imported_to_seed"] is False
    assert got["same"] and got["same_after"] and got["pending"] is None
    assert got["loader"] != "_SeedAfterExec" and "_SeedOnImport" not in got["hooks"]
