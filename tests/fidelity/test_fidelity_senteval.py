"""SentEval's supervised relatedness regressor and its MLP classifier, step by step, against
re-statements of the original code's update rules written here.

The references use torch's own modules, loss and optimizer as SentEval's ``tools/relatedness.py``
(``RelatednessPytorch``) and ``tools/classifier.py`` (``MLP``) build them, numpy's global stream
re-seeded per model, torch's global generator for the initialisation and the dropout masks, the
deep copy of the best model and the never-reset tenacity counter; they run one model at a time in
float32 (SentEval's precision). Parameters must agree after every optimizer step within 1e-5, and
whole fits must stop at the same check with the same dev score.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr

from benchharness.tasks.senteval.classifier import split_select
from benchharness.tasks.senteval.config import CONFIGS, NOREG_GRID, ClassifierConfig, RelatednessConfig
from benchharness.tasks.senteval.mlp import BatchedMLP, mlp_split_select
from benchharness.tasks.senteval.relatedness import RelatednessRegressor, soft_targets
from tests.unit.tasks.test_transfer_classifier import ReferenceLogReg

ATOL = 1e-5


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------
# The 5-way soft target


def tai_target(y: float) -> list[float]:
    """Tai, Socher & Manning (2015), eq. for p: class floor(y)+1 gets y - floor(y), class floor(y)
    gets floor(y) - y + 1, classes 1..5, nothing else."""
    f = math.floor(y)
    return [(y - f) if c == f + 1 else (f - y + 1) if c == f else 0.0 for c in range(1, 6)]


def test_soft_targets_are_the_tree_lstm_distribution_including_sts_b_scores_below_one():
    scores = np.array([1.0, 2.3, 4.5, 5.0, 3.0, 0.0, 0.4, 0.999, 1.2])
    got = soft_targets(scores)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.array([tai_target(y) for y in scores], dtype=np.float32), atol=0)
    # hand-worked rows
    np.testing.assert_allclose(got[1], [0, 0.7, 0.3, 0, 0], atol=1e-7)
    np.testing.assert_allclose(got[3], [0, 0, 0, 0, 1])
    np.testing.assert_allclose(got[5], [0, 0, 0, 0, 0])  # STS-B's 0: an all-zero target, as SentEval
    np.testing.assert_allclose(got[6], [0.4, 0, 0, 0, 0], atol=1e-7)
    # on SICK's range the expectation over classes 1..5 is the score itself
    sick = scores[scores >= 1]
    np.testing.assert_allclose(soft_targets(sick) @ np.arange(1, 6), sick, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# RelatednessPytorch


class ReferenceRelatedness:
    """SentEval's RelatednessPytorch with its constants as arguments (on CPU)."""

    def __init__(self, dim: int, cfg: RelatednessConfig, seed: int = 1111):
        np.random.seed(seed)
        torch.manual_seed(seed)
        self.cfg = cfg
        self.model = torch.nn.Sequential(torch.nn.Linear(dim, cfg.nclasses), torch.nn.Softmax(dim=-1))
        self.loss_fn = torch.nn.MSELoss()
        self.loss_fn.size_average = False  # as SentEval; ignored by torch >= 0.4 (mean)
        self.optimizer = torch.optim.Adam(self.model.parameters(), weight_decay=cfg.l2)

    def step(self, X, y, rows):
        idx = torch.from_numpy(np.asarray(rows)).long()
        loss = self.loss_fn(self.model(X[idx]), y[idx])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def predict(self, X):
        with torch.no_grad():
            probs = np.concatenate(
                [self.model(X[i : i + 64]).numpy() for i in range(0, len(X), self.cfg.batch_size)], axis=0
            )
        return np.dot(probs, np.arange(1, 6))

    def run(self, X, y, devX, devscores):
        nepoch, best, count, stop = 0, -1, 0, False
        while not stop and nepoch <= self.cfg.max_epoch:
            for _ in range(self.cfg.passes_per_check):
                perm = np.random.permutation(len(X))
                for i in range(0, len(X), self.cfg.batch_size):
                    self.step(X, y, perm[i : i + self.cfg.batch_size])
            nepoch += self.cfg.passes_per_check
            pr = pearsonr(self.predict(devX), devscores)[0]
            pr = 0 if pr != pr else pr
            if pr > best:
                best, best_model, best_epoch = pr, copy.deepcopy(self.model), nepoch
            else:
                if count >= self.cfg.tenacity:
                    stop = True
                count += 1
        self.model = best_model
        return best, best_epoch, nepoch


