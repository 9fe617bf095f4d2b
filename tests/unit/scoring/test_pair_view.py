"""The cross-encoder's view: pairs scored by a plain function, with the prompts where
``CrossEncoder.predict`` puts them, refusing what is not one finite score per pair, and no search."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import CROSS_ENCODER, KindMismatchError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Prompts, Role
from benchharness.scoring.pair_view import PairView, as_scores
from benchharness.scoring.views import as_view


class Recorder:
    """Scores a pair by its texts' lengths (left x 100 + right), keeping every call's pairs."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def __call__(self, pairs):
        self.calls.append(list(pairs))
        return np.array([100 * len(a) + len(b) for a, b in pairs], dtype=np.float32)


def test_scores_come_back_in_order_as_float64_and_are_counted():
    score = Recorder()
    view = PairView(score)
    out = view.pairs(["ab", "a", "abc"], ["x", "xyz", ""], (QUERY, DOCUMENT))
    assert out.dtype == np.float64 and out.tolist() == [201.0, 103.0, 300.0]
    assert score.calls == [[("ab", "x"), ("a", "xyz"), ("abc", "")]]
    view.pairs(["q"], ["d"])
    assert view.facts() == {"pairs_scored": 4}
    assert view.kind == CROSS_ENCODER and as_view(view) is view  # a task reads it as it is


def test_the_left_roles_prompt_goes_before_the_first_text_only():
    """CrossEncoder.predict(prompt=...) prepends to a pair's first text; an explicit document
    prompt goes before a (query, document) pair's second text; a symmetric pair gets the default."""
    score = Recorder()
    view = PairView(score, Prompts(default="D: ", query="Q: ", document="P: "))
    view.pairs(["q"], ["d"], (QUERY, DOCUMENT))
    view.pairs(["s1"], ["s2"], (DEFAULT, DEFAULT))
    view.pairs(["q"], ["d"], (Role("query", "Find duplicates"), DOCUMENT))  # the template is "{instruction}"
    assert score.calls == [[("Q: q", "P: d")], [("D: s1", "s2")], [("Find duplicatesq", "P: d")]]
    only_default = Recorder()
    PairView(only_default, Prompts(default="D: ")).pairs(["q"], ["d"], (QUERY, DOCUMENT))
    assert only_default.calls == [[("D: q", "d")]]  # the default prompt, as predict applies it, on the left


def test_a_cross_encoder_cannot_search_a_corpus():
    with pytest.raises(KindMismatchError, match=r"^a cross-encoder model scores given pairs and cannot search"):
        PairView(Recorder(), name="rr").search(["q"], ["a", "b"], 1)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (np.zeros((2, 3)), r"returned an array of shape \(2, 3\) for 2 pairs; expected one score per pair"),
        (np.zeros(3), r"returned an array of shape \(3,\) for 2 pairs"),
        ("no", r"returned str, not scores"),
        (np.array([1.0, np.nan]), r"scored 1 of 2 pairs as NaN or infinite \(the first: 'b' with 'y'\)"),
    ],
)
def test_what_is_not_one_finite_score_per_pair_is_refused_in_one_line(returned, message):
    with pytest.raises(InvalidInputError, match=message) as caught:
        PairView(lambda pairs: returned, name="mine").pairs(["a", "b"], ["x", "y"])
    assert "\n" not in str(caught.value)


def test_scores_from_torch_and_a_column_are_one_per_pair():
    torch = pytest.importorskip("torch")
    assert as_scores(torch.tensor([[0.5], [1.5]], dtype=torch.float16), 2, "t").tolist() == [0.5, 1.5]
    assert as_scores([[3], [4]], 2, "l").tolist() == [3.0, 4.0]


def test_unequal_sides_are_refused():
    with pytest.raises(InvalidInputError, match="2 left texts and 1 right texts"):
        PairView(Recorder()).pairs(["a", "b"], ["x"])
