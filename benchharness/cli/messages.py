"""Where the command line sends the library's messages: the ``benchharness`` logger's records to
standard error, at a level set by ``-v`` / ``-q``, and progress bars on unless ``-q`` or standard error
is not a terminal (a log file, CI: a bar there is a stream of ``\r`` frames, kilobytes a line).

The library only logs (``logging.getLogger("benchharness.*")``) and reads one progress switch
(``benchharness.core.progress``); neither prints. A command's own output (its table, its report)
is printed to standard output by the command, so it can be piped while messages stay on the
terminal.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

from benchharness.core.progress import progress_shown

#: the logger every module of the package logs under
ROOT = "benchharness"


class _Format(logging.Formatter):
    """Information as it is, everything louder prefixed with its level (``warning: ...``)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if record.levelno <= logging.INFO else f"{record.levelname.lower()}: {text}"


def level_of(verbose: int, quiet: bool) -> int:
    """``-q``: warnings and errors only; default: information too; ``-v``: debug messages as well."""
    if quiet:
        return logging.WARNING
    return logging.DEBUG if verbose else logging.INFO


def bars_shown(quiet: bool) -> bool:
    """Whether the command shows progress bars: not with ``-q``, and not where standard error is no
    terminal (a log file, CI), where a bar is a stream of frames rather than a line that moves."""
    return not quiet and sys.stderr.isatty()


@contextlib.contextmanager
def messages(verbose: int = 0, quiet: bool = False) -> Iterator[None]:
    """The command's messages on standard error and its progress bars on, for as long as it runs
    (``main`` may be called more than once in one process, as the tests do)."""
    logger = logging.getLogger(ROOT)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format("%(message)s"))
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level_of(verbose, quiet))
    try:
        with progress_shown(bars_shown(quiet)):
            yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