def _pairs(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    u, v = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    score = np.clip(2.5 + 1.5 * (u * v).sum(1) / d * 3 + rng.normal(scale=0.3, size=n), 0, 5)
    feats = np.c_[np.abs(u - v), u * v].astype(np.float32)
    return feats, score


def test_every_regression_step_matches_relatedness_pytorch():
    X, score = _pairs()
    Y = soft_targets(score)
    cfg = RelatednessConfig()
    mine = RelatednessRegressor(X, Y, cfg, seed=1111)
    ref = ReferenceRelatedness(X.shape[1], cfg, seed=1111)
    np.testing.assert_array_equal(mine.weight.numpy(), ref.model[0].weight.detach().numpy())  # same init
    Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)
    for _ in range(3):  # passes, batches of 64 with a partial last one
        perm = np.random.permutation(len(X))  # the reference's global stream
        assert np.array_equal(perm, mine.rng.permutation(len(X)))  # ... and ours
        for i in range(0, len(X), 64):
            rows = perm[i : i + 64]
            ref.step(Xt, Yt, rows)
            mine.step(rows)
            for a, b in ((mine.weight, ref.model[0].weight), (mine.bias, ref.model[0].bias)):
                assert float(np.abs(a.numpy() - b.detach().numpy()).max()) < ATOL
    assert mine.steps == 3 * 4


def test_a_whole_regression_fit_stops_where_relatedness_pytorch_stops():
    X, score = _pairs(n=40, d=12, seed=1)  # few training pairs: dev Pearson peaks, then falls
    dev_x, dev_score = _pairs(n=80, d=12, seed=2)
    test_x, _ = _pairs(n=60, d=12, seed=3)
    cfg = RelatednessConfig(passes_per_check=10, max_epoch=400)  # shorter checks, same rule
    mine = RelatednessRegressor(X, soft_targets(score), cfg, seed=1111)
    fit = mine.fit(dev_x, dev_score)
    ref = ReferenceRelatedness(X.shape[1], cfg, seed=1111)
    best, best_epoch, stop_epoch = ref.run(
        torch.from_numpy(X), torch.from_numpy(soft_targets(score)), torch.from_numpy(dev_x), dev_score
    )
    assert (fit.best_epoch, fit.stop_epoch) == (best_epoch, stop_epoch)
    assert best_epoch < stop_epoch < 400  # early stopping happened, at the same check
    assert abs(fit.dev_pearson - best) < 1e-6
    np.testing.assert_allclose(mine.predict(test_x), ref.predict(torch.from_numpy(test_x)), atol=ATOL)


# ---------------------------------------------------------------------------------------------
# MLP (nhid > 0)


