"""``benchharness analyze`` on glove-50d writes its numbers as JSON and its plots as PNG."""

import json

import numpy as np

from benchharness.cli import main
from benchharness.core.data_root import DataRoot
from benchharness.data.readers import STSB_COLUMNS, read_scored_tsv, senteval_text, stsb_file


def test_analyze_glove_writes_json_and_png(project, data_dir, capsys):
    assert main(["analyze", "glove-50d", "--out", "out"]) == 0
    report = json.loads((project / "out" / "analysis" / "glove-50d.json").read_text())
    _, _, gold = read_scored_tsv(DataRoot(data_dir).path(stsb_file("test", False), "senteval"), STSB_COLUMNS,
                                 False, text=senteval_text)
    gold = np.asarray(gold)
    # PaSeR's levels [0,1) [1,2) [2,3) [3,4) [4,5], counted here with numpy's histogram (last bin closed)
    assert [lv["n"] for lv in report["cosine_by_gold_level"]] == np.histogram(gold, bins=[0, 1, 2, 3, 4, 5])[0].tolist()
    assert report["data"]["positive_pairs"] == int((gold >= 4).sum()) and report["data"]["pairs"] == 1379
    assert 0 <= report["alignment"] <= 4 and report["uniformity"] < 0  # bounds for unit vectors
    assert 0 < report["isotropy"]["top1_pc_variance_share"] < report["isotropy"]["top10_pc_variance_share"] <= 1
    for fig in report["figures"]:
        assert (project / "out" / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "alignment" in capsys.readouterr().out
