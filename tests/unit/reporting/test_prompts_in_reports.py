"""Encoder prompts and task instructions in the leaderboard (Markdown, CSV, LaTeX, HTML), the report
page and the model card: shown for the results that have them, escaped in every format, and nothing
changes for results without them (checked against the same results with their prompts stripped)."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import shutil
import subprocess
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from test_leaderboard import STS, _result, _training

from benchharness.core.results import Result, ResultStore
from benchharness.reporting.leaderboard import build, sections
from benchharness.reporting.table_formats import html_tables, latex, markdown, to_csv
from benchharness.tasks import boards

RANKING = next(s for s in sections([]) if s.title == boards.RANKING.title)
#: every character some format reads as markup: a pipe, a tag, a quote of each kind, a backtick, a line break
HOSTILE = {
    "query_prompt": "query: a|b <script>alert(\"x\")</script>\nnext 'q' `tick`",
    "document_prompt": "passage: ",
    "instruction_template": "Instruct: {instruction}\nQuery: ",
}
INSTRUCTION = 'Find <b>duplicates</b> | of "this"\nquestion'
#: what e5 puts in front of QQP's queries and documents (HOSTILE's template filled with INSTRUCTION)
APPLIED = {"query": f"Instruct: {INSTRUCTION}\nQuery: ", "document": "passage: "}


def _prompted(
    result: Result,
    prompts: dict[str, str] | None,
    applied: dict[str, str] | None = None,
    instruction: str | None = None,
) -> Result:
    """``result`` as the runner stores one computed with ``prompts`` on a task with ``instruction``."""
    identity = {**result.encoder_identity, **({"prompts": prompts} if prompts else {})}
    metadata = {
        **result.encoder_metadata,
        **({"prompts": prompts} if prompts else {}),
        **({"prompts_applied": applied} if applied else {}),
    }
    protocol = {**result.protocol, **({"instruction": instruction} if instruction else {})}
    return replace(result, encoder_identity=identity, encoder_metadata=metadata, protocol=protocol)


def _stripped(result: Result) -> Result:
    """The same result as stored before prompts and instructions existed."""
    return replace(
        result,
        encoder_identity={k: v for k, v in result.encoder_identity.items() if k != "prompts"},
        encoder_metadata={k: v for k, v in result.encoder_metadata.items() if k not in ("prompts", "prompts_applied")},
        protocol={k: v for k, v in result.protocol.items() if k != "instruction"},
    )


def _ranking(encoder: str, task: str, score: float) -> Result:
    return replace(_result(encoder, task, score), main_metric="map", metrics={"map": score, "mrr@10": score + 1})


def _results() -> list[Result]:
    """e5 with HOSTILE prompts everywhere; plain without any; mixed with a prompt on STS12-16 only.
    QQP and AskUbuntu carry an instruction for every encoder (the runner records the task's)."""
    out = []
    for i, column in enumerate(STS.columns):
        out.append(_prompted(_result("e5", column.task, 70.0 + i), HOSTILE, {"default": ""}))
        out.append(_result("plain", column.task, 60.0 + i))
        mixed = {"prompt": "p: "} if i < 5 else None
        out.append(_prompted(_result("mixed", column.task, 50.0 + i), mixed, {"default": "p: "} if mixed else None))
    for task in ("QQP", "AskUbuntu"):
        out.append(_prompted(_ranking("e5", task, 40.0), HOSTILE, APPLIED, INSTRUCTION))
        out.append(_prompted(_ranking("plain", task, 30.0), None, None, INSTRUCTION))
    return out


def _stores(tmp_path) -> tuple[ResultStore, ResultStore]:
    prompted, stripped = ResultStore(tmp_path / "prompted"), ResultStore(tmp_path / "stripped")
    for result in _results():
        prompted.save(result)
        stripped.save(_stripped(result))
    return prompted, stripped


def _code_spans(text: str) -> list[str]:
    """The contents of the CommonMark code spans of one line (fence: a run of n backticks, closed by
    the next run of exactly n; one padding space stripped from each side)."""
    spans = []
    for match in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", text):
        body = match.group(2)
        spans.append(body[1:-1] if body.startswith(" ") and body.endswith(" ") and body.strip() else body)
    return spans


def _value(assignment: str) -> tuple[str, str]:
    """``key='text'`` -> (key, text), the text read back as the Python literal it is written as."""
    key, literal = assignment.split("=", 1)
    return key, ast.literal_eval(literal)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


# ---- Markdown ------------------------------------------------------------------------------------
def test_markdown_lists_each_rows_prompts_and_the_task_instructions_as_literal_text(tmp_path):
    prompted, _ = _stores(tmp_path)
    text = markdown(build(prompted, None))
    lines = text.splitlines()
    # every table keeps one column count on every line, hostile prompts or not
    tables = [[line for line in block.splitlines() if line.startswith("|")] for block in text.split("\n\n")]
    for table in (t for t in tables if t):
        assert len({len(_cells(line)) for line in table}) == 1, table
    rows = {(c := _cells(line))[0]: c for line in lines if line.startswith("| ") and "Encoder" not in line}
    assert rows["e5"][1] == "base; with prompts" and rows["plain"][1] == "base"
    # nothing from a prompt is markup: outside code spans, no tag, no line of its own
    prose = re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", "", text)
    assert "<script" not in prose and "<b>" not in prose and not any(line.startswith("next") for line in lines)

    (e5_note,) = {line for line in lines if line.startswith("Prompts of `e5`")}  # the same in both sections
    assert dict(map(_value, _code_spans(e5_note)[1:])) == HOSTILE
    assert [k for k, _ in map(_value, _code_spans(e5_note)[1:])] == [
        "query_prompt",
        "document_prompt",
        "instruction_template",
    ]
    mixed = [line for line in lines if line.startswith("Prompts of `mixed`")]
    assert mixed == [
        "Prompts of `mixed` (in `STS12`, `STS13`, `STS14`, `STS15`, `STS16`): `prompt='p: '`.",
        "Prompts of `mixed` (in `STS-B`, `SICK-R`): none.",
    ]
    assert not any(line.startswith("Prompts of `plain`") for line in lines)

    (instructions,) = [line for line in lines if line.startswith("Task instructions")]
    spans = _code_spans(instructions)
    assert spans[0] == "QQP" and ast.literal_eval(spans[1]) == INSTRUCTION
    assert spans[2] == "AskUbuntu" and ast.literal_eval(spans[3]) == INSTRUCTION and len(spans) == 4
    # the instruction is the retrieval section's note, not the STS section's
    sts, ranking = (next(s for s in text.split("\n## ") if s.startswith(t)) for t in ("STS", "Retrieval"))
    assert "Task instructions" not in sts and "Prompts of `e5`" in sts and "Task instructions" in ranking


def test_results_that_differ_in_their_instruction_name_their_rows(tmp_path):
    store = ResultStore(tmp_path)
    store.save(_prompted(_ranking("new", "QQP", 40.0), None, None, "Find duplicates"))
    store.save(_ranking("old", "QQP", 30.0))  # stored before the task had an instruction
    (table,) = build(store, None).tables
    (line,) = [line for line in markdown(build(store, None)).splitlines() if line.startswith("Task instructions")]
    assert line.endswith(": `QQP`: `'Find duplicates'` (`new`), none (`old`).")
    assert [(i.task, i.text, i.encoders) for i in table.instructions] == [
        ("QQP", "Find duplicates", ("new",)),
        ("QQP", None, ("old",)),
    ]


# ---- the same results without prompts render as before ---------------------------------------------
def _without_md_notes(text: str) -> str:
    """The prompted board with its prompt paragraphs dropped and its table cells compared stripped
    (a longer Source cell widens a column's padding), the marker taken out of the Source cells."""
    out = []
    for block in text.split("\n\n"):
        if block.startswith(("Prompts of ", "Task instructions (")):
            continue
        out.append("\n".join(_normal_row(line) for line in block.splitlines()))
    return "\n\n".join(out)


def _normal_row(line: str) -> str:
    if not line.startswith("|"):
        return line
    cells = [c.removesuffix("; with prompts") for c in _cells(line)]
    return "|".join("---" if set(c) == {"-"} else c for c in cells)


def test_without_prompts_every_format_prints_what_it_printed_before(tmp_path):
    prompted, stripped = _stores(tmp_path)
    with_prompts, without = build(prompted, None, results_label="r/"), build(stripped, None, results_label="r/")

    plain_md = markdown(without)
    assert "with prompts" not in plain_md and "Prompts of" not in plain_md and "Task instructions" not in plain_md
    assert _without_md_notes(markdown(with_prompts)) == _without_md_notes(plain_md)

    old_header = [
        "section",
        "encoder",
        "group",
        "source",
        "column",
        "score",
        "text",
        "ci_low",
        "ci_high",
        "not_significantly_worse_than_best",
        "best_in_column",
    ]
    plain_csv = list(csv.reader(io.StringIO(to_csv(without))))
    assert plain_csv[0] == old_header
    rich_csv = list(csv.reader(io.StringIO(to_csv(with_prompts))))
    assert rich_csv[0] == [*old_header, "prompts", "instruction"]
    assert [[c.removesuffix("; with prompts") for c in row[:-2]] for row in rich_csv] == plain_csv
    e5_qqp = next(row for row in rich_csv if row[1] == "e5" and row[4] == "QQP MAP")
    assert json.loads(e5_qqp[-2]) == HOSTILE and e5_qqp[-1] == INSTRUCTION
    assert next(row for row in rich_csv if row[1] == "plain" and row[4] == "STS12")[-2:] == ["", ""]

    plain_tex = latex(without, intervals=True)
    rich_tex = latex(with_prompts, intervals=True)
    cut = re.sub(r"(\\caption\{.*?\$p \\geq 0\.05\$\)\.).*\}$", r"\1}", rich_tex, flags=re.MULTILINE)
    assert cut.replace("; with prompts", "") == plain_tex and "Prompts of" not in plain_tex

    plain_html = html_tables(without)
    rich_html = "\n".join(
        line for line in html_tables(with_prompts).splitlines() if not line.startswith('<p class="note prompts">')
    )
    assert rich_html.replace("; with prompts", "") == plain_html and "prompts" not in plain_html


# ---- HTML ----------------------------------------------------------------------------------------
class _Page(HTMLParser):
    """Every start tag, the text of each ``<code>`` of the prompt notes, and the provenance rows."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.codes: list[str] = []
        self.cells: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "p" and "prompts" in (dict(attrs).get("class") or ""):
            self._in = "note"
        elif tag == "code" and self._in == "note":
            self.codes.append("")
            self._in = "code"
        elif tag == "td":
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag == "code" and self._in == "code":
            self._in = "note"
        elif tag == "p":
            self._in = None

    def handle_data(self, data):
        if self._in == "code":
            self.codes[-1] += data
        if self.cells:
            self.cells[-1] += data


def test_html_shows_the_prompts_and_instruction_as_text_never_markup(tmp_path):
    from benchharness.reporting.html_report import write_report

    prompted, _ = _stores(tmp_path)
    fragment = _Page()
    fragment.feed(html_tables(build(prompted, None)))
    assert "script" not in fragment.tags and "b" not in fragment.tags
    assert dict(map(_value, (c for c in fragment.codes if c.startswith("query_prompt=")))) == {
        "query_prompt": HOSTILE["query_prompt"]
    }
    assert (
        sum(c.startswith(("query_prompt=", "document_prompt=", "instruction_template=")) for c in fragment.codes)
        == 2 * 3
    )  # e5's three prompts under each of its two tables
    assert [ast.literal_eval(c) for c in fragment.codes if c.startswith(("'", '"'))] == [INSTRUCTION] * 2
    assert "e5" in fragment.codes and "plain" not in fragment.codes  # only prompted rows are named

    page = _Page()
    page.feed(write_report(prompted, tmp_path / "out", None).read_text())
    assert page.tags.count("script") == 1 and "b" not in page.tags  # the page's own sort script only
    assert sum(c.startswith("query_prompt=") for c in page.codes) == 2
    # provenance: e5's prompts, and what QQP's and AskUbuntu's queries and documents got in front of them
    prompts_row = page.cells[page.cells.index("prompts") + 1]
    assert prompts_row == ", ".join(f"{k}={v!r}" for k, v in HOSTILE.items())
    applied_row = page.cells[page.cells.index("prompts applied") + 1]
    assert applied_row.startswith("AskUbuntu, QQP: query=" + repr(APPLIED["query"]) + ", document='passage: '; ")
    assert page.cells.count("prompts") == 2  # e5 and mixed; plain has no prompts row
    mixed_row = page.cells[[i for i, c in enumerate(page.cells) if c == "prompts"][1] + 1]
    assert mixed_row == "SICKRelatedness, STSBenchmark: none; STS12, STS13, STS14, STS15, STS16: prompt='p: '"


# ---- seeds, LaTeX, the model card -----------------------------------------------------------------
def test_seeds_scored_with_different_prompts_are_not_averaged_together(tmp_path):
    store = ResultStore(tmp_path)
    for name, seed, prompts in (
        ("run-s1", 1, {"prompt": "a: "}),
        ("run-s2", 2, {"prompt": "a: "}),
        ("run-s3", 3, {"prompt": "b: "}),
    ):
        for column in STS.columns:
            store.save(_prompted(_result(name, column.task, 60.0 + seed, metadata=_training(seed)), prompts))
    (table,) = build(store, None).tables
    assert [(line.encoder, line.source) for line in table.lines] == [
        ("run-s3", "trained; no recipe; with prompts"),
        ("run-s1 (seeds 1,2)", "trained; no recipe; other seeds: run-s2; with prompts"),
    ]
    assert [dict(n.prompts) for line in table.lines for n in line.prompts] == [{"prompt": "b: "}, {"prompt": "a: "}]


def test_latex_with_hostile_prompts_compiles(tmp_path):
    prompted, _ = _stores(tmp_path)
    text = latex(build(prompted, None))
    assert r"\texttt{query\_prompt='query: a|b \textless{}script\textgreater{}" in text
    assert "\n" not in text.split(r"\caption{")[1].split(r"\label")[0].rstrip("\n")  # the caption is one line
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended)")
    (tmp_path / "board.tex").write_text(text)
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n\\input{board.tex}\n\\end{document}\n"
    )
    made = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stdout[-2000:]


def test_the_model_card_names_the_prompts_its_scores_were_computed_with(tmp_path):
    from benchharness.reporting.model_card import card

    store = ResultStore(tmp_path)
    manifest = {"encoder": {"pooling": "avg"}, "method": "simcse"}
    for column in STS.columns:
        store.save(_prompted(_result("run", column.task, 60.0), {"query_prompt": "q|<i>"}))
        store.save(_result("bare", column.task, 60.0))
    body = card("run", manifest, store)
    (note,) = [line for line in body.splitlines() if line.startswith("Prompts of")]
    assert _code_spans(note) == ["run", "query_prompt='q|<i>'"]
    assert "Prompts of" not in card("bare", manifest, store)
