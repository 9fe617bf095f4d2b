"""WordNet's data files, read as NLTK's reader reads them: each synset's lemma names and gloss.

DefSent+ trains on every (lemma, definition) pair of WordNet, and PaSeR's EDA replaces words by the
lemma names of their synsets. NLTK builds a full synset object for each line it reads (pointers,
verb frames, sense keys, and for an adjective satellite the synset it is similar to), which made
reading all 117,659 synsets take about 20 s on a 2-core AVX2 machine; these two fields, parsed from
the same lines in NLTK's order, take about a second. ``benchmarks/wordnet_reader.py`` checks every
pair against NLTK's and times both; a unit test compares a sample of synsets with NLTK's.

The files come from an NLTK data folder (``corpora/wordnet/`` or, as ``nltk.download`` may leave
it, ``corpora/wordnet.zip``); nothing is downloaded here.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchharness.core.errors import InvalidInputError, MissingFileError

#: the data files in the order NLTK's ``all_synsets()`` reads them (its reader's ``_FILEMAP``):
#: adjectives (satellites included), adverbs, nouns, verbs
DATA_FILES = ("data.adj", "data.adv", "data.noun", "data.verb")
#: a lemma's optional syntactic marker, which NLTK strips (``galore(ip)`` -> ``galore``)
_MARKER = re.compile(r"(.*?)(\([^()]*\))?$")
#: a quoted example inside a gloss: NLTK's definition is the gloss without them
_QUOTED = re.compile(r"[\"].*?[\"]")
#: the licence header's copyright line, which NLTK's ``get_version`` reads the version from
_VERSION = re.compile(r"Word[nN]et (\d+|\d+\.\d+) Copyright")


def lemma_names(line: str) -> tuple[str, ...]:
    """A data line's lemma names, markers stripped, in order (NLTK's ``Synset.lemma_names()``):
    the fourth field counts them (hexadecimal), each followed by its lex id."""
    fields = line.split("|", 1)[0].split()
    count = int(fields[3], 16)
    names = fields[4 : 4 + 2 * count : 2]
    if len(names) != count:
        raise ValueError(f"{count} lemmas announced, {len(names)} present")
    return tuple(_MARKER.match(name).group(1) for name in names)  # type: ignore[union-attr]


def definition(line: str) -> str:
    """A data line's definition (NLTK's ``Synset.definition()``): the gloss after ``|`` without
    its quoted examples, stripped of spaces and of the ``;`` that separated them."""
    _, gloss = line.strip().split("|")
    return _QUOTED.sub("", gloss).strip().strip("; ")


class WordNetFiles:
    """The WordNet data files of an NLTK data folder, from its ``corpora/wordnet`` folder or zip."""

    def __init__(self, nltk_dir: str | Path) -> None:
        corpora = Path(nltk_dir) / "corpora"
        self.folder, self.zip = corpora / "wordnet", corpora / "wordnet.zip"
        if not self.folder.is_dir() and not self.zip.is_file():
            raise MissingFileError(
                f"no WordNet under {corpora}; get it with `benchharness data download nltk` "
                "(nltk.download('wordnet')) or point --data-dir at a data root holding nltk_data/"
            )

    def where(self, name: str) -> str:
        """How a file is named in messages: its path, or the zip's path and its member."""
        return str(self.folder / name) if self.folder.is_dir() else f"{self.zip}:wordnet/{name}"

    def read_bytes(self, name: str) -> bytes:
        if self.folder.is_dir():
            return (self.folder / name).read_bytes()
        with zipfile.ZipFile(self.zip) as archive:
            return archive.read(f"wordnet/{name}")

    def lines(self, name: str) -> Iterator[tuple[int, str]]:
        """A file's lines with their numbers (from 1), decoded as NLTK decodes them (UTF-8)."""
        text = io.StringIO(self.read_bytes(name).decode("utf-8"), newline=None)
        yield from enumerate(text, 1)

    def version(self) -> str:
        """The WordNet version its licence header names (``3.0`` for NLTK's ``wordnet``)."""
        for _, line in self.lines(DATA_FILES[0]):
            if not line[:1].isspace():
                break
            if match := _VERSION.search(line):
                return match.group(1)
        raise InvalidInputError(f"{self.where(DATA_FILES[0])}: no 'WordNet <version> Copyright' line in its header")

    def synsets(self, names: Sequence[str] = DATA_FILES) -> Iterator[tuple[tuple[str, ...], str]]:
        """Every synset's lemma names and definition, in NLTK's ``all_synsets()`` order (the licence
        header, whose lines start with spaces, skipped as NLTK skips it); ``names``: some of the
        data files only, in NLTK's order (``data.adv`` is its ``all_synsets("r")``)."""
        for name in names:
            for lineno, line in self.lines(name):
                if line[:1].isspace():
                    continue
                try:
                    yield lemma_names(line), definition(line)
                except (ValueError, IndexError) as exc:
                    raise InvalidInputError(
                        f"{self.where(name)}:{lineno}: not a WordNet data line ({exc}): {line[:80]!r}"
                    ) from None
