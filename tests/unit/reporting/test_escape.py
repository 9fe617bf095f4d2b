"""What each output format needs escaped, on hand-written inputs; and the report's bars drawn from zero
on one shared axis with every whisker inside its frame."""

from __future__ import annotations

import pytest
from test_leaderboard import STS, _result, _store_all

from benchharness.core.results import ResultStore
from benchharness.reporting.escape import csv_cell, md_cell, md_code, one_line, tex


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+A1", "'+A1"),
        ("-A1", "'-A1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("-3.25", "-3.25"),
        ("+4", "+4"),
        ("-1e-3", "-1e-3"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_csv_text_cells_are_never_formulas_and_numbers_stay(text, written):
    assert csv_cell(text) == written


def test_markdown_cells_and_code_spans_hold_any_name():
    assert md_cell("a|b\nc\r\nd") == r"a\|b c d"
    assert one_line("x\u2028y") == "x y"
    assert md_code("plain") == "`plain`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("``x") == "``` ``x ```"
    assert md_code("a\nb") == "`a b`"


def test_latex_escapes_specials_and_drops_what_pdflatex_cannot_set():
    assert tex("a_b & 100% #1 $x$ {y} ~^\\") == (
        r"a\_b \& 100\% \#1 \$x\$ \{y\} \textasciitilde{}"
        r"\textasciicircum{}\textbackslash{}"
    )
    assert tex("rtl\u200fmark\u202e\u200b") == "rtlmark"  # bidi and zero-width marks dropped
    assert tex("a\nb\tc") == "a b c"
    assert tex("café") == "café"  # Latin-1 letters are set by the default utf8 input
    assert tex("名") == r"\texttt{[U+540D]}"
    assert tex("65.00 ±1.41 – †") == r"65.00 $\pm$1.41 -- \dag{}"


def _board(tmp_path):
    from benchharness.reporting.leaderboard import build

    store = ResultStore(tmp_path)
    _store_all(store, "wide", [60.0, 20.0, 30.0, 40.0, 50.0, 55.0, 45.0], confidence={"main": [10.0, 95.0]})
    _store_all(store, "narrow", [58.0, 21.0, 31.0, 41.0, 51.0, 56.0, 46.0], confidence={"main": [57.0, 59.0]})
    return build(store, None)


def test_every_panel_shares_one_axis_from_zero_past_every_whisker(tmp_path):
    from benchharness.reporting.html_report import axis_range

    (table,) = _board(tmp_path).tables
    low, high = axis_range(table)
    # the widest interval ends at 95 (the narrow Avg. and cells are inside it); 3% of the range as margin
    assert low == 0.0 and high == pytest.approx(95.0 * 1.03)


def test_negative_scores_and_intervals_move_the_axis_below_zero(tmp_path):
    from benchharness.reporting.html_report import axis_range
    from benchharness.reporting.leaderboard import build

    store = ResultStore(tmp_path)
    store.save(_result("neg", "STSBenchmark", -5.0, confidence={"main": [-12.0, 2.0]}))
    (table,) = build(store, None).tables
    low, high = axis_range(table)
    assert low == pytest.approx(-12.0 - 0.03 * 14.0) and high == pytest.approx(2.0 + 0.03 * 14.0)


def test_the_drawn_panels_use_that_range(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from benchharness.reporting import html_report

    (table,) = _board(tmp_path).tables
    limits = []
    monkeypatch.setattr(html_report, "_svg", lambda fig: limits.extend(ax.get_xlim() for ax in fig.axes) or "")
    html_report.bars(table)
    assert len(limits) == len(STS.columns) + 1 and set(limits) == {html_report.axis_range(table)}
