"""The runner and models of kinds other than dense: a task a kind cannot run is refused before
anything is computed, in one line naming the kind and the task; a task it can run is scored through
the kind's view, and its result says which kind and similarity scored it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from scipy.stats import spearmanr

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.kind_models import PairModel
from benchharness.core.kinds import PAIRS, KindMismatchError, ModelKind, View
from benchharness.core.prompts import Role
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run


class _LengthScorer(PairModel):
    """A pair scorer whose score is minus the difference of the texts' lengths; it records each call."""

    similarity = "minus length difference"

    def __init__(self) -> None:
        super().__init__("toy-pairs")
        self.calls: list[list[tuple[str, str]]] = []

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.calls.append(list(pairs))
        return np.array([-abs(len(a) - len(b)) for a, b in pairs], dtype=np.float64)

    def identity_info(self) -> dict:
        return {"family": "toy", "score": "minus length difference"}


class _PairView(View):
    kind = "toy-pairs"
    offers = frozenset({PAIRS})

    def __init__(self, model: _LengthScorer) -> None:
        self.model = model

    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: tuple[Role, Role]):
        return self.model.score_pairs(list(zip(left, right)))

    def facts(self) -> dict:
        return {"pairs_scored": sum(map(len, self.model.calls))}


@pytest.fixture
def toy_kind(register_plugin):
    kind = ModelKind(
        "toy-pairs",
        "a toy pair scorer",
        frozenset({PAIRS}),
        "a score per pair",
        "minus length difference",
        open_view=lambda encoder, settings: _PairView(encoder),
    )
    register_plugin("model_kinds", "toy-pairs", kind)
    _LengthScorer.model_kind = "toy-pairs"
    yield kind
    _LengthScorer.model_kind = PairModel.model_kind


def test_a_task_the_kind_cannot_run_fails_before_anything_is_scored(data_dir, toy_kind):
    model = _LengthScorer()
    summary = run(
        [model.name],
        [tasks.get("MR"), tasks.get("SICKRelatedness-trial")],
        lambda _: model,
        DataRoot(data_dir),
        None,
        RunSettings(data_dir=data_dir),
    )
    refused, scored = summary.outcomes
    assert (refused.task, refused.status) == ("MR", "failed")
    assert "toy-pairs is a toy pair scorer (a score per pair), and MR needs vectors" in refused.message
    assert "\n" not in refused.message
    assert scored.status == "computed"
    # only the pairs of the task it can run were ever scored
    sick = tasks.get("SICKRelatedness-trial")
    sick.load(DataRoot(data_dir))
    a, b, gold = sick.subsets["test"]
    assert model.calls == [list(zip(a, b))]
    want = 100 * spearmanr([-abs(len(x) - len(y)) for x, y in zip(a, b)], gold).statistic
    assert scored.main_score == pytest.approx(want, abs=1e-9)
    result = scored.result
    assert result.protocol["model_kind"] == "toy-pairs"
    assert result.protocol["similarity"] == "minus length difference"
    assert result.metrics["pairs_scored"] == len(a)
    assert result.encoder_identity["kind"] == "toy-pairs"


def test_a_post_processor_on_a_model_of_another_kind_is_refused(data_dir, register_plugin):
    class _Folder(_LengthScorer):
        pass

    resolver = Resolver(settings=RunSettings(data_dir=data_dir))
    resolver._base = lambda name, spec, manifest, shared: _Folder()  # the base a catalogue would build
    with pytest.raises(
        KindMismatchError, match=r"whitening post-processes dense vectors, and glove-50d is a cross-encoder"
    ):
        resolver.get("glove-50d+whitening")