class ReferenceMLP:
    """SentEval's MLP(nhid > 0): Linear, Dropout, Sigmoid, Linear; torch's optimizer with the
    weight decay set on its one parameter group."""

    def __init__(self, dim, nclasses, nhid, dropout, l2, cfg, seed=1111):
        np.random.seed(seed)
        torch.manual_seed(seed)
        self.cfg = cfg
        self.model = torch.nn.Sequential(
            torch.nn.Linear(dim, nhid), torch.nn.Dropout(p=dropout), torch.nn.Sigmoid(), torch.nn.Linear(nhid, nclasses)
        )
        self.loss_fn = torch.nn.CrossEntropyLoss()
        opt = torch.optim.Adam if cfg.optim == "adam" else torch.optim.RMSprop
        self.optimizer = opt(self.model.parameters())
        self.optimizer.param_groups[0]["weight_decay"] = l2

    def step(self, X, y, rows):
        self.model.train()
        idx = torch.from_numpy(np.asarray(rows)).long()
        loss = self.loss_fn(self.model(X[idx]), y[idx])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def params(self):
        first, second = self.model[0], self.model[3]
        return [p.detach().numpy().copy() for p in (first.weight, first.bias, second.weight, second.bias)]

    def score(self, X, y):
        self.model.eval()
        with torch.no_grad():
            return 1.0 * int((self.model(X).argmax(1) == y).sum()) / len(X)  # SentEval's correct / n

    def fit(self, X, y, devX, devy):
        nepoch, best, count, stop = 0, -1, 0, False
        while not stop and nepoch <= self.cfg.max_epoch:
            for _ in range(self.cfg.epoch_size):
                perm = np.random.permutation(len(X))
                for i in range(0, len(X), self.cfg.batch_size):
                    self.step(X, y, perm[i : i + self.cfg.batch_size])
            nepoch += self.cfg.epoch_size
            acc = self.score(devX, devy)
            if acc > best:
                best, best_model = acc, copy.deepcopy(self.model)
            else:
                if count >= self.cfg.tenacity:
                    stop = True
                count += 1
        self.model = best_model
        return best, nepoch


def _classes(n=150, d=6, c=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(c, d))
    y = rng.integers(0, c, size=n)
    return (centers[y] * 0.8 + rng.normal(size=(n, d))).astype(np.float32), y


def _ours(mlp, s, k):
    """Model k's (weight, bias, weight, bias) in nn.Linear's layout."""
    w1, w2 = s["w1"][k], s["w2"][k]
    return [t.numpy().copy() for t in (w1[:-1].T, w1[-1], w2[:-1].T, w2[-1])]  # copies: training goes on in place


@pytest.mark.parametrize(("optim", "dropout"), [("adam", 0.1), ("adam", 0.0), ("rmsprop", 0.2)])
def test_every_mlp_step_matches_sentevals_mlp(optim, dropout):
    X, y = _classes()
    cfg = CONFIGS["default" if optim == "adam" else "fast"]
    l2s = [1e-5, 1e-2]
    mlp = BatchedMLP(X, y, 3, cfg, nhid=7, dropout=dropout, device="cpu")
    state = mlp.start(l2s)
    rng = np.random.RandomState(1111)
    batches = [p[i : i + 64] for p in (rng.permutation(150) for _ in range(3)) for i in range(0, 150, 64)]
    ours = []
    for rows in batches:
        mlp.step(state, rows)
        ours.append([_ours(mlp, state, k) for k in range(len(l2s))])
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    for k, l2 in enumerate(l2s):  # one reference after the other: each re-seeds torch's generator
        ref = ReferenceMLP(6, 3, 7, dropout, l2, cfg)
        for step, rows in enumerate(batches):
            ref.step(Xt, yt, rows)
            for a, b in zip(ours[step][k], ref.params()):
                assert float(np.abs(a - b).max()) < ATOL, (k, step)


def test_a_whole_mlp_fit_matches_sentevals_mlp_fit():
    X, y = _classes(n=160, seed=6)
    X = 2 * X
    cfg = ClassifierConfig("t", kfold=2, optim="rmsprop", batch_size=16, tenacity=2, epoch_size=1, max_epoch=40)
    l2s = [1e-5, 1e-2, 1e-1]
    mlp = BatchedMLP(X, y, 3, cfg, nhid=5, dropout=0.2, device="cpu")
    trained = mlp.fit(np.arange(110), np.arange(110, 160), l2s)
    assert len(set(trained.epochs.tolist())) == 3 and max(trained.epochs) < 40  # each stops early, at its own check
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    for k, l2 in enumerate(l2s):
        ref = ReferenceMLP(6, 3, 5, 0.2, l2, cfg)
        best, nepoch = ref.fit(Xt[:110], yt[:110], Xt[110:], yt[110:])
        assert trained.dev_accuracy[k] == best
        assert trained.epochs[k] == nepoch
        w1, w2 = trained.w1[k], trained.w2[k]
        for a, b in zip([w1[:-1].T, w1[-1], w2[:-1].T, w2[-1]], ref.params()):
            assert float(np.abs(a.numpy() - b).max()) < ATOL


