"""Quality against size: which results are sizes of which encoder, the curves drawn from them (a
line per precision, a point per size at its bytes and score), and the report's section."""

from __future__ import annotations

import pytest

import benchharness
from benchharness.core.results import ResultStore
from benchharness.core.specs import Family
from benchharness.reporting.html_report import write_report
from benchharness.reporting.size_curve import base_of, precision_of, size_families, size_figure
from tests.fakes import HashEncoder
from tests.helpers import needs_data

TASK = "STSBenchmark"
SIZES = "hashed:16+truncate(d=4|8)+quantize(precision=int8|binary)"


@pytest.fixture
def hashed(register_plugin) -> None:
    """A family ``hashed:<dim>`` of hash vectors: any number of encoders, encoded at once."""
    build = lambda name, params, context: HashEncoder(name, dim=int(params["dim"]))
    register_plugin("families", "hashed", Family.of("hashed", build, target="dim"))


@pytest.fixture
def stored(hashed, data_dir, tmp_path) -> ResultStore:
    benchharness.evaluate(
        f"{SIZES},hashed:16,hashed:16+truncate(d=8),hashed:8", TASK, data_dir=data_dir, results_dir=tmp_path / "r"
    )
    return ResultStore(tmp_path / "r")


def test_a_name_is_a_size_of_the_encoder_before_its_first_size_stage():
    assert base_of("minilm-l6+whitening+truncate(d=64)+quantize(precision=binary)") == "minilm-l6+whitening"
    assert base_of("minilm-l6+whitening") is None and base_of("minilm-l6") is None
    assert precision_of("m+truncate(d=8)+quantize(precision=binary,similarity=hamming)") == "binary"
    assert precision_of("m+truncate(d=8)") == "float32"


@needs_data("senteval/STS/STSBenchmark")
def test_the_sizes_of_an_encoder_are_one_family_drawn_a_line_a_precision(stored, tmp_path):
    families = size_families(stored)
    assert list(families) == ["hashed:16"]  # hashed:8 has no size, and is left out
    points = families["hashed:16"][TASK]
    assert [(p.encoder, p.bytes_per_vector) for p in points] == [
        ("hashed:16+truncate(d=4)+quantize(precision=binary)", 1),
        ("hashed:16+truncate(d=8)+quantize(precision=binary)", 1),
        ("hashed:16+truncate(d=4)+quantize(precision=int8)", 4),
        ("hashed:16+truncate(d=8)+quantize(precision=int8)", 8),
        ("hashed:16+truncate(d=8)", 32),
        ("hashed:16", 64),
    ]
    (ax,) = size_figure(families).axes
    lines = {bars.get_label(): list(zip(*bars.lines[0].get_data())) for bars in ax.containers}
    by_name = {p.encoder: p for p in points}
    assert lines["hashed:16 float32"] == [
        (32, by_name["hashed:16+truncate(d=8)"].score),
        (64, by_name["hashed:16"].score),
    ]
    assert set(lines) == {"hashed:16 float32", "hashed:16 int8", "hashed:16 binary"}
    page = write_report(stored, tmp_path / "report", None).read_text()
    assert page.count("<h2>Quality against size</h2>") == 1


@needs_data("senteval/STS/STSBenchmark")
def test_a_report_without_sizes_has_no_size_section(hashed, data_dir, tmp_path):
    benchharness.evaluate("hashed:8", TASK, data_dir=data_dir, results_dir=tmp_path / "r")
    page = write_report(ResultStore(tmp_path / "r"), tmp_path / "report", None).read_text()
    assert "Quality against size" not in page
