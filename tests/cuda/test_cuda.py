"""benchharness's CUDA paths, each run on ``DEVICE`` and compared with the CPU on the same weights.

Marked ``cuda``: ``benchmarks/gpu_check.py`` runs them on a GPU machine (``pytest -m cuda``, the
device ``cuda``); without a CUDA device they skip, and ``BENCHHARNESS_TEST_DEVICE=cpu`` runs them on
the CPU as a dry run. The weights are never assumed to be real (the GPU machine's hub cache holds
seeded random MiniLM-L3 weights): every number computed on the device is compared with the CPU's on
the very same weights, both computed here, the CPU side by sentence-transformers' own ``encode``
wherever a model only encodes. The model is paraphrase-MiniLM-L3-v2's configuration and tokenizer
with seeded random weights, saved as a sentence-transformers folder (``hf:`` and ``st:`` read it);
the catalogue name ``minilm-l3`` loads whatever weights the hub cache holds.

Precisions the device cannot run are skipped with the reason: benchharness refuses fp16 autocast
off CUDA, and bf16 on a CPU without native bf16 (``benchharness/core/devices.py``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import benchharness
from benchharness.core.devices import PRECISIONS, has_native_bf16
from benchharness.core.errors import InvalidInputError
from benchharness.evaluation.resolver import Resolver, build
from benchharness.evaluation.run_settings import RunSettings
from tests.helpers import DATA, MINILM_L3, TOY_DICTIONARY, needs_data

DEVICE = os.environ.get("BENCHHARNESS_TEST_DEVICE", "cuda")

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        DEVICE.startswith("cuda") and not torch.cuda.is_available(),
        reason="no CUDA device here: benchmarks/gpu_check.py runs these on a GPU machine "
        "(BENCHHARNESS_TEST_DEVICE=cpu runs them on the CPU)",
    ),
]

#: the catalogue name of the model the seeded folder copies the configuration of
CATALOGUE_NAME = "minilm-l3"
#: the ways of naming the model (``device_encoder``): ``hf:`` through the inference engine and through
#: the padded reference path (which runs fp16/bf16 autocast on CUDA alone), ``st:``, the catalogue name
KINDS = ("hf", "hf-reference", "st", "catalogue")

#: fp32 on the device against the CPU: max |difference| of the L2-normalised vectors
FP32_BOUND = 1e-4
#: fp16 and bf16 on the device against fp32 on the CPU: the least cosine of a sentence's two vectors
REDUCED_COSINE = 0.99

SENTENCES = [
    "a man is playing a guitar .",
    "a woman is slicing an onion .",
    "two dogs run through a field of tall grass .",
    "the cat sat on the mat and looked very happy .",
    "hello",
    "stock markets fell sharply after the announcement .",
    "the committee approved the new budget yesterday .",
    "heavy rain caused flooding in the northern region .",
    "a child reads a book under a tree .",
    "the team won the championship after a long season .",
    "a plane is taking off .",
    "hello",
    "three children are standing in a field next to a fence and a tree .",
    "the red car hit a bus at the corner of the street .",
    "a chef cooks pasta in a busy kitchen while the guests wait .",
    "birds sing",
    "the river flows quietly past the old mill and under the stone bridge .",
    "a musician tunes his violin before the concert begins .",
    "the price of bread rose again this week .",
    "scientists discovered a new species of frog in the rainforest .",
    "a boy kicks a ball",
    "the old man walked slowly along the beach at sunset .",
    "she painted the fence white .",
    "the train to the city was delayed by snow .",
    "a group of friends plays chess in the park .",
    "the museum opens at nine .",
    "a dog is barking at the mailman .",
    "the government announced new rules for electric cars .",
    "two women are talking on a bench .",
    "the moon rose over the quiet village .",
    "a farmer feeds the chickens every morning .",
    "the software update fixed several security problems .",
]


#: one optimizer step of 8 sentences, no dev evaluation, no warmup (the step runs at the peak rate)
ONE_STEP = {"max_steps": 1, "batch_size": 8, "max_length": 16, "eval_every": 0, "eval_at_start": False}
ONE_STEP_NO_WARMUP = {**ONE_STEP, "warmup_ratio": 0.0}


# ---- where things run ------------------------------------------------------------------------------


def same_device(found: object) -> bool:
    """Whether ``found`` (a device or its name) is ``DEVICE`` (any index when ``DEVICE`` names none)."""
    got, wanted = torch.device(str(found)), torch.device(DEVICE)
    return got.type == wanted.type and (wanted.index is None or got.index == wanted.index)


def devices_of(module: torch.nn.Module) -> set[str]:
    return {str(p.device) for p in module.parameters()}


def assert_on_device(module: torch.nn.Module) -> None:
    found = devices_of(module)
    assert found and all(same_device(d) for d in found), f"parameters on {sorted(found)}, not {DEVICE}"


def unavailable(precision: str, kind: str | None = None) -> str | None:
    """Why ``precision`` cannot run on ``DEVICE`` (None: it can), for an encoder named as ``kind`` says."""
    wanted = torch.device(DEVICE)
    if precision == "fp32":
        return None
    if kind == "hf-reference" and wanted.type != "cuda":
        return (
            f"the padded reference path runs {precision} autocast on CUDA only: benchharness refuses it on "
            f"{DEVICE} (encoders/transformer.py)"
        )
    if wanted.type == "cuda":
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            return "this GPU has no bf16 (torch.cuda.is_bf16_supported() is False)"
        return None
    if precision == "fp16":
        return f"fp16 autocast needs CUDA: benchharness refuses it on {DEVICE} (core/devices.py check_precision)"
    if wanted.type == "cpu" and has_native_bf16():
        return None
    return (
        f"bf16 on {DEVICE} needs a CPU with native bf16 (avx512_bf16 or amx_bf16), which this one lacks: "
        "benchharness refuses it (core/devices.py check_precision)"
    )


def resolver(device: str) -> Resolver:
    """Names resolved as a run with ``--device device`` resolves them."""
    return Resolver(settings=RunSettings(device=device))


def device_encoder(kind: str, folder: Path, precision: str, device: str = DEVICE) -> benchharness.Encoder:
    """The seeded folder as ``hf:`` or ``st:`` names it, or the catalogue name, on ``device`` in
    ``precision`` (a spec parameter; a catalogue name takes none, so its spec gets one)."""
    names = resolver(device)
    if kind == "hf":
        return names.get(f"hf:{folder}?pooling=avg&precision={precision}")
    if kind == "hf-reference":
        return names.get(f"hf:{folder}?pooling=avg&backend=reference&precision={precision}")
    if kind == "st":
        return names.get(f"st:{folder}?precision={precision}")
    if precision == "fp32":
        return names.get(CATALOGUE_NAME)
    return build(CATALOGUE_NAME, {**names.spec_for(CATALOGUE_NAME), "precision": precision}, names.context)


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def relative_deviation(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want|, as a fraction of max |want|."""
    return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())


