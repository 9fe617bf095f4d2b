"""MkDocs hook: the Python API reference (``docs/reference/api.md``) listed from the package itself at
build time, so that a name added to or dropped from ``benchharness.__all__`` adds or drops its entry.

``benchharness`` exports its names lazily (``__getattr__`` over ``_EXPORTS``: public name -> defining
module), which a static reader of the package cannot follow; so the hook writes one mkdocstrings
directive per exported name at the object's defining path (``::: benchharness.tasks.get``), headed
with its public name (``benchharness.get_task``). The groups are the comments of ``_EXPORTS`` in
``benchharness/__init__.py`` ("evaluate, read back, compare", ...). Names defined in the contract
modules (``CONTRACTS``: what an encoder or a task must provide) are documented with their whole
module in the section after, and listed in their group with a link there.

mkdocstrings reads the code statically (griffe), as the package's folders would be installed:
``benchharness.encoders`` and ``benchharness.tasks`` live in the top-level ``encoders/`` and ``tasks/``
(``[tool.setuptools.package-dir]`` in ``pyproject.toml``), which a reader of ``benchharness/`` alone
cannot find. So before mkdocstrings starts, the hook copies the sources into the installed layout in
a temporary folder (``source_tree``) and points the Python handler's ``paths`` there; importing the
package to inspect it instead would run ``benchharness/cli/__main__.py``.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from docs_text import fill_marker
from mkdocs.plugins import event_priority

MARKER = "<!-- api-reference -->"
PAGE = "reference/api.md"
#: modules documented whole: the contracts a plugin implements, with their helpers
CONTRACTS = {
    "benchharness.core.encoder": "The encoder contract",
    "benchharness.core.task": "The task contract",
    "benchharness.core.prompts": "Roles and prompts",
}
#: a group comment and an entry of the ``_EXPORTS`` literal
_COMMENT = re.compile(r"^\s*#\s*(?P<text>.+?)\s*$")
_ENTRY = re.compile(r'^\s*"(?P<name>\w+)"\s*:')


def export_groups(init: Path, names: list[str]) -> list[tuple[str, list[str]]]:
    """``names`` (``__all__`` less ``__version__``) grouped by the comment above them in the
    ``_EXPORTS`` literal of ``init``, in its order; names it does not list go to a last group."""
    source = init.read_text()
    literal = source.split("_EXPORTS = {", 1)[1].split("\n}", 1)[0]
    groups: list[tuple[str, list[str]]] = []
    for line in literal.splitlines():
        if comment := _COMMENT.match(line):
            groups.append((comment["text"], []))
        elif (entry := _ENTRY.match(line)) and entry["name"] in names:
            if not groups:
                groups.append(("", []))
            groups[-1][1].append(entry["name"])
    listed = {n for _, group in groups for n in group}
    rest = [n for n in names if n not in listed]
    if rest:
        groups.append(("more", rest))
    return [(title, group) for title, group in groups if group]


def _directive(path: str, public: str) -> list[str]:
    return [
        f"::: {path}",
        "    options:",
        f'      heading: "{public}"',
        f'      toc_label: "{public.rsplit(".", 1)[-1]}"',
        "      heading_level: 3",
        "",
    ]


def render(root: Path) -> str:
    """The generated part of the page, in Markdown with mkdocstrings directives."""
    import benchharness

    exports: dict[str, str] = benchharness._EXPORTS
    renamed: dict[str, str] = benchharness._RENAMED
    names = [n for n in benchharness.__all__ if n != "__version__"]
    out: list[str] = []
    for title, group in export_groups(root / "benchharness" / "__init__.py", names):
        out += [f"## {title[:1].upper() + title[1:]}", ""]
        for name in group:
            module, attr = exports[name], renamed.get(name, name)
            path = f"{module}.{attr}"
            if module in CONTRACTS:
                out += [f"- `benchharness.{name}`: [`{path}`][{path}], in {CONTRACTS[module].lower()} below", ""]
            else:
                out += _directive(path, f"benchharness.{name}")
    out += ["## Contracts", ""]
    for module, title in CONTRACTS.items():
        out += [
            f"::: {module}",
            "    options:",
            f'      heading: "{title}: {module}"',
            f'      toc_label: "{title}"',
            "      heading_level: 3",
            "      show_root_heading: true",
            "      members_order: source",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def source_tree(root: Path, dest: Path) -> Path:
    """Copy the packages of the checkout at ``root`` into ``dest`` as they would be installed (each
    import name of ``[tool.setuptools.package-dir]`` in its folder); returns ``dest``."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = setuptools["package-dir"]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in sorted(mapping, key=lambda n: n.count(".")):  # a package before those inside it
        shutil.copytree(root / mapping[name], dest.joinpath(*name.split(".")), ignore=ignore, dirs_exist_ok=True)
    return dest


_TREES: list[Path] = []


@event_priority(100)  # before mkdocstrings reads its configuration
def on_config(config: Any) -> Any:
    """MkDocs event: the Python handler reads the installed layout of this checkout's sources."""
    root = Path(config.config_file_path).resolve().parent
    tree = source_tree(root, Path(tempfile.mkdtemp(prefix="benchharness-docs-src-")))
    _TREES.append(tree)
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(tree)]
    return config


def _remove_trees(*args: Any, **kwargs: Any) -> None:
    while _TREES:
        shutil.rmtree(_TREES.pop(), ignore_errors=True)


#: MkDocs events: the copies go when a build ends, however it ends
on_post_build = on_build_error = on_shutdown = _remove_trees


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill in the reference on its page; every other page passes through."""
    return fill_marker(
        markdown, page, PAGE, MARKER, "API reference", lambda: render(Path(config.config_file_path).resolve().parent)
    )