# ---------------------------------------------------------------------------------------------
# SplitClassifier for 5 classes (SST5), 3 (SICK-E), and SNLI's noreg with its epoch overrides


def reference_split(X, y, splits, nclasses, cfg, grid):
    """SentEval's SplitClassifier: one model per L2 value, the first best rounded dev accuracy,
    then a refit of that value (the same seeds: the same model) and its test accuracy."""
    (tr, dv, te) = splits
    scores = []
    for l2 in grid:
        ref = ReferenceLogReg(X.shape[1], nclasses, l2, cfg)
        ref.fit(X[tr], y[tr], validation_data=(X[dv], y[dv]))
        scores.append(round(100 * ref.score(X[dv], y[dv]), 2))
    best = grid[int(np.argmax(scores))]
    ref = ReferenceLogReg(X.shape[1], nclasses, best, cfg)
    ref.fit(X[tr], y[tr], validation_data=(X[dv], y[dv]))
    return max(scores), round(100 * ref.score(X[te], y[te]), 2), best


@pytest.mark.parametrize(
    ("nclasses", "cfg", "grid"),
    [
        (5, CONFIGS["fast"], (1e-5, 1e-4, 1e-3, 1e-2)),
        (3, CONFIGS["fast"], (1e-5, 1e-4, 1e-3, 1e-2)),
        (3, ClassifierConfig("snli", 10, "adam", 64, 5, 1, 15), NOREG_GRID),
    ],
    ids=["sst5", "sick-e", "snli"],
)
def test_split_protocol_matches_sentevals_split_classifier(nclasses, cfg, grid):
    X, y = _classes(n=240, d=5, c=nclasses, seed=nclasses)
    X = X.astype(np.float64)
    splits = (np.arange(0, 160), np.arange(160, 200), np.arange(200, 240))
    out = split_select(
        X[:160],
        y[:160],
        X[160:200],
        y[160:200],
        X[200:],
        y[200:],
        nclasses,
        cfg,
        device="cpu",
        dtype=torch.float64,
        grid=grid,
    )
    devacc, acc, l2 = reference_split(X, y, splits, nclasses, cfg, grid)
    assert (out["devacc"], out["acc"], out["chosen_l2"]) == (devacc, acc, l2)


def test_mlp_grid_selection_keeps_the_first_best_dev_point():
    X, y = _classes(n=200, seed=7)
    cfg = ClassifierConfig("t", kfold=2, optim="adam", batch_size=32, tenacity=1, epoch_size=1, max_epoch=8)
    out = mlp_split_select(
        X[:120], y[:120], X[120:160], y[120:160], X[160:], y[160:], 3, cfg, nhids=(0, 4, 8), dropouts=(0.0, 0.2)
    )
    points = out["grid_devacc"]
    assert [(p["nhid"], p["dropout"]) for p in points] == [(0, 0.0), (4, 0.0), (4, 0.2), (8, 0.0), (8, 0.2)]
    first_best = next(p for p in points if p["devacc"] == max(q["devacc"] for q in points))
    assert (out["nhid"], out["dropout"], out["chosen_l2"]) == (
        first_best["nhid"],
        first_best["dropout"],
        first_best["l2"],
    )
    assert out["fits"] == 5 * 4 and out["yhat"].shape == (40,)
    assert out["acc"] == round(100 * float((out["yhat"] == y[160:]).mean()), 2)