# ---- fixtures ----------------------------------------------------------------------------------------


def hub_snapshot() -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(MINILM_L3, local_files_only=True))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """paraphrase-MiniLM-L3-v2's configuration and tokenizer with seeded random weights (torch seed
    0), saved as a sentence-transformers folder pooled by the mean (``hf:`` reads it too)."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from benchharness.encoders.sentence_transformers_format import save_as_sentence_transformer

    snapshot = hub_snapshot()
    folder = tmp_path_factory.mktemp("seeded-l3") / "model"
    with torch.random.fork_rng(devices=[]):  # the session's random stream goes on as it was
        torch.manual_seed(0)
        model = AutoModel.from_config(AutoConfig.from_pretrained(snapshot))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(snapshot).save_pretrained(folder)
    save_as_sentence_transformer(folder, {"pooling": "avg"})
    return folder


@pytest.fixture(scope="module")
def cpu_vectors():
    """``cpu_vectors(folder, sentences)``: sentence-transformers' own ``encode`` of a model folder on
    the CPU in fp32 (float64 rows), each model loaded once: the reference every device run meets."""
    from sentence_transformers import SentenceTransformer

    models: dict[str, SentenceTransformer] = {}

    def vectors(folder: Path, sentences: list[str]) -> np.ndarray:
        key = str(folder)
        if key not in models:
            models[key] = SentenceTransformer(key, device="cpu", local_files_only=True)
        return np.asarray(models[key].encode(list(sentences), convert_to_numpy=True), dtype=np.float64)

    return vectors


@dataclass(frozen=True)
class Corpus:
    fit: list[str]  # what whitening and RepAL fit on, and the documents searched
    fit_file: Path  # the same, one a line (``fit=text:<file>``)
    probe: list[str]  # what is encoded with the fitted post-processors, and the queries


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory) -> Corpus:
    """400 STS-B train sentences to fit on (and search), 40 others to probe with."""
    from benchharness.core.data_root import DataRoot
    from benchharness.data.corpora import load_corpus

    sentences = load_corpus("stsb-train", DataRoot(data_dir), unique=True)
    fit, probe = sentences[:400], sentences[400:440]
    path = tmp_path_factory.mktemp("fit") / "fit.txt"
    path.write_text("".join(f"{s}\n" for s in fit), encoding="utf8")
    return Corpus(fit, path, probe)


# ---- 1. inference ------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_inference_on_the_device_agrees_with_the_cpu(seeded, cpu_vectors, kind, precision):
    reason = unavailable(precision, kind)
    if reason is not None:
        with pytest.raises(InvalidInputError):  # refused before any model loads, as the reason says
            device_encoder(kind, seeded, precision)
        pytest.skip(reason)
    encoder = device_encoder(kind, seeded, precision)
    got = unit(encoder.encode(SENTENCES))
    assert_on_device(encoder.model)
    assert same_device(encoder.metadata["device"]), encoder.metadata
    assert encoder.identity_info().get("precision", "fp32") == precision  # the spec's precision was taken
    want = unit(cpu_vectors(hub_snapshot() if kind == "catalogue" else seeded, SENTENCES))
    assert got.shape == want.shape and np.isfinite(got).all()
    deviation = float(np.abs(got - want).max())
    cosines = (got * want).sum(axis=1)
    measured = f"{kind} {precision} on {DEVICE}: max |difference| {deviation:.3g}, least cosine {cosines.min():.6f}"
    if precision == "fp32":
        assert deviation <= FP32_BOUND, measured
    else:
        assert cosines.min() >= REDUCED_COSINE, measured
        assert deviation > 0, f"{measured}: not one bit moved, so {precision} autocast did not run"


# ---- 2. one training step of each method under autocast -------------------------------------------


def training_inputs(method: str, folder: Path) -> dict[str, object]:
    """What ``benchharness.train`` needs for one step of ``method`` (skips where the machine lacks it)."""
    if method == "defsent-plus":
        if importlib.util.find_spec("matplotlib") is None:
            pytest.skip("DefSent+ plots its entry space each round, and matplotlib is not installed here")
        dictionary = folder.parent / "toy-dictionary.tsv"
        dictionary.write_text("".join(f"{entry}\t{text}\n" for entry, text in TOY_DICTIONARY), encoding="utf8")
        # one round, one batch of every definition: one step (the protocol fixes epochs and warmup)
        return {"dictionary": str(dictionary), "rounds": 1, "batch_size": len(TOY_DICTIONARY), "max_length": 16}
    inputs: dict[str, object] = {"sentences": SENTENCES, **ONE_STEP_NO_WARMUP}
    if method == "paser":
        stopwords = DATA / "nltk_data" / "corpora" / "stopwords" / "english"
        if not stopwords.is_file():
            pytest.skip(f"PaSeR's RAKE reads NLTK's stopwords, missing from the data root: {stopwords}")
        inputs["augment"] = "rd"  # random deletion: the WordNet that synonym replacement reads is not needed
    return inputs


def training_methods() -> list[str]:
    from benchharness.core.plugins import PLUGINS

    return sorted(PLUGINS.names("methods"))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("method", training_methods())
def test_one_training_step_of_each_method_on_the_device(seeded, tmp_path, method, precision):
    reason = unavailable(precision)
    if reason is not None:
        pytest.skip(reason)
    model = benchharness.train(
        method, base=str(seeded), device=DEVICE, precision=precision, **training_inputs(method, tmp_path)
    )
    training = model.manifest["training"]
    assert training["steps"] == 1, training
    assert same_device(training["device"]) and training["precision"] == precision, training
    losses = [row["loss"] for row in model.metrics if "loss" in row]
    assert losses and all(math.isfinite(loss) for loss in losses), model.metrics

    assert_on_device(model.model)
    assert same_device(model.device)
    vectors = model.encode(SENTENCES[:8])
    assert vectors.shape == (8, 384) and np.isfinite(vectors).all()
    assert same_device(model.metadata["device"]), model.metadata
    if precision != "fp16":  # fp16's loss scaler may skip a first step whose scaled gradients overflow
        from transformers import AutoModel

        base = AutoModel.from_pretrained(seeded).state_dict()
        trained = {k: v.detach().cpu() for k, v in model.model.state_dict().items()}
        common = sorted(base.keys() & trained.keys())
        assert common and any(not torch.equal(base[k], trained[k]) for k in common), "the step changed no weight"


def test_the_step_above_covers_every_method_of_the_recipes():
    """Every method a recipe of ``recipes.toml`` trains is a registered one, so the step above runs it."""
    from benchharness.training.recipes import load_book

    book = load_book()

    def method(name: str) -> str:
        entry = book.entries[name]
        return entry["method"] if "method" in entry else method(entry["extends"])

    trained = {method(name) for name in book.names()}
    assert trained and trained <= set(training_methods()), sorted(trained - set(training_methods()))


# ---- 3. whitening and RepAL fitted on the device's vectors ------------------------------------------


@needs_data("senteval/STS/STSBenchmark/sts-train.csv")
def test_whitening_fitted_on_device_vectors_agrees_with_the_cpu(seeded, corpus):
    spec = f"st:{seeded}+whitening(k=32,fit=text:{corpus.fit_file})"
    on_device, on_cpu = resolver(DEVICE).get(spec), resolver("cpu").get(spec)
    got, want = on_device.encode(corpus.probe).astype(np.float64), on_cpu.encode(corpus.probe).astype(np.float64)
    assert_on_device(on_device.base.model)
    assert on_device.dimensions == on_cpu.dimensions == (32, 384)
    mean = relative_deviation(on_device.mu, on_cpu.mu)
    # an eigenvector's sign is arbitrary: each kept direction is compared as the CPU's points
    signs = np.sign((got * want).sum(axis=0))
    vectors = relative_deviation(got * signs, want)
    cosines = float(np.abs(unit(got) @ unit(got).T - unit(want) @ unit(want).T).max())
    measured = f"on {DEVICE}: fit mean {mean:.3g}, whitened vectors {vectors:.3g}, cosines {cosines:.3g}"
    assert mean <= 1e-4 and vectors <= 1e-2 and cosines <= 2e-3, measured


@needs_data("senteval/STS/STSBenchmark/sts-train.csv")
def test_repal_fitted_on_device_vectors_agrees_with_the_cpu(seeded, corpus):
    fit = f"text:{corpus.fit_file}"
    spec = f"st:{seeded}+repal(l1=0.1,l2=1.0,keywords=5,fit={fit},tfidf={fit})"
    on_device, on_cpu = resolver(DEVICE).get(spec), resolver("cpu").get(spec)
    got, want = on_device.encode(corpus.probe).astype(np.float64), on_cpu.encode(corpus.probe).astype(np.float64)
    assert_on_device(on_device.base.model)
    assert on_device.masked(corpus.probe) == on_cpu.masked(corpus.probe)  # the same keywords masked
    mean = relative_deviation(on_device.v_mean, on_cpu.v_mean)
    vectors = relative_deviation(got, want)
    cosine = float((unit(got) * unit(want)).sum(axis=1).min())
    measured = f"on {DEVICE}: v_mean {mean:.3g}, refined vectors {vectors:.3g}, least cosine {cosine:.6f}"
    assert mean <= 1e-4 and vectors <= 1e-3 and cosine >= 0.999, measured


# ---- 4. the embedding cache written from the device --------------------------------------------------


def test_the_embedding_cache_keeps_device_vectors_and_serves_them(seeded, cpu_vectors, tmp_path):
    from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache

    root = tmp_path / "cache"
    encoder = resolver(DEVICE).get(f"st:{seeded}")
    writing = CachingEncoder(encoder, EmbeddingCache(root))
    written = writing.encode(SENTENCES)
    assert writing.encoded == len(set(SENTENCES))
    assert_on_device(encoder.model)
    direct = unit(encoder.encode(SENTENCES))
    assert float(np.abs(unit(written) - direct).max()) <= 1e-5  # the cache's chunks encode as one call does

    reading = CachingEncoder(resolver(DEVICE).get(f"st:{seeded}"), EmbeddingCache(root))
    read = reading.encode(SENTENCES)
    assert reading.encoded == 0 and np.array_equal(read, written)

    # the device is no part of the identity: a CPU run of the same model is served the device's rows
    on_cpu = resolver("cpu").get(f"st:{seeded}")
    assert on_cpu.identity == encoder.identity
    serving = CachingEncoder(on_cpu, EmbeddingCache(root))
    served = serving.encode(SENTENCES)
    assert serving.encoded == 0 and np.array_equal(served, written)
    deviation = float(np.abs(unit(written) - unit(cpu_vectors(seeded, SENTENCES))).max())
    assert deviation <= FP32_BOUND, f"cached {DEVICE} vectors against the CPU's: max |difference| {deviation:.3g}"


# ---- 5. faiss search over vectors from the device ------------------------------------------------------


@needs_data("senteval/STS/STSBenchmark/sts-train.csv")
def test_faiss_search_of_device_vectors_ranks_as_the_cpu(seeded, corpus, cpu_vectors):
    pytest.importorskip("faiss", reason="faiss-cpu is not installed here")
    from benchharness.scoring.top_k import top_k

    k = 10
    encoder = resolver(DEVICE).get(f"st:{seeded}")
    queries, docs = unit(encoder.encode(corpus.probe)), unit(encoder.encode(corpus.fit))
    assert_on_device(encoder.model)
    half = len(docs) // 2  # two blocks: the merge of block results runs too
    scores, ids = top_k(queries.astype(np.float32), [docs[:half], docs[half:]], k)

    # the reference: every cosine on the CPU's vectors, ranked by score then corpus order
    reference = unit(cpu_vectors(seeded, corpus.probe)) @ unit(cpu_vectors(seeded, corpus.fit)).T
    best = np.argsort(-reference, axis=1, kind="stable")[:, :k]
    best_scores = np.take_along_axis(reference, best, axis=1)
    assert ids.shape == (len(corpus.probe), k) and (ids >= 0).all()
    found = np.take_along_axis(reference, ids, axis=1)  # the CPU's cosines of the device's hits
    shortfall = float((best_scores - found).max())
    identical = int((ids == best).all(axis=1).sum())
    measured = f"{identical} of {len(ids)} top-{k} lists identical; largest shortfall {shortfall:.3g}"
    # each rank holds a document as good as the CPU's at that rank, to within what ties allow
    assert shortfall <= FP32_BOUND, measured
    assert float(np.abs(scores - found).max()) <= FP32_BOUND, measured


# ---- 6. evaluate() of a SentenceTransformer already on the device ------------------------------------


@needs_data("senteval/STS/STSBenchmark/sts-test.csv")
def test_evaluate_takes_a_sentence_transformer_on_the_device(seeded, data_dir):
    from sentence_transformers import SentenceTransformer

    on_device = SentenceTransformer(str(seeded), device=DEVICE, local_files_only=True)
    on_cpu = SentenceTransformer(str(seeded), device="cpu", local_files_only=True)
    got = benchharness.evaluate(on_device, "STSBenchmark", data_dir=data_dir, intervals=False).results[0]
    want = benchharness.evaluate(on_cpu, "STSBenchmark", data_dir=data_dir, intervals=False).results[0]
    assert same_device(got.encoder_metadata["device"]), got.encoder_metadata
    assert want.encoder_metadata["device"] == "cpu"
    assert abs(got.main_score - want.main_score) <= 0.01, (got.main_score, want.main_score)
    assert same_device(on_device.device) and devices_of(on_device) == {str(on_device.device)}  # left where it was


# ---- 7. a training call leaves the caller's random stream on the device where it was ----------------

#: in a fresh process, so that CUDA starts inside the call: seed, maybe train, then draw on the device
CALLERS_STREAM = """
import json, sys, torch
import benchharness
device, base, train, sentences = sys.argv[1], sys.argv[2], sys.argv[3] == "yes", json.loads(sys.argv[4])
torch.manual_seed(7)
if train:
    benchharness.train("simcse", base=base, device=device, sentences=sentences, seed=99, **json.loads(sys.argv[5]))
print(json.dumps(torch.rand(4, device=device).tolist()))
"""


def test_a_training_call_leaves_the_callers_random_stream_on_the_device_as_it_found_it(seeded, tmp_path):
    def draws(train: str) -> list[float]:
        command = [sys.executable, "-c", CALLERS_STREAM, DEVICE, str(seeded), train, json.dumps(SENTENCES)]
        env = {**os.environ, "BENCHHARNESS_RUNS": str(tmp_path / "runs")}
        done = subprocess.run(
            [*command, json.dumps(ONE_STEP_NO_WARMUP)], capture_output=True, text=True, timeout=600, env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert draws("yes") == draws("no")  # the call (which started the device and trained) is invisible
