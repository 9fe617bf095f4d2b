"""``+truncate`` and ``+quantize``: codes equal to sentence-transformers' ``quantize_embeddings``,
Hamming distances counted by hand, int8 calibrated on each task alone (both sides together), the
bytes a vector takes, value lists expanded into variants whose base encodes once."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.specs import Family, UnknownEncoderError, encoder_list, expand_variants
from benchharness.encoders.postprocess.quantize import binary_codes
from benchharness.scoring.quantization import normalise, ranges_of, scalar_codes
from tests.fakes import HashEncoder
from tests.helpers import needs_data

TASK, OTHER = "SICKRelatedness-trial", "STS12"


@pytest.fixture
def hashed(register_plugin) -> list[HashEncoder]:
    """A family ``hashed:<dim>``; every encoder it builds is kept, with the calls it received."""
    built: list[HashEncoder] = []

    def build(name, params, context):
        built.append(HashEncoder(name, dim=int(params["dim"])))
        return built[-1]

    register_plugin("families", "hashed", Family.of("hashed", build, target="dim", accepts=()))
    return built


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_codes_are_sentence_transformers_quantize_embeddings(precision):
    from sentence_transformers.util import quantize_embeddings

    x = normalise(np.random.default_rng(0).normal(size=(200, 37)).astype(np.float32))
    expected = quantize_embeddings(x, precision=precision)
    if precision.endswith("binary"):
        packed = expected.astype(np.int16) + 128 if precision == "binary" else expected
        np.testing.assert_array_equal(binary_codes(x, "cosine"), np.unpackbits(packed.astype(np.uint8), axis=1))
    else:
        np.testing.assert_array_equal(scalar_codes(x, ranges_of(x), precision), expected.astype(np.float32))


def test_the_cosine_of_hamming_codes_is_an_affine_function_of_the_distance():
    x = np.random.default_rng(1).normal(size=(2, 29)).astype(np.float32)
    a, b = binary_codes(x, "hamming")
    distance = int(((x[0] > 0) != (x[1] > 0)).sum())  # counted bit by bit
    assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) == pytest.approx(1 - 2 * distance / 29, abs=1e-6)


def test_value_lists_expand_into_variants_in_order():
    assert expand_variants("m+truncate(d=64|128)") == ["m+truncate(d=64)", "m+truncate(d=128)"]
    assert expand_variants("m+truncate(d=64|32)+quantize(precision=int8|binary)") == [
        "m+truncate(d=64)+quantize(precision=int8)",
        "m+truncate(d=64)+quantize(precision=binary)",
        "m+truncate(d=32)+quantize(precision=int8)",
        "m+truncate(d=32)+quantize(precision=binary)",
    ]
    assert expand_variants("vectors:a|b.npy") == ["vectors:a|b.npy"]  # a base spec is left as written
    assert encoder_list("a, m+truncate(d=8|16),m+truncate(d=8)") == ["a", "m+truncate(d=8)", "m+truncate(d=16)"]
    with pytest.raises(UnknownEncoderError, match=r"an empty value in d='8\|'"):
        expand_variants("m+truncate(d=8|)")


@needs_data("senteval/SICK")
def test_truncated_and_quantized_vectors_score_as_computed_by_hand(hashed, data_dir):
    results = benchharness.evaluate(
        "hashed:16+truncate(d=8)+quantize(precision=int8)", TASK, data_dir=data_dir, cache_dir=None
    )
    sick = tasks.get(TASK)
    sick.load(DataRoot(data_dir))
    ((first, second, gold),) = sick.subsets.values()
    base = HashEncoder(dim=16)
    vectors = {s: v[:8] for s, v in zip(sick.sentences(), base.encode(sick.sentences()))}
    x = normalise(np.array([vectors[s] for s in [*first, *second]]))
    codes = scalar_codes(x, ranges_of(x), "int8")  # calibrated on both sides together
    a, b = codes[: len(first)], codes[len(first) :]
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    (result,) = results.results
    assert result.main_score == pytest.approx(100 * spearmanr(cosine, gold)[0], abs=1e-9)
    assert result.embedding_stats["bytes_per_vector"] == 8 and result.embedding_stats["dimensions"] == 8


@needs_data("senteval/SICK", "senteval/STS/STS12-en-test")
def test_int8_is_calibrated_on_each_task_alone(hashed, data_dir):
    spec = "hashed:16+quantize(precision=int8)"
    together = benchharness.evaluate(spec, [TASK, OTHER], data_dir=data_dir, cache_dir=None)
    alone = benchharness.evaluate(spec, TASK, data_dir=data_dir, cache_dir=None)
    assert together.get(spec, TASK).main_score == alone.get(spec, TASK).main_score
    assert hashed[0].calls and len(hashed[0].calls[0]) > len(hashed[-1].calls[0])  # one pass for both tasks


@needs_data("senteval/SICK")
def test_the_variants_of_one_base_load_it_once_and_through_the_cache_encode_once(hashed, data_dir, tmp_path):
    names = "hashed:16+truncate(d=4|8|12)"
    results = benchharness.evaluate(names, TASK, data_dir=data_dir, cache_dir=tmp_path / "cache")
    assert [r.encoder for r in results.results] == [f"hashed:16+truncate(d={d})" for d in (4, 8, 12)]
    assert [r.embedding_stats["bytes_per_vector"] for r in results.results] == [16, 32, 48]
    assert len(hashed) == 1  # one base built for the three
    assert len(hashed[0].calls) == 1  # and asked once: the other two read the cache
    assert [r.timings["sentences_not_from_cache"] for r in results.results] == [len(hashed[0].calls[0]), 0, 0]
    base = benchharness.evaluate("hashed:16", TASK, data_dir=data_dir, cache_dir=None).results[0]
    assert base.embedding_stats["bytes_per_vector"] == 64


def test_bad_parameters_and_stages_after_a_task_calibration_are_refused(hashed):
    for spec, message in [
        ("hashed:16+truncate(d=0)", r"truncate takes d=<positive integer>"),
        ("hashed:16+quantize(precision=int4)", r"quantize takes precision=float32\|int8\|uint8\|binary\|ubinary"),
        ("hashed:16+quantize(precision=int8,similarity=hamming)", r"similarity=hamming compares binary codes"),
        ("hashed:16+quantize(precision=binary,calibration=train-splits)", r"binary takes no calibration="),
        ("hashed:16+quantize(precision=int8)+truncate(d=4)", r"calibrated on each task .* must come last"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            benchharness.as_encoder(spec)
    with pytest.raises(InvalidInputError, match=r"d=32 exceeds the 16 dimensions of 'hashed:16'"):
        benchharness.as_encoder("hashed:16+truncate(d=32)").encode(["a", "b"])
