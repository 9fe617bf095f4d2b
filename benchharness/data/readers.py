"""Readers of the STS file formats, shared by the STS tasks and the unlabeled corpora.

One reader per format, so that a task and a corpus built from the same file see the same
sentences, in the same order, byte for byte (fitted post-processors record a digest of their
corpus; results record it):

- STS12-16 (SentEval's ``STS.input.<subset>.txt`` + ``STS.gs.<subset>.txt``): one tab-separated
  pair per input line, the gold score on the same line of the gold file; a pair whose gold line is
  empty is not scored (SentEval drops it) but is still a sentence pair of the input file;
- STS-B (SentEval's ``sts-<split>.csv``, tab-separated despite the name, no header; or the raw
  original under ``stsbenchmark/``): gold in column 4, sentences in columns 5 and 6;
- SICK (``SICK_<split>.txt``, a header line): sentences in columns 1 and 2, relatedness in 3;
- JSON lines (``json_lines``): the one reader of every JSON-lines format (BEIR corpora and
  queries, tasks declared from ``.jsonl`` files, ``vectors:`` files, NLI training data), with one
  set of rules.

Text is SentEval's: the line split on whitespace and re-joined with single spaces
(``senteval_text``), except where a caller asks for the raw text.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from benchharness.core.data_root import DataError
from benchharness.core.errors import UserError

#: STS12-16: SentEval's subset files of each year, in SentEval's order
STS_YEARS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
#: SICK split -> its file under the data root
SICK_FILES: dict[str, str] = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
#: (gold, sentence a, sentence b) columns
STSB_COLUMNS = (4, 5, 6)
SICK_COLUMNS = (3, 1, 2)

Pairs = tuple[list[str], list[str], list[float]]


def senteval_text(s: str) -> str:
    """SentEval splits on whitespace and the batcher re-joins with single spaces."""
    return " ".join(s.split())


def raw_text(s: str) -> str:
    """The original text, surrounding whitespace removed (the raw STS-B variant)."""
    return s.strip()


#: what ``errors="surrogateescape"`` turns an undecodable byte into
_ESCAPED = re.compile("[\udc80-\udcff]")


def undecodable_message(path: Path | str, lines: Iterable[str], exc: UnicodeDecodeError) -> str:
    """``<path>:<line>: ...`` for a file whose strict decoding raised ``exc``, shared by every
    reader whose errors must name the file and line.

    The decoder reports a byte offset within the block it was decoding, not a line (and a
    streaming reader may fail on a block ahead of its line), so the reader reads the file again
    with ``errors="surrogateescape"``, split into ``lines`` exactly as it splits it: every
    undecodable byte becomes a lone surrogate, which valid text never holds, and the first line
    holding one is the line to name.
    """
    lineno = 0
    try:
        for lineno, line in enumerate(lines, 1):  # noqa: B007 (read after the loop: the line it stopped at)
            if _ESCAPED.search(line):
                break
    except (EOFError, OSError, zlib.error):  # a compressed stream that also breaks off in that line
        lineno += 1
    byte = exc.object[exc.start : exc.start + 1]
    return (
        f"{path}:{max(lineno, 1)}: byte {byte!r} is not valid {exc.encoding} ({exc.reason}); "
        "the file is damaged or in another encoding"
    )


#: characters of a value read from a file that an error quotes: enough to find the line, too few to
#: show a file's content (a data file may be anything a symlink points at, secrets included)
EXCERPT_CHARS = 40
#: the longest line a streamed data file may hold (characters): a longer one is refused by line
#: number instead of filling memory (a corpus line of gigabytes is a broken file, not a document)
MAX_LINE_CHARS = 64 * 2**20
#: where the files are the machine's state, not data: a data file leading there is refused
SYSTEM_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


def excerpt(value: object) -> str:
    """A value read from a file, as an error quotes it: its ``repr`` (control characters escaped),
    cut to ``EXCERPT_CHARS`` characters."""
    text = repr(value)
    return text if len(text) <= EXCERPT_CHARS else f"{text[:EXCERPT_CHARS]}... ({len(text):,} characters)"


def check_data_file(path: Path, error: type[UserError] = DataError) -> None:
    """Refuse a data file that is not a regular file (a folder, a device, a pipe), or that is, or
    leads through symlinks to, a file of ``/proc``, ``/sys`` or ``/dev``. A symlink to data
    elsewhere is followed. A missing file is left to the reader, which names it."""
    real = Path(os.path.realpath(path))
    if any(real == root or root in real.parents for root in SYSTEM_ROOTS):
        raise error(f"{path}: leads to {real}, a file of the system, not data; give a data file")
    if real.exists() and not real.is_file():
        raise error(f"{path}: not a regular file (a folder, device or pipe); give a data file")


@contextlib.contextmanager
def text_stream(path: Path, error: type[UserError] = DataError) -> Iterator[IO[str]]:
    """A UTF-8 text file opened for streaming (a byte-order mark accepted; lines end at ``\n``
    only: JSON text may hold U+2028, at which ``splitlines`` would split); a file that cannot be
    opened, or a decoding error while it is read, raises ``error`` naming the file (and the line)."""
    check_data_file(path, error)
    try:
        fh = open(path, encoding="utf-8-sig", newline="\n")  # noqa: SIM115 (closed by the ``with`` below)
    except OSError as exc:  # missing, a folder, unreadable
        raise error(f"{path}: {exc.strerror or exc}") from None
    with fh:
        try:
            yield fh
        except UnicodeDecodeError as exc:
            with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="\n") as again:
                raise error(undecodable_message(path, again, exc)) from None


def numbered_lines(
    fh: IO[str], path: Path, error: type[UserError] = DataError, limit: int = MAX_LINE_CHARS
) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text stream, each line read with a bound: one longer than
    ``limit`` characters raises ``error`` naming the file and line, before it is held whole."""
    for line_no in itertools.count(1):
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) > limit:
            raise error(
                f"{path}:{line_no}: a line longer than {limit:,} characters; the file is damaged or not this format"
            )
        yield line_no, line


