"""Text helpers shared by the documentation hooks: text written for a terminal or a docstring
(argparse help, ``benchmarks/*.py`` docstrings) made safe to drop into Markdown, and the generated
text put in place of its page's marker (``fill_marker``).

A help string such as ``trains into <out>-s<seed>`` would otherwise lose ``<out>`` as an unknown
HTML tag, and ``results/*/x`` would open an emphasis; inside code spans nothing is escaped, since
Markdown shows code spans as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: reStructuredText's inline literal (``x``), as the docstrings write it
_RST_LITERAL = re.compile(r"``(.+?)``")
#: a Markdown code span (single backticks), kept as it is
_CODE_SPAN = re.compile(r"(`[^`\n]+`)")
#: characters Markdown (or an HTML parser behind it) would read as markup in running text
_SPECIAL = {"\\": "\\\\", "*": "\\*", "[": "\\[", "]": "\\]", "|": "\\|", "<": "&lt;", ">": "&gt;", "_": "\\_"}


def rst_literals_to_markdown(text: str) -> str:
    """``x`` (reStructuredText) -> `x` (Markdown)."""
    return _RST_LITERAL.sub(lambda m: f"`{m.group(1)}`", text)


def escape(text: str) -> str:
    """``text`` as literal Markdown: special characters escaped outside code spans; a ``|`` inside a
    code span is escaped too (a table cell would end there otherwise)."""
    parts = _CODE_SPAN.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # a code span
            out.append(part.replace("|", "\\|"))
        else:
            out.append("".join(_SPECIAL.get(ch, ch) for ch in part))
    return "".join(out)


def first_paragraph(docstring: str | None) -> str:
    """The first paragraph of a docstring, on one line (empty without a docstring)."""
    if not docstring:
        return ""
    paragraph = docstring.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def code_block(text: str, language: str = "text") -> str:
    """``text`` in a fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def fill_marker(markdown: str, page: Any, name: str, marker: str, what: str, render: Callable[[], str]) -> str:
    """A hook's ``on_page_markdown``: on its page ``docs/<name>``, ``marker`` replaced by ``render()``
    (``what`` it generates); every other page passes through. A page that has lost its marker fails
    the build rather than going out without the generated text."""
    if page.file.src_uri != name:
        return markdown
    if marker not in markdown:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"docs/{name} has lost its marker {marker}: the generated {what} goes there")
    return markdown.replace(marker, render())
