"""Top lists made from other lists or from a row of scores (``scoring.ranked_lists``), against lists
worked out by hand: the tie rules, the padding, reciprocal-rank fusion's sums."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.scoring.ranked_lists import best_of_row, padded, reciprocal_rank_fusion, reranked


def test_the_best_of_a_row_cut_inside_a_tie_keeps_corpus_order():
    scores = np.array([0.1, 0.5, 0.3, 0.5, 0.5, 0.9])
    values, ids = best_of_row(scores, 3)
    assert ids.tolist() == [5, 1, 3] and values.tolist() == [0.9, 0.5, 0.5]
    assert best_of_row(scores, 3, exclude=5)[1].tolist() == [1, 3, 4]
    assert best_of_row(scores, 10)[1].tolist() == [5, 1, 3, 4, 2, 0]  # fewer documents than asked


def test_lists_are_padded_to_k():
    scores, ids = padded([(np.array([2.0]), np.array([7])), (np.zeros(0), np.zeros(0, dtype=int))], 2)
    assert ids.tolist() == [[7, -1], [-1, -1]] and scores[0, 0] == 2 and np.isneginf(scores[0, 1])


def test_reranked_candidates_tie_by_first_stage_rank():
    # candidates in first-stage order 4 2 9 1; 2 and 1 tie at 0.7 (2 was ranked first), 4 and 9 at 0.2
    scores, ids = reranked([np.array([4, 2, 9, 1])], [np.array([0.2, 0.7, 0.2, 0.7])], 3)
    assert ids.tolist() == [[2, 1, 4]] and scores.tolist() == [[0.7, 0.7, 0.2]]


def test_reciprocal_rank_fusion_sums_one_over_sixty_plus_rank():
    a = np.array([[3, 1, 0, -1]])  # 3 first, 1 second, 0 third
    b = np.array([[1, 2, -1, -1]])  # 1 first, 2 second
    scores, ids = reciprocal_rank_fusion([a, b], 60, 5)
    # 1: 1/62 + 1/61; 3: 1/61; 2: 1/62; 0: 1/63
    assert ids.tolist() == [[1, 3, 2, 0, -1]]
    assert scores[0, :4] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63])
