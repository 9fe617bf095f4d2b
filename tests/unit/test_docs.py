"""The documentation holds: the site builds under ``mkdocs build --strict``, every Python example in
README.md and docs/ runs, every ``benchharness ...`` command line in them parses with the real
argument parser, README's and CONTRIBUTING's links resolve, and the generated pages (CLI reference,
API reference, benchmarks) say what the code and the measurement files say.

An example may be left out only by a marker on the line before its fence, with the reason::

    <!-- docs-test: skip (trains a model for minutes) -->

and at most ``MAX_SKIPPED`` are, over all files.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import run_example

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "hooks"
#: the most examples that may be marked as not run, over README.md and docs/
MAX_SKIPPED = 5
SKIP_MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*(?P<reason>\(.+\))?\s*-->\s*$")
PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "shell", "console", "shell-session", "zsh"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")


def documents() -> list[Path]:
    """README.md, CONTRIBUTING.md and every Markdown page under docs/ (not the example plugin's
    build leftovers, which the site leaves out too)."""
    pages = [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if p.is_file()]
    for path in sorted((ROOT / "docs").rglob("*.md")):
        parts = path.relative_to(ROOT / "docs").parts
        if not any(part in {"build", "hooks"} or part.endswith(".egg-info") for part in parts):
            pages.append(path)
    return pages


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Block:
    """A fenced code block: where its first line of code is (1-based), its language, its code, and
    the reason given by a skip marker before it (None without one)."""

    path: Path
    line: int
    language: str
    code: str
    skip: str | None


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path`` (``` or ~~~, indented or not, as CommonMark closes them)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP_MARKER.match(previous)
        start, i = i + 1, i + 1
        while i < len(lines) and not closing.match(lines[i]):
            i += 1
        code = "\n".join(line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in lines[start:i])
        language = (match["info"].split() or [""])[0].lower().strip("{}.")
        blocks.append(Block(path, start + 1, language, code + "\n", (skip["reason"] or "") if skip else None))
        i += 1
    return blocks


def skip_markers(path: Path) -> list[int]:
    """Line numbers (1-based) of the skip markers in ``path``."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if SKIP_MARKER.match(line)]


# --- Python examples -----------------------------------------------------------------------------


def python_blocks(path: Path) -> list[Block]:
    return [b for b in fenced_blocks(path) if b.language in PYTHON]


DOCUMENTS_WITH_PYTHON = [p for p in documents() if python_blocks(p)]


def test_the_documents_are_found():
    names = {rel(p) for p in documents()}
    assert "README.md" in names
    assert {"docs/ARCHITECTURE.md", "docs/PROTOCOLS.md", "docs/reference/cli.md", "docs/benchmarks.md"} <= names


def test_skip_markers_are_few_give_a_reason_and_stand_before_a_python_example():
    marked = []
    for path in documents():
        skipped_lines = {b.line for b in python_blocks(path) if b.skip is not None}
        for line in skip_markers(path):
            marked.append(f"{rel(path)}:{line}")
            assert any(0 < start - line <= 3 for start in skipped_lines), (
                f"{rel(path)}:{line}: a docs-test skip marker must stand on the line before a ```python fence"
            )
        for block in python_blocks(path):
            if block.skip is not None:
                assert block.skip.strip("() "), f"{rel(path)}:{block.line}: say why the example is skipped"
    assert len(marked) <= MAX_SKIPPED, f"{len(marked)} examples are marked as not run (at most {MAX_SKIPPED}): {marked}"


#: the skip reason of an example repeated from another page, where it runs
SAME_CODE = re.compile(r"^\(the same code runs in (?P<page>\S+)\)$")


def test_an_example_skipped_as_repeated_is_the_code_of_an_example_that_runs():
    """An example shown on two pages runs once: the copy marked "the same code runs in <page>" must
    be, character for character, a block of that page which is not skipped."""
    repeated = [b for p in documents() for b in python_blocks(p) if b.skip and SAME_CODE.match(b.skip)]
    for block in repeated:
        page = ROOT / SAME_CODE.match(block.skip or "")["page"]  # type: ignore[index]
        assert page in documents(), f"{rel(block.path)}:{block.line}: {page.name} is not a tested page"
        running = [b.code for b in python_blocks(page) if b.skip is None]
        assert block.code in running, f"{rel(block.path)}:{block.line}: no example of {rel(page)} is this code"


@pytest.mark.parametrize(
    "block", [b for p in documents() for b in python_blocks(p)], ids=lambda b: f"{rel(b.path)}:{b.line}"
)
def test_every_python_example_compiles(block):
    compile("\n" * (block.line - 1) + block.code, str(block.path), "exec")