def json_lines(path: Path, error: type[UserError] = DataError) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSON-lines file, read as a stream (a
    corpus may be large). The rules of every JSON-lines format here: ``text_stream``'s, blank lines
    skipped, and a line that is not JSON or not one object raises ``error`` naming the file and line."""
    with text_stream(path, error) as fh:
        for line_no, line in numbered_lines(fh, path, error):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(
                    f"{path}:{line_no}: not JSON ({exc.msg}, column {exc.colno}); a JSON lines file holds "
                    "one object per line"
                ) from None
            if not isinstance(record, dict):
                raise error(f"{path}:{line_no}: a JSON {type(record).__name__}; expected one object per line")
            yield line_no, record


def read_lines(path: Path) -> list[str]:
    """Every line of a utf-8 file, blank ones included (``read().splitlines()``, as SentEval)."""
    try:
        with open(path, encoding="utf8") as fh:
            return fh.read().splitlines()
    except UnicodeDecodeError as exc:
        with open(path, encoding="utf8", errors="surrogateescape") as fh:
            raise DataError(undecodable_message(path, fh.read().splitlines(), exc)) from None


def sts_year_file(year: str, subset: str, kind: str) -> str:
    """``kind`` is ``input`` (the pairs) or ``gs`` (the gold scores); the path is data-root relative."""
    return f"senteval/STS/{year}-en-test/STS.{kind}.{subset}.txt"


def stsb_file(split: str, raw: bool = False) -> str:
    return "senteval/STS/STSBenchmark/" + ("stsbenchmark/" if raw else "") + f"sts-{split}.csv"


def sick_file(split: str) -> str:
    return f"senteval/SICK/{SICK_FILES[split]}"


def finite_float(value: Any) -> float | None:
    """``value`` as a float, or None where it is no finite number: text that does not parse, ``nan``
    and ``inf`` (which do), a boolean (a JSON ``true`` is no score). One such score in a file makes
    every correlation or ranking over it meaningless, so readers refuse it naming the line."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def gold_score(text: str, path: Path | None, lineno: int) -> float:
    """A gold score as a float; text that is no finite number raises ``DataError`` naming the file and line."""
    score = finite_float(text)
    if score is None:
        raise DataError(f"{path}:{lineno}: gold score {excerpt(text)} is not a number")
    return score


def read_sts_pairs(input_path: Path, gold_path: Path | None = None) -> Pairs:
    """An STS12-16 subset. With ``gold_path``: the scored pairs only and their gold scores (SentEval's
    evaluation set); without: every pair of the input file, gold or not, and no scores."""
    inputs = read_lines(input_path)
    if gold_path is None:
        gold: list[str | None] = [None] * len(inputs)
    else:
        gold = list(read_lines(gold_path))
        if len(inputs) != len(gold):  # named at the first line the shorter file lacks
            longer = input_path if len(inputs) > len(gold) else gold_path
            raise DataError(
                f"{longer}:{min(len(inputs), len(gold)) + 1}: {input_path} has {len(inputs)} "
                f"lines but {gold_path} has {len(gold)}"
            )
    a, b, g = [], [], []
    for lineno, (pair, score) in enumerate(zip(inputs, gold), 1):
        if score is not None and score.strip() == "":  # SentEval drops pairs without a gold score
            continue
        fields = pair.split("\t")
        if len(fields) < 2:
            raise DataError(f"{input_path}:{lineno}: expected two tab-separated sentences")
        a.append(senteval_text(fields[0]))
        b.append(senteval_text(fields[1]))
        if score is not None:
            g.append(gold_score(score, gold_path, lineno))
    return a, b, g


def read_scored_tsv(
    path: Path,
    columns: tuple[int, int, int],
    header: bool,
    gold: bool = True,
    text: Callable[[str], str] = senteval_text,
) -> Pairs:
    """STS-B csv or SICK txt: ``columns`` = (gold, sentence a, sentence b); the first line skipped
    when ``header``. ``gold=False`` reads the sentences only (an unlabeled corpus)."""
    gi, ai, bi = columns
    a, b, g = [], [], []
    for lineno, line in enumerate(read_lines(path), 1):
        if header and lineno == 1:
            continue
        fields = line.strip().split("\t")
        if len(fields) <= max(columns):
            raise DataError(f"{path}:{lineno}: expected at least {max(columns) + 1} tab-separated fields")
        a.append(text(fields[ai]))
        b.append(text(fields[bi]))
        if gold:
            g.append(gold_score(fields[gi], path, lineno))
    return a, b, g


def interleave(a: list[str], b: list[str]) -> list[str]:
    """The sentences of a pair list in file order: a1, b1, a2, b2, ..."""
    return [s for pair in zip(a, b) for s in pair]
