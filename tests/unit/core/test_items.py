"""Per-item outputs kept beside each result reproduce its stored scores, and carry intervals."""

import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.model_selection import StratifiedKFold
from unit.tasks.test_transfer import TINY, _write_binary

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.items import MissingItemsError
from benchharness.core.results import ResultStore
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.tasks.senteval.transfer import BinaryTask
from tests.fakes import HashEncoder


def _run(data_dir, store, encoder, names, **kw):
    return run(
        [encoder.name], [tasks.get(n) for n in names], lambda _: encoder, DataRoot(data_dir), store, RunSettings(**kw)
    )


def test_sts_items_reproduce_the_stored_spearman_exactly(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    assert _run(data_dir, store, HashEncoder(), ["STS12", "STSBenchmark"]).failed == []
    for task in ("STS12", "STSBenchmark"):
        result = store.load("hash", task)
        items = store.load_items(result).items
        rho = 100 * spearmanr(items["cosine"], items["gold"])[0]
        assert rho == result.main_score  # same arrays, same correlation: exact
        assert result.items["n"] == len(items["gold"]) == result.metrics["n"]
        low, high = result.confidence["main"]
        assert low < result.main_score < high and result.confidence["resamples"] == 1000
    sts12 = store.load("hash", "STS12")
    items = store.load_items(sts12).items
    names = [str(n) for n in items["subset_names"]]
    assert names == sts12.protocol["subsets"]
    for i, name in enumerate(names):  # per-subset scores from the subset ids
        rows = items["subset"] == i
        assert 100 * spearmanr(items["cosine"][rows], items["gold"][rows])[0] == sts12.metrics[f"{name}.spearman"]
    assert sts12.confidence["intervals"]["mean.spearman"]["unit"] == "pairs, resampled within each subset"
    assert sts12.confidence["intervals"]["all.spearman"]["unit"] == "pairs"


def test_kfold_transfer_items_give_the_outer_folds_and_the_score(tmp_path):
    _write_binary(tmp_path, n=60)
    task = BinaryTask("MR", ("MR/rt-polarity.pos", "MR/rt-polarity.neg"), 120, TINY, "synthetic")
    task.load(DataRoot(tmp_path, verify=False))
    rng = np.random.default_rng(0)
    noise = {}

    def embed(sentences):  # informative but noisy: accuracy below 100 and differing between folds
        pos = np.array([sum(w in ("good", "great", "fine") for w in s.split()) for s in sentences], float)
        rows = [noise.setdefault(s, rng.normal(size=2) * 1.5) for s in sentences]
        return np.c_[pos, np.ones(len(sentences))] + np.array(rows)

    ev = task.evaluate_items(embed, 1111)
    items = ev.items
    labels = np.asarray(task.labels)
    assert np.array_equal(items["gold"], labels)
    skf = StratifiedKFold(n_splits=3, shuffle=True, random_state=1111)  # SentEval's outer split
    for f, (_, test) in enumerate(skf.split(np.zeros(len(labels)), labels)):
        assert (items["fold"][test] == f).all()
        assert round(100 * float((items["pred"][test] == labels[test]).mean()), 2) == ev.metrics["fold_acc"][f]
    assert ev.metrics["acc"] == round(float(np.mean(ev.metrics["fold_acc"])), 2)
    assert "yhat" not in ev.metrics and "fold" not in ev.metrics


def test_add_items_recomputes_results_stored_without_them_and_keeps_the_score(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    path = store.path("hash", "STSBenchmark")
    old = json.loads(path.read_text())
    for key in ("items", "confidence"):  # as a result file that holds neither
        del old[key]
    path.write_text(json.dumps(old))
    path.with_name("STSBenchmark.items.npz").unlink()
    with pytest.raises(MissingItemsError, match="--add-items"):
        store.load_items(store.load("hash", "STSBenchmark"))

    summary = _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    assert summary.outcomes[0].status == "reused"  # without the flag nothing changes
    summary = _run(data_dir, store, HashEncoder(), ["STSBenchmark"], add_items=True)
    assert summary.outcomes[0].status == "computed" and summary.outcomes[0].message == ""
    new = store.load("hash", "STSBenchmark")
    assert new.main_score == old["main_score"] and store.has_items(new)
    summary = _run(data_dir, store, HashEncoder(), ["STSBenchmark"], add_items=True)
    assert summary.outcomes[0].status == "reused"  # items there: nothing to add


def test_items_that_do_not_match_their_digest_are_refused(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    result = store.load("hash", "STSBenchmark")
    npz = store.path("hash", "STSBenchmark").with_name(result.items["file"])
    npz.write_bytes(npz.read_bytes() + b"x")
    with pytest.raises(MissingItemsError, match="belongs to another run"):
        store.load_items(result)


def _mark(store, encoder, task):
    """Overwrite a stored interval with an impossible one, to see whether a rerun reused it."""
    path = store.path(encoder, task)
    raw = json.loads(path.read_text())
    raw["confidence"]["main"] = [-1.0, -1.0]
    path.write_text(json.dumps(raw))
    return raw["confidence"]


@pytest.mark.parametrize("commit", ["abc123", "abc123-dirty"])
def test_a_rerun_reuses_stored_intervals_only_for_identical_items_from_the_same_clean_code(
    data_dir, tmp_path, monkeypatch, commit
):
    import benchharness.evaluation.runner as runner_module

    monkeypatch.setattr(runner_module, "versions", lambda: {"numpy": np.__version__, "git_commit": commit})
    store = ResultStore(tmp_path)
    _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    fresh = store.load("hash", "STSBenchmark").confidence
    marked = _mark(store, "hash", "STSBenchmark")

    _run(data_dir, store, HashEncoder(), ["STSBenchmark"], overwrite="always")
    again = store.load("hash", "STSBenchmark").confidence
    assert again == (marked if commit == "abc123" else fresh)  # a dirty checkout bootstraps afresh

    _mark(store, "hash", "STSBenchmark")  # other vectors, other items: bootstrapped afresh
    _run(data_dir, store, HashEncoder(salt="other"), ["STSBenchmark"], overwrite="always")
    other = store.load("hash", "STSBenchmark").confidence
    assert other["main"] != [-1.0, -1.0] and other["main"] != fresh["main"]

    _mark(store, "hash", "STSBenchmark")  # the same code, but another numpy: bootstrapped afresh
    monkeypatch.setattr(runner_module, "versions", lambda: {"numpy": "0.0", "git_commit": commit})
    _run(data_dir, store, HashEncoder(salt="other"), ["STSBenchmark"], overwrite="always")
    assert store.load("hash", "STSBenchmark").confidence == other
