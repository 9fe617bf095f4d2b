"""Sizes against the full vector: one paired test per size and task, Holm across all of them
(recomputed here by hand), a size marked below only when significantly worse; from Python and
from a results folder."""

from __future__ import annotations

import pytest

import benchharness
from benchharness.reporting.compare import SIZE_ALPHA, SizeComparison
from benchharness.scoring.confidence import paired
from tests.helpers import cli, needs_data

TASK = "SICKRelatedness-trial"
SIZES = "glove-50d+truncate(d=2|50)"


def holm_by_hand(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: the i-th smallest p times (m - i), kept monotone."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


@needs_data("senteval/SICK", "glove")
def test_each_size_is_tested_against_the_full_vector_and_marked_when_significantly_below(data_dir):
    sizes = benchharness.evaluate(SIZES, TASK, data_dir=data_dir)
    full = benchharness.evaluate("glove-50d", TASK, data_dir=data_dir)
    table = benchharness.compare(sizes, full, encoder_a=SIZES)
    assert isinstance(table, SizeComparison)
    two, fifty = table.rows
    assert (two.encoder, fifty.encoder) == ("glove-50d+truncate(d=2)", "glove-50d+truncate(d=50)")
    assert (two.bytes_per_vector, fifty.bytes_per_vector) == (8, 200)
    a, b = sizes.get(two.encoder, TASK), full.get("glove-50d", TASK)
    rep, _ = paired(TASK, a.main_metric, sizes.items(a), full.items(b), n_resamples=1000, seed=0)
    assert two.row.difference == pytest.approx(a.main_score - b.main_score, abs=1e-9)
    assert two.row.p_value == rep.comparison().p_value
    assert [r.row.p_holm for r in table.rows] == holm_by_hand([r.row.p_value for r in table.rows])
    assert two.below and two.row.p_holm < SIZE_ALPHA  # two dimensions of fifty lose, and the test says so
    assert fifty.row.difference == 0 and not fifty.below  # all fifty are the full vector
    assert "below" in str(table)


@needs_data("senteval/SICK", "glove")
def test_the_command_line_compares_the_stored_sizes(project):
    done = cli(project, "run", "--encoders", f"{SIZES},glove-50d", "--tasks", TASK, "--quiet")
    assert done.returncode == 0, done.stderr
    shown = cli(project, "compare", SIZES, "glove-50d", "--tasks", TASK)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if line.startswith("| glove-50d+truncate")]
    assert len(lines) == 2 and lines[0].rstrip(" |").endswith("below") and not lines[1].rstrip(" |").endswith("below")
    missing = cli(project, "compare", "glove-50d+truncate(d=2|3)", "glove-50d", "--tasks", TASK)
    assert missing.returncode == 2 and "glove-50d+truncate(d=3) on SICKRelatedness-trial" in missing.stderr
