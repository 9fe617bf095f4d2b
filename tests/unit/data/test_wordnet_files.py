"""WordNet's data files read directly: hand-written lines with their lemma names and definitions
worked out by hand, the folder and the zip ``nltk.download`` may leave, a corrupt line named by
file and line, and a sample of the real synsets against NLTK's own reader."""

from __future__ import annotations

import zipfile

import pytest

from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.data.wordnet import DATA_FILES, WordNetFiles, definition, lemma_names
from tests.helpers import DATA, needs_data, nltk_wordnet

HEADER = (
    "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    "  2 WordNet 3.0 Copyright 2006 by Princeton University.  All rights reserved.  \n"
)
ABLE = (
    "00001740 00 a 01 able 0 005 = 05200169 n 0000 ! 00002098 a 0101 | (usually followed by `to') having the "
    'necessary means or skill; "able to swim"; "she was able to program her computer"  \n'
)
ABOUNDING = (
    '00014358 00 s 02 abounding 0 galore(ip) 0 001 & 00013887 a 0000 | existing in abundance; "whiskey galore"  \n'
)
ENTITY = (
    "00001740 03 n 01 entity 0 001 ~ 00001930 n 0000 | that which is perceived or known or inferred to have its "
    "own distinct existence  \n"
)
RUN_UP = '00001234 30 v 02 run_up 0 build_up 1 000 01 + 08 00 | make bigger; "run up a bill"  \n'
FILES = {
    "data.adj": HEADER + ABLE + ABOUNDING,
    "data.adv": HEADER,
    "data.noun": HEADER + ENTITY,
    "data.verb": HEADER + RUN_UP,
}
#: worked out by hand: adjectives (a satellite among them), adverbs, nouns, verbs, in that order
EXPECTED = [
    (("able",), "(usually followed by `to') having the necessary means or skill"),
    (("abounding", "galore"), "existing in abundance"),
    (("entity",), "that which is perceived or known or inferred to have its own distinct existence"),
    (("run_up", "build_up"), "make bigger"),
]


def write_folder(nltk_dir, files=FILES):
    folder = nltk_dir / "corpora" / "wordnet"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return nltk_dir


def test_a_lines_lemma_names_drop_their_markers_and_its_definition_its_examples():
    assert lemma_names(ABOUNDING) == ("abounding", "galore")
    assert definition(ABOUNDING) == "existing in abundance"
    assert lemma_names(RUN_UP) == ("run_up", "build_up")  # lex ids skipped, the verb frame ignored


def test_synsets_come_in_nltks_file_order_from_a_folder_or_its_zip(tmp_path):
    folder = write_folder(tmp_path / "plain")
    assert list(WordNetFiles(folder).synsets()) == EXPECTED
    assert WordNetFiles(folder).version() == "3.0"
    zipped = tmp_path / "zipped" / "corpora"
    zipped.mkdir(parents=True)
    with zipfile.ZipFile(zipped / "wordnet.zip", "w") as archive:
        for name, text in FILES.items():
            archive.writestr(f"wordnet/{name}", text)
    assert list(WordNetFiles(zipped.parent).synsets()) == EXPECTED


def test_a_corrupt_line_is_named_by_file_and_line(tmp_path):
    broken = dict(FILES, **{"data.noun": HEADER + ENTITY + "00001930 03 n 03 physical_entity 0 | no gloss\n"})
    with pytest.raises(InvalidInputError, match=r"corpora/wordnet/data\.noun:4: not a WordNet data line \("):
        list(WordNetFiles(write_folder(tmp_path, broken)).synsets())


def test_no_wordnet_says_how_to_get_it(tmp_path):
    with pytest.raises(MissingFileError, match=r"no WordNet under .*corpora; get it with `benchharness data download"):
        WordNetFiles(tmp_path)


@needs_data("nltk_data/corpora/wordnet")
def test_a_sample_of_real_synsets_is_what_nltks_reader_gives(monkeypatch):
    """Every 150th synset of each file, against NLTK's ``synset_from_pos_and_offset`` (lemma names
    and definition); the whole of WordNet is compared by ``benchmarks/wordnet_reader.py``."""
    reader = nltk_wordnet(monkeypatch)
    files = WordNetFiles(DATA / "nltk_data")
    checked = 0
    for name in DATA_FILES:
        lines = [line for _, line in files.lines(name) if not line[:1].isspace()]
        for line in lines[::150]:
            synset = reader.synset_from_pos_and_offset(line.split()[2], int(line.split()[0]))
            assert (lemma_names(line), definition(line)) == (tuple(synset.lemma_names()), synset.definition())
            checked += 1
    assert checked > 700
