"""Dictionaries for DefSent+: entries with their definition sentences.

DefSent+ (Liu, 2024; ``../shared/papers/defsent-plus.txt`` section 3.3) trains on every entry of a
dictionary, multi-word ones included, so the readers keep every entry. Three sources:

* WordNet (the data files NLTK reads): an entry is a lemma name (``_`` read as a space), its definitions are the
  glosses of the synsets it belongs to;
* the Oxford splits of Ishiwatari et al. (2019), ``word \\t example \\t definition`` per line (the
  example sentence is not a definition and is dropped);
* any ``entry \\t definition`` file a user supplies.

Entries are keyed case-insensitively (``normalize_entry``): the Oxford data is lowercased, and the
paper's Table 1 combines "duplicate entries from different resources" into one. Merging combines
duplicate entries and removes duplicate definitions within an entry, as the paper's Table 1 says.
"""

from __future__ import annotations

import random
import re
import statistics as stats
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.data.readers import undecodable_message
from benchharness.data.wordnet import WordNetFiles


def normalize_entry(entry: str) -> str:
    """The key under which entries of different sources are combined: lowercased, ``_`` read as a
    space (WordNet writes ``ice_cream``), runs of whitespace collapsed."""
    return re.sub(r"\s+", " ", entry.replace("_", " ")).strip().lower()


@dataclass
class Dictionary:
    """Entries in first-seen order, each with its de-duplicated definitions.

    ``sources`` names what was read (for manifests and statistics tables).
    """

    entries: list[str] = field(default_factory=list)
    definitions: list[list[str]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]], source: str) -> Dictionary:
        """Group ``(entry, definition)`` pairs by normalised entry, dropping repeated definitions."""
        index: dict[str, int] = {}
        seen: list[set[str]] = []
        out = cls(sources=[source])
        for entry, definition in pairs:
            key = normalize_entry(entry)
            definition = " ".join(definition.split())
            if not key or not definition:
                continue
            if key not in index:
                index[key] = len(out.entries)
                out.entries.append(key)
                out.definitions.append([])
                seen.append(set())
            i = index[key]
            if definition not in seen[i]:
                seen[i].add(definition)
                out.definitions[i].append(definition)
        return out

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def n_definitions(self) -> int:
        return sum(len(d) for d in self.definitions)

    def pairs(self) -> tuple[list[str], list[int]]:
        """Every definition with the index of its entry: the classification training set."""
        texts = [d for defs in self.definitions for d in defs]
        labels = [i for i, defs in enumerate(self.definitions) for _ in defs]
        return texts, labels

    def select(self, keep: Sequence[int], note: str) -> Dictionary:
        """The sub-dictionary of the entries at ``keep`` (in that order); ``note`` says why."""
        return Dictionary(
            [self.entries[i] for i in keep], [list(self.definitions[i]) for i in keep], [*self.sources, note]
        )


def merge(*dictionaries: Dictionary) -> Dictionary:
    """One dictionary: duplicate entries combined, duplicate definitions of an entry removed."""
    pairs = ((e, d) for dic in dictionaries for e, defs in zip(dic.entries, dic.definitions) for d in defs)
    merged = Dictionary.from_pairs(pairs, source="")
    merged.sources = [s for dic in dictionaries for s in dic.sources]
    return merged


def read_wordnet(nltk_dir: str | Path) -> Dictionary:
    """WordNet lemmas and their synsets' glosses, read from an NLTK data dir (never downloaded):
    the pairs NLTK's ``all_synsets()`` gives, straight from the data files (``data.wordnet``)."""
    files = WordNetFiles(nltk_dir)
    pairs = ((lemma, gloss) for lemmas, gloss in files.synsets() for lemma in lemmas)
    return Dictionary.from_pairs(pairs, source=f"wordnet-{files.version()}")


def _read_tsv(
    path: Path, n_fields: int, pick: Callable[[list[str]], tuple[str, str]], layout: str
) -> list[tuple[str, str]]:
    pairs = []
    with open(path, encoding="utf-8") as fh:
        try:
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\n").rstrip("\r")
                if not line.strip():
                    continue
                fields = line.split("\t")
                if len(fields) != n_fields:
                    raise InvalidInputError(
                        f"{path}:{lineno}: expected {n_fields} tab-separated fields ({layout}), "
                        f"found {len(fields)}: {line[:80]!r}"
                    )
                pairs.append(pick(fields))
        except UnicodeDecodeError as exc:
            with open(path, encoding="utf-8", errors="surrogateescape") as again:
                raise InvalidInputError(undecodable_message(path, again, exc)) from None
    return pairs