@pytest.mark.parametrize("path", DOCUMENTS_WITH_PYTHON, ids=rel)
def test_the_python_examples_run(path, project):
    """A document's examples run in order in one namespace (a later one may use an earlier one's
    names), in a fresh project folder with the shared data and the offline Hugging Face cache; an
    exception or a failing ``assert`` in an example fails the test, its traceback naming the
    document and line."""
    from benchharness.core.plugins import PLUGINS
    from benchharness.tasks.files.declarations import REGISTERED

    namespace: dict = {"__name__": "__main__"}
    ran = 0
    # what the examples register (file tasks, a plugin method) lasts for the document only: left in
    # the worker, a later test saw tasks it never declared
    tasks_before = dict(REGISTERED)
    plugins_before = {kind: set(added) for kind, added in PLUGINS._added.items()}
    try:
        for block in python_blocks(path):
            if block.skip is not None:
                continue
            # padded so that a traceback's line numbers are the document's
            run_example("\n" * (block.line - 1) + block.code, str(path), namespace)
            ran += 1
    finally:
        REGISTERED.clear()
        REGISTERED.update(tasks_before)
        for kind, added in PLUGINS._added.items():
            for name in set(added) - plugins_before[kind]:
                PLUGINS.unregister(kind, name)
    assert ran or all(b.skip is not None for b in python_blocks(path))


# --- command lines -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandLine:
    path: Path
    line: int
    argv: tuple[str, ...]  # after "benchharness"


#: "[--address HOST:PORT]": an optional part of a command line, written out
_OPTIONAL_PART = re.compile(r"\[(\s*-[^\[\]]*)\]")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {"&&", "||", ";", "|", "&"}
_PLACEHOLDER = re.compile(r"^<[^<>]+>$")


def _commands_in(text: str) -> list[list[str]]:
    """The ``benchharness`` invocations in one shell line (after ``&&``, ``;``, ``|`` too, after
    ``VAR=value`` prefixes), each as its words after ``benchharness``; redirections and ``...`` are
    dropped."""
    try:
        words = shlex.split(_OPTIONAL_PART.sub(r"\1", text), comments=True)
    except ValueError:
        return []
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    out = []
    for segment in segments:
        while segment and _ENV_ASSIGNMENT.match(segment[0]):
            segment = segment[1:]
        if not segment or segment[0] != "benchharness":
            continue
        argv: list[str] = []
        words = iter(segment[1:])
        for word in words:
            if word in {">", ">>", "<", "2>", "&>"}:
                next(words, None)  # the file
            elif re.match(r"^(\d?>|&>|<)", word) or word in {"...", "…"}:
                continue
            else:
                argv.append(word)
        out.append(argv)
    return out


def command_lines(path: Path) -> list[CommandLine]:
    """``benchharness`` command lines in ``path``: in fenced shell blocks (in ``console`` blocks only
    the ``$ `` lines) and, in README.md and CONTRIBUTING.md, which write commands as indented blocks,
    in those."""
    found: list[CommandLine] = []

    def add(line_no: int, text: str) -> None:
        found.extend(CommandLine(path, line_no, tuple(argv)) for argv in _commands_in(text))

    for block in fenced_blocks(path):
        if block.language not in SHELL:
            continue
        pending, start = "", 0
        for offset, raw in enumerate(block.code.splitlines()):
            line = raw.strip()
            if not pending:
                if block.language in {"console", "shell-session"} and not line.startswith("$ "):
                    continue
                start = block.line + offset
                line = line.removeprefix("$ ")
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            add(start, pending + line)
            pending = ""
    if path.parent == ROOT:
        lines = path.read_text(encoding="utf-8").splitlines()
        inside_fence = False
        for n, line in enumerate(lines, 1):
            if FENCE.match(line):
                inside_fence = not inside_fence
            elif not inside_fence and line.startswith("    ") and line.lstrip().startswith(("benchharness ", "$ ")):
                add(n, line.strip().removeprefix("$ "))
    return found


ALL_COMMAND_LINES = [c for p in documents() for c in command_lines(p)]


class _ParseError(Exception):
    pass


def _raise(self: argparse.ArgumentParser, message: str) -> None:
    raise _ParseError(f"{self.prog}: {message}")


def test_command_lines_are_found_in_the_readme():
    assert sum(c.path.name == "README.md" for c in ALL_COMMAND_LINES) >= 10


