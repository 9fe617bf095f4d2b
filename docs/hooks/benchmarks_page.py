"""MkDocs hook: the benchmarks page (``docs/benchmarks.md``) written at build time from the
measurements kept in ``results/benchmarks/*.txt``, so that the page shows exactly what was measured
and nothing is copied by hand.

Each file becomes a section: the description is the first paragraph of the docstring of the script
that wrote it (``benchmarks/<script>.py``), then what its head line records (``benchmarks/machine.py``
``header()``: the command, the commit, the date, the machine with its CPU kind, the load at start),
then the file's lines as they are. The script is the one the head line's command names; a file with
no head line (written before ``header()`` existed) is matched to the script whose name starts its
own (``faiss_search_400k.txt`` -> ``faiss_search.py``) and says that it records no commit or machine.
A file no script can be found for is a build warning (an error under ``--strict``).
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docs_text import code_block, escape, fill_marker, rst_literals_to_markdown

MARKER = "<!-- benchmarks -->"
PAGE = "benchmarks.md"
log = logging.getLogger("mkdocs.hooks.benchmarks_page")

#: ``benchmarks/machine.py``'s head line (and the earlier forms of it): command, commit (with an
#: optional note in parentheses), date, then the machine and the load at start
HEADER = re.compile(
    r"^# (?P<command>.+?), at (?P<commit>[0-9a-f]{7,40}(?:-dirty)?)(?: \((?P<note>[^)]*)\))?, "
    r"(?P<date>\d{4}-\d{2}-\d{2}), (?P<machine>.+)$"
)
#: a script named in a command: ``benchmarks/x.py``, ``x.py``, ``<new checkout>/benchmarks/x.py``
SCRIPT = re.compile(r"([\w.-]+)\.py\b")


@dataclass(frozen=True)
class Header:
    """What one head line records."""

    line: str
    command: str
    commit: str
    note: str | None
    date: str
    machine: str


@dataclass(frozen=True)
class Measurement:
    """One ``results/benchmarks/*.txt`` file, read."""

    name: str
    path: Path
    script: Path | None
    headers: tuple[Header, ...]
    body: str


def parse_header(line: str) -> Header | None:
    match = HEADER.match(line.strip())
    if match is None:
        return None
    return Header(line=line.strip(), **match.groupdict())


def find_script(name: str, headers: tuple[Header, ...], scripts: dict[str, Path]) -> Path | None:
    """The script that wrote ``<name>.txt``: the one the first head line's command names, else the
    longest script name that the file's name is or starts with (followed by ``_``)."""
    for header in headers[:1]:
        for stem in SCRIPT.findall(header.command):
            if stem in scripts:
                return scripts[stem]
    prefixes = [s for s in scripts if name == s or name.startswith(f"{s}_")]
    return scripts[max(prefixes, key=len)] if prefixes else None


def read(root: Path) -> list[Measurement]:
    """Every ``results/benchmarks/*.txt`` under ``root``, sorted by name."""
    scripts = {p.stem: p for p in sorted((root / "benchmarks").glob("*.py"))}
    out = []
    for path in sorted((root / "results" / "benchmarks").glob("*.txt")):
        lines = path.read_text().splitlines()
        headers = tuple(h for h in map(parse_header, lines) if h is not None)
        first = lines.index(headers[0].line) if headers else None
        body = "\n".join(line for i, line in enumerate(lines) if i != first)
        out.append(Measurement(path.stem, path, find_script(path.stem, headers, scripts), headers, body))
    return out


def description(script: Path) -> str:
    """The first paragraph of the script's docstring in Markdown, with the paragraphs after it while
    it ends in a colon (what it introduces: a command, a list)."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    paragraphs = [p for p in doc.split("\n\n") if p.strip()]
    taken: list[str] = []
    for paragraph in paragraphs:
        if taken and not taken[-1].rstrip().endswith(":"):
            break
        lines = paragraph.splitlines()
        if all(line.startswith("    ") for line in lines if line.strip()):
            taken.append(paragraph)  # an indented block: code, kept as it is
        else:
            text = " ".join(line.strip() for line in lines).replace("::", ":")
            taken.append(escape(rst_literals_to_markdown(text)))
    return "\n\n".join(taken)


def machine_and_load(machine: str) -> tuple[str, str]:
    """The head line's machine part split for the summary table: the machine and CPU kind, and the
    load average at start (with "not idle" where the line says so). The head line's forms over time:
    ``2-core AMD EPYC (avx512-bf16); load 0.57 at start (NOT idle: ...)``, ``idle 2-core AMD EPYC with
    AVX512-BF16 (load 0.42 at start)``, ``idle 2-core AMD EPYC (AVX2; load < 0.5 at start)``."""
    match = re.search(r"load (?P<load>(?:<\s*)?\d+(?:\.\d+)?) at start", machine)
    if match is None:
        return machine, ""
    name = machine[: match.start()].rstrip(" (;").removeprefix("idle ")
    if name.count("(") > name.count(")"):
        name += ")"
    load = match["load"] + (", not idle" if "NOT idle" in machine else "")
    return name, load


def short(commit: str) -> str:
    """A commit as ``git log --oneline`` names it (7 characters), ``-dirty`` kept."""
    sha, dirty, _ = commit.partition("-dirty")
    return sha[:7] + ("-dirty" if dirty else "")


def _section(m: Measurement, root: Path) -> list[str]:
    out = [f"## {m.name} {{ #{m.name} }}", ""]
    if m.script is not None:
        about = description(m.script)
        if about:
            out += [about, ""]
    facts = [f"- **File**: `{m.path.relative_to(root).as_posix()}`"]
    if m.script is not None:
        facts.append(f"- **Script**: `{m.script.relative_to(root).as_posix()}`")
    if m.headers:
        h = m.headers[0]
        facts += [
            f"- **Command**: `{h.command}`",
            f"- **Commit**: `{h.commit}`" + (f" ({escape(h.note)})" if h.note else ""),
            f"- **Date**: {h.date}",
            f"- **Machine**: {escape(h.machine)}",
        ]
        if len(m.headers) > 1:
            facts.append(f"- **Runs recorded**: {len(m.headers)} (each run's head line is in the output below)")
    else:
        facts.append("- **Recorded**: no head line: this file does not record its commit, date or machine")
    out += [*facts, "", code_block(m.body), ""]
    return out


def render(root: Path) -> str:
    """The generated part of the page: a summary table (what each file's head line records), then
    one section per measurement."""
    measurements = read(root)
    for m in measurements:
        if m.script is None:
            log.warning("results/benchmarks/%s.txt: no benchmarks/*.py script wrote it (none is named in it)", m.name)
    out = ["| Measurement | Date | Commit | Machine | Load at start |", "| --- | --- | --- | --- | --- |"]
    for m in measurements:
        if m.headers:
            h = m.headers[0]
            machine, load = machine_and_load(h.machine)
            recorded = f"{h.date} | `{short(h.commit)}` | {escape(machine)} | {escape(load)}"
        else:
            recorded = " | | not recorded | "
        label = m.name.replace("_", "_\u200b")  # long names may wrap after an underscore
        out.append(f"| [{label}](#{m.name}) | {recorded} |")
    out.append("")
    for m in measurements:
        out += _section(m, root)
    return "\n".join(out).rstrip() + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill in the measurements on their page; every other page passes through."""
    return fill_marker(
        markdown, page, PAGE, MARKER, "measurements", lambda: render(Path(config.config_file_path).resolve().parent)
    )
