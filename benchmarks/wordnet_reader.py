"""WordNet's (lemma, definition) pairs read from the data files (``benchharness.data.wordnet``)
against NLTK's reader, what DefSent+'s dictionary and PaSeR's EDA would otherwise use.

In one process, alternately ``--repeats`` times: every pair through ``WordNetFiles.synsets()`` and
through a fresh ``WordNetCorpusReader``'s ``all_synsets()`` (``lemma_names()``, ``definition()``),
the reader's start included, as each call of ``read_wordnet`` paid it. It checks that the two lists
are equal, pair for pair and in order, and that the versions agree, then prints the median of each
and their ratio. Smoke mode reads the adverbs only (``data.adv``)::

    python benchmarks/wordnet_reader.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from machine import SMOKE, data_root, header, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    repeats = 1 if SMOKE else args.repeats
    pos = "r" if SMOKE else None  # smoke: the adverbs, a small file

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from benchharness.data.wordnet import WordNetFiles

    nltk_dir = data_root().root / "nltk_data"
    nltk.data.path.insert(0, str(nltk_dir))  # NLTK reads only from its data path (this script owns its process)

    def ours() -> tuple[list[tuple[str, str]], str]:
        files = WordNetFiles(nltk_dir)
        synsets = files.synsets(("data.adv",)) if SMOKE else files.synsets()
        return [(name, gloss) for names, gloss in synsets for name in names], files.version()

    def theirs() -> tuple[list[tuple[str, str]], str]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            reader = WordNetCorpusReader(str(nltk_dir / "corpora" / "wordnet"), None)
        pairs = [(name, s.definition()) for s in reader.all_synsets(pos) for name in s.lemma_names()]
        return pairs, reader.get_version()

    times: dict[str, list[float]] = {"data files": [], "nltk": []}
    for _ in range(repeats):
        for label, read in (("data files", ours), ("nltk", theirs)):
            start = time.perf_counter()
            pairs, version = read()
            times[label].append(time.perf_counter() - start)
            if label == "data files":
                expected = (pairs, version)
            elif (pairs, version) != expected:
                first = next(i for i, (a, b) in enumerate(zip(pairs, expected[0])) if a != b)
                raise SystemExit(f"the readers differ at pair {first}: nltk {pairs[first]}, ours {expected[0][first]}")
    ours_s, theirs_s = statistics.median(times["data files"]), statistics.median(times["nltk"])
    read = f"WordNet {expected[1]}: {len(expected[0]):,} (lemma, definition) pairs{' (smoke: adverbs)' * SMOKE}"
    lines = [
        header(),
        f"{read}, equal in order from both readers: True",
        f"median of {repeats}:",
        f"  nltk WordNetCorpusReader (start + all_synsets): {theirs_s:7.2f} s",
        f"  benchharness.data.wordnet (data files):         {ours_s:7.2f} s",
        f"  speed-up: {theirs_s / ours_s:.1f}x",
    ]
    report("wordnet_reader", lines)


if __name__ == "__main__":
    main()