@pytest.mark.parametrize("command", ALL_COMMAND_LINES, ids=lambda c: f"{rel(c.path)}:{c.line}")
def test_every_command_line_parses(command, monkeypatch, capsys):
    """Parsed, not run: every flag exists, every choice is one the parser offers, nothing is missing.
    A ``<placeholder>`` where a choice goes is allowed."""
    from benchharness.cli import PLUGIN_COMMANDS, build_parser

    monkeypatch.setattr(argparse.ArgumentParser, "error", _raise)
    argv = list(command.argv)
    name = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(expand=name if name in PLUGIN_COMMANDS else None)
    where = f"{rel(command.path)}:{command.line}: benchharness {shlex.join(argv)}"
    try:
        parser.parse_args(argv)
    except _ParseError as exc:
        bad = re.search(r"invalid choice: '([^']*)'", str(exc))
        if not (bad and _PLACEHOLDER.match(bad.group(1))):
            pytest.fail(f"{where}\n  {exc}")
    except SystemExit as exc:  # --help, --version
        assert exc.code in (0, None), f"{where}: exit {exc.code}"
    capsys.readouterr()


# --- links in README.md and CONTRIBUTING.md ------------------------------------------------------

_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\s(?:href|src)=["']([^"']+)["']""", re.I)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT_ID = re.compile(r"""(?:\{\s*#([\w.-]+)[^}]*\}|\b(?:id|name)=["']([^"']+)["'])""")


def _prose(text: str) -> str:
    """``text`` with fenced blocks and code spans blanked (line numbers kept)."""
    lines = text.splitlines()
    out, fence = [], None
    for line in lines:
        match = FENCE.match(line)
        if fence is None and match:
            fence = match["fence"]
            out.append("")
        elif fence is not None:
            if re.match(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", line):
                fence = None
            out.append("")
        elif line.startswith("    ") or line.startswith("\t"):
            out.append("")  # an indented code block (or a list continuation: no links lost there in practice)
        else:
            out.append(_CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line))
    return "\n".join(out)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: link text kept, markup and punctuation dropped, lower
    case, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub offers in a Markdown file: one per heading (repeats numbered -1, -2, ...)
    plus explicit ids (``{ #id }``, ``id=``/``name=`` in HTML)."""
    text = path.read_text(encoding="utf-8")
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose(text).splitlines():
        heading = _HEADING.match(line)
        if heading:
            title = _EXPLICIT_ID.sub("", heading[2]).strip()
            slug = github_slug(title)
            count = seen.get(slug, 0)
            found.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    for explicit in _EXPLICIT_ID.finditer(text):
        found.add(explicit[1] or explicit[2])
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link and image in ``path``'s prose, reference definitions and HTML."""
    prose = _prose(path.read_text(encoding="utf-8"))
    out = []
    for pattern in (_LINK, _REFERENCE_DEFINITION, _HTML_LINK):
        for match in pattern.finditer(prose):
            out.append((prose.count("\n", 0, match.start()) + 1, match.group(1)))
    return sorted(out)


def test_link_extraction_and_slugs():
    assert github_slug("Training encoders (`benchharness train`)") == "training-encoders-benchharness-train"
    assert github_slug("Is a difference real? Intervals, paired tests, analysis") == (
        "is-a-difference-real-intervals-paired-tests-analysis"
    )
    assert (
        github_slug("Files from elsewhere, full disks, shared machines")
        == "files-from-elsewhere-full-disks-shared-machines"
    )
    assert github_slug("A [linked](x.md) `code_name` -- b") == "a-linked-code_name----b"


@pytest.mark.parametrize("path", [p for p in documents() if p.parent == ROOT], ids=rel)
def test_readme_and_contributing_links_resolve(path):
    broken = []
    for line, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http(s), mailto: not checked offline
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{rel(path)}:{line}: {target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{rel(path)}:{line}: {target}: no heading or id #{anchor} in {rel(destination)}")
    assert not broken, "\n".join(broken)


# --- the generated pages ---------------------------------------------------------------------------


@pytest.fixture
def hooks(monkeypatch):
    """The docs/hooks folder importable, as MkDocs makes it for the hooks."""
    monkeypatch.syspath_prepend(str(HOOKS))
    yield
    for name in ("docs_text", "cli_reference", "benchmarks_page", "api_reference"):
        sys.modules.pop(name, None)


def test_the_cli_reference_names_every_option_of_every_command(hooks, monkeypatch):
    """Checked against argparse's own ``--help`` text: each flag that any (sub-)command's help shows
    is in the page, and each command and sub-command has its section."""
    import cli_reference

    from benchharness.cli import COMMANDS

    monkeypatch.setenv("COLUMNS", "10000")  # the help text unwrapped: no flag broken across lines
    page = cli_reference.render()
    top, commands = cli_reference.command_parsers()
    assert list(commands) == list(COMMANDS)
    parsers = [("", top)] + [(name, p) for name, p in commands.items()]
    for name, parser in commands.items():
        for sub_name, sub in cli_reference._subcommands(parser):
            parsers.append((f"{name}-{sub_name}", sub))
    for anchor, parser in parsers:
        if anchor:
            assert f"{{ #{anchor} }}" in page, anchor
        flags = set(re.findall(r"(?:^|[\s\[(|,])(--?[A-Za-z][\w-]*)", parser.format_help()))
        missing = {f for f in flags - {"-h", "--help"} if f"`{f}`" not in page}
        assert not missing, f"{parser.prog}: {sorted(missing)} not in the CLI reference"


def test_the_benchmarks_page_shows_every_measurement_file_in_full(hooks):
    import benchmarks_page

    page = benchmarks_page.render(ROOT)
    files = sorted((ROOT / "results" / "benchmarks").glob("*.txt"))
    assert files
    for path in files:
        assert f"## {path.stem} {{ #{path.stem} }}" in page
        lines = path.read_text().splitlines()
        heads = [line for line in lines if line.startswith("# ") and ", at " in line]
        for line in lines:
            if line not in heads[:1]:
                assert line in page, f"{path.name}: {line!r} not on the page"
        if heads:  # the head line's commit and date, read here without the hook's pattern
            commit, day = heads[0].split(", at ", 1)[1].split(", ")[:2]
            assert f"`{commit.split(' ')[0]}`" in page and day in page


def test_the_benchmarks_page_reads_the_head_line_machine_py_writes_today(hooks, monkeypatch):
    """``benchmarks/machine.py``'s ``header()`` and the page's reader agree: a change to the head
    line's form that the page cannot read fails here, not in a published page."""
    import benchmarks_page

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setattr(sys, "argv", ["benchmarks/warm_rerun.py", "--repeats", "5"])
    import machine

    line = machine.header()
    header = benchmarks_page.parse_header(line)
    assert header is not None, line
    assert header.command == "python benchmarks/warm_rerun.py --repeats 5"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", header.date)
    assert "core" in header.machine and "load" in header.machine
    machine_name, load = benchmarks_page.machine_and_load(header.machine)
    assert "core" in machine_name and "load" not in machine_name and re.match(r"^\d+\.\d\d", load)
    scripts = {p.stem: p for p in (ROOT / "benchmarks").glob("*.py")}
    assert benchmarks_page.find_script("anything", (header,), scripts) == ROOT / "benchmarks" / "warm_rerun.py"
    assert benchmarks_page.find_script("faiss_search_400k", (), scripts) == ROOT / "benchmarks" / "faiss_search.py"


@pytest.mark.parametrize(
    ("machine", "name", "load"),
    [
        (
            "2-core AMD EPYC (avx512-bf16); load 0.57 at start (NOT idle: timings indicative only)",
            "2-core AMD EPYC (avx512-bf16)",
            "0.57, not idle",
        ),
        ("idle 2-core AMD EPYC with AVX512-BF16 (load 0.42 at start)", "2-core AMD EPYC with AVX512-BF16", "0.42"),
        ("idle 2-core AMD EPYC (AVX2; load < 0.5 at start)", "2-core AMD EPYC (AVX2)", "< 0.5"),
        ("a machine", "a machine", ""),
    ],
)
def test_the_benchmarks_table_splits_every_form_of_the_head_line(hooks, machine, name, load):
    import benchmarks_page

    assert benchmarks_page.machine_and_load(machine) == (name, load)


def test_the_api_reference_lists_every_public_name(hooks):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    import api_reference

    import benchharness

    public = [n for n in benchharness.__all__ if n != "__version__"]
    groups = api_reference.export_groups(ROOT / "benchharness" / "__init__.py", public)
    listed = [n for _, names in groups for n in names]
    assert sorted(listed) == sorted(public)
    page = api_reference.render(ROOT)
    for name in public:
        assert f"benchharness.{name}" in page


# --- the site --------------------------------------------------------------------------------------


def _docs_extra_missing() -> str | None:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install -e '.[docs]' to build the documentation site"
    return None


def test_the_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: every nav page exists, every link and anchor between pages resolves,
    the generated pages render and mkdocstrings reads every documented object without a warning."""
    reason = _docs_extra_missing()
    if reason:
        pytest.skip(reason)
    site = tmp_path / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert 'id="run"' in cli and "--encoders" in cli
    api = (site / "reference" / "api" / "index.html").read_text()
    assert 'id="benchharness.evaluation.evaluate.evaluate"' in api
    assert 'id="benchharness.core.encoder.Encoder"' in api
    benchmarks = (site / "benchmarks" / "index.html").read_text()
    for path in (ROOT / "results" / "benchmarks").glob("*.txt"):
        assert f'id="{path.stem}"' in benchmarks
