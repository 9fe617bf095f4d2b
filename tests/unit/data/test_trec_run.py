"""Reading a TREC run file (``data.trec_run``): lists ordered by score then written rank, and each
malformed line refused naming the file and line."""

from __future__ import annotations

import pytest

from benchharness.core.data_root import DataError
from benchharness.data.trec_run import read_trec_run


def test_lists_are_ordered_by_score_then_by_the_rank_written(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 b 2 1.5 x\nq1 Q0 a 1 2.0 x\n\nq2 Q0 c 2 0.5 x\nq2 Q0 d 1 0.5 x\nq1 Q0 e 3 1.5 x\n")
    lists = read_trec_run(run)
    assert lists["q1"].documents == ["a", "b", "e"] and lists["q1"].scores == [2.0, 1.5, 1.5]
    assert lists["q2"].documents == ["d", "c"]  # a tie: the rank written decides


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("q1 Q0 a 1 2.0\n", r"run.trec:1: 5 field\(s\); a TREC run line has 6"),
        ("q1 Q0 a one 2.0 x\n", r"run.trec:1: rank 'one' is not a whole number"),
        ("q1 Q0 a 1 2.0 x\nq1 Q0 b 2 nan x\n", r"run.trec:2: score 'nan' is not a finite number"),
        ("q1 Q0 a 1 2.0 x\nq1 Q0 a 2 1.0 x\n", r"run.trec:2: query 'q1' lists document 'a' again \(first on line 1\)"),
        ("\n\n", r"run.trec: no run lines"),
    ],
)
def test_a_malformed_run_is_refused_naming_the_line(tmp_path, text, says):
    run = tmp_path / "run.trec"
    run.write_text(text)
    with pytest.raises(DataError, match=says):
        read_trec_run(run)
