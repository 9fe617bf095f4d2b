"""The files of the ``vectors`` family, shared by the side that writes them and the side that
reads them: their names, which kind of model each holds the outputs of, and the key of a row (a
sentence's role and instruction)."""

from __future__ import annotations

from benchharness.core.kinds import DENSE, MULTI_VECTOR, SPARSE
from benchharness.core.prompts import Role

SENTENCES = "sentences.jsonl"
VECTORS = "vectors.npy"
#: a sparse model's rows: a scipy.sparse matrix, one row per line, as wide as the vocabulary
SPARSE_VECTORS = "vectors.npz"
#: a multi-vector model's token vectors: every line's stacked in line order (tokens x dimension)
TOKENS = "tokens.npy"
#: where each line's token vectors start in ``TOKENS``, then where the last one ends (lines + 1)
TOKEN_OFFSETS = "token_offsets.npy"
#: ``{"similarity": ...}``: how a sparse or multi-vector model compares its outputs
SIMILARITY = "similarity.json"
#: each kind's files beside ``sentences.jsonl``: a folder's kind is told by which of them it holds
KIND_FILES = {DENSE: (VECTORS,), SPARSE: (SPARSE_VECTORS,), MULTI_VECTOR: (TOKENS, TOKEN_OFFSETS)}
#: how each of them is saved, for messages
SAVED_AS = {
    VECTORS: "one float32 row per line, in the order of the lines (numpy.save)",
    SPARSE_VECTORS: "one row per line, as wide as the vocabulary (scipy.sparse.save_npz of a CSR matrix)",
    TOKENS: "every line's token vectors stacked in the order of the lines, float32 (numpy.save)",
    TOKEN_OFFSETS: f"where each line's rows start in {TOKENS}, then where the last ends, int64 (numpy.save)",
}
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
