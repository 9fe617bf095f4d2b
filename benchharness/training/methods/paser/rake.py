"""RAKE keyphrase extraction (Rose et al. 2010) on a single sentence, as PaSeR uses it.

PaSeR treats each training sentence as the "document": the sentence is cut into candidate
phrases at stopwords and punctuation; a word's score is ``deg(w) / freq(w)``, where ``freq(w)``
counts the word's occurrences in candidate phrases and ``deg(w)`` is its degree in the
co-occurrence graph of those phrases (the summed length of every candidate phrase the word
occurs in, itself included, as in the RAKE paper and rake-nltk); a phrase scores the sum of its
words' scores. The top-k distinct phrases are the ones PaSeR masks and asks its decoder to
reconstruct.

Phrases carry the character spans of all their occurrences, so that the masking step can find
the subword tokens that cover them whatever the tokenizer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: words (letters/digits, with inner apostrophes or hyphens) or single punctuation characters
TOKEN = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


@dataclass(frozen=True)
class Phrase:
    """A candidate phrase: its lowercased words, RAKE score and every occurrence's character span."""

    words: tuple[str, ...]
    score: float
    spans: tuple[tuple[int, int], ...]  # (start, end) character offsets of each occurrence

    @property
    def text(self) -> str:
        return " ".join(self.words)


def nltk_data_dir(data_root: Path | None = None) -> Path:
    """The shared NLTK data folder (``<data root>/nltk_data``), made the first entry of
    ``nltk.data.path``; never downloads (these machines are offline)."""
    import nltk

    from benchharness.core.data_root import SOURCES, DataError, default_data

    folder = (Path(data_root) if data_root is not None else default_data().root) / "nltk_data"
    if not folder.is_dir():
        src = SOURCES["nltk"]
        raise DataError(
            f"NLTK data folder missing: {folder} (needs corpora/stopwords and corpora/wordnet); "
            f"get it with `benchharness data download nltk` ({src.url})"
        )
    if str(folder) not in nltk.data.path:
        nltk.data.path.insert(0, str(folder))
    return folder


@lru_cache(maxsize=4)
def english_stopwords(data_root: str | None = None) -> frozenset[str]:
    """NLTK's English stopword list (179 words), read from the shared NLTK data folder."""
    folder = nltk_data_dir(Path(data_root) if data_root else None)
    path = folder / "corpora" / "stopwords" / "english"
    if not path.exists():
        from benchharness.core.data_root import DataError

        raise DataError(
            f"{path} missing: the NLTK stopwords corpus is needed for RAKE (`benchharness data download nltk`)"
        )
    return frozenset(w.strip().lower() for w in path.read_text(encoding="utf8").splitlines() if w.strip())


def is_punctuation(token: str) -> bool:
    return not any(ch.isalnum() for ch in token)


def candidate_phrases(text: str, stopwords: frozenset[str]) -> list[list[tuple[str, int, int]]]:
    """Maximal runs of words that are neither stopwords nor punctuation: (word, start, end) lists."""
    phrases: list[list[tuple[str, int, int]]] = []
    current: list[tuple[str, int, int]] = []
    for m in TOKEN.finditer(text):
        word = m.group(0).lower()
        if is_punctuation(word) or word in stopwords:
            if current:
                phrases.append(current)
            current = []
        else:
            current.append((word, m.start(), m.end()))
    if current:
        phrases.append(current)
    return phrases


def rake(text: str, stopwords: frozenset[str], top_k: int | None = None) -> list[Phrase]:
    """Distinct candidate phrases of ``text`` by decreasing RAKE score (ties: first occurrence first)."""
    candidates = candidate_phrases(text, stopwords)
    freq: dict[str, int] = {}
    degree: dict[str, int] = {}
    for phrase in candidates:
        for word, _, _ in phrase:
            freq[word] = freq.get(word, 0) + 1
            degree[word] = degree.get(word, 0) + len(phrase)
    word_score = {w: degree[w] / freq[w] for w in freq}
    found: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for phrase in candidates:
        key = tuple(w for w, _, _ in phrase)
        found.setdefault(key, []).append((phrase[0][1], phrase[-1][2]))
    ranked = [Phrase(words, sum(word_score[w] for w in words), tuple(spans)) for words, spans in found.items()]
    # ``found`` keeps first-occurrence order and sorted() is stable: ties keep sentence order
    ranked = sorted(ranked, key=lambda p: -p.score)
    return ranked if top_k is None else ranked[:top_k]
