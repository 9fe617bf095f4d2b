"""The variants of one base (``x+truncate(d=10|20)``) are encoded by their base once, through the
embedding cache, and the log says so once, naming the variants it serves. It used to say
"encoding N unique sentences" once per variant, even when every sentence came from the cache."""

from __future__ import annotations

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from tests.helpers import cli

TASK = "STSBenchmark-dev"
VARIANTS = ["glove-50d+truncate(d=10)", "glove-50d+truncate(d=20)"]


def _unique_sentences(data_dir) -> int:
    task = tasks.get(TASK)
    task.load(DataRoot(data_dir))
    return len(set(task.sentences()))


def _lines(done) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if "unique sentences" in line]


def test_the_base_says_once_what_it_encodes_for_its_variants(project, data_dir):
    n = _unique_sentences(data_dir)
    run = ("run", "--encoders", "glove-50d+truncate(d=10|20)", "--tasks", TASK)
    assert _lines(cli(project, *run)) == [
        f"[glove-50d] encoding {n:,} unique sentences for 1 task(s), once for its 2 variants: {', '.join(VARIANTS)}"
    ]
    # computed again: the base's cache serves every sentence, and the line says so
    assert _lines(cli(project, *run, "--overwrite", "always")) == [
        f"[glove-50d] all {n:,} unique sentences cached for 1 task(s), once for its 2 variants: {', '.join(VARIANTS)}"
    ]


def test_a_lone_truncation_counts_what_its_bases_cache_holds(project, data_dir):
    n = _unique_sentences(data_dir)
    assert cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK).returncode == 0  # fills the cache
    assert _lines(cli(project, "run", "--encoders", VARIANTS[0], "--tasks", TASK)) == [
        f"[{VARIANTS[0]}] all {n:,} unique sentences cached for 1 task(s)"
    ]


def test_without_a_cache_each_variant_encodes_and_says_so(project, data_dir):
    n = _unique_sentences(data_dir)
    done = cli(project, "run", "--encoders", "glove-50d+truncate(d=10|20)", "--tasks", TASK, "--no-cache")
    assert _lines(done) == [f"[{name}] encoding {n:,} unique sentences for 1 task(s)" for name in VARIANTS]
