"""Every file the reports write, as a user would meet it, through the real command line: published
rows in an installed wheel, output suffixes and missing folders refused in one line, hostile names
escaped in CSV, Markdown and LaTeX, foreign SVG never inlined, a NaN score never shown as one, and the
model card honest about its data and its repository."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchharness.core.results import Result, ResultStore
from benchharness.reporting.leaderboard import sections
from benchharness.tasks import boards
from tests.helpers import cli, one_line_error

ROOT = Path(__file__).resolve().parents[2]
STS = next(s for s in sections([]) if s.title == boards.STS.title)


def result(encoder: str, task: str, score: float, confidence: dict | None = None) -> Result:
    return Result(
        encoder=encoder,
        task=task,
        main_score=score,
        main_metric="spearman",
        metrics={"spearman": score},
        protocol={"variant": "v"},
        encoder_identity={"hash": "h"},
        encoder_metadata={},
        data={"sha256": "d", "root": "", "files": [], "verified": True},
        seed=1111,
        timings={},
        versions={},
        date="2026-01-01",
        confidence=confidence,
    )


def store_row(root: Path, encoder: str, scores: list[float]) -> None:
    store = ResultStore(root)
    for column, score in zip(STS.columns, scores):
        store.save(result(encoder, column.task, score))


# ---- published rows ship with the package ----------------------------------------------------------
def test_an_installed_wheel_carries_the_published_rows_and_shows_them(tmp_path):
    source = tmp_path / "src"
    for part in ("benchharness", "encoders", "tasks"):
        shutil.copytree(ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / part, source / part)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "wheels"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheels").glob("benchharness-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"benchharness/reporting/published/{n}.csv" for n in ("sts", "transfer", "ranking")} <= names

    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    project = tmp_path / "project"
    store_row(project / "results", "mine", [50.0] * 7)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import benchharness.core.checkout as c, benchharness as b; print(c.CHECKOUT, b.__file__)",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.split()[0] == "None" and where.stdout.split()[1].startswith(str(site)), where
    done = cli(project, "leaderboard", "--papers", "paser", env=env)
    assert done.returncode == 0, done.stderr
    assert "published: paser Table 1" in done.stdout and "| mine" in done.stdout
    assert "Rows marked *published* are copied from the method papers" in done.stdout


def test_a_board_without_published_rows_does_not_claim_them(tmp_path):
    store_row(tmp_path / "results", "mine", [50.0] * 7)
    done = cli(tmp_path, "leaderboard", "--no-published")
    assert done.returncode == 0, done.stderr
    assert "Rows marked *published*" not in done.stdout and "Published rows are left out" in done.stdout
    (tmp_path / "empty").mkdir()
    done = cli(tmp_path, "leaderboard", "--published-dir", "empty")
    assert "published:" not in done.stdout and "No published rows are shown: `empty`" in done.stdout
    one_line_error(cli(tmp_path, "leaderboard", "--published-dir", "nowhere"), "--published-dir nowhere")


# ---- refused before any work ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["-o", "lb.pdf"], ["lb.pdf", ".pdf", ".md", ".csv", ".tex", ".html"]),
        (["--format", "csv", "-o", "lb.tex"], ["lb.tex", "--format csv", ".csv"]),
    ],
)
def test_an_output_suffix_the_format_cannot_write_is_refused(tmp_path, args, needles):
    store_row(tmp_path / "results", "mine", [50.0] * 7)
    one_line_error(cli(tmp_path, "leaderboard", *args), *needles)
    assert not list(tmp_path.glob("lb.*"))


def test_a_missing_results_folder_is_an_error_naming_it_and_the_command_that_fills_it(tmp_path):
    one_line_error(cli(tmp_path, "leaderboard"), "results", "benchharness run --encoders")
    one_line_error(
        cli(tmp_path, "leaderboard", "--results-dir", "elsewhere"),
        "elsewhere",
        "benchharness run --encoders",
        "--results-dir elsewhere",
    )
    one_line_error(cli(tmp_path, "report", "--out", "page", "--results-dir", "elsewhere"), "elsewhere")
    assert not (tmp_path / "page").exists()


# ---- hostile names -------------------------------------------------------------------------------
def test_csv_cells_are_never_formulas_but_numbers_stay_numbers(tmp_path):
    store_row(tmp_path / "results", '=HYPERLINK("http://x","y")', [50.0] * 7)
    store_row(tmp_path / "results", "@sum", [-3.2] * 7)
    done = cli(tmp_path, "leaderboard", "--format", "csv", "--no-published")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert {r["encoder"] for r in rows} == {'\'=HYPERLINK("http://x","y")', "'@sum"}
    negative = next(r for r in rows if r["encoder"] == "'@sum" and r["column"] == "STS12")
    assert negative["score"] == "-3.2" and negative["text"] == "-3.20"  # a number is data, never quoted
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "@")) and (not value.startswith("-") or float(value) < 0)


def test_markdown_rows_survive_pipes_and_newlines_in_names(tmp_path):
    store_row(tmp_path / "results", "a|b\nc", [50.0] * 7)
    store_row(tmp_path / "results", "plain", [40.0] * 7)
    done = cli(tmp_path, "leaderboard", "--no-published", "--no-intervals")
    assert done.returncode == 0, done.stderr
    table = done.stdout.split(f"## {STS.title}")[1].split("\n\n")[1].splitlines()
    assert len(table) == 4  # header, rule, two rows
    cells = re.split(r"(?<!\\)\|", table[2].strip())[1:-1]
    assert len(cells) == 2 + 8 and cells[0].strip() == r"a\|b c" and cells[2].strip() == "50.00"


def test_latex_drops_bidi_marks_and_compiles(tmp_path):
    store_row(tmp_path / "results", "rtl\u200fname_名前", [50.0] * 7)
    done = cli(tmp_path, "leaderboard", "--no-published", "-o", "board.tex")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "board.tex").read_text()
    assert "\u200f" not in text and "名" not in text and r"rtlname\_" in text
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended)")
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n\\input{board.tex}\n\\end{document}\n"
    )
    made = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stdout[-2000:]


def test_the_report_never_inlines_a_foreign_svg(tmp_path):
    store_row(tmp_path / "results", "mine", [50.0] * 7)
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>document.title="owned"'
        '</script><rect width="10" height="10"/></svg>'
    )
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "alignment-uniformity.svg").write_text(svg)
    done = cli(tmp_path, "report", "--out", "page", "--analysis", "analysis")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "page" / "index.html").read_text()
    assert "owned" not in page and page.count("<script>") == 1  # the page's own sort script only
    encoded = re.search(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    assert encoded and base64.b64decode(encoded.group(1)).decode() == svg
    one_line_error(cli(tmp_path, "report", "--out", "page2", "--analysis", "nowhere"), "--analysis nowhere")
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is not None:  # in a real browser, the image's script does not run (.ci/run installs Chromium)
        dom = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--dump-dom",
                (tmp_path / "page" / "index.html").as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert "<title>" in dom and "owned" not in dom.split("<body")[0]


def test_a_nan_score_is_never_shown_as_a_number(tmp_path):
    store_row(tmp_path / "results", "mine", [50.0] * 7)
    path = ResultStore(tmp_path / "results").path("mine", "STS13")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "main_score": math.nan, "metrics": {"spearman": math.nan}}))
    done = cli(tmp_path, "leaderboard", "--no-published")
    assert "nan |" not in done.stdout.lower()
    one_line_error(done, "results/mine/STS13.json", "NaN", "delete it to recompute")


# ---- the model card --------------------------------------------------------------------------------
def test_the_card_of_a_transductive_run_says_so_and_names_its_repository(project, tiny_bert):
    out = "run`x\ny"  # a run's path with a backtick and a newline
    trained = cli(
        project,
        "train",
        "simcse",
        "--base",
        str(tiny_bert),
        "--out",
        out,
        "--data",
        "sts-unlabeled",
        "--batch-size",
        "2",
        "--max-steps",
        "2",
        "--eval-every",
        "0",
        "--threads",
        "1",
        "--quiet",
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    store_row(project / "results", out, [50.0] * 7)
    done = cli(project, "push", out, "--stage-only", "--stage", "staged", "--repo-id", "me/my-model")
    assert done.returncode == 0, done.stderr
    card = (project / "staged" / "README.md").read_text()
    front, body = card.split("\n---\n", 1)
    assert 'SentenceTransformer("me/my-model")' in body and "<this repository>" not in card
    assert "**Transductive.** The training corpus `sts-unlabeled` holds the unlabeled sentences" in body
    sts_entries = [line for line in front.splitlines() if "spearman_cosine" in line]
    assert len(sts_entries) == 7 and all("transductive: trained on sts-unlabeled" in e for e in sts_entries)
    assert body.splitlines()[1] == "# run`x y"  # the heading is one line
    for line in body.splitlines():
        if line.startswith("- "):  # every code span of the training list closes on its line
            spans = re.findall(r"(`+)(.*?)\1", line)
            assert "`" not in re.sub(r"(`+)(.*?)\1", "", line), line
            assert spans, line


def test_a_name_that_reads_as_mathtext_is_drawn_as_text(tmp_path):
    store_row(tmp_path / "results", "bad$\\notacommand{$", [50.0] * 7)
    done = cli(tmp_path, "report", "--out", "page")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "bad$\\notacommand{$" in (tmp_path / "page" / "index.html").read_text()
