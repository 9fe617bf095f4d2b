"""Average of static word vectors (GloVe and any file in the GloVe text format): the ``glove``
family, ``glove:<path>``; the file name ``glove-50d`` stands for GloVe 6B 50d under the data root."""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.digests import remembered, sha256_file
from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.specs import BuildContext, Family, Params
from benchharness.data.readers import undecodable_message

#: word2vec's text format starts with ``<count> <dim>``
WORD2VEC_HEADER = re.compile(r"[0-9]+ [0-9]+")


def read_word_vectors(path: Path) -> tuple[dict[str, int], np.ndarray]:
    """Read ``word v1 ... vd`` lines (plain or .gz) into a vocabulary and a float32 matrix.

    word2vec's text format is this one after a ``<count> <dim>`` header line: a first line of
    exactly two integers is read as that header (a GloVe line has a word and at least one value,
    and no one averages 1-d vectors) and the body is checked against it, every line holding
    ``dim`` values and ``count`` lines in all.

    A malformed line, undecodable text or a damaged compressed stream raises ValueError with the
    file and line number, since a truncated download is the usual cause.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    vocab: dict[str, int] = {}
    rows: list[np.ndarray] = []
    dim = None
    header: tuple[int, int] | None = None
    lines = 0  # vector lines read
    lineno = 0
    with opener(path, "rt", encoding="utf8") as fh:
        try:
            for lineno, line in enumerate(fh, 1):
                if lineno == 1 and WORD2VEC_HEADER.fullmatch(line.strip()):
                    header = (int(line.split()[0]), int(line.split()[1]))
                    dim = header[1]
                    continue
                lines += 1
                word, _, rest = line.rstrip().partition(" ")  # word2vec's C tool ends lines with a space
                try:
                    vec = np.array(rest.split(" "), dtype=np.float32)
                except ValueError:
                    raise InvalidInputError(f"{path}:{lineno}: not a 'word v1 ... vd' line") from None
                if dim is None:
                    dim = vec.shape[0]
                elif vec.shape[0] != dim:
                    said = "" if header is None else " (the word2vec header on line 1 says so)"
                    raise InvalidInputError(f"{path}:{lineno}: {vec.shape[0]} values, expected {dim}{said}")
                if word not in vocab:  # first occurrence wins, as in SentEval's loader
                    vocab[word] = len(rows)
                    rows.append(vec)
        except UnicodeDecodeError as exc:
            with opener(path, "rt", encoding="utf8", errors="surrogateescape") as again:
                raise InvalidInputError(undecodable_message(path, again, exc)) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InvalidInputError(f"{path}:{lineno + 1}: damaged or truncated compressed file ({exc})") from None
    if not rows:
        raise InvalidInputError(f"{path}:1: no word vectors")
    if header is not None and lines != header[0]:
        raise InvalidInputError(
            f"{path}:{lineno}: {lines} vectors, but the word2vec header on line 1 says "
            f"{header[0]}; the file is truncated or its header is wrong"
        )
    return vocab, np.stack(rows)


@lru_cache(maxsize=2)
def _read_once(path: str, size: int, mtime_ns: int) -> tuple[dict[str, int], np.ndarray]:
    """``read_word_vectors`` once per file and process while the file is unchanged (its size and
    mtime): parsing the text is most of a GloVe evaluation (1.8 of 2.2 s on SICKRelatedness-trial),
    and a notebook or a test session evaluates the same file again and again. The matrix is shared,
    so it is read-only."""
    vocab, vectors = read_word_vectors(Path(path))
    vectors.setflags(write=False)
    return vocab, vectors


class WordVectorAverage(Encoder):
    """Mean of the vectors of the whitespace tokens found in the vocabulary.

    Like SentEval's bag-of-words baseline, out-of-vocabulary tokens are skipped and a sentence with
    none found gets the zero vector (its cosine then counts as 0). GloVe 6B is an uncased
    vocabulary, so tokens are lowercased by default; that choice is part of the identity.
    """

    def __init__(self, name: str, path: str | Path, lowercase: bool = True) -> None:
        super().__init__(name)
        self.path = Path(path)
        self.lowercase = bool(lowercase)
        self._vocab: dict[str, int] | None = None
        self._vectors: np.ndarray | None = None

    def _load(self) -> None:
        if self._vectors is None:
            if not self.path.exists():
                raise MissingFileError(
                    f"word vectors not found: {self.path}. GloVe files: https://nlp.stanford.edu/projects/glove/"
                )
            stat = self.path.stat()
            self._vocab, self._vectors = _read_once(str(self.path.resolve()), stat.st_size, stat.st_mtime_ns)

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        self._load()
        assert self._vocab is not None and self._vectors is not None
        out = np.zeros((len(sentences), self._vectors.shape[1]), dtype=np.float32)
        for i, sentence in enumerate(sentences):
            text = sentence.lower() if self.lowercase else sentence
            ids = [self._vocab[w] for w in text.split() if w in self._vocab]
            if ids:
                out[i] = self._vectors[ids].mean(axis=0)
        return out

    def identity_info(self) -> dict[str, Any]:
        # the file's sha256, remembered across runs while the file is unchanged (benchharness.core.digests)
        digest = remembered("sha256", [self.path], lambda: sha256_file(self.path)) if self.path.exists() else None
        return {"family": "word-vector-average", "file": self.path.name, "sha256": digest, "lowercase": self.lowercase}

    @property
    def metadata(self) -> dict[str, Any]:
        return {**super().metadata, "pooling": "mean of word vectors", "base_model": self.path.name}


def glove_file(data_dir: Path) -> Path:
    """The full GloVe 6B 50d file when the user has it, else the shared subset."""
    for rel in ("glove/glove.6B.50d.txt", "glove/glove.6B.50d.txt.gz", "glove/glove.6B.50d.subset.txt.gz"):
        if (data_dir / rel).exists():
            return data_dir / rel
    return data_dir / "glove/glove.6B.50d.subset.txt.gz"


def build(name: str, spec: Params, context: BuildContext) -> WordVectorAverage:
    params = dict(spec)
    path = params.pop("file")
    if path == "glove-50d":
        path = glove_file(context.data_root)
    return WordVectorAverage(name, path, **params)


FAMILY = Family.of("glove", build, target="file", accepts=("lowercase",), from_manifest=True)
