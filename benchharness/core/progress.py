"""Whether long steps show progress bars, set by whoever runs them (``run --quiet`` turns them off).

Tasks are called as ``evaluate(embed, seed)`` and know nothing of the command line; the runner sets
this around each evaluation, and the slow inner loops (the transfer classifiers) read it."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_SHOWN: contextvars.ContextVar[bool] = contextvars.ContextVar("benchharness_progress", default=True)


def shown() -> bool:
    return _SHOWN.get()


@contextlib.contextmanager
def progress_shown(flag: bool) -> Iterator[None]:
    token = _SHOWN.set(flag)
    try:
        yield
    finally:
        _SHOWN.reset(token)
