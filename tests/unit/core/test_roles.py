"""Roles and prompts: what reaches the encoder for each side of a task, what is encoded once, and
how the cache keeps roles apart."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from benchharness.core.data_root import DataRoot
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Prompts, Role
from benchharness.core.task import Evaluation, Task, TaskMetadata
from benchharness.encoders.sentence_transformers_format import save_as_sentence_transformer
from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from tests.fakes import HashEncoder
from tests.helpers import tokenizer_inputs

QUERIES = ["how do cats sleep", "shared text"]
DOCUMENTS = ["shared text", "cats sleep a lot"]


class SearchTask(Task):
    """Two queries against two documents; one text is asked for on both sides. Its metric is the
    cosine of each query with each document, so that the vectors a role got are visible."""

    metadata = TaskMetadata(
        name="Search",
        family="test",
        description="roles",
        split="test",
        main_score="first",
        protocol="none",
        reference="",
    )

    def _load(self, data: DataRoot) -> None:
        pass

    def sentences(self) -> list[str]:
        return QUERIES + DOCUMENTS

    def requests(self) -> dict[Role, list[str]]:
        return {self.query_role: QUERIES, DOCUMENT: DOCUMENTS}

    def evaluate_items(self, embed, seed: int) -> Evaluation:
        q, d = embed(QUERIES, self.query_role), embed(DOCUMENTS, DOCUMENT)
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        d = d / np.linalg.norm(d, axis=1, keepdims=True)
        cosines = q @ d.T
        return Evaluation({"first": float(cosines[0, 0]), "shared": float(cosines[1, 0])})

    def evaluate(self, embed, seed: int):
        return self.evaluate_items(embed, seed).metrics


def _run(encoder, tmp_path, cache: bool = False) -> dict:
    settings = RunSettings(cache_dir=tmp_path / "cache" if cache else None, intervals=False)
    wrapped = CachingEncoder(encoder, EmbeddingCache(tmp_path / "cache")) if cache else encoder
    summary = run([encoder.name], [SearchTask()], lambda name: wrapped, DataRoot(tmp_path), None, settings)
    (outcome,) = summary.outcomes
    assert outcome.status == "computed", outcome.message
    return outcome.result.metrics


def test_prompts_fall_back_as_sentence_transformers_does():
    e5 = Prompts(default="query: ", query="query: ", document="passage: ")
    assert [e5.for_role(r) for r in (DEFAULT, QUERY, DOCUMENT)] == ["query: ", "query: ", "passage: "]
    bge = Prompts(query="Represent: ", document="")
    assert [bge.for_role(r) for r in (DEFAULT, QUERY, DOCUMENT)] == ["", "Represent: ", ""]
    only_default = Prompts(default="x ")
    assert only_default.for_role(DOCUMENT) == "x "
    instructed = Role("query", "Find the answer")
    assert (
        Prompts(instruction_template="Instruct: {instruction}\nQuery: ").for_role(instructed)
        == "Instruct: Find the answer\nQuery: "
    )
    assert bge.for_role(instructed) == "Find the answer"  # a prompted model without a template: verbatim
    assert Prompts().for_role(instructed) == ""  # a plain model ignores instructions, as in mteb
    with pytest.raises(ValueError, match="placeholder"):
        Prompts(instruction_template="no placeholder")


def test_a_symmetric_encoder_encodes_a_shared_sentence_once(tmp_path):
    encoder = HashEncoder()
    metrics = _run(encoder, tmp_path)
    encoded = [s for call in encoder.calls for s in call]
    assert sorted(encoded) == sorted(set(QUERIES + DOCUMENTS))  # "shared text" once, for both roles
    assert metrics["shared"] == pytest.approx(1.0, abs=1e-6)  # the same vector on both sides


def test_role_prompts_reach_the_encoder_per_side(tmp_path):
    encoder = HashEncoder()
    encoder.prompts = Prompts(query="q: ", document="d: ")
    metrics = _run(encoder, tmp_path)
    encoded = sorted(s for call in encoder.calls for s in call)
    assert encoded == sorted([f"q: {s}" for s in QUERIES] + [f"d: {s}" for s in DOCUMENTS])
    plain = HashEncoder()
    expected = plain.encode(["q: shared text"])[0] @ plain.encode(["d: shared text"])[0]
    expected /= np.linalg.norm(plain.encode(["q: shared text"])[0]) * np.linalg.norm(
        plain.encode(["d: shared text"])[0]
    )
    assert metrics["shared"] == pytest.approx(float(expected), abs=1e-6)


def test_the_cache_keeps_roles_apart_and_serves_them_again(tmp_path):
    encoder = HashEncoder()
    encoder.prompts = Prompts(query="q: ", document="d: ")
    first = _run(encoder, tmp_path, cache=True)
    folders = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir())
    assert len(folders) == 2 and all(f.startswith(encoder.identity + "-") for f in folders)
    encoder.calls.clear()
    assert _run(encoder, tmp_path, cache=True) == first
    assert encoder.calls == []  # both roles served from the cache
    symmetric = HashEncoder(salt="other")
    _run(symmetric, tmp_path, cache=True)
    assert (tmp_path / "cache" / symmetric.identity).is_dir()  # a symmetric encoder keeps its one folder


def test_prompts_enter_the_identity_and_the_result(tmp_path):
    plain, prompted = HashEncoder(), HashEncoder()
    prompted.prompts = Prompts(query="q: ")
    assert plain.identity != prompted.identity
    assert prompted.identity_record()["prompts"] == {"query_prompt": "q: "}
    settings = RunSettings(intervals=False)
    summary = run(["p"], [SearchTask()], lambda name: prompted, DataRoot(tmp_path), None, settings)
    result = summary.outcomes[0].result
    assert result.encoder_identity["prompts"] == {"query_prompt": "q: "}
    assert result.encoder_metadata["prompts_applied"] == {"query": "q: ", "document": ""}


def test_a_task_instruction_reaches_the_query_side_of_a_prompted_model(tmp_path):
    class Instructed(SearchTask):
        metadata = TaskMetadata(
            name="Instructed",
            family="test",
            description="roles",
            split="test",
            main_score="first",
            protocol="none",
            reference="",
            instruction="Find cats",
        )

    encoder = HashEncoder()
    encoder.prompts = Prompts(query="q: ", instruction_template="Instruct: {instruction}\nQuery: ")
    summary = run(["p"], [Instructed()], lambda name: encoder, DataRoot(tmp_path), None, RunSettings(intervals=False))
    assert summary.outcomes[0].status == "computed"
    assert {s for call in encoder.calls for s in call} >= {"Instruct: Find cats\nQuery: how do cats sleep"}
    assert summary.outcomes[0].result.protocol["instruction"] == "Find cats"


@pytest.fixture
def prompted_st(tiny_bert, tmp_path):
    """A tiny sentence-transformers model whose config names a query and a passage prompt (no default)."""
    folder = tmp_path / "prompted"
    shutil.copytree(tiny_bert, folder)
    save_as_sentence_transformer(folder, {"pooling": "avg"})
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    settings.update(prompts={"query": "query: ", "passage": "passage: "}, default_prompt_name=None)
    config.write_text(json.dumps(settings))
    return folder


def test_a_configured_prompt_reaches_the_tokenizer_on_the_query_side_only(prompted_st):
    encoder = Resolver().get(f"st:{prompted_st}")
    assert encoder.prompts == Prompts(query="query: ", document="passage: ")
    with tokenizer_inputs(encoder.model[0].tokenizer) as seen:
        query = encoder.encode_role(["a cat sleeps"], QUERY)
        plain = encoder.encode_role(["a cat sleeps"], DEFAULT)
    # the query prompt alone first: the check that it leaves a sentence room within max_length
    assert seen == ["query: ", "query: a cat sleeps", "a cat sleeps"]
    assert not np.allclose(query, plain)
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(prompted_st), device="cpu")
    np.testing.assert_allclose(query, reference.encode(["a cat sleeps"], prompt_name="query"), atol=1e-5)
    np.testing.assert_allclose(plain, reference.encode(["a cat sleeps"]), atol=1e-5)


def test_spec_prompts_replace_the_configured_ones_and_are_checked(prompted_st):
    encoder = Resolver().get(f"st:{prompted_st}?query_prompt=search:%20")
    assert encoder.prompts == Prompts(query="search: ", document="passage: ")
    with pytest.raises(Exception, match="has no parameter 'query_promt'"):
        Resolver().get(f"st:{prompted_st}?query_promt=x")


def test_an_unpinned_encoder_is_scored_but_never_stored(tmp_path):
    from benchharness.core.results import ResultStore

    class Unpinned(HashEncoder):
        pinned = False

    store = ResultStore(tmp_path / "results")
    summary = run(
        ["u"], [SearchTask()], lambda name: Unpinned("u"), DataRoot(tmp_path), store, RunSettings(intervals=False)
    )
    (outcome,) = summary.outcomes
    assert outcome.status == "computed" and "not stored: the encoder is unpinned" in outcome.message
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.json"))
