"""EDA augmentations (Wei & Zou 2019) that PaSeR applies before duplicating and masking.

Three operations on whitespace words, each with its ratio ``alpha``:

- synonym replacement (``sr``): ``n = max(1, int(alpha * len(words)))`` distinct non-stopwords
  that have a WordNet synonym are replaced (every occurrence) by a random synonym; multi-word
  synonyms become several words. PaSeR's official data uses sr with alpha 0.5, its best setting.
- random deletion (``rd``): each word is dropped with probability ``alpha``; if none is left, one
  random word of the sentence is kept.
- random swap (``rs``): ``n = max(1, int(alpha * len(words)))`` times, two random positions swap.

Differences from the EDA reference code, deliberate: it first strips every character that is not
a lowercase ASCII letter (digits and punctuation vanish); here words are kept as they are, since
the STS corpus is already tokenized and lowercased and the masking step needs the text intact.
EDA collects synonyms in a Python ``set`` (an order that depends on the interpreter's hash seed);
here they are kept in WordNet order so a seed reproduces the same augmentation. Synonyms are
cleaned as EDA does: ``_`` and ``-`` become spaces, lowercase, only letters and spaces kept.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from benchharness.core.errors import InvalidInputError
from benchharness.data.wordnet import lemma_names
from benchharness.training.methods.paser.rake import english_stopwords, nltk_data_dir

AUGMENTATIONS = ("none", "sr", "rd", "rs")
_LETTERS = set("abcdefghijklmnopqrstuvwxyz ")


@lru_cache(maxsize=4)
def _wordnet(data_root: str | None = None):
    """NLTK's WordNet reader over the shared NLTK data folder (no download)."""
    nltk_data_dir(Path(data_root) if data_root else None)
    from nltk.corpus import wordnet

    try:
        wordnet.ensure_loaded()
    except LookupError as exc:
        from benchharness.core.data_root import DataError

        raise DataError(
            f"WordNet not found in the NLTK data folder ({exc.__class__.__name__}); `benchharness data download nltk`"
        ) from None
    return wordnet


@lru_cache(maxsize=65536)
def synonyms(word: str, data_root: str | None = None) -> tuple[str, ...]:
    """WordNet synonyms of ``word`` (all synsets, all lemmas), cleaned as EDA does, word excluded.

    The synsets are NLTK's ``wordnet.synsets(word)``, in its order (its morphology and lemma index);
    only their lemma names are read, straight from the data files (``_lemma_names``), since building
    NLTK's full synset objects (pointers, frames, gloss) was most of a PaSeR batch's collation."""
    reader = _wordnet(data_root)
    lemma, index = word.lower(), reader._lemma_pos_offset_map
    out: dict[str, None] = {}
    for pos in _POS_ORDER:
        for form in reader._morphy(lemma, pos, True):
            for offset in index[form].get(pos, []):
                for raw in _lemma_names(data_root, pos, offset):
                    name = raw.replace("_", " ").replace("-", " ").lower()
                    name = "".join(ch for ch in name if ch in _LETTERS).strip()
                    if name and name != word:
                        out[name] = None
    return tuple(out)


#: the parts of speech ``wordnet.synsets`` walks, in its order (nltk's POS_LIST), and their data files
_POS_ORDER = ("n", "v", "a", "r")
_DATA_FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "s": "data.adj", "r": "data.adv"}


@lru_cache(maxsize=8)
def _data_file(data_root: str | None, pos: str) -> bytes:
    """A WordNet data file, whole (the four are about 30 MB; a synset is a line at its byte offset)."""
    with _wordnet(data_root).root.join(_DATA_FILES[pos]).open() as fh:
        return bytes(fh.read())


@lru_cache(maxsize=262144)
def _lemma_names(data_root: str | None, pos: str, offset: int) -> tuple[str, ...]:
    """The lemma names of the synset at ``offset`` (``data.wordnet.lemma_names``), NLTK's
    ``Synset.lemma_names()`` in its order."""
    data = _data_file(data_root, pos)
    line = data[offset : data.index(b"\n", offset)].decode("utf-8")
    if line.split(None, 1)[0] != f"{offset:08d}":  # NLTK warns and yields no synset for a bad offset
        return ()
    return lemma_names(line)


def synonym_replacement(
    words: list[str],
    alpha: float,
    rng: random.Random,
    stopwords: frozenset[str],
    lookup: Callable[[str], tuple[str, ...]] = synonyms,
) -> list[str]:
    """Replace up to ``max(1, int(alpha * len(words)))`` distinct non-stopwords by a WordNet synonym."""
    if not words or alpha <= 0:
        return list(words)
    n = max(1, int(alpha * len(words)))
    candidates = list(dict.fromkeys(w for w in words if w.lower() not in stopwords))
    rng.shuffle(candidates)
    new = list(words)
    replaced = 0
    for word in candidates:
        options = lookup(word.lower())
        if not options:
            continue
        choice = rng.choice(options)
        new = [choice if w == word else w for w in new]
        replaced += 1
        if replaced >= n:
            break
    return " ".join(new).split()


def random_deletion(words: list[str], p: float, rng: random.Random) -> list[str]:
    """Drop each word with probability ``p``; never return an empty sentence."""
    if len(words) <= 1 or p <= 0:
        return list(words)
    kept = [w for w in words if rng.random() > p]
    return kept if kept else [words[rng.randrange(len(words))]]


def random_swap(words: list[str], alpha: float, rng: random.Random) -> list[str]:
    """Swap two distinct random positions ``max(1, int(alpha * len(words)))`` times."""
    new = list(words)
    if len(new) < 2 or alpha <= 0:
        return new
    for _ in range(max(1, int(alpha * len(new)))):
        i, j = rng.sample(range(len(new)), 2)
        new[i], new[j] = new[j], new[i]
    return new


class Augmenter:
    """One EDA operation with its ratio, applied to a sentence with a caller-supplied RNG."""

    def __init__(self, kind: str = "sr", alpha: float = 0.5, data_root: str | None = None) -> None:
        if kind not in AUGMENTATIONS:
            raise InvalidInputError(f"unknown augmentation {kind!r}; choose one of {', '.join(AUGMENTATIONS)}")
        self.kind = kind
        self.alpha = float(alpha)
        self.data_root = data_root
        if kind == "sr":
            self.stopwords = english_stopwords(data_root)
            _wordnet(data_root)  # fail now, not in the middle of training, if WordNet is missing

    def __call__(self, sentence: str, rng: random.Random) -> str:
        words = sentence.split()
        if self.kind == "sr":
            words = synonym_replacement(words, self.alpha, rng, self.stopwords, lambda w: synonyms(w, self.data_root))
        elif self.kind == "rd":
            words = random_deletion(words, self.alpha, rng)
        elif self.kind == "rs":
            words = random_swap(words, self.alpha, rng)
        return " ".join(words)
