"""Trained recipes reach the resolver as a catalogue, and listing or checking a name never trains."""

from __future__ import annotations

import pytest

from benchharness.evaluation.resolver import Resolver
from benchharness.training import train


@pytest.fixture
def no_training(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))  # an empty run store

    def refuse(*args, **kwargs):
        raise AssertionError("a listing or a check trained a recipe")

    monkeypatch.setattr(train, "train_in_store", refuse)
    monkeypatch.setattr(train, "train_with", refuse)


def test_listing_encoders_names_every_recipe_without_training(no_training):
    rows = {r["name"]: r for r in Resolver().describe()}
    assert rows["paser"]["description"].startswith("recipe, trained on demand")
    assert rows["paser-top1"]["settings"] == "benchharness train paser --recipe paser-top1"


def test_checking_a_recipe_name_and_a_composition_on_it_trains_nothing(no_training):
    resolver = Resolver()
    resolver.check("paser")
    resolver.check("consert+whitening(k=64)")


def test_without_training_an_untrained_recipe_fails_with_the_command(no_training):
    with pytest.raises(train.NotTrainedError, match="benchharness train simcse"):
        Resolver(train_missing=False).check("simcse")
