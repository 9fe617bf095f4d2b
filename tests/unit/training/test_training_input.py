"""Training input that cannot teach, said before the run takes it up: sentences so repeated that a
batch's in-batch negatives are copies of the positive, and a step count that would train for years."""

from __future__ import annotations

import itertools
import logging
import re
import tomllib
from pathlib import Path

import pytest

from benchharness.training import estimate, recipes
from benchharness.training.harness import in_batch_copies
from tests.helpers import MINILM_L3, cli, training

YEAR = 365 * 24 * 3600
VARIED = [f"sentence {i} talks about {w} ." for i, w in enumerate(["cats", "dogs", "rain", "tea", "snow"] * 8)]


def train(project: Path, *flags: str):
    return cli(project, "train", "simcse", "--out", "out", "--eval-every", "0", "--threads", "1", *flags)


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ")]


def test_copies_of_one_sentence_are_warned_about_before_training(project, tiny_bert):
    (project / "copies.txt").write_text("the same sentence .\n" * 100_000)
    done = train(project, "--base", str(tiny_bert), "--data", "copies.txt", "--batch-size", "8", "--max-steps", "1")
    assert done.returncode == 0, done.stderr
    # one sentence: each of the 7 others of a batch of 8 is a copy of it (by hand)
    expected = (
        "warning: training data copies.txt: 1 distinct sentences among 100,000, so in a batch of 8 a sentence meets "
        "on average 7.0 copies of itself as in-batch negatives, identical to its positive, which teach nothing; "
        "give more varied sentences (more distinct ones than a batch holds)"
    )
    assert warnings_of(done.stderr) == [expected]


def test_varied_sentences_train_without_a_warning(project, tiny_bert):
    (project / "varied.txt").write_text("\n".join(VARIED) + "\n")
    done = train(project, "--base", str(tiny_bert), "--data", "varied.txt", "--batch-size", "8", "--max-steps", "1")
    assert done.returncode == 0 and warnings_of(done.stderr) == [], done.stderr


@pytest.mark.parametrize(("corpus", "batch"), [("aaabbc", 3), ("aaaaab", 2), ("abcdef", 3), ("aabbcc", 6)])
def test_in_batch_copies_is_the_mean_over_every_order_the_loop_may_draw(corpus, batch):
    """Every permutation of the corpus, cut in consecutive batches as the loop cuts it: the mean number
    of other rows of an anchor's batch that are its own sentence."""
    total = orders = 0
    for order in itertools.permutations(corpus):
        orders += 1
        batches = [order[i : i + batch] for i in range(0, len(order), batch)]
        total += sum(b.count(s) - 1 for b in batches for s in b) / len(order)
    counts = [corpus.count(s) for s in sorted(set(corpus))]
    assert in_batch_copies(counts, batch) == pytest.approx(total / orders)


def test_an_estimate_beyond_a_year_is_warned_about_and_a_plain_one_is_not(project, caplog):
    """The estimate is steps x the measured seconds per step of recipes.toml (150 steps of the cpu preset:
    minutes; 10^12: millennia whatever the row)."""
    _, settings, plan = training("unused", project / "out")
    book = recipes.load_book()
    caplog.set_level(logging.INFO, logger="benchharness")
    for steps in (150, 10**12):
        recipe = recipes.derive("simcse", {"max_steps": steps}, book=book)
        estimate.announce(recipe, settings, plan, 10_000, book)
    announced = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(announced) == 2 and "150 steps, about" in announced[0] and "1,000,000,000,000 steps" in announced[1]
    assert len(warned) == 1 and "would train for about" in warned[0] and "years" in warned[0], warned


def test_an_absurd_max_steps_prints_the_estimate_and_a_warning(project):
    """The default recipe's base (MiniLM-L3), batch and length, as measured in recipes.toml: the years
    printed lie between those of the slowest and fastest measured CPU row."""
    (project / "corpus.txt").write_text("\n".join(VARIED) + "\n")
    done = train(project, "--data", "corpus.txt", "--max-steps", "1000000000000", "--stop-after", "1")
    assert done.returncode == 0, done.stderr
    assert re.search(r"in out: 1,000,000,000,000 steps, about [\d,]+ years \(", done.stderr), done.stderr
    (warning,) = warnings_of(done.stderr)
    m = re.fullmatch(
        r"warning: recipe:[0-9a-f]+ would train for about ([\d,]+) years \(1,000,000,000,000 steps\); "
        r"check --max-steps and --epochs, or stop it with Ctrl-C",
        warning,
    )
    assert m is not None, warning
    table = tomllib.loads((Path(recipes.__file__).parent / "recipes.toml").read_text())["throughput"]
    rows = [
        t["seconds_per_step"]
        for t in table
        if (t["method"], t["base"], t["device"], t["batch_size"]) == ("simcse", MINILM_L3, "cpu", 32)
    ]
    years = int(m[1].replace(",", ""))
    assert 10**12 * min(rows) / YEAR - 1 <= years <= 10**12 * max(rows) / YEAR + 1
