"""The HTML report is one offline page whose script sorts and filters in a real (headless) browser."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from html.parser import HTMLParser

import numpy as np
import pytest
from test_leaderboard import STS, _result, _store_all

from benchharness.core.results import ResultStore
from benchharness.core.task import Evaluation
from benchharness.reporting.html_report import write_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _store(tmp_path):
    store = ResultStore(tmp_path / "results")
    rng = np.random.default_rng(1)
    gold = rng.uniform(0, 5, 300)
    for name, noise, scores in (
        ("alpha", 1.0, [70, 50, 60, 60, 60, 60, 60]),
        ("beta", 3.0, [40, 80, 61, 61, 61, 61, 61]),
        ("gamma", 1.1, [55, 65, 59, 59, 59, 59, 59]),
    ):
        _store_all(store, name, [float(s) for s in scores], confidence={"main": [1.0, 2.0]})
        cosine = gold + rng.normal(0, noise, 300)
        items = {"cosine": cosine, "gold": gold, "subset": np.zeros(300, np.int16), "subset_names": np.array(["test"])}
        store.save(
            replace(
                _result(name, "STSBenchmark", scores[5], confidence={"main": [scores[5] - 1, scores[5] + 1]}),
                per_item=Evaluation({}, items, "sts"),
            )
        )
    return store


class _Rows(HTMLParser):
    """The encoder of every row of the first leaderboard table, and whether it is hidden."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, bool]] = []
        self._tables = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "board" in (a.get("class") or ""):
            self._tables += 1
        if tag == "tr" and self._tables == 1 and "data-encoder" in a:
            self.rows.append((a["data-encoder"], "display: none" in (a.get("style") or "")))


def test_the_page_is_self_contained(tmp_path):
    page = write_report(_store(tmp_path), tmp_path / "out", None).read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no CDN, nothing fetched
    assert page.count("<svg") >= 1 and "<script>" in page
    assert "Pairwise significance" in page and "Provenance" in page
    assert ">alpha<" in page and "1.0–2.0" in page  # a row and an interval


def test_a_headless_browser_sorts_and_filters_the_rows(tmp_path):
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no Chromium here (Debian: apt-get install chromium; .ci/run installs it where it can)")
    page = write_report(_store(tmp_path), tmp_path / "out", None)

    def rendered(fragment: str) -> list[tuple[str, bool]]:
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"{page.as_uri()}#{fragment}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert 'data-ready="yes"' in done.stdout, done.stderr[-2000:]  # the script ran to its end
        parser = _Rows()
        parser.feed(done.stdout)
        return parser.rows

    column = 2 + [c.task for c in STS.columns].index("STS12")  # Encoder, Source, then the scores
    assert [e for e, _ in rendered(f"sort=0:{column}:desc")] == ["alpha", "gamma", "beta"]  # 70, 55, 40
    assert [e for e, _ in rendered(f"sort=0:{column}:asc")] == ["beta", "gamma", "alpha"]
    assert [e for e, _ in rendered(f"sort=0:{column + 1}:desc")] == ["beta", "gamma", "alpha"]  # STS13: 80, 65, 50
    assert dict(rendered("filter=gam")) == {"alpha": True, "beta": True, "gamma": False}
