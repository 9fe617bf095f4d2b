"""Post-processors: whitening and RepAL checked against independent computations (numpy,
scikit-learn's PCA and TfidfVectorizer, the bare encoder on hand-masked text), their identities,
errors, and the registration of a tuned chain."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.decomposition import PCA
from sklearn.feature_extraction.text import TfidfVectorizer

from benchharness.core.encoder import Encoder
from benchharness.core.settings import load_config
from benchharness.core.specs import UnknownEncoderError
from benchharness.encoders.postprocess.repal import RepAL
from benchharness.encoders.postprocess.whitening import Whitening
from benchharness.evaluation.resolver import Resolver
from tests.helpers import needs_data

WORDS = [
    "man",
    "woman",
    "dog",
    "cat",
    "guitar",
    "piano",
    "plays",
    "sings",
    "runs",
    "the",
    "a",
    "is",
    "on",
    "with",
    "quickly",
    "slowly",
    "red",
    "blue",
    "zebra",
    "river",
    "mountain",
    "eats",
    "bread",
]


class TableEncoder(Encoder):
    """Deterministic pseudo-random vectors per sentence, with an optional mask token."""

    def __init__(self, dim: int = 6, mask: str | None = "[MASK]") -> None:
        super().__init__("table")
        self.dim, self._mask = dim, mask
        self.calls: list[list[str]] = []

    def vector(self, s: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha1(s.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).normal(size=self.dim) * np.arange(1, self.dim + 1)

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        return np.stack([self.vector(s) for s in sentences]).astype(np.float32)

    def identity_info(self) -> dict[str, Any]:
        return {"family": "table", "dim": self.dim}

    @property
    def mask_token(self) -> str | None:
        return self._mask


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    lines = {" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) for _ in range(300)}
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(sorted(lines)) + "\n")
    return path


def lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line]


def test_whitening_gives_identity_covariance_on_its_fit_corpus(corpus):
    base = TableEncoder()
    white = Whitening(base, "table+whitening", fit=f"text:{corpus}")
    sentences = lines(corpus)
    out = white.encode(sentences).astype(np.float64)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(6), atol=1e-4)
    # independent: PCA with whitening = the same transform up to each component's sign
    # (PCA divides by n-1 too)
    pca = PCA(whiten=True).fit_transform(base.encode(sentences).astype(np.float64))
    np.testing.assert_allclose(np.abs(out), np.abs(pca), atol=1e-3)


def test_whitening_keeps_the_top_k_directions(corpus):
    base = TableEncoder()
    sentences = lines(corpus)
    out = Whitening(base, "w", k=3, fit=f"text:{corpus}").encode(sentences).astype(np.float64)
    assert out.shape == (len(sentences), 3)
    pca = PCA(n_components=3, whiten=True).fit_transform(base.encode(sentences).astype(np.float64))
    np.testing.assert_allclose(np.abs(out), np.abs(pca), atol=1e-3)
    # applied to sentences outside the corpus, with the corpus statistics
    x = base.encode(["zebra eats bread"]).astype(np.float64)
    mu = base.encode(sentences).astype(np.float64).mean(axis=0)
    cov = np.cov(base.encode(sentences).astype(np.float64), rowvar=False)
    evals, evecs = np.linalg.eigh(cov)
    top = np.argsort(evals)[::-1][:3]
    expected = (x - mu) @ evecs[:, top] / np.sqrt(evals[top])
    got = Whitening(base, "w", k=3, fit=f"text:{corpus}").encode(["zebra eats bread"])
    np.testing.assert_allclose(np.abs(got), np.abs(expected), rtol=1e-4)


def test_whitening_is_lazy_and_keeps_only_directions_with_variance(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("a dog\nthe cat\nthe man sings\n")  # 3 centred points span 2 dimensions
    base = TableEncoder()
    white = Whitening(base, "w", fit=f"text:{small}")
    assert base.calls == []  # nothing fitted or encoded until the first encode
    out = white.encode(lines(small)).astype(np.float64)
    assert out.shape == (3, 2)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(2), atol=1e-6)
    assert white.metadata["post_processing"][-1]["dimensions_kept"] == [2, 6]
    with pytest.raises(ValueError, match="spans only 2 of the 6 dimensions"):
        Whitening(base, "w", k=3, fit=f"text:{small}").encode(["a dog"])


class HyperplaneEncoder(TableEncoder):
    """Vectors whose coordinates sum to zero, like mean-pooled LayerNorm outputs."""

    def vector(self, s: str) -> np.ndarray:
        v = super().vector(s)
        return v - v.mean()


def test_whitening_drops_the_null_direction_of_a_hyperplane(corpus):
    base = HyperplaneEncoder()
    sentences = lines(corpus)
    out = Whitening(base, "w", fit=f"text:{corpus}").encode(sentences).astype(np.float64)
    assert out.shape == (len(sentences), 5)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(5), atol=1e-4)
    pca = PCA(n_components=5, whiten=True).fit_transform(base.encode(sentences).astype(np.float64))
    np.testing.assert_allclose(np.abs(out), np.abs(pca), atol=1e-3)


def tfidf_top(corpus_sentences: list[str], sentence: str, k: int) -> set[str] | None:
    """Top-k words by tf*idf with scikit-learn; None when the k-th score ties the next one."""
    vec = TfidfVectorizer(stop_words="english", norm=None, smooth_idf=True).fit(corpus_sentences)
    row = vec.transform([sentence]).toarray()[0]
    names = vec.get_feature_names_out()
    order = np.argsort(-row, kind="stable")
    scores = row[order]
    if scores[k - 1] <= 0 or (len(scores) > k and np.isclose(scores[k - 1], scores[k])):
        return None
    return {names[i] for i in order[:k]}


def test_masking_picks_the_tfidf_top_words(corpus):
    sentences = lines(corpus)
    repal = RepAL(TableEncoder(), "r", keywords=2, fit=f"text:{corpus}", tfidf=f"text:{corpus}")
    checked = 0
    for sentence in sentences[:80]:
        expected = tfidf_top(sentences, sentence, 2)
        if expected is None:
            continue
        assert set(repal.masker.keywords_of(sentence)) == expected, sentence
        masked = repal.masked([sentence])[0].split()
        assert [w for w, m in zip(sentence.split(), masked) if m == "[MASK]"] == [
            w for w in sentence.split() if w in expected
        ]
        checked += 1
    assert checked >= 20


def test_masking_skips_stop_and_one_letter_words_and_masks_unseen_words_first(corpus):
    repal = RepAL(TableEncoder(), "r", keywords=1, fit=f"text:{corpus}", tfidf=f"text:{corpus}")
    # "xylophone" never occurs in the corpus: highest idf
    assert repal.masked(["the man plays a xylophone ."]) == ["the man plays a [MASK] ."]
    assert repal.masked(["a the is"]) == ["a the is"]  # nothing but stop words / 1-letter words
    keep_stops = RepAL(
        TableEncoder(), "r", keywords=20, stop_words="none", fit=f"text:{corpus}", tfidf=f"text:{corpus}"
    )
    assert keep_stops.masked(["the dog is on a mat"]) == ["[MASK] [MASK] [MASK] [MASK] a [MASK]"]


def test_repal_equals_the_formula(corpus):
    base = TableEncoder()
    sentences = ["a man plays the guitar", "the zebra eats bread quickly"]
    repal = RepAL(base, "r", l1=0.3, l2=0.7, keywords=2, fit=f"text:{corpus}", tfidf=f"text:{corpus}")
    got = repal.encode(sentences)
    corpus_sentences = lines(corpus)
    v_mean = np.stack([base.vector(s) for s in corpus_sentences]).mean(axis=0)
    for sentence, row in zip(sentences, got):
        top = tfidf_top(corpus_sentences, sentence, 2)
        assert top is not None
        starred = " ".join("[MASK]" if w in top else w for w in sentence.split())
        expected = base.vector(sentence) - 0.3 * base.vector(starred) - 0.7 * v_mean
        np.testing.assert_allclose(row, expected, rtol=1e-5, atol=1e-5)


def test_repal_without_sentence_term_skips_the_masked_pass(corpus):
    base = TableEncoder()
    repal = RepAL(base, "r", l1=0, l2=1.5, fit=f"text:{corpus}", tfidf=f"text:{corpus}")
    got = repal.encode(["the zebra eats bread"])
    v_mean = np.stack([base.vector(s) for s in lines(corpus)]).mean(axis=0)
    np.testing.assert_allclose(got[0], base.vector("the zebra eats bread") - 1.5 * v_mean, rtol=1e-5, atol=1e-5)
    assert not any("[MASK]" in s for call in base.calls for s in call)


def test_repal_on_a_tiny_bert_matches_the_bare_encoder_on_hand_masked_text(tiny_bert, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the dog runs\nthe dog sleeps\na cat runs\nthe dog eats\n")
    base_name = f"hf:{tiny_bert}?pooling=avg"
    registry = Resolver()
    composed = registry.get(f"{base_name}+repal(l1=0.5,l2=0.25,keywords=1,fit=text:{corpus},tfidf=text:{corpus})")
    got = composed.encode(["the zebra runs", "the dog runs"])
    bare = registry.get(base_name)
    # keywords=1 by tf*idf over the corpus: unseen "zebra" (df 0), then "runs" (df 2) beats "dog" (df 3)
    starred = bare.encode(["the [MASK] runs", "the dog [MASK]"]).astype(np.float64)
    plain = bare.encode(["the zebra runs", "the dog runs"]).astype(np.float64)
    v_mean = bare.encode(lines(corpus)).astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(got, plain - 0.5 * starred - 0.25 * v_mean, rtol=1e-4, atol=1e-5)
    assert composed.mask_token == "[MASK]"


def test_identity_changes_with_every_parameter_and_the_corpus(corpus, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("\n".join(lines(corpus)[:-1]) + "\n")  # one sentence fewer
    base = TableEncoder()
    fit = f"text:{corpus}"
    repals = [RepAL(base, "r", fit=fit, tfidf=fit)]
    for change in (
        {"l1": 0.2},
        {"l2": 0.5},
        {"keywords": 3},
        {"stop_words": "none"},
        {"fit": f"text:{other}"},
        {"tfidf": f"text:{other}"},
    ):
        repals.append(RepAL(base, "r", **{"fit": fit, "tfidf": fit, **change}))
    repals.append(RepAL(TableEncoder(dim=5), "r", fit=fit, tfidf=fit))
    whitenings = [
        Whitening(base, "w", fit=fit),
        Whitening(base, "w", k=4, fit=fit),
        Whitening(base, "w", fit=f"text:{other}"),
    ]
    identities = [e.identity for e in repals + whitenings]
    assert len(set(identities)) == len(identities)
    assert RepAL(base, "x", fit=fit, tfidf=fit).identity == repals[0].identity  # name is not identity
    info = repals[0].identity_info()
    assert info["fit"]["sentences"] == len(set(lines(corpus)))
    assert info["fit"]["sha256"] == hashlib.sha256("\n".join(lines(corpus)).encode()).hexdigest()


def test_repal_needs_a_mask_token(tmp_path):
    glove = tmp_path / "vectors.txt"
    glove.write_text("dog 0.1 0.2\ncat 0.3 0.4\n")
    with pytest.raises(ValueError, match=r"mask token.*\+whitening"):
        Resolver().get(f"glove:{glove}+repal")
    white = Resolver().get(f"glove:{glove}+whitening")  # whitening needs none
    assert white.mask_token is None


@pytest.mark.parametrize(
    "name, message",
    [
        ("minilm-l6+", "malformed"),
        ("minilm-l6+whitening(k=2", "malformed"),
        ("minilm-l6+whitenin", "Did you mean: whitening"),
        ("minilm-l6+repal(lambda1=0.2)", "no parameter lambda1; it takes: l1, l2"),
    ],
)
def test_composition_errors(name, message):
    with pytest.raises(UnknownEncoderError, match=message.replace("(", r"\(")):
        Resolver().get(name)


def test_bad_parameter_values_are_explained(corpus):
    with pytest.raises(ValueError, match="positive integer"):
        Resolver().get("glove-50d+whitening(k=0)")
    with pytest.raises(ValueError, match="unknown fit corpus 'wiki'"):
        Whitening(TableEncoder(), "w", fit="wiki")
    with pytest.raises(ValueError, match="stop_words must be"):
        RepAL(TableEncoder(), "r", stop_words="french", fit=f"text:{corpus}", tfidf=f"text:{corpus}")


def test_metadata_records_each_step_and_its_corpus(corpus):
    white = Whitening(TableEncoder(), "w", k=4, fit=f"text:{corpus}")
    repal = RepAL(white, "r", l1=0.2, fit=f"text:{corpus}", tfidf=f"text:{corpus}")
    steps = repal.metadata["post_processing"]
    assert [s["name"] for s in steps] == ["whitening", "repal"]
    assert steps[0]["k"] == 4 and steps[1]["l1"] == 0.2
    assert steps[1]["tfidf"]["corpus"] == f"text:{corpus}"
    assert repal.identity_info()["base"] == white.identity_info()


@needs_data("senteval/STS/STSBenchmark/sts-test.csv", "senteval/SICK/SICK_train.txt", "senteval/STS/STS16-en-test")
def test_fit_corpus_reports_test_sentences(data_dir):
    from benchharness.core.data_root import DataRoot
    from benchharness.encoders.postprocess.fitting import FitCorpus

    transductive = FitCorpus("sts-unlabeled", data_dir).describe()
    # every STS12-16, STS-B test and SICK test sentence (the corpus holds them all, unlabeled)
    from benchharness.tasks.sts import STSYear, sick, stsb

    test_tasks = [STSYear(y) for y in ("STS12", "STS13", "STS14", "STS15", "STS16")] + [stsb("test"), sick("test")]
    test = set()
    for task in test_tasks:
        task.load(DataRoot(data_dir))
        test.update(task.sentences())
    assert transductive["transductive"] is True and transductive["test_sentence_overlap"] == len(test)
    default = FitCorpus("train-splits", data_dir).describe()
    assert default["transductive"] is False and 0 < default["test_sentence_overlap"] < len(test)


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
def test_tune_repal_registers_a_runnable_encoder(tiny_bert, tmp_path, monkeypatch, caplog, data_dir):
    from benchharness.evaluation.run_settings import RunSettings
    from benchharness.tuning import repal_grid as tune_repal

    caplog.set_level(logging.INFO, logger="benchharness")

    (tmp_path / "benchharness.toml").write_text('[paths]\nruns_dir = "runs"\ncache_dir = "cache"\n')
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "c.txt"
    corpus.write_text("a man is playing a guitar\na woman is slicing an onion\nthe dog runs on the grass\n")
    base = f"hf:{tiny_bert}?pooling=avg"
    options = tune_repal.RepALTuning(
        encoder=base, l1="0,0.5", l2="0:1:0.5", fit=f"text:{corpus}", tfidf=f"text:{corpus}", name="tiny-tuned"
    )
    config = load_config()  # what the command line reads once and hands every command
    output = tune_repal.tune(options, RunSettings(data_dir=data_dir, cache_dir=config.cache_dir, config=config))
    assert "| l1=0.5 " in output and "-> best" in output
    manifest = json.loads((tmp_path / "runs/tiny-tuned/manifest.json").read_text())
    grid = manifest["tuning"]["grid"]
    assert [(p["l1"], p["l2"]) for p in grid] == [(a, b) for a in (0, 0.5) for b in (0, 0.5, 1)]
    best = manifest["tuning"]["best"]
    assert best["score"] == max(p["score"] for p in grid)
    # the registered name resolves to RepAL with the best values; score it independently
    encoder = Resolver().get("tiny-tuned")
    assert (encoder.l1, encoder.l2) == (best["l1"], best["l2"])
    from benchharness import tasks

    dev = tasks.get("STSBenchmark-dev")
    from benchharness.core.data_root import DataRoot

    dev.load(DataRoot(data_dir))
    a, b, gold = dev.subsets["test"]
    va, vb = encoder.encode(a).astype(np.float64), encoder.encode(b).astype(np.float64)
    cos = (va * vb).sum(1) / np.linalg.norm(va, axis=1) / np.linalg.norm(vb, axis=1)
    assert spearmanr(cos, gold).correlation * 100 == pytest.approx(best["score"], abs=1e-3)
    assert "registered 'tiny-tuned'" in caplog.text


def test_a_config_entry_can_name_a_composition(tmp_path, monkeypatch, corpus):
    glove = tmp_path / "vectors.txt"
    glove.write_text("dog 0.1 0.2 0.5\ncat 0.3 0.4 0.1\nman 0.9 0.1 0.3\n")
    (tmp_path / "benchharness.toml").write_text(
        f'[encoders."tiny+white"]\nspec = "glove:{glove}+whitening(k=2,fit=text:{corpus})"\n'
    )
    monkeypatch.chdir(tmp_path)
    encoder = Resolver().get("tiny+white")  # a registered name wins over splitting on '+'
    assert isinstance(encoder, Whitening) and encoder.k == 2
    assert encoder.fit_corpus.name == f"text:{corpus}"
