"""The one base class of the errors a user can fix.

The command line prints a ``UserError`` as one line (``benchharness: error: ...``) and exits 2;
every other exception keeps its traceback, so a programming error is never mistaken for bad input.
Each layer derives its own errors from it (unknown names, missing data, bad configuration).
"""

from __future__ import annotations

from collections.abc import Sequence


class UserError(Exception):
    """Bad input, missing data or a refused request, with a message that says what to do."""

    def __str__(self) -> str:  # subclasses that are also KeyErrors would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class InvalidInputError(UserError, ValueError):
    """A value the user gave (a flag, a spec parameter, a file's content) that cannot be used."""


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the user named, or the harness needs, that is not there."""


class DivergedError(UserError, FloatingPointError):
    """A training loss that became NaN or infinite: the settings, not the code, need changing."""


class UnavailableDataError(UserError):
    """A task's data that this machine lacks for a cause many tasks of one run share (mteb or NanoBEIR
    datasets missing, offline): forty near-identical lines would bury what to do, so the run logs one
    line for them all (``summary``), and each task's own at debug level."""

    @classmethod
    def summary(cls, failed: Sequence[tuple[str, UnavailableDataError]], loaded: Sequence[str]) -> str:
        """One line for the tasks ``failed`` (name, error) with this cause; ``loaded``: the run's
        tasks whose data were found."""
        names = ", ".join(name for name, _ in failed)
        return f"{len(failed)} tasks cannot load their data ({names}); the first: {failed[0][1]}"
