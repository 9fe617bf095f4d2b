"""``st:`` on a ``SparseEncoder`` folder (and a ``SparseEncoder`` object) is a sparse model: each role
encoded by the model's own method with its prompt, as CSR rows equal to sentence-transformers' own
tensors, and an identity that pins what changes the scores."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import benchharness
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import KindMismatchError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Role
from benchharness.encoders.st_sparse import SparseEncoderFolder, SparseEncoderObject, from_object
from benchharness.evaluation.kinds import kind_of
from benchharness.evaluation.resolver import Resolver
from tests.sparse_helpers import make_tiny_splade

SENTENCES = ["a man is playing a guitar .", "the cat sat on the mat", "stocks fell sharply on monday", "a"]


@pytest.fixture(scope="module")
def splade(tmp_path_factory):
    """The tiny SPLADE, saved with a query and a document prompt (``encode_query`` and
    ``encode_document`` apply them, ``encode`` neither)."""
    from sentence_transformers import SparseEncoder

    folder = make_tiny_splade(tmp_path_factory.mktemp("splade"))
    model = SparseEncoder(str(folder), device="cpu", local_files_only=True)
    model.prompts = {"query": "query: ", "document": "passage: "}
    model.save(str(folder))
    return folder


@pytest.fixture(scope="module")
def st_model(splade):
    from sentence_transformers import SparseEncoder

    return SparseEncoder(str(splade), device="cpu", local_files_only=True)


def _variant(splade, tmp_path, **settings):
    """A copy of the model folder whose ``config_sentence_transformers.json`` has ``settings``."""
    folder = tmp_path / "variant"
    shutil.copytree(splade, folder)
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **settings}))
    return folder


def _dense(tensor) -> np.ndarray:
    return tensor.to_dense().numpy()


def test_st_on_a_sparse_encoder_folder_is_a_sparse_model(splade):
    model = Resolver().get(f"st:{splade}")
    assert isinstance(model, SparseEncoderFolder) and kind_of(model).name == "sparse"
    record = model.identity_record()
    assert record["kind"] == "sparse" and record["similarity_fn"] == "dot" and record["max_length"] == 64
    assert record["prompts"] == {"query_prompt": "query: ", "document_prompt": "passage: "}
    assert model.vocabulary_size == 30522
    with pytest.raises(KindMismatchError, match="gives no dense vectors"):
        model.encode(SENTENCES)


@pytest.mark.parametrize(
    ("role", "method"), [(QUERY, "encode_query"), (DOCUMENT, "encode_document"), (DEFAULT, "encode")]
)
def test_each_role_is_encoded_by_the_models_own_method(splade, st_model, role, method):
    rows = Resolver().get(f"st:{splade}").encode_sparse(SENTENCES, role)
    expected = _dense(getattr(st_model, method)(SENTENCES))
    assert rows.format == "csr" and rows.dtype == np.float32 and rows.shape == expected.shape
    assert (rows.data != 0).all() and rows.nnz == np.count_nonzero(expected)
    np.testing.assert_array_equal(rows.toarray(), expected)


def test_the_roles_prompts_change_the_rows(splade, st_model):
    model = Resolver().get(f"st:{splade}")
    query, document = model.encode_sparse(SENTENCES, QUERY), model.encode_sparse(SENTENCES, DOCUMENT)
    assert (query != document).nnz > 0
    assert model.vector_key(QUERY) != model.vector_key(DOCUMENT)  # cached apart


def test_a_spec_prompt_and_a_task_instruction_reach_the_model(splade, st_model):
    model = Resolver().get(f"st:{splade}?query_prompt=find: &instruction_template=Instruct: {{instruction}} | ")
    np.testing.assert_array_equal(
        model.encode_sparse(SENTENCES, QUERY).toarray(), _dense(st_model.encode_query(SENTENCES, prompt="find: "))
    )
    np.testing.assert_array_equal(
        model.encode_sparse(SENTENCES, Role("query", "retrieve the answer")).toarray(),
        _dense(st_model.encode_query(SENTENCES, prompt="Instruct: retrieve the answer | ")),
    )


def test_the_models_max_active_dims_and_similarity_are_applied_and_pinned(splade, tmp_path):
    plain = Resolver().get(f"st:{splade}")
    capped = Resolver().get(f"st:{_variant(splade, tmp_path, max_active_dims=5)}")
    rows = capped.encode_sparse(SENTENCES, DOCUMENT)
    assert np.diff(rows.indptr).max() == 5 < np.diff(plain.encode_sparse(SENTENCES, DOCUMENT).indptr).max()
    assert capped.identity_record()["max_active_dims"] == 5 and plain.identity_record()["max_active_dims"] is None
    shutil.rmtree(tmp_path / "variant")
    cosine = Resolver().get(f"st:{_variant(splade, tmp_path, similarity_fn_name='cosine')}")
    assert cosine.similarity == "cosine" and cosine.identity_record()["similarity_fn"] == "cosine"
    identities = {plain.identity, capped.identity, cosine.identity, Resolver().get(f"st:{splade}?prompt=x: ").identity}
    assert len(identities) == 4 and Resolver().get(f"st:{splade}").identity == plain.identity


def test_a_similarity_the_view_does_not_compute_is_refused_in_one_line(splade, tmp_path):
    with pytest.raises(InvalidInputError, match=r"similarity_fn_name is 'manhattan'; .* dot or cosine") as info:
        Resolver().get(f"st:{_variant(splade, tmp_path, similarity_fn_name='manhattan')}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("setting", ["precision=fp16", "backend=onnx"])
def test_the_dense_engines_settings_are_refused(splade, setting):
    with pytest.raises(InvalidInputError, match="a sparse encoder runs through sentence-transformers' own methods"):
        Resolver().get(f"st:{splade}?{setting}")


def test_no_text_gives_no_rows_of_the_vocabulary_width(splade):
    rows = Resolver().get(f"st:{splade}").encode_sparse([], QUERY)
    assert rows.shape == (0, 30522) and rows.nnz == 0


def test_an_object_scores_as_its_folder_and_its_identity_is_its_weights(splade):
    import torch
    from sentence_transformers import SparseEncoder

    model = SparseEncoder(str(splade), device="cpu", local_files_only=True)
    model.train()
    held = benchharness.as_encoder(model)
    assert isinstance(held, SparseEncoderObject) and kind_of(held).name == "sparse"
    folder = Resolver().get(f"st:{splade}")
    for role in (QUERY, DOCUMENT, DEFAULT):
        np.testing.assert_array_equal(
            held.encode_sparse(SENTENCES, role).toarray(), folder.encode_sparse(SENTENCES, role).toarray()
        )
    assert model.training  # handed back in the mode it was in
    before = held.identity
    assert before == from_object(model, "again").identity
    with torch.no_grad():
        model[0].auto_model.cls.predictions.bias += 0.5
    assert from_object(model, "again").identity != before
    with pytest.raises(InvalidInputError, match="identity= pins a plain callable"):
        from_object(model, "x", identity="mine")
