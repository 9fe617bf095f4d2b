"""The names of retrieval pipelines, parsed without loading anything:

- ``FIRST>>RERANKER?k=K``: FIRST's top K of each query reranked by RERANKER. ``k`` (required) and
  ``variant`` (``always_rerank_positives``; default ``candidates``) are the pipeline's keys of the
  query string after RERANKER; any other key stays RERANKER's own (``st:<folder>?max_length=256&k=50``).
  The split is on the last ``>>`` outside parentheses and quotes, so FIRST may itself be a pipeline
  (a cascade) or hold ``>>`` inside ``rrf(...)``.
- ``rrf(A,B,...)``: reciprocal-rank fusion of two or more first stages, each any name of its own.

FIRST may be any name a model of a kind that searches resolves to (a dense, sparse or multi-vector
encoder, ``bm25``, ``run:<file>``, a fusion, a pipeline); RERANKER any that scores pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from benchharness.core.specs import UnknownEncoderError
from benchharness.encoders.pipeline import CANDIDATES, RERANK_PROTOCOLS

PIPE = ">>"
#: the keys of a pipeline's query string; every other key is its reranker's
KEYS = ("k", "variant")
FUSION_PREFIX = "rrf("
USAGE = "FIRST>>RERANKER?k=K (and &variant=always_rerank_positives)"


@dataclass(frozen=True)
class PipelineName:
    """A parsed ``FIRST>>RERANKER?k=K&variant=...``."""

    first: str
    reranker: str
    k: int
    variant: str = CANDIDATES


def split_outside(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` where it is outside parentheses, square brackets and quotes; the
    parts are not stripped. A name whose brackets or quotes do not close is refused in one line."""
    parts, start, depth, quote, i = [], 0, 0, "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                break
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    if depth != 0 or quote:
        raise UnknownEncoderError(f"malformed encoder name {text!r}: a bracket or quote is not closed")
    return [*parts, text[start:]]


def parse_pipeline(name: str) -> PipelineName | None:
    """The parts of a pipeline name; None when ``name`` has no ``>>`` outside brackets and quotes."""
    parts = split_outside(name, PIPE)
    if len(parts) == 1:
        return None
    first, rest = PIPE.join(parts[:-1]).strip(), parts[-1].strip()
    reranker, _, query = rest.partition("?")
    own: dict[str, str] = {}
    kept = []
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if key.strip() in KEYS:
            if key.strip() in own:
                raise UnknownEncoderError(f"pipeline {name!r}: {key.strip()} is given twice")
            own[key.strip()] = value.strip()
        else:
            kept.append(item)
    reranker = reranker.strip() + (f"?{'&'.join(kept)}" if kept else "")
    if not first or not reranker.strip():
        raise UnknownEncoderError(f"pipeline {name!r}: a stage is empty; expected {USAGE}")
    return PipelineName(first, reranker, _depth(name, own.get("k")), _variant(name, own.get("variant")))


def _depth(name: str, given: str | None) -> int:
    if given is None:
        joined = "&" if "?" in name.rpartition(PIPE)[2] else "?"
        raise UnknownEncoderError(
            f"pipeline {name!r}: say how many of the first stage's documents to rerank, as in {name}{joined}k=100"
        )
    try:
        k = int(given)
    except ValueError:
        k = 0
    if k < 1:
        raise UnknownEncoderError(
            f"pipeline {name!r}: k={given!r}; the depth is a whole number of documents, 1 or more"
        )
    return k


def _variant(name: str, given: str | None) -> str:
    if given is None:
        return CANDIDATES
    if given not in RERANK_PROTOCOLS:
        raise UnknownEncoderError(
            f"pipeline {name!r}: unknown variant {given!r}; choose {' or '.join(RERANK_PROTOCOLS)}"
        )
    return given


def parse_fusion(name: str) -> list[str] | None:
    """The first stages of ``rrf(A,B,...)``, or None when ``name`` is not a fusion."""
    text = name.strip()
    if not text.startswith(FUSION_PREFIX):
        return None
    malformed = UnknownEncoderError(f"malformed fusion {name!r}; expected rrf(A,B,...) and nothing after it")
    if not text.endswith(")"):
        raise malformed
    try:  # unbalanced inside: the parenthesis that closes rrf's is not the last one
        members = [m.strip() for m in split_outside(text[len(FUSION_PREFIX) : -1], ",")]
    except UnknownEncoderError:
        raise malformed from None
    if len(members) < 2 or not all(members):
        given = len([m for m in members if m])
        raise UnknownEncoderError(f"fusion {name!r} fuses {given} first stage(s); give two or more")
    return members


def is_staged(name: str) -> bool:
    """Whether ``name`` is a pipeline or a fusion (checked, not only looked at)."""
    return parse_pipeline(name) is not None or parse_fusion(name) is not None


def first_stage_depths(names: Iterable[str]) -> dict[str, int]:
    """The deepest ``k`` each first stage is reranked to among ``names`` (a run's encoders), by the
    first stage's name: the run searches each first stage once, that deep, and every pipeline on it
    takes its prefix. Names that do not parse are left to the resolver to refuse."""
    depths: dict[str, int] = {}
    pending = list(names)
    while pending:
        try:
            parsed = parse_pipeline(pending.pop())
        except UnknownEncoderError:
            continue
        if parsed is not None:
            depths[parsed.first] = max(depths.get(parsed.first, 0), parsed.k)
            pending.append(parsed.first)
    return depths
