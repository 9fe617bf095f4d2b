"""The batched SentEval classifier against a one-model-at-a-time reference written here.

The reference follows SentEval's ``PyTorchClassifier``/``MLP`` line by line (nn.Linear, torch's own
Adam/RMSprop, CrossEntropyLoss, numpy re-seeded per classifier, deepcopy of the best model, the
never-reset tenacity counter), in float64 so that both sides agree to rounding and every accuracy,
stopping epoch and chosen L2 must match exactly.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from benchharness.tasks.senteval.classifier import (
    L2_GRID,
    BatchedLogReg,
    ClassifierConfig,
    Fit,
    inner_kfold,
    kfold_then_test,
)
from benchharness.tasks.senteval.config import CONFIGS


class ReferenceLogReg:
    """SentEval's MLP(nhid=0), one model, float64."""

    def __init__(self, dim: int, nclasses: int, l2: float, cfg: ClassifierConfig, seed: int = 1111):
        np.random.seed(seed)
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(dim, nclasses).double()
        self.cfg = cfg
        self.loss = torch.nn.CrossEntropyLoss()
        opt = torch.optim.Adam if cfg.optim == "adam" else torch.optim.RMSprop
        self.optimizer = opt(self.model.parameters(), weight_decay=l2)

    def fit(self, X, y, validation_data=None, validation_split=None):
        if validation_data is None:
            perm = np.random.permutation(len(X))
            cut = int(validation_split * len(X))
            X, y, devX, devy = X[perm[cut:]], y[perm[cut:]], X[perm[:cut]], y[perm[:cut]]
        else:
            devX, devy = validation_data
        X, y = torch.as_tensor(X), torch.as_tensor(y)
        nepoch, best, count, stop = 0, -1.0, 0, False
        while not stop and nepoch <= self.cfg.max_epoch:
            for _ in range(self.cfg.epoch_size):
                perm = np.random.permutation(len(X))
                for i in range(0, len(X), self.cfg.batch_size):
                    idx = torch.as_tensor(perm[i : i + self.cfg.batch_size])
                    loss = self.loss(self.model(X[idx]), y[idx])
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
            nepoch += self.cfg.epoch_size
            acc = self.score(devX, devy)
            if acc > best:
                best, best_model = acc, copy.deepcopy(self.model)
            else:
                if count >= self.cfg.tenacity:
                    stop = True
                count += 1
        self.model, self.nepoch = best_model, nepoch
        return best

    def score(self, X, y):
        with torch.no_grad():
            pred = self.model(torch.as_tensor(X)).argmax(1).numpy()
        return float((pred == y).mean())


def _data(n=150, d=6, c=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(c, d))
    y = rng.integers(0, c, size=n)
    X = centers[y] * 0.6 + rng.normal(size=(n, d))
    return X.astype(np.float64), y


@pytest.mark.parametrize("cfg_name", ["default", "fast"])
def test_batched_fits_match_single_model_reference(cfg_name):
    torch.set_num_threads(1)
    cfg = CONFIGS[cfg_name]
    X, y = _data()
    clf = BatchedLogReg(X, y, 3, cfg, device="cpu", dtype=torch.float64)
    # groups of different sizes (so shorter groups skip the last step), one validation split
    splits = [(np.arange(0, 100), np.arange(100, 150)), (np.arange(7, 110), np.arange(110, 150))]
    fits = [Fit.with_dev(tr, dv, 1111) for tr, dv in splits] + [Fit.with_split(np.arange(150), 1111)]
    trained = clf.fit(fits, [list(L2_GRID)] * 3)
    for g, (tr, dv) in enumerate([*splits, (np.arange(150), None)]):
        for k, l2 in enumerate(L2_GRID):
            ref = ReferenceLogReg(6, 3, l2, cfg)
            if dv is None:
                acc = ref.fit(X, y, validation_split=0.05)
            else:
                acc = ref.fit(X[tr], y[tr], validation_data=(X[dv], y[dv]))
            assert trained.dev_accuracy[g, k] == acc
            assert trained.epochs[g, k] == ref.nepoch
            np.testing.assert_allclose(
                trained.weight[g, k].numpy(), ref.model.weight.detach().numpy().T, rtol=1e-9, atol=1e-12
            )
            np.testing.assert_allclose(
                trained.bias[g, k].numpy(), ref.model.bias.detach().numpy(), rtol=1e-9, atol=1e-12
            )


def test_tenacity_counter_is_never_reset():
    """A model whose dev accuracy alternates never sees `tenacity` non-improving checks in a row
    but must still stop after tenacity+1 of them in total."""
    X, y = _data(n=60, d=4, c=2, seed=3)
    cfg = ClassifierConfig("t", kfold=2, optim="adam", batch_size=16, tenacity=1, epoch_size=1, max_epoch=50)
    clf = BatchedLogReg(X, y, 2, cfg, device="cpu", dtype=torch.float64)
    trained = clf.fit([Fit.with_dev(np.arange(40), np.arange(40, 60), 1111)], [[1e-5]])
    ref = ReferenceLogReg(4, 2, 1e-5, cfg)
    ref.fit(X[:40], y[:40], validation_data=(X[40:], y[40:]))
    assert trained.epochs[0, 0] == ref.nepoch < 51  # stopped early, at the same check


def _reference_inner_kfold(X, y, cfg):
    skf = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    tests, chosen = [], []
    for train, test in skf.split(X, y):
        scores = []
        for l2 in L2_GRID:
            accs = []
            for itr, ite in skf.split(X[train], y[train]):
                ref = ReferenceLogReg(X.shape[1], 2, l2, cfg)
                ref.fit(X[train][itr], y[train][itr], validation_data=(X[train][ite], y[train][ite]))
                accs.append(ref.score(X[train][ite], y[train][ite]))
            scores.append(round(100 * np.mean(accs), 2))
        best = L2_GRID[int(np.argmax(scores))]
        chosen.append(best)
        ref = ReferenceLogReg(X.shape[1], 2, best, cfg)
        ref.fit(X[train], y[train], validation_split=0.05)
        tests.append(round(100 * ref.score(X[test], y[test]), 2))
    return round(float(np.mean(tests)), 2), chosen


def test_inner_kfold_protocol_matches_reference():
    torch.set_num_threads(1)
    cfg = ClassifierConfig("small", kfold=3, optim="rmsprop", batch_size=32, tenacity=2, epoch_size=1, max_epoch=20)
    X, y = _data(n=90, d=5, c=2, seed=1)
    out = inner_kfold(X, y, 2, cfg, device="cpu", dtype=torch.float64)
    acc, chosen = _reference_inner_kfold(X, y, cfg)
    assert out["acc"] == acc
    assert out["chosen_l2"] == chosen
    assert out["fits"] == 3 * 3 * 4 + 3


def test_kfold_then_test_picks_l2_and_scores_test():
    cfg = ClassifierConfig("small", kfold=3, optim="adam", batch_size=32, tenacity=1, epoch_size=1, max_epoch=10)
    X, y = _data(n=120, d=5, c=3, seed=2)
    out = kfold_then_test(X[:90], y[:90], X[90:], y[90:], 3, cfg, device="cpu")
    assert out["yhat"].shape == (30,)
    assert out["acc"] == round(100 * float((out["yhat"] == y[90:]).mean()), 2)
    assert out["chosen_l2"] in L2_GRID
    assert out["acc"] > 100 / 3  # separable clusters: well above chance
