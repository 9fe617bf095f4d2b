"""SentEval's logistic-regression protocol, with the many small classifiers trained together.

SentEval (facebookresearch/SentEval, ``tools/classifier.py`` + ``tools/validation.py``) trains one
``nn.Linear`` at a time: the nested cross-validation of MR under the default config is 10 outer x
4 L2 values x 10 inner folds + 10 refits = 410 sequential fits, and the classifier, not the encoder,
is where the time goes. Here every fit of one protocol stage runs in the same tensors: a *group*
is one training set with its own random stream (SentEval re-seeds numpy for every classifier, so
fits on equally sized sets shuffle identically), and the K L2 values of a group share each
gathered mini-batch: weights are ``(G, d, K*C)`` and one ``bmm`` serves all of them. Each model
keeps SentEval's semantics exactly:

- init: ``nn.Linear(d, C)`` right after ``torch.manual_seed(seed)`` (every fit starts from it);
- each "epoch" = ``epoch_size`` passes, each pass a fresh ``np.random.permutation`` of the training
  rows from that fit's ``RandomState(seed)`` stream, batches taken in order, last one partial;
- loss: mean cross-entropy over the batch. SentEval sets ``loss_fn.size_average = False`` after
  construction, which modern PyTorch ignores (``reduction`` is fixed at init), so the patched
  SentEval every recent paper ran uses the mean: reproduced;
- optimizer: torch's Adam (lr 1e-3) or RMSprop (lr 1e-2, alpha 0.99) with default arguments and
  ``weight_decay`` = the L2 value, i.e. coupled L2 added to the gradient of weight *and* bias;
- after each epoch the dev accuracy is checked; a strictly better one snapshots the model, any
  other increments a counter that is never reset and stops training once it had reached
  ``tenacity`` (so training stops at the (tenacity+1)-th non-improving check); the loop runs while
  ``nepoch <= max_epoch`` with ``nepoch`` advancing by ``epoch_size``; the best snapshot is kept;
- ``validation_split=0.05``: the first ``int(0.05 n)`` rows of the stream's first permutation are
  the dev set, the rest (in permutation order) the training set, and the stream continues.

Masks keep the lockstep honest: a model that stopped, or a group whose pass has one batch fewer,
takes no optimizer step at all (Adam's moments and step count stay as they are).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold
from tqdm.auto import tqdm

from benchharness.core.cpu_share import shared_threads
from benchharness.core.devices import pick_device
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import shown
from benchharness.tasks.senteval.config import L2_GRID, VALIDATION_SPLIT, ClassifierConfig


@dataclass
class Fit:
    """One SentEval ``MLP.fit`` call: training rows (in SentEval's order), dev rows, its stream."""

    train: np.ndarray
    dev: np.ndarray
    rng: np.random.RandomState

    @classmethod
    def with_dev(cls, train: np.ndarray, dev: np.ndarray, seed: int) -> Fit:
        """``fit(X, y, validation_data=(devX, devy))``."""
        return cls(np.asarray(train), np.asarray(dev), np.random.RandomState(seed))

    @classmethod
    def with_split(cls, rows: np.ndarray, seed: int, split: float = VALIDATION_SPLIT) -> Fit:
        """``fit(X, y, validation_split=split)``: the dev rows come from the stream's first draw."""
        rows = np.asarray(rows)
        rng = np.random.RandomState(seed)
        perm = rng.permutation(len(rows))
        cut = int(split * len(rows))
        return cls(rows[perm[cut:]], rows[perm[:cut]], rng)


@dataclass
class Trained:
    """Best snapshots of G groups x K models, with their dev accuracy and stopping epoch."""

    weight: torch.Tensor  # (G, K, d, C)
    bias: torch.Tensor  # (G, K, C)
    dev_accuracy: np.ndarray  # (G, K), fraction as SentEval's score() returns it
    epochs: np.ndarray  # (G, K), nepoch when the model stopped


class BatchedClassifiers:
    """What SentEval's classifiers trained in lock step share: the config (its optimizer checked),
    the seed every fit starts from, and the feature matrix on the device with a column of ones, which
    carries the bias, so that one bmm and one optimizer update serve weight and bias together
    (SentEval's weight decay covers the bias too: no special case needed); the labels, and their
    one-hot rows for the loss's gradient."""

    def __init__(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        nclasses: int,
        config: ClassifierConfig,
        seed: int = 1111,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if config.optim not in ("adam", "rmsprop"):
            raise InvalidInputError(f"optimizer {config.optim!r}: SentEval configs use adam or rmsprop")
        self.device = device if isinstance(device, torch.device) else pick_device(device)
        self.dtype, self.config, self.seed, self.nclasses = dtype, config, seed, nclasses
        X = torch.as_tensor(np.asarray(features), dtype=dtype, device=self.device)
        self.X = torch.cat([X, torch.ones(len(X), 1, dtype=dtype, device=self.device)], 1)
        self.y = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=self.device)
        self.onehot = torch.nn.functional.one_hot(self.y, nclasses).to(dtype)
        self.dim = X.shape[1]


class BatchedLogReg(BatchedClassifiers):
    """Trains many SentEval logistic regressions over one feature matrix at once."""

    def initial_parameters(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``nn.Linear(d, C)`` as SentEval builds it right after ``torch.manual_seed(seed)``."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            layer = torch.nn.Linear(self.dim, self.nclasses)
        return (
            layer.weight.detach().T.to(self.device, self.dtype).contiguous(),
            layer.bias.detach().to(self.device, self.dtype),
        )

    # ---------------------------------------------------------------------------------------
    def fit(self, fits: list[Fit], l2: list[list[float]]) -> Trained:
        """Train ``len(l2[g])`` models (one per L2 value) on each fit ``g``; all groups equally wide."""
        cfg = self.config
        G, K, C, d = len(fits), len(l2[0]), self.nclasses, self.dim
        if any(len(row) != K for row in l2) or len(l2) != G:
            raise InvalidInputError("l2 must be a G x K list, one row per fit")
        KC = K * C
        dev, dt = self.device, self.dtype
        w0, b0 = self.initial_parameters()
        # (G, d+1, K*C): model k owns columns kC..kC+C, the last row is its bias
        W = torch.cat([w0, b0.unsqueeze(0)]).repeat(1, K).expand(G, d + 1, KC).contiguous()
        state = {
            "W": W,
            "m": torch.zeros_like(W),
            "v": torch.zeros_like(W),
            "t": torch.zeros(G, 1, KC, dtype=dt, device=dev),
        }
        decay = torch.tensor(l2, dtype=dt, device=dev).repeat_interleave(C, 1).view(G, 1, KC)
        best_W = W.clone()
        best = np.full((G, K), -1.0)
        count = np.zeros((G, K), dtype=int)
        alive = np.ones((G, K), dtype=bool)
        stop_epoch = np.zeros((G, K), dtype=int)
        dev_rows, dev_mask = _padded([f.dev for f in fits], dev)
        n_dev = np.array([len(f.dev) for f in fits])

        bar = tqdm(
            total=cfg.max_epoch, desc=f"classifiers ({G * K} fits)", unit="epoch", leave=False, disable=not shown()
        )
        with shared_threads(dev) as threads, bar:
            nepoch = 0
            while alive.any() and nepoch <= cfg.max_epoch:
                threads.adjust()  # a busy neighbour makes lock-stepped threads spin: see cpu_share
                ga = np.flatnonzero(alive.any(1))
                gat = torch.as_tensor(ga, device=dev)
                sub = {k: v[gat] for k, v in state.items()}
                live = torch.as_tensor(alive[ga], dtype=dt, device=dev).repeat_interleave(C, 1).unsqueeze(1)
                for _ in range(cfg.epoch_size):
                    self._one_pass(sub, [fits[g] for g in ga], decay[gat], live)
                for k, v in sub.items():
                    state[k][gat] = v
                nepoch += cfg.epoch_size
                correct = self._correct(sub["W"], dev_rows[gat], dev_mask[gat], K)
                acc = correct / n_dev[ga, None]
                was_alive = alive[ga]
                improved = was_alive & (acc > best[ga])
                nonimproving = was_alive & ~improved
                stopping = nonimproving & (count[ga] >= cfg.tenacity)  # SentEval: counter never reset
                count[ga] += nonimproving
                best[ga] = np.where(improved, acc, best[ga])
                if improved.any():
                    keep = torch.as_tensor(improved, device=dev).repeat_interleave(C, 1).unsqueeze(1)
                    best_W[gat] = torch.where(keep, sub["W"], best_W[gat])
                alive[ga] = was_alive & ~stopping
                stop_epoch[ga] = np.where(was_alive, nepoch, stop_epoch[ga])
                bar.update(cfg.epoch_size)
                bar.set_postfix(training=int(alive.sum()), refresh=False)
        per_model = best_W.view(G, d + 1, K, C).permute(0, 2, 1, 3)
        return Trained(per_model[:, :, :d].contiguous(), per_model[:, :, d].contiguous(), best, stop_epoch)

    def _one_pass(self, s: dict[str, torch.Tensor], fits: list[Fit], decay: torch.Tensor, live: torch.Tensor) -> None:
        """One pass over each group's training rows in a fresh permutation of its stream."""
        bs = self.config.batch_size
        sizes = [len(f.train) for f in fits]
        steps = math.ceil(max(sizes) / bs)
        rows = np.zeros((len(fits), steps * bs), dtype=np.int64)
        mask = np.zeros((len(fits), steps * bs), dtype=np.float64)
        for j, f in enumerate(fits):
            rows[j, : sizes[j]] = f.train[f.rng.permutation(sizes[j])]
            mask[j, : sizes[j]] = 1.0
        rows_t = torch.as_tensor(rows, device=self.device).view(len(fits), steps, bs)
        mask_t = torch.as_tensor(mask, dtype=self.dtype, device=self.device).view(len(fits), steps, bs)
        counts = mask_t.sum(2)  # (Ga, steps)
        # mean over the real rows of each batch; an empty batch (a shorter group's missing last
        # step) takes no optimizer step at all
        weights = mask_t / counts.clamp(min=1).unsqueeze(2)
        stepping = (counts > 0).to(self.dtype)
        for i in range(steps):
            self._step(s, rows_t[:, i], weights[:, i], live * stepping[:, i, None, None], decay)

    def _step(
        self,
        s: dict[str, torch.Tensor],
        rows: torch.Tensor,
        weights: torch.Tensor,
        update: torch.Tensor,
        decay: torch.Tensor,
    ) -> None:
        Ga, bs = rows.shape
        C = self.nclasses
        flat = rows.reshape(-1)
        xb = self.X.index_select(0, flat).view(Ga, bs, -1)  # shared by the K models of a group
        logits = torch.bmm(xb, s["W"])  # (Ga, bs, K*C)
        K = logits.shape[2] // C
        # softmax written out: torch.softmax over a last dimension of 2..6 classes is several
        # times slower on CPU than these four vectorised ops
        grad = logits.view(Ga, bs, K, C)
        grad = grad.sub(grad.amax(3, keepdim=True)).exp_()
        grad.div_(grad.sum(3, keepdim=True))
        grad.sub_(self.onehot.index_select(0, flat).view(Ga, bs, 1, C)).mul_(weights.view(Ga, bs, 1, 1))
        grad = grad.view(Ga, bs, K * C)
        gW = torch.bmm(xb.transpose(1, 2), grad).add_(s["W"] * decay)  # coupled L2, as torch's
        s["t"].add_(update)
        if self.config.optim == "adam":
            _adam(s["W"], gW, s["m"], s["v"], s["t"], update)
        else:
            _rmsprop(s["W"], gW, s["v"], update)

    def _correct(self, W: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor, K: int) -> np.ndarray:
        """Correct predictions of every model on its group's (padded) rows: (Ga, K) ints."""
        pred = self._predict(W, rows, K)  # (Ga, n, K)
        hit = (pred == self.y[rows].unsqueeze(2)) & mask.bool().unsqueeze(2)
        return hit.sum(1).cpu().numpy()

    def _predict(self, W: torch.Tensor, rows: torch.Tensor, K: int) -> torch.Tensor:
        out = []
        for start in range(0, rows.shape[1], 4096):  # bounded memory on large dev/test sets
            chunk = rows[:, start : start + 4096]
            logits = torch.bmm(self.X[chunk], W)
            out.append(logits.view(*chunk.shape, K, self.nclasses).argmax(3))
        return torch.cat(out, 1)

    def predict(self, trained: Trained, g: int, k: int, rows: np.ndarray) -> np.ndarray:
        """Labels that model (g, k) predicts for ``rows`` (first class wins an exact tie, as max())."""
        W = torch.cat([trained.weight[g, k], trained.bias[g, k].unsqueeze(0)]).unsqueeze(0)
        r = torch.as_tensor(np.asarray(rows), device=self.device).unsqueeze(0)
        return self._predict(W, r, 1)[0, :, 0].cpu().numpy()

    def accuracy(self, trained: Trained, g: int, k: int, rows: np.ndarray) -> float:
        pred = self.predict(trained, g, k, rows)
        return float((pred == self.y[torch.as_tensor(np.asarray(rows), device=self.device)].cpu().numpy()).mean())


def _padded(index_lists: list[np.ndarray], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(r) for r in index_lists)
    rows = np.zeros((len(index_lists), n), dtype=np.int64)
    mask = np.zeros((len(index_lists), n), dtype=bool)
    for j, r in enumerate(index_lists):
        rows[j, : len(r)] = r
        mask[j, : len(r)] = True
    return torch.as_tensor(rows, device=device), torch.as_tensor(mask, device=device)


def _adam(
    p: torch.Tensor,
    g: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    t: torch.Tensor,
    u: torch.Tensor,
    lr: float = 1e-3,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
) -> None:
    """torch.optim.Adam's update (defaults, coupled weight decay already in ``g``) where ``u`` is 1."""
    m.add_((g - m).mul_(u * (1 - b1)))
    v.add_((g * g - v).mul_(u * (1 - b2)))
    steps = t.clamp(min=1)
    bc1 = 1 - b1**steps
    bc2_sqrt = (1 - b2**steps).sqrt()
    p.sub_(m / (v.sqrt() / bc2_sqrt + eps) * (u * lr / bc1))


def _rmsprop(
    p: torch.Tensor,
    g: torch.Tensor,
    v: torch.Tensor,
    u: torch.Tensor,
    lr: float = 1e-2,
    alpha: float = 0.99,
    eps: float = 1e-8,
) -> None:
    """torch.optim.RMSprop's update (defaults) where ``u`` is 1."""
    v.add_((g * g - v).mul_(u * (1 - alpha)))
    p.sub_(g / (v.sqrt() + eps) * (u * lr))


# ------------------------------------------------------------------------------------------------
# SentEval's three validation schemes (tools/validation.py), each as two batched stages.


def _pick(scores: list[float]) -> int:
    """SentEval rounds mean dev accuracy to 2 decimals (in %) and takes the first maximum."""
    return int(np.argmax(scores))


def inner_kfold(
    features: np.ndarray,
    labels: np.ndarray,
    nclasses: int,
    config: ClassifierConfig,
    seed: int = 1111,
    device: str | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict:
    """``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA): outer k-fold; in each outer train split an
    inner k-fold picks L2; refit on the outer train split with 5% held out; mean outer accuracy."""
    clf = BatchedLogReg(features, labels, nclasses, config, seed, device, dtype)
    # SentEval: both splitters are StratifiedKFold(k, shuffle=True, random_state=1111), literally 1111
    skf = StratifiedKFold(n_splits=config.kfold, shuffle=True, random_state=1111)
    outer = list(skf.split(features, labels))
    fits = []
    for train, _ in outer:
        for in_train, in_test in skf.split(features[train], labels[train]):
            fits.append(Fit.with_dev(train[in_train], train[in_test], seed))
    grid = clf.fit(fits, [list(L2_GRID)] * len(fits))
    k = config.kfold
    dev_acc = grid.dev_accuracy.reshape(len(outer), k, len(L2_GRID))  # score == the fit's dev set
    chosen, dev_results = [], []
    for o in range(len(outer)):
        scores = [round(100 * float(np.mean(dev_acc[o, :, r])), 2) for r in range(len(L2_GRID))]
        chosen.append(L2_GRID[_pick(scores)])
        dev_results.append(max(scores))
    refits = clf.fit([Fit.with_split(train, seed) for train, _ in outer], [[c] for c in chosen])
    # each item is tested in exactly one outer fold: its prediction there, and that fold's index
    yhat = np.empty(len(labels), dtype=np.int64)
    fold = np.empty(len(labels), dtype=np.int16)
    test_results = []
    for o, (_, test) in enumerate(outer):
        yhat[test] = clf.predict(refits, o, 0, test)
        fold[test] = o
        test_results.append(round(100 * float((yhat[test] == np.asarray(labels)[test]).mean()), 2))
    return {
        "devacc": round(float(np.mean(dev_results)), 2),
        "acc": round(float(np.mean(test_results)), 2),
        "fold_acc": test_results,
        "chosen_l2": chosen,
        "fits": len(fits) * len(L2_GRID) + len(outer),
        "yhat": yhat,
        "fold": fold,
    }


def kfold_then_test(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    nclasses: int,
    config: ClassifierConfig,
    seed: int = 1111,
    device: str | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict:
    """``KFoldClassifier`` (TREC, MRPC): k-fold on train picks L2, refit on all train with 5% held
    out, predict test."""
    n = len(train_x)
    clf = BatchedLogReg(
        np.vstack([train_x, test_x]), np.concatenate([train_y, test_y]), nclasses, config, seed, device, dtype
    )
    skf = StratifiedKFold(n_splits=config.kfold, shuffle=True, random_state=seed)
    fits = [Fit.with_dev(tr, te, seed) for tr, te in skf.split(train_x, train_y)]
    grid = clf.fit(fits, [list(L2_GRID)] * len(fits))
    scores = [round(100 * float(np.mean(grid.dev_accuracy[:, r])), 2) for r in range(len(L2_GRID))]
    chosen = L2_GRID[_pick(scores)]
    refit = clf.fit([Fit.with_split(np.arange(n), seed)], [[chosen]])
    test_rows = np.arange(n, n + len(test_x))
    yhat = clf.predict(refit, 0, 0, test_rows)
    acc = float((yhat == np.asarray(test_y)).mean())
    return {
        "devacc": max(scores),
        "acc": round(100 * acc, 2),
        "yhat": yhat,
        "chosen_l2": chosen,
        "fits": len(fits) * len(L2_GRID) + 1,
    }


def split_select(
    train_x: np.ndarray,
    train_y: np.ndarray,
    dev_x: np.ndarray,
    dev_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    nclasses: int,
    config: ClassifierConfig,
    seed: int = 1111,
    device: str | None = None,
    dtype: torch.dtype = torch.float32,
    grid: Sequence[float] = L2_GRID,
) -> dict:
    """``SplitClassifier`` (SST2, SST5, SICK-E, SNLI, probing with nhid=0): every L2 of ``grid``
    trains on train with early stopping on dev; the best dev accuracy picks L2. SentEval then refits
    that L2 with the same seed, data and dev set, a deterministic repeat of the grid's fit, so the
    grid's model is used directly. SNLI's ``noreg`` is ``grid=NOREG_GRID``."""
    n_tr, n_dev = len(train_x), len(dev_x)
    clf = BatchedLogReg(
        np.vstack([train_x, dev_x, test_x]),
        np.concatenate([train_y, dev_y, test_y]),
        nclasses,
        config,
        seed,
        device,
        dtype,
    )
    dev_rows = np.arange(n_tr, n_tr + n_dev)
    values = list(grid)
    trained = clf.fit([Fit.with_dev(np.arange(n_tr), dev_rows, seed)], [values])
    scores = [round(100 * float(trained.dev_accuracy[0, r]), 2) for r in range(len(values))]
    k = _pick(scores)
    test_rows = np.arange(n_tr + n_dev, n_tr + n_dev + len(test_x))
    yhat = clf.predict(trained, 0, k, test_rows)
    return {
        "devacc": max(scores),
        "acc": round(100 * float((yhat == np.asarray(test_y)).mean()), 2),
        "chosen_l2": values[k],
        "fits": len(values),
        "yhat": yhat,
    }
