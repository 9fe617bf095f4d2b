"""The cross-encoder kind: no vector per text, a score for each (query, document) pair read together
by the model (sentence-transformers' ``CrossEncoder``, or any callable from pairs to scores given as
``benchharness.PairScorer``). It runs the tasks that score given pairs (STS, pair files, AskUbuntu,
reranking files) and is refused, before anything is scored, by those that need vectors or a search
of a whole corpus.

A task's pairs are scored through ``Outputs``: each distinct pair once, and, with a cache folder,
read back under the model's identity on a rerun (one float32 per pair, the dense codec with width 1;
``CrossEncoder.predict`` gives float32). The key of a pair is the two texts as the model reads them,
prompts included, so that pairs asked for in two roles that the model reads alike share a score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import PairModel
from benchharness.core.kinds import CROSS_ENCODER, PAIR_SCORE, PAIRS, ModelKind, View, ViewSettings
from benchharness.core.prompts import DEFAULT
from benchharness.evaluation.kinds import held_model
from benchharness.evaluation.kinds.outputs import Outputs
from benchharness.evaluation.row_codecs import DENSE_ROWS
from benchharness.scoring.pair_view import PairView


def pair_key(left: str, right: str) -> str:
    """A pair's key in the cache: unambiguous whatever characters the texts hold (the length of the
    first says where it ends)."""
    return f"{len(left)}\x1f{left}\x1f{right}"


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """The pairs of one task scored by ``encoder``'s model through the kind's cache."""
    model: PairModel = held_model(encoder, PairModel, KIND)
    outputs = Outputs(model, DEFAULT, DENSE_ROWS, settings.cache_dir)

    def score(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)

        def compute(positions: list[int]) -> np.ndarray:
            scores = model.score_pairs([pairs[i] for i in positions])
            return np.asarray(scores, dtype=np.float32).reshape(-1, 1)

        rows = outputs.get([pair_key(left, right) for left, right in pairs], compute)
        return np.asarray(rows, dtype=np.float64)[:, 0]

    return PairView(score, model.prompts, model.name)


KIND = ModelKind(
    name=CROSS_ENCODER,
    title="a cross-encoder",
    offers=frozenset({PAIRS}),
    gives="a score for each text pair, read together",
    similarity=PAIR_SCORE,
    open_view=open_view,
)
