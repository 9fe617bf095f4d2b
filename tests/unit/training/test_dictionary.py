"""Dictionary readers, merging, subsets and statistics for DefSent+ (hand-checked toy data, plus
the shared Oxford splits counted independently and WordNet glosses checked against the paper)."""

from __future__ import annotations

import statistics as stats

import pytest

from benchharness.training.methods.defsent_plus.dictionary import (
    Dictionary,
    format_statistics,
    load_sources,
    merge,
    normalize_entry,
    read_entry_definition_file,
    read_oxford,
    read_wordnet,
    statistics,
    subsample,
)
from tests.helpers import DATA, needs_data, nltk_wordnet


def test_normalize_entry():
    assert normalize_entry("  Ice_Cream ") == "ice cream"
    assert normalize_entry("New   York") == "new york"


def test_from_pairs_groups_entries_and_drops_repeated_definitions():
    d = Dictionary.from_pairs(
        [
            ("Bank", "a financial institution"),
            ("bank", "sloping land beside water"),
            ("bank", "a  financial institution"),
            ("river_bank", "the bank of a river"),
            ("empty", "  "),
        ],
        source="toy",
    )
    assert d.entries == ["bank", "river bank"]
    assert d.definitions == [["a financial institution", "sloping land beside water"], ["the bank of a river"]]
    texts, labels = d.pairs()
    assert texts == ["a financial institution", "sloping land beside water", "the bank of a river"]
    assert labels == [0, 0, 1]


def test_merge_combines_duplicate_entries_across_sources():
    a = Dictionary.from_pairs([("cat", "a small feline"), ("dog", "a domestic canine")], "a")
    b = Dictionary.from_pairs([("Cat", "a small feline"), ("Cat", "a spiteful woman"), ("emu", "a large bird")], "b")
    m = merge(a, b)
    assert m.entries == ["cat", "dog", "emu"]
    assert m.definitions == [["a small feline", "a spiteful woman"], ["a domestic canine"], ["a large bird"]]
    assert m.sources == ["a", "b"]
    assert (len(m), m.n_definitions) == (3, 4)


def test_readers_and_errors(tmp_path):
    ox = tmp_path / "valid.txt"
    ox.write_text(
        "fiver\tshe slipped him a fiver .\ta five-dollar bill .\n"
        "cement\tthe cement set .\ta binding powder\ncement\tmore cement .\ta binding powder\n\n"
    )
    d = read_oxford(ox)
    assert d.entries == ["fiver", "cement"] and d.definitions == [["a five-dollar bill ."], ["a binding powder"]]
    user = tmp_path / "mine.tsv"
    user.write_text("apple\ta fruit\napple\ta tech company\n")
    assert read_entry_definition_file(user).definitions == [["a fruit", "a tech company"]]
    bad = tmp_path / "bad.txt"
    bad.write_text("word\texample\tdefinition\nbroken line without tabs\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected 3"):
        read_oxford(bad)
    with pytest.raises(FileNotFoundError, match=r"train\.txt is missing"):
        load_sources(["oxford-train"], tmp_path)
    with pytest.raises(ValueError, match="unknown dictionary source"):
        load_sources(["webster"], tmp_path)


def test_subsample_is_deterministic_and_filters():
    d = Dictionary.from_pairs(
        [(f"w{i}", f"def {j} of w{i}") for i in range(50) for j in range(i % 3 + 1)]
        + [("two words", "a phrase"), ("two words", "another")],
        "toy",
    )
    multi = subsample(d, min_definitions=2)
    assert all(len(defs) >= 2 for defs in multi.definitions)
    assert len(multi) == sum(1 for i in range(50) if i % 3 >= 1) + 1
    assert "two words" not in subsample(d, min_definitions=2, single_word=True).entries
    s1, s2 = subsample(d, max_entries=10, seed=7), subsample(d, max_entries=10, seed=7)
    assert s1.entries == s2.entries and len(s1) == 10
    assert [d.entries.index(e) for e in s1.entries] == sorted(d.entries.index(e) for e in s1.entries)
    assert subsample(d) is d


def test_statistics_by_hand():
    d = Dictionary.from_pairs(
        [("a", "one two three"), ("a", "one"), ("b", "one two three four five"), ("c", "one two")], "toy"
    )
    s = statistics(d, lambda texts: [len(t.split()) for t in texts])
    assert s == {"entries": 3, "definitions": 4, "max_tokens": 5, "median_tokens": 2.5}
    table = format_statistics({"toy": s})
    assert "5 (2.5)" in table and "| toy" in table


@needs_data("oxford/valid.txt", "oxford/test.txt")
def test_shared_oxford_splits_counted_independently():
    pairs, words = set(), set()
    for split in ("valid", "test"):
        for line in (DATA / "oxford" / f"{split}.txt").read_text(encoding="utf-8").splitlines():
            word, _, definition = line.split("\t")
            pairs.add((word.lower(), " ".join(definition.split())))
            words.add(word.lower())
    d = load_sources(["oxford-valid", "oxford-test"], DATA)
    assert (len(d), d.n_definitions) == (len(words), len(pairs))
    assert len(read_oxford(DATA / "oxford" / "valid.txt").entries) == len(
        {w.split("\t")[0] for w in (DATA / "oxford" / "valid.txt").read_text(encoding="utf-8").splitlines()}
    )


@needs_data("nltk_data/corpora/wordnet")
def test_wordnet_glosses_match_the_paper_example(training_corpora, monkeypatch):
    d = read_wordnet(training_corpora.root / "nltk_data")
    # the paper's section 3.1 example gloss "give new life or vigor to" is WordNet's revitalize.v.02;
    # the lemma also belongs to regenerate.v.09 ("restore strength")
    defs = d.definitions[d.entries.index("revitalize")]
    assert sorted(defs) == ["give new life or vigor to", "restore strength"]
    assert d.sources == ["wordnet-3.0"]
    # every lemma is an entry: compare with NLTK's own lemma index (a different file set)
    reader = nltk_wordnet(monkeypatch)
    assert len(d) == len({normalize_entry(n) for n in reader.all_lemma_names()})
    lengths = [len(t.split()) for t in d.pairs()[0]]
    assert stats.median(lengths) > 3
