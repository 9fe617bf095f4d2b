"""The files of the ``vectors`` family, shared by the side that writes them and the side that
reads them: their names, and the key of a row (a sentence's role and instruction)."""

from __future__ import annotations

from benchharness.core.prompts import Role

SENTENCES = "sentences.jsonl"
VECTORS = "vectors.npy"
#: the sha256 of ``sentences.jsonl`` as ``benchharness sentences`` wrote it: a folder whose lines
#: changed since (reordered, edited) no longer matches the rows computed for them
SENTENCES_DIGEST = "sentences.sha256"
#: file suffixes of the keyed layouts (one file holding each sentence and its vector)
KEYED_SUFFIXES = (".jsonl", ".parquet")
#: (role name or None for the default role, instruction or None): the rows of one kind of request
RoleKey = tuple[str | None, str | None]


def role_key(role: Role) -> RoleKey:
    """The key of the rows that answer ``role``: an instruction counts for a query only, as only
    the query side is given one (``Task.query_role``)."""
    return role.name, role.instruction if role.name == "query" else None


def role_text(key: RoleKey) -> str:
    """A row key as messages name it: ``query (instruction '...')``."""
    name, instruction = key
    return (name or "default") + (f" (instruction {instruction!r})" if instruction else "")


#: characters of a quoted sentence
QUOTE_CHARS = 60


def quote(text: str) -> str:
    """A sentence as messages quote it, cut at ``QUOTE_CHARS``."""
    return repr(text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "...")
