"""EDA augmentations: counts and invariants of each operation, and WordNet synonyms."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from benchharness.training.methods.paser.eda import Augmenter, random_deletion, random_swap, synonym_replacement
from tests.helpers import needs_data

STOP = frozenset({"the", "a", "is"})
LEXICON = {"car": ("automobile",), "red": ("crimson red",), "fast": ("quick",)}


def lookup(word: str) -> tuple[str, ...]:
    return LEXICON.get(word, ())


def test_synonym_replacement_replaces_n_distinct_words_everywhere():
    words = ["the", "red", "car", "is", "a", "red", "car"]  # 7 words, alpha 0.3 -> n = 2
    out = synonym_replacement(words, 0.3, random.Random(0), STOP, lookup)
    # both replaceable words replaced at every occurrence; the multi-word synonym becomes two words
    assert out == ["the", "crimson", "red", "automobile", "is", "a", "crimson", "red", "automobile"]


def one_word(word: str) -> tuple[str, ...]:
    return {"red": ("crimson",)}.get(word, lookup(word))


def test_synonym_replacement_stops_at_n_and_spares_stopwords():
    words = ["the", "red", "car", "is", "fast"]  # alpha 0.2 -> n = max(1, int(1.0)) = 1
    for seed in range(5):
        out = synonym_replacement(words, 0.2, random.Random(seed), STOP, one_word)
        changed = {w for w in words if w not in out}
        assert len(changed) == 1 and changed <= {"red", "car", "fast"}
        assert out.count("the") == 1 and out.count("is") == 1


def test_random_deletion():
    words = ["one", "two", "three", "four", "five", "six"]
    assert random_deletion(words, 0.0, random.Random(0)) == words
    only = random_deletion(words, 1.0, random.Random(0))
    assert len(only) == 1 and only[0] in words
    kept = random_deletion(words, 0.5, random.Random(3))
    assert [w for w in words if w in kept] == kept  # order preserved, a subsequence
    assert random_deletion(["single"], 1.0, random.Random(0)) == ["single"]


def test_random_swap_permutes():
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight"]  # alpha 0.25 -> 2 swaps
    out = random_swap(words, 0.25, random.Random(1))
    assert Counter(out) == Counter(words) and out != words
    assert sum(a != b for a, b in zip(out, words)) <= 4
    assert random_swap(["solo"], 0.5, random.Random(0)) == ["solo"]


def test_seeded_augmentation_is_reproducible():
    aug = Augmenter("rs", 0.5)
    s = "a b c d e f g h"
    assert aug(s, random.Random(7)) == aug(s, random.Random(7))
    with pytest.raises(ValueError, match="unknown augmentation"):
        Augmenter("back-translation")


@needs_data("nltk_data/corpora/wordnet")
def test_wordnet_synonyms_match_nltk(training_corpora):  # all of WordNet: slow
    from benchharness.training.methods.paser.eda import _wordnet, synonyms

    wn = _wordnet(str(training_corpora.root))
    expected = set()
    for synset in wn.synsets("car"):
        for name in synset.lemma_names():
            clean = name.replace("_", " ").replace("-", " ").lower()
            if clean != "car":
                expected.add(clean)
    got = synonyms("car", str(training_corpora.root))
    assert set(got) == expected and "automobile" in got and len(got) == len(set(got))
    out = Augmenter("sr", 0.5, str(training_corpora.root))("the car", random.Random(0))
    assert out.startswith("the ") and out != "the car"


@needs_data("nltk_data/corpora/wordnet")
def test_synonyms_read_from_the_data_files_equal_nltks_synsets_for_real_words(training_corpora):  # all of WordNet: slow
    """``synonyms`` reads lemma names straight from WordNet's data files; for every distinct word of
    1,500 STS-B dev sentences (inflected forms, adjectives with satellites and syntactic markers,
    words without synsets), the tuple, order included, equals the one built from NLTK's own
    ``wordnet.synsets(word)`` and ``lemma.name()``."""
    from benchharness import tasks
    from benchharness.training.methods.paser.eda import _LETTERS, _wordnet, synonyms

    task = tasks.get("STSBenchmark-dev")
    task.load(training_corpora)
    words = dict.fromkeys(w.lower() for s in task.sentences()[:1500] for w in s.split())
    wn = _wordnet(str(training_corpora.root))

    def nltk_synonyms(word: str) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for synset in wn.synsets(word):
            for lemma in synset.lemmas():
                name = lemma.name().replace("_", " ").replace("-", " ").lower()
                name = "".join(ch for ch in name if ch in _LETTERS).strip()
                if name and name != word:
                    out[name] = None
        return tuple(out)

    assert len(words) > 2000
    mismatched = [w for w in words if synonyms(w, str(training_corpora.root)) != nltk_synonyms(w)]
    assert not mismatched, mismatched[:5]
    assert synonyms("galore", str(training_corpora.root)) == nltk_synonyms("galore") != ()  # an "(ip)" marker
