"""argparse ``type=`` validators for numeric flags, shared by ``run``, ``train`` and ``tune``.

A value outside its range is refused while the command line is parsed, so the message is
argparse's own ("argument --max-steps: must be a positive integer, got 0") and comes before any
data or model is loaded; ``--limit 0`` or ``--max-steps 0`` would otherwise mean "unlimited" or
"train nothing" without saying so.
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Callable


class BadValue(argparse.ArgumentTypeError, ValueError):
    """A value a validator refuses: argparse prints it after the flag's name, and code that checks a
    value given in Python (a training option) catches it as the ``ValueError`` it also is."""


def _number(cast: Callable[[str], float], text: str, what: str) -> float:
    try:
        value = cast(text)
    except ValueError:
        raise BadValue(f"must be {what}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise BadValue(f"must be {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts, sizes, step numbers)."""
    value = int(_number(int, text, "a positive integer"))
    if value < 1:
        raise BadValue(f"must be a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds; intervals where 0 means "none")."""
    value = int(_number(int, text, "an integer >= 0"))
    if value < 0:
        raise BadValue(f"must be an integer >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, temperatures, clipping norms)."""
    value = _number(float, text, "a positive number")
    if value <= 0:
        raise BadValue(f"must be a positive number, got {value:g}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (loss weights, weight decay)."""
    value = _number(float, text, "a number >= 0")
    if value < 0:
        raise BadValue(f"must be a number >= 0, got {value:g}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1) (warmup ratio, dropout and cutoff rates)."""
    value = _number(float, text, "a number in [0, 1)")
    if not 0 <= value < 1:
        raise BadValue(f"must be in [0, 1), got {value:g}")
    return value


def probability(text: str) -> float:
    """A number in [0, 1] (augmentation ratios)."""
    value = _number(float, text, "a number in [0, 1]")
    if not 0 <= value <= 1:
        raise BadValue(f"must be in [0, 1], got {value:g}")
    return value


def _items(text: str) -> list[str]:
    """The comma-separated items of a list flag (``384,128,64``; a Python tuple's text also reads)."""
    items = [t.strip() for t in text.strip().strip("()[]").split(",") if t.strip()]
    if not items:
        raise BadValue(f"must be a comma-separated list, got {text!r}")
    return items


def descending_sizes(text: str) -> tuple[int, ...]:
    """Distinct positive integers from the largest down (embedding sizes: ``384,256,128,64``): one
    spelling per set, so that two ways of writing the same sizes never make two recipes."""
    values = tuple(positive_int(t) for t in _items(text))
    if any(a <= b for a, b in itertools.pairwise(values)):
        raise BadValue(f"must be distinct sizes from the largest down (e.g. 384,128,64), got {text!r}")
    return values


def weight_list(text: str) -> tuple[float, ...]:
    """Numbers >= 0, at least one of them > 0 (the weights of a sum of losses: ``1,1,0.5``)."""
    values = tuple(non_negative_float(t) for t in _items(text))
    if not any(values):
        raise BadValue(f"must hold a weight > 0, got {text!r}")
    return values
