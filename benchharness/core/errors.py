"""The one base class of the errors a user can fix.

The command line prints a ``UserError`` as one line (``benchharness: error: ...``) and exits 2;
every other exception keeps its traceback, so a programming error is never mistaken for bad input.
Each layer derives its own errors from it (unknown names, missing data, bad configuration).
"""

from __future__ import annotations


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
