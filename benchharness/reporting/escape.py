"""What each output format needs escaped in text that comes from users (encoder names, run paths,
task names from files): a name is data, never markup, a formula or a command in the file it lands in.

- CSV: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
  formula by spreadsheets; OWASP's rule prefixes such a cell with a single quote. A number (``-3.2``)
  is left as it is: it is data either way.
- Markdown table cells: ``|`` ends a cell and a newline ends the row.
- LaTeX: the specials are commands; control and bidirectional marks (U+200F...) and characters the
  default pdflatex set-up has no glyph for stop the compilation, so they are dropped or shown as
  their code point.
- Markdown code spans: a backtick ends the span and a newline the line.
"""

from __future__ import annotations

import re
import unicodedata

_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """A CSV text cell no spreadsheet evaluates (OWASP CSV injection: a leading single quote)."""
    if not text.startswith(_FORMULA_PREFIXES):
        return text
    try:
        float(text)
    except ValueError:
        return "'" + text
    return text


def one_line(text: str) -> str:
    """Line breaks of any kind (CR, LF, U+2028...) as spaces: a name never starts a new line."""
    return " ".join(text.splitlines()) if text else text


def md_cell(text: str) -> str:
    """Text for one Markdown table cell: pipes escaped, line breaks as spaces."""
    return one_line(text).replace("|", "\\|")


def md_code(text: str) -> str:
    """``text`` as one inline Markdown code span (CommonMark: fenced by more backticks than any run
    inside it, padded with a space when it starts or ends with one)."""
    text = one_line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "–": "--",
    "†": r"\dag{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def _latex_char(ch: str) -> str:
    if ch in _LATEX_SPECIAL:
        return _LATEX_SPECIAL[ch]
    if ch in "\n\r\t" or unicodedata.category(ch) == "Zs":
        return " "
    if unicodedata.category(ch).startswith("C"):  # control, format (bidi marks, zero-width), private, unassigned
        return ""
    if ord(ch) < 0x80 or (ord(ch) >= 0xC0 and ord(ch) <= 0xFF and unicodedata.category(ch).startswith("L")):
        return ch  # ASCII and Latin-1 letters: what pdflatex's default utf8 input sets up
    return rf"\texttt{{[U+{ord(ch):04X}]}}"


def tex(text: str) -> str:
    """Text set verbatim in LaTeX by a default pdflatex set-up: every character that LaTeX reads as a
    command escaped, control and bidi marks dropped, characters it cannot set shown as code points."""
    return "".join(_latex_char(ch) for ch in text)
