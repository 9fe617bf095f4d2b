"""The protocol-spread table reads every variant from stored results and recomputes float32 scores."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.stats import spearmanr
from test_leaderboard import _result

from benchharness.core.results import ResultStore
from benchharness.core.task import Evaluation
from benchharness.reporting.protocol_spread import markdown, spread


def test_variants_come_from_the_stored_metrics_and_items(tmp_path):
    store = ResultStore(tmp_path)
    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, 500), 1)
    # cosines that float32 ties: distinct float64 values 1e-9 apart
    cosine = np.round(gold / 5 + rng.normal(0, 0.2, 500), 2) + rng.uniform(0, 1e-9, 500)
    items = {"cosine": cosine, "gold": gold, "subset": np.zeros(500, np.int16), "subset_names": np.array(["a"])}
    sts12 = _result("enc", "STS12", 100 * spearmanr(cosine, gold)[0])
    sts12.main_metric = "all.spearman"
    sts12.metrics = {"all.spearman": sts12.main_score, "mean.spearman": 61.5, "wmean.spearman": 62.25}
    store.save(replace(sts12, per_item=Evaluation({}, items, "sts")))
    store.save(_result("enc", "MR", 75.0))
    store.save(_result("enc", "MR-fast", 76.5))
    variants = {(v.task, v.variant): v for v in spread(store, "enc")}
    assert variants[("STS12", "mean")].score == 61.5 and variants[("STS12", "wmean")].score == 62.25
    expected32 = 100 * spearmanr(cosine.astype(np.float32), gold)[0]
    assert variants[("STS12", "all, float32 cosines")].score == expected32 != sts12.main_score
    assert variants[("MR", "fast config")].score == 76.5
    missing = variants[("STSBenchmark", "raw cased text (mteb)")]
    assert missing.score is None and "--tasks STSBenchmark-raw" in missing.missing
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in markdown("enc", spread(store, "enc")).splitlines()
        if line.startswith("| MR")
    ]
    assert ["MR", "fast config", "76.50", "+1.50"] in rows
