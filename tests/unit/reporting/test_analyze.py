"""``benchharness analyze A B`` writes each encoder's numbers as JSON and figures holding both, as PNG,
SVG and PDF, into the folder asked for and nowhere else."""

import json

import numpy as np

from benchharness.cli import main
from benchharness.core.data_root import DataRoot
from benchharness.data.readers import STSB_COLUMNS, read_scored_tsv, senteval_text, stsb_file

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
