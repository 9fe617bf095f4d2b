"""``benchharness analyze A B`` writes each encoder's numbers as JSON and figures holding both, as PNG,
SVG and PDF, into the folder asked for and nowhere else."""

import json

import numpy as np
import pytest

from benchharness.cli import main
from benchharness.core.data_root import DataRoot
from benchharness.core.results import ResultStore, slug
from benchharness.core.specs import expand_variants
from benchharness.data.readers import STSB_COLUMNS, read_scored_tsv, senteval_text, stsb_file
from benchharness.reporting.html_report import write_report

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "svg": b"<?xml", "pdf": b"%PDF-"}


def test_analyze_two_encoders_writes_json_and_figures_of_both(project, data_dir, capsys):
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    assert main(["analyze", "glove-50d", "glove-50d+whitening", "--out", "figs"]) == 0
    out = project / "figs"
    report = json.loads((out / "glove-50d.json").read_text())
    _, _, gold = read_scored_tsv(
        DataRoot(data_dir).path(stsb_file("test", False), "senteval"), STSB_COLUMNS, False, text=senteval_text
    )
    gold = np.asarray(gold)
    # PaSeR's levels [0,1) [1,2) [2,3) [3,4) [4,5], counted here with numpy's histogram (last bin closed)
    assert [lv["n"] for lv in report["cosine_by_gold_level"]] == np.histogram(gold, bins=[0, 1, 2, 3, 4, 5])[0].tolist()
    assert report["data"]["positive_pairs"] == int((gold >= 4).sum()) and report["data"]["pairs"] == 1379
    assert 0 <= report["alignment"] <= 4 and report["uniformity"] < 0  # bounds for unit vectors
    assert 0 < report["isotropy"]["top1_pc_variance_share"] < report["isotropy"]["top10_pc_variance_share"] <= 1
    whitened = json.loads((out / "glove-50d+whitening.json").read_text())
    # whitening makes the space isotropic: the top principal component carries far less variance
    assert whitened["isotropy"]["top1_pc_variance_share"] < report["isotropy"]["top1_pc_variance_share"]
    for stem in ("alignment-uniformity", "cosine-levels"):
        for fmt, magic in MAGIC.items():
            assert (out / f"{stem}.{fmt}").read_bytes()[: len(magic)] == magic
    svg = (out / "alignment-uniformity.svg").read_text()
    assert "glove-50d" in svg and "glove-50d+whitening" in svg  # both encoders in one figure
    after = sorted(p.relative_to(project) for p in project.rglob("*") if not p.is_relative_to(out))
    assert [p for p in after if p not in before and p.parts[0] != ".cache"] == []  # nothing written elsewhere
    assert "alignment" in capsys.readouterr().out


def test_analyze_draws_sizes_and_scores_each_as_a_run_scores_it(project, data_dir, capsys):
    """A value list adds an encoder's sizes: each one's STS-B test Spearman and interval are the
    ones ``evaluate`` stores for that encoder (the int8 codes calibrated on all of the task's
    sentences in both), its bytes per vector the code's size, and the size curve is drawn."""
    import benchharness

    sizes = "glove-50d+truncate(d=16|32)+quantize(precision=int8|binary)"
    assert main(["analyze", "glove-50d", sizes, "--out", "figs", "--formats", "svg,png"]) == 0
    names = ["glove-50d", *expand_variants(sizes)]
    reports = {name: json.loads((project / "figs" / f"{slug(name)}.json").read_text()) for name in names}
    runs = benchharness.evaluate(names, "STSBenchmark", data_dir=data_dir, results_dir="results")
    for name, report in reports.items():
        run = runs.get(name, "STSBenchmark")
        assert report["spearman"]["score"] == pytest.approx(run.main_score, abs=1e-9), name
        assert report["spearman"]["ci"] == run.confidence["main"], name
        stats = run.embedding_stats
        assert report["size"] == {k: stats[k] for k in ("dimensions", "bytes_per_vector")}, name
    # one bit a dimension, one byte a dimension, four bytes a dimension
    assert reports["glove-50d+truncate(d=16)+quantize(precision=binary)"]["size"]["bytes_per_vector"] == 2
    assert reports["glove-50d+truncate(d=32)+quantize(precision=int8)"]["size"]["bytes_per_vector"] == 32
    assert reports["glove-50d"]["size"] == {"dimensions": 50, "bytes_per_vector": 200}
    svg = (project / "figs" / "size-curve.svg").read_text()
    assert "glove-50d int8" in svg and "glove-50d binary" in svg and "glove-50d float32" in svg
    assert (project / "figs" / "size-curve.png").read_bytes()[:8] == MAGIC["png"]
    assert "STS-B test Spearman" in capsys.readouterr().out
    page = write_report(
        ResultStore(project / "results"), project / "page", None, analysis_dir=project / "figs"
    ).read_text()
    assert 'alt="size-curve.svg"' in page  # `report --analysis figs` shows it with the other figures
