"""Missing and corrupt data give actionable errors; GloVe files are read strictly."""

import gzip

import numpy as np
import pytest

from benchharness import tasks
from benchharness.core.data_root import CHECKSUMS, DataError, DataRoot, file_sha256
from benchharness.encoders.glove import WordVectorAverage, read_word_vectors


def test_missing_file_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as err:
        tasks.get("STS12").load(DataRoot(tmp_path))
    msg = str(err.value)
    assert "STS.input.MSRpar.txt" in msg and "benchharness data download senteval" in msg


def test_shared_files_match_pinned_checksums(data_dir):
    for rel in ("senteval/STS/STSBenchmark/sts-test.csv", "senteval/SICK/SICK_test_annotated.txt"):
        assert file_sha256(data_dir / rel) == CHECKSUMS[rel]


def test_corrupt_file_is_named(tmp_path, data_dir):
    rel = "senteval/SICK/SICK_test_annotated.txt"
    (tmp_path / rel).parent.mkdir(parents=True)
    text = (data_dir / rel).read_text(encoding="utf8").replace("3.3", "4.3", 1)
    (tmp_path / rel).write_text(text, encoding="utf8")
    with pytest.raises(DataError, match=r"corrupt or modified data file .*SICK_test_annotated\.txt"):
        tasks.get("SICKRelatedness").load(DataRoot(tmp_path))


def test_glove_reader_plain_and_gz_and_bad_line(tmp_path):
    plain = tmp_path / "v.txt"
    plain.write_text("cat 1 0\ndog 0 1\ncat 5 5\n")
    vocab, vecs = read_word_vectors(plain)
    assert vocab == {"cat": 0, "dog": 1}  # first occurrence wins
    np.testing.assert_array_equal(vecs[[vocab["cat"], vocab["dog"]]], [[1, 0], [0, 1]])  # the first cat's vector
    gz = tmp_path / "v.txt.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("cat 1 0\ndog 0 1\n")
    enc = WordVectorAverage("g", gz)
    got = enc.encode(["Cat dog", "unknown words", "dog"])
    np.testing.assert_allclose(got, [[0.5, 0.5], [0, 0], [0, 1]])
    bad = tmp_path / "bad.txt"
    bad.write_text("cat 1 0\ndog 0 x\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2"):
        read_word_vectors(bad)
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("cat 1 0\ndog 0 1 2\n")
    with pytest.raises(ValueError, match=r"ragged\.txt:2: 3 values, expected 2"):
        read_word_vectors(ragged)


def test_a_download_is_saved_whole_or_not_at_all(tmp_path, monkeypatch):
    import io
    import urllib.request

    from benchharness.core.data_root import fetch

    class Cut(io.BytesIO):
        def read(self, size=-1):
            if self.tell() >= 3:
                raise TimeoutError("connection lost")
            return super().read(min(size, 3))

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: Cut(b"abcdef"))
    with pytest.raises(OSError, match=r"connection lost.*f\.tsv"):  # named by the file the user asked for
        fetch("https://example.org/f.tsv", tmp_path / "f.tsv")
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary sibling
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"abcdef"))
    assert fetch("https://example.org/f.tsv", tmp_path / "f.tsv").read_bytes() == b"abcdef"
