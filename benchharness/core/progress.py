"""Whether long steps show progress bars: the one switch every bar reads (encoders, the transfer
classifiers, training loops, fitting post-processors).

Off unless whoever runs the work turns it on: the command line does (``-q`` keeps it off), and
``benchharness.evaluate(..., show_progress=True)`` does for its call. Encoders and tasks know
nothing of either; they read ``shown()``."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_SHOWN: contextvars.ContextVar[bool] = contextvars.ContextVar("benchharness_progress", default=False)


def shown() -> bool:
    return _SHOWN.get()


@contextlib.contextmanager
def progress_shown(flag: bool) -> Iterator[None]:
    token = _SHOWN.set(flag)
    try:
        yield
    finally:
        _SHOWN.reset(token)
