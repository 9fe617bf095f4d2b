"""Embedding-space analysis (``benchharness.reporting.analysis``) on cases worked by hand and brute force."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from benchharness.reporting import analysis
from tests.helpers import SHARED


def test_alignment_by_hand():
    # pairs (e1, e1) and (e2, e1): squared distances 0 and 2 -> mean 1; vectors are normalised first
    x = np.array([[2.0, 0.0], [0.0, 3.0]])
    y = np.array([[1.0, 0.0], [5.0, 0.0]])
    assert analysis.alignment(x, y) == pytest.approx(1.0)
    assert analysis.alignment(x, y, alpha=1.0) == pytest.approx(math.sqrt(2) / 2)
    with pytest.raises(ValueError, match="paired rows"):
        analysis.alignment(x, y[:1])


def test_positive_pairs_take_gold_of_four_and_above():
    assert analysis.positive_pairs(np.array([3.8, 4.0, 5.0, 2.0, 4.2])).tolist() == [1, 2, 4]


def test_uniformity_by_hand():
    # e1, -e1, e2: squared distances 4, 2, 2 -> log((e^-8 + 2 e^-4) / 3)
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0]])
    assert analysis.uniformity(x) == pytest.approx(math.log((math.exp(-8) + 2 * math.exp(-4)) / 3))
    assert analysis.uniformity(x[[0, 2]]) == pytest.approx(-4.0)  # one orthogonal pair: -2 * 2


def test_uniformity_matches_pdist_and_is_independent_of_blocks(monkeypatch):
    x = np.random.default_rng(0).normal(size=(57, 8))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    expected = math.log(np.exp(-2 * pdist(unit, "sqeuclidean")).mean())
    assert analysis.uniformity(x) == pytest.approx(expected, abs=1e-12)
    monkeypatch.setattr(analysis, "UNIFORMITY_BLOCK_ROWS", 5)
    assert analysis.uniformity(x) == pytest.approx(expected, abs=1e-12)


def test_cosine_by_gold_level_by_hand():
    gold = np.array([0.0, 0.5, 1.0, 2.4, 4.0, 5.0])
    cos = np.array([0.2, 0.4, 0.5, 0.6, 0.8, 1.0])
    levels = analysis.cosine_by_gold_level(cos, gold)
    assert [lv.level for lv in levels] == ["0-1", "1-2", "2-3", "3-4", "4-5"]
    assert [lv.n for lv in levels] == [2, 1, 1, 0, 2]  # 1.0 opens level 1-2; 5.0 closes 4-5
    assert (levels[0].mean, levels[0].var) == pytest.approx((0.3, 0.01))  # var of 0.2, 0.4 (ddof 0)
    assert (levels[4].mean, levels[4].var) == pytest.approx((0.9, 0.01))
    assert (levels[1].mean, levels[1].var) == pytest.approx((0.5, 0.0))
    assert math.isnan(levels[3].mean) and math.isnan(levels[3].var)
    with pytest.raises(ValueError, match=r"1 gold scores lie outside \[0, 5\], e.g. pair 1 with 5.2"):
        analysis.cosine_by_gold_level(np.zeros(2), np.array([1.0, 5.2]))


def test_levels_are_the_ones_paser_publishes():
    path = SHARED / "published" / "paser_cosine_levels.csv"
    if not path.exists():
        pytest.skip(f"published table not found at {path}")
    with open(path, newline="") as fh:
        published = list(dict.fromkeys(row["level"] for row in csv.DictReader(fh)))
    stats = analysis.cosine_by_gold_level(np.linspace(0, 1, 6), np.arange(6.0))
    assert [lv.level for lv in stats] == published


def test_random_pair_cosine_by_hand_and_against_the_all_pairs_mean():
    # two vectors: every pair is (0, 1), cosine 1/sqrt(2)
    assert analysis.mean_random_pair_cosine(np.array([[1.0, 0.0], [3.0, 3.0]]), n_pairs=50) == pytest.approx(
        1 / math.sqrt(2)
    )
    # many vectors: the sample mean estimates the mean over all ordered pairs i != j, which for unit
    # rows u is (||sum u||^2 - n) / (n (n - 1)); allow 4 standard errors of the sample mean
    x = np.random.default_rng(1).normal(size=(300, 16)) + 0.5  # a shifted cloud: positive mean cosine
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = len(u)
    exact = (np.sum(u.sum(axis=0) ** 2) - n) / (n * (n - 1))
    cosines = (u @ u.T)[~np.eye(n, dtype=bool)]
    n_pairs = 40_000
    got = analysis.mean_random_pair_cosine(x, n_pairs=n_pairs, seed=3)
    assert abs(got - exact) < 4 * cosines.std() / math.sqrt(n_pairs)
    assert got == analysis.mean_random_pair_cosine(x, n_pairs=n_pairs, seed=3)


def test_top_pc_variance_share_by_hand():
    # variances 9 and 1 along the axes (centred square of half-sides 3 and 1): top PC carries 0.9
    x = np.array([[3.0, 1.0], [3.0, -1.0], [-3.0, 1.0], [-3.0, -1.0]]) + 10.0
    assert analysis.top_pc_variance_share(x, 1) == pytest.approx(0.9)
    assert analysis.top_pc_variance_share(x, 2) == pytest.approx(1.0)
    line = np.outer(np.arange(5.0), [1.0, 2.0, -1.0])
    assert analysis.top_pc_variance_share(line, 1) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"k must lie in 1\.\.2"):
        analysis.top_pc_variance_share(x, 3)


def test_zero_vectors_are_refused():
    with pytest.raises(ValueError, match=r"1 zero vectors \(rows \[1\]"):
        analysis.uniformity(np.array([[1.0, 0.0], [0.0, 0.0]]))


def test_plots_write_png(tmp_path):
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 200)
    cos = gold / 5 + rng.normal(0, 0.1, 200)
    levels = analysis.plot_cosine_levels({"a": cos, "b": cos / 2}, gold, tmp_path / "levels.png", title="test")
    scatter = analysis.plot_alignment_uniformity({"a": (0.2, -2.0), "b": (0.3, -3.1)}, tmp_path / "au.png")
    for path in (levels, scatter):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["au.png", "levels.png"]  # no temporary left
