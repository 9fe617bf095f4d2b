"""RAKE on single sentences, checked against scores worked out by hand."""

from __future__ import annotations

import pytest

from benchharness.training.methods.paser.rake import candidate_phrases, rake
from tests.helpers import needs_data

STOP = frozenset({"the", "and", "a", "of", "over", "in", "for", "do", "i"})


def test_hand_worked_scores_with_repeated_words():
    # candidates: [red car] [red bus hit] [car]
    # freq: red 2, car 2, bus 1, hit 1; deg: red 2+3=5, car 2+1=3, bus 3, hit 3
    # word scores: red 2.5, car 1.5, bus 3, hit 3 -> red bus hit 8.5, red car 4.0, car 1.5
    text = "the red car and the red bus hit a car"
    ranked = rake(text, STOP)
    assert [p.text for p in ranked] == ["red bus hit", "red car", "car"]
    assert [p.score for p in ranked] == pytest.approx([8.5, 4.0, 1.5])
    assert ranked[0].spans == ((text.index("red bus"), text.index("red bus") + len("red bus hit")),)
    assert ranked[2].spans == ((len(text) - 3, len(text)),)


def test_rake_paper_fragment_and_tie_order():
    # every word occurs once: two-word phrases score 2+2, single words 1; ties keep sentence order
    text = "Compatibility of systems of linear constraints over the set of natural numbers."
    ranked = rake(text, STOP, top_k=3)
    assert [(p.text, p.score) for p in ranked] == [
        ("linear constraints", 4.0),
        ("natural numbers", 4.0),
        ("compatibility", 1.0),
    ]


def test_repeated_phrase_keeps_every_occurrence_and_punctuation_splits():
    text = "london, paris and london"
    phrases = candidate_phrases(text, STOP)
    assert [[w for w, _, _ in p] for p in phrases] == [["london"], ["paris"], ["london"]]
    ranked = rake(text, STOP)
    assert ranked[0].text == "london" and ranked[0].spans == ((0, 6), (18, 24))
    # freq(london) = 2, deg = 2 -> 1.0; paris 1.0; london first (first occurrence)
    assert [p.score for p in ranked] == [1.0, 1.0]


def test_sentence_of_stopwords_has_no_phrase():
    assert rake("and the of a", STOP) == []


@needs_data("nltk_data/corpora/stopwords/english")
def test_nltk_english_stopwords(data_dir):
    from benchharness.training.methods.paser.rake import english_stopwords

    words = english_stopwords(str(data_dir))
    lines = [w for w in (data_dir / "nltk_data/corpora/stopwords/english").read_text().split() if w]
    assert words == frozenset(lines)
    assert {"the", "of", "a", "for"} <= words and "visa" not in words
    top = rake("do i need a transit visa for a stop in london ?", words, top_k=2)
    assert [p.text for p in top] == ["transit visa", "need"]
