"""``st:`` on a sentence-transformers ``MultiVectorEncoder`` folder, and such a model given to
``evaluate`` as an object (``encoders.st_multi_vector``, ``evaluation.kinds.multi_vector``): loaded as a
multi-vector model, encoded per role by the model's own methods, pinned by what decides its token
vectors, scored by MaxSim as sentence-transformers scores, cached per role, and refused on tasks that
need one vector per text before anything is encoded. The model is the seeded ColBERT-style one of
``tests.multi_vector_helpers`` on MiniLM-L3."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import benchharness
from benchharness.core.kind_models import MultiVectorModel
from benchharness.core.kinds import ViewSettings
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Role
from benchharness.encoders.st_multi_vector import MultiVectorEncoderFolder, MultiVectorEncoderObject
from benchharness.evaluation.kinds import held_model
from benchharness.evaluation.kinds.multi_vector import KIND
from benchharness.evaluation.models import as_encoder
from benchharness.evaluation.resolver import Resolver
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from tests.helpers import MINILM_L3
from tests.multi_vector_helpers import DIMENSION, QUERY_TOKENS, make_colbert

QUERIES = ["how do cats sleep?", "what is the capital of france?"]
DOCUMENTS = ["Cats sleep for most of the day, curled up.", "Paris is the capital of France.", "A dog barks!"]


@pytest.fixture(scope="module")
def colbert(tmp_path_factory) -> Path:
    return make_colbert(tmp_path_factory.mktemp("colbert") / "model", MINILM_L3)


@pytest.fixture(scope="module")
def reference(colbert):
    """sentence-transformers' own ``MultiVectorEncoder`` on the folder."""
    from sentence_transformers import MultiVectorEncoder

    return MultiVectorEncoder(str(colbert), local_files_only=True, device="cpu")


def built(spec: str):
    return Resolver().get(spec)


def test_st_loads_the_folder_as_a_multi_vector_model_with_its_own_settings(colbert):
    encoder = built(f"st:{colbert}")
    assert isinstance(encoder, MultiVectorEncoderFolder) and encoder.model_kind == "multi-vector"
    assert encoder.prompts.query == "[Q] " and encoder.prompts.document == "[D] "
    assert encoder.similarity == "maxsim" and not encoder.length_normalized
    record = encoder.identity_record()
    assert record["kind"] == "multi-vector" and record["prompts"] == {"query_prompt": "[Q] ", "document_prompt": "[D] "}
    module = record["modules"]["sentence_bert_config.json"]
    assert module["query_expansion"]["length"] == QUERY_TOKENS and module["document_length"] == 128
    assert "!" in record["modules"]["2_MultiVectorMask/config.json"]["skiplist_words"]
    assert set(record["module_weights"]) == {"1_Dense"} and record["max_length"] == 512


def test_each_role_is_encoded_by_the_models_own_method(colbert, reference):
    """Queries by ``encode_query`` (prompt, expansion to 32 tokens), documents by ``encode_document``
    (prompt, punctuation dropped), a symmetric task's texts by ``encode``: as the reference encodes."""
    encoder = built(f"st:{colbert}")
    expected = {
        QUERY: reference.encode_query(QUERIES + DOCUMENTS, convert_to_numpy=True),
        DOCUMENT: reference.encode_document(QUERIES + DOCUMENTS, convert_to_numpy=True),
        DEFAULT: reference.encode(QUERIES + DOCUMENTS, convert_to_numpy=True),
    }
    for role, want in expected.items():
        got = encoder.encode_tokens(QUERIES + DOCUMENTS, role)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-5)
            assert g.dtype == np.float32 and g.shape[1] == DIMENSION
    assert {len(m) for m in expected[QUERY]} == {QUERY_TOKENS}
    # "[D] " adds one scored token ("d": the brackets are punctuation); "," "." "!" and "?" are dropped
    assert [len(m) for m in expected[DOCUMENT]] == [len(m) + 1 for m in expected[DEFAULT]]


def test_a_spec_prompt_an_empty_one_and_a_task_instruction_replace_the_models_own(colbert, reference):
    encoder = built(f"st:{colbert}?query_prompt=search: ")
    assert encoder.identity != built(f"st:{colbert}").identity
    want = reference.encode_query(QUERIES, prompt="search: ", convert_to_numpy=True)
    for got, w in zip(encoder.encode_tokens(QUERIES, QUERY), want):
        np.testing.assert_allclose(got, w, atol=1e-5)
    unprompted = built(f"st:{colbert}?query_prompt=")
    want = reference.encode_query(QUERIES, prompt="", convert_to_numpy=True)
    for got, w in zip(unprompted.encode_tokens(QUERIES, QUERY), want):
        np.testing.assert_allclose(got, w, atol=1e-5)
    instructed = Role("query", instruction="Find the answer")
    want = reference.encode_query(QUERIES, prompt="Find the answer", convert_to_numpy=True)
    for got, w in zip(built(f"st:{colbert}").encode_tokens(QUERIES, instructed), want):
        np.testing.assert_allclose(got, w, atol=1e-5)


