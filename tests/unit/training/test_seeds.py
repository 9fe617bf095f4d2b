"""``train <method> --seeds``: one run per seed, each in its own (resumable) folder."""

import argparse
import json
from pathlib import Path

import pytest

from benchharness.cli import train as training_cli


class RecordingMethod:
    """Stands for one seed's training (``benchharness.cli.train._train_one``: recipe, run folder, method)."""

    def __init__(self, status=0):
        self.calls, self.status = [], status

    def __call__(self, args):
        self.calls.append((args.seed, args.out, args.name))
        return self.status


def _args(**kw):
    base = {"method": "fake", "seeds": "3,1", "seed": None, "out": Path("runs/simcse-l3"), "name": None}
    return argparse.Namespace(**{**base, **kw})


def test_each_seed_trains_in_its_own_folder_under_its_own_name(monkeypatch):
    fake = RecordingMethod()
    monkeypatch.setattr(training_cli, "_train_one", fake)
    assert training_cli.main(_args()) == 0
    assert fake.calls == [
        (3, Path("runs/simcse-l3-s3"), "simcse-l3-s3"),
        (1, Path("runs/simcse-l3-s1"), "simcse-l3-s1"),
    ]
    fake.calls.clear()
    training_cli.main(_args(seeds="7", name="mine"))
    assert fake.calls == [(7, Path("runs/simcse-l3-s7"), "mine-s7")]


def test_a_failing_seed_makes_the_command_fail_and_bad_seed_lists_are_refused(monkeypatch):
    monkeypatch.setattr(training_cli, "_train_one", RecordingMethod(status=1))
    assert training_cli.main(_args()) == 1
    with pytest.raises(ValueError, match="comma list of integers"):
        training_cli.main(_args(seeds="1,two"))
    with pytest.raises(ValueError, match="distinct"):
        training_cli.main(_args(seeds="1,1"))
    with pytest.raises(ValueError, match="either --seed or --seeds"):
        training_cli.main(_args(seed=5))


def test_seeds_through_the_real_command_give_one_recipe_per_seed(capsys):
    """`train simcse --seeds 1,2 --show` derives the default recipe once per seed (the list itself
    is no recipe setting: the method's options would refuse it)."""
    from benchharness.cli import main

    assert main(["train", "simcse", "--seeds", "1,2", "--show"]) == 0
    out = capsys.readouterr().out
    shown = [json.loads(block) for block in out.split("== seed ")[1:] for block in [block[block.index("{") :]]]
    assert [r["flags"]["seed"] for r in shown] == [1, 2] and [r["options"]["seed"] for r in shown] == [1, 2]
    assert len({r["key"] for r in shown}) == 2
