"""The one rule that tells a local path from a hub id, for every place that accepts either
(``hf:``/``st:`` specs, ``tokenizer=``, ``benchharness train --base``).

``org/name`` is a valid hub id and a valid relative path, so a name counts as a path only when
nothing else could be meant: it starts with ``/``, ``./``, ``../`` or ``~``, has more than one
``/`` (a hub id has at most one: ``runs/x/model`` is a folder), or contains the OS path separator
where that is not ``/`` (Windows). Such a name that does not exist gets "no such folder" here,
instead of the hub's "Repo id must be in the form ..." after an attempted lookup.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchharness.core.errors import MissingFileError

_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


def looks_like_path(name: str) -> bool:
    """Whether ``name`` can only mean a local file or folder (not a hub id)."""
    return (
        name.startswith(_PREFIXES) or name in (".", "..") or name.count("/") > 1 or (os.sep != "/" and os.sep in name)
    )


def check_local_path(name: str, what: str) -> None:
    """Raise ``FileNotFoundError`` when ``name`` is meant as a local path and does not exist."""
    if looks_like_path(name) and not Path(name).expanduser().exists():
        raise MissingFileError(
            f"{what}: no such folder {name!r} ({Path(name).expanduser().absolute()}); "
            "check the path, or give a Hugging Face hub id such as "
            "sentence-transformers/all-MiniLM-L6-v2"
        )
