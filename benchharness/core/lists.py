"""Comma lists whose items may hold commas of their own, inside brackets: a post-processor's
parameters (``truncate(d=64,norm=true)``), an mteb benchmark's name (``MTEB(eng, v2)``) and a
task's filters (``STS22[languages=eng,deu]``)."""

from __future__ import annotations

_OPEN, _CLOSE = "([", ")]"


def split_outside_brackets(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` where it is not inside parentheses or square brackets; the parts are not
    stripped. ``ValueError`` names the text when its brackets do not balance."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch in _OPEN) - (ch in _CLOSE)
        if depth < 0:
            break
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        raise ValueError(f"unbalanced brackets in {text!r}")
    return [*parts, current]


def bracketed_list(text: str) -> list[str]:
    """The non-empty items of a comma list, stripped, commas inside brackets kept."""
    return [item.strip() for item in split_outside_brackets(text) if item.strip()]