def read_oxford(path: str | Path) -> Dictionary:
    """One Oxford split of Ishiwatari et al. (2019): ``word \\t example \\t definition`` lines."""
    path = Path(path)
    pairs = _read_tsv(path, 3, lambda f: (f[0], f[2]), "word, example, definition")
    return Dictionary.from_pairs(pairs, source=f"oxford:{path.name}")


def read_entry_definition_file(path: str | Path) -> Dictionary:
    """A user dictionary: ``entry \\t definition`` lines (an entry may repeat, one definition a line)."""
    path = Path(path)
    pairs = _read_tsv(path, 2, lambda f: (f[0], f[1]), "entry, definition")
    return Dictionary.from_pairs(pairs, source=f"file:{path.name}")


def read_source(spec: str, data_root: Path) -> Dictionary:
    """One dictionary source: ``wordnet``, ``oxford-train``/``-valid``/``-test`` (the data root's
    ``oxford/<split>.txt``; train is not shipped with the shared data) or a path to an
    ``entry \t definition`` file."""
    if spec == "wordnet":
        return read_wordnet(data_root / "nltk_data")
    if spec.startswith("oxford-"):
        split = spec.removeprefix("oxford-")
        if split not in ("train", "valid", "test"):
            raise InvalidInputError(f"unknown Oxford split {split!r}; use oxford-train, oxford-valid or oxford-test")
        path = data_root / "oxford" / f"{split}.txt"
        if not path.exists():
            raise MissingFileError(
                f"{path} is missing (the shared data holds only the valid and test splits of "
                "Ishiwatari et al. 2019); drop it from --dictionary or supply the file"
            )
        return read_oxford(path)
    if Path(spec).is_file():
        return read_entry_definition_file(spec)
    raise InvalidInputError(
        f"unknown dictionary source {spec!r}: use wordnet, oxford-valid, oxford-test, "
        "oxford-train or a path to an 'entry<TAB>definition' file"
    )


def load_sources(specs: Sequence[str], data_root: Path) -> Dictionary:
    """Read the named sources (see ``read_source``) and merge them into one dictionary."""
    parts = [read_source(spec, data_root) for spec in specs]
    return merge(*parts) if len(parts) > 1 else parts[0]


def subsample(
    dictionary: Dictionary,
    max_entries: int | None = None,
    min_definitions: int = 1,
    single_word: bool = False,
    seed: int = 42,
) -> Dictionary:
    """A deterministic subset: entries with at least ``min_definitions`` definitions (and a single
    word if asked), then, if more than ``max_entries`` remain, a seeded sample of them kept in their
    original order. Used when a full dictionary is too costly for the hardware at hand."""
    keep = [
        i
        for i, defs in enumerate(dictionary.definitions)
        if len(defs) >= min_definitions and (not single_word or " " not in dictionary.entries[i])
    ]
    notes = [f"min_definitions={min_definitions}"] + (["single_word"] if single_word else [])
    if max_entries is not None and len(keep) > max_entries:
        keep = sorted(random.Random(seed).sample(keep, max_entries))
        notes.append(f"sample {max_entries} entries (seed {seed})")
    if len(keep) == len(dictionary) and not single_word:
        return dictionary
    return dictionary.select(keep, "subset: " + ", ".join(notes))


def statistics(dictionary: Dictionary, count_tokens: Callable[[list[str]], list[int]]) -> dict[str, float | int]:
    """The paper's Table 1 columns: entries, definitions, max and median definition length in
    tokens (``count_tokens``: the model tokenizer's token counts, without special tokens, of a
    list of texts; batched because WordNet alone has 200k glosses)."""
    texts, _ = dictionary.pairs()
    lengths = list(count_tokens(texts))
    return {
        "entries": len(dictionary),
        "definitions": len(texts),
        "max_tokens": max(lengths, default=0),
        "median_tokens": stats.median(lengths) if lengths else 0,
    }


def format_statistics(rows: dict[str, dict[str, float | int]]) -> str:
    """A Table-1-like text table, one row per named dictionary."""
    from tabulate import tabulate

    return tabulate(
        [
            [name, r["definitions"], r["entries"], f"{r['max_tokens']} ({r['median_tokens']:g})"]
            for name, r in rows.items()
        ],
        headers=["dictionary", "definitions", "entries", "max (median) tokens"],
        tablefmt="github",
    )