def test_an_older_formats_prompts_are_those_sentence_transformers_composes(colbert, tmp_path):
    """A PyLate save keeps its markers as ``query_prefix``/``document_prefix`` beside no prompts: the
    folder is loaded to read the prompts sentence-transformers makes of them, and encodes as it does."""
    from sentence_transformers import MultiVectorEncoder

    folder = tmp_path / "pylate"
    shutil.copytree(colbert, folder)
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    del config["prompts"]
    config.update(model_type="ColBERT", query_prefix="[unused0]", document_prefix="[unused1]")
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    encoder = built(f"st:{folder}")
    assert (encoder.prompts.query, encoder.prompts.document) == ("[unused0]", "[unused1]")
    reference = MultiVectorEncoder(str(folder), local_files_only=True, device="cpu")
    for got, want in zip(
        encoder.encode_tokens(DOCUMENTS, DOCUMENT), reference.encode_document(DOCUMENTS, convert_to_numpy=True)
    ):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_the_identity_pins_the_projection_weights_and_the_similarity(colbert, tmp_path):
    from safetensors.torch import load_file, save_file

    first = built(f"st:{colbert}").identity_record()
    other = tmp_path / "other"
    shutil.copytree(colbert, other)
    weights = load_file(other / "1_Dense" / "model.safetensors")
    save_file({k: v * 2 for k, v in weights.items()}, other / "1_Dense" / "model.safetensors")
    moved = built(f"st:{other}").identity_record()
    assert moved["weights_sha256"] == first["weights_sha256"]  # the transformer's are the same
    assert moved["module_weights"] != first["module_weights"]
    config = json.loads((other / "config_sentence_transformers.json").read_text())
    (other / "config_sentence_transformers.json").write_text(json.dumps({**config, "similarity_fn_name": "meanmaxsim"}))
    normalised = built(f"st:{other}")
    assert normalised.length_normalized and normalised.identity_record()["similarity_fn_name"] == "meanmaxsim"


def test_pairs_are_scored_as_the_models_similarity_pairwise_maxsim_and_meanmaxsim(colbert, reference):
    left, right = QUERIES * 3, [d for d in DOCUMENTS for _ in QUERIES]
    for similarity in ("maxsim", "meanmaxsim"):
        reference.similarity_fn_name = similarity
        encoder = as_encoder(reference, name="held")
        assert isinstance(encoder, MultiVectorEncoderObject) and encoder.length_normalized == (similarity != "maxsim")
        view = KIND.open_view(encoder, ViewSettings())
        want = reference.similarity_pairwise(
            reference.encode_query(left, convert_to_numpy=True), reference.encode_document(right, convert_to_numpy=True)
        )
        np.testing.assert_allclose(view.pairs(left, right, (QUERY, DOCUMENT)), want.numpy(), rtol=1e-5)
    reference.similarity_fn_name = "maxsim"


def test_an_object_is_pinned_by_its_weights_now(colbert, reference):
    from sentence_transformers import MultiVectorEncoder

    held = MultiVectorEncoderObject("held", reference)
    again = MultiVectorEncoderObject("held", MultiVectorEncoder(str(colbert), local_files_only=True, device="cpu"))
    assert held.identity == again.identity and held.prompts == built(f"st:{colbert}").prompts
    record = held.identity_record()
    assert record["kind"] == "multi-vector" and record["max_length"] == 512
    with_pooler = [k for k in dict(again.model.named_parameters()) if ".pooler." in k]
    assert with_pooler  # MiniLM-L3's pooler is in the model but reaches no output: left out of the hash
    import torch

    with torch.no_grad():
        again.model[1].linear.weight.mul_(2)
    assert held.identity != MultiVectorEncoderObject("held", again.model).identity


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCUMENTS))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(QUERIES))
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\n")
    return folder


def test_retrieval_through_the_cache_is_read_back_without_encoding(colbert, tmp_path, monkeypatch, data_dir):
    monkeypatch.setattr(declarations, "REGISTERED", {})
    register_file_task("tiny-beir", write_beir(tmp_path / "beir"), kind="retrieval")
    run = {"data_dir": data_dir, "cache_dir": tmp_path / "cache", "intervals": False, "device": "cpu"}
    (first,) = benchharness.evaluate(f"st:{colbert}", "tiny-beir", **run)
    assert first.metrics["ndcg@10"] == 100.0  # each query finds its own answer first
    assert first.metrics["tokens_per_query"] == QUERY_TOKENS and first.metrics["token_dimension"] == DIMENSION

    def refuse(self, sentences, role=DEFAULT):
        raise AssertionError(f"encoded {len(sentences)} texts again")

    monkeypatch.setattr(MultiVectorEncoderFolder, "encode_tokens", refuse)
    (second,) = benchharness.evaluate(f"st:{colbert}", "tiny-beir", **run, overwrite="always")
    assert second.metrics == first.metrics


def test_a_task_that_needs_vectors_is_refused_before_anything_is_encoded(colbert, monkeypatch, data_dir):
    def refuse(self, sentences, role=DEFAULT):
        raise AssertionError("encoded")

    monkeypatch.setattr(MultiVectorEncoderFolder, "encode_tokens", refuse)
    results = benchharness.evaluate(f"st:{colbert}", "MR", data_dir=data_dir, errors="keep")
    (failed,) = results.failed
    assert "is a multi-vector encoder (one vector per token), and MR needs vectors" in failed.message


def test_the_kind_unwraps_the_cache_and_refuses_another_model(colbert):
    from benchharness.core.kinds import KindMismatchError
    from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache

    encoder = built(f"st:{colbert}")
    assert (
        held_model(CachingEncoder(encoder, EmbeddingCache(colbert.parent / "cache")), MultiVectorModel, KIND) is encoder
    )
    with pytest.raises(KindMismatchError, match="not a multi-vector encoder"):
        held_model(built("glove-50d"), MultiVectorModel, KIND)
