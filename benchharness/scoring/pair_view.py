"""The view of a cross-encoder: a score for each (left, right) pair of texts, read together by the
model, and nothing else (no vectors, no search of a corpus).

The view is handed a plain function from pairs to scores (the kind plugin routes it through the
cache), so it scores with any model that reads pairs: a sentence-transformers ``CrossEncoder`` or a
user's callable. Prompts follow ``CrossEncoder.predict(prompt=...)``: one prompt per pair, put in
front of its first text (the query of a reranking pair); that is the left role's prompt (the model's
default prompt, or the task's instruction through the template). A document prompt set explicitly
(``document_prompt=``) goes in front of the right text of a (query, document) pair; sentence-
transformers has no such prompt, so a model's own configuration never sets one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import CROSS_ENCODER, PAIRS, Roles, View
from benchharness.core.prompts import DOCUMENT, NO_PROMPTS, Prompts

#: pairs of texts, in the order their scores come back
Pairs = Sequence[tuple[str, str]]


def returned_array(value: Any, dtype: type, who: str, what: str) -> np.ndarray:
    """What a user's model or callable returned, as a numpy array of ``dtype``: numpy, a torch tensor
    (any device or dtype), nested lists. Anything else is refused in one line naming ``who`` returned
    it and ``what`` was expected."""
    if hasattr(value, "detach"):
        value = value.detach().float().cpu().numpy()
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{who} returned {type(value).__name__}, not {what}") from None


def as_scores(value: Any, n: int, name: str) -> np.ndarray:
    """What a pair scorer returned for ``n`` pairs as a float64 array of ``n``: numpy, a torch tensor
    (any device or dtype), a list; one column of ``n`` rows is one score per pair too. Anything else
    is refused with what came back (a classifier's several labels per pair are not one score)."""
    scores = returned_array(value, np.float64, name, "scores")
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    if scores.shape != (n,):
        raise InvalidInputError(
            f"{name} returned an array of shape {scores.shape} for {n} pairs; expected one score per pair"
        )
    return scores


class PairView(View):
    """Scores from ``score(pairs) -> array`` (one finite number per pair, in order), as float64;
    ``facts`` counts the pairs the task asked for. The function sees every pair asked for, repeats
    included: the kind's cache (``evaluation.kinds.outputs``) scores each distinct pair once."""

    kind = CROSS_ENCODER
    offers = frozenset({PAIRS})

    def __init__(self, score: Callable[[Pairs], np.ndarray], prompts: Prompts = NO_PROMPTS, name: str = "") -> None:
        self._score = score
        self._prompts = prompts
        self._name = name or "the cross-encoder"
        self._asked = 0

    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles) -> np.ndarray:
        first = self._prompts.for_role(roles[0])
        second = self._prompts.document if roles[1].name == DOCUMENT.name and self._prompts.document else ""
        pairs = [(first + a, second + b) for a, b in zip(left, right)]
        scores = as_scores(self._score(pairs), len(pairs), self._name)
        if not np.isfinite(scores).all():
            bad = int(np.argmax(~np.isfinite(scores)))
            raise InvalidInputError(
                f"{self._name} scored {int((~np.isfinite(scores)).sum())} of {len(pairs)} pairs as NaN or "
                f"infinite (the first: {pairs[bad][0][:60]!r} with {pairs[bad][1][:60]!r})"
            )
        self._asked += len(pairs)
        return scores

    def facts(self) -> dict[str, float | int]:
        """How many pairs the task had scored (``pairs_scored``: the cross-encoder's forward passes
        when nothing is cached, its cost beside a dense model's one pass per text)."""
        return {"pairs_scored": self._asked}
