"""SentEval's MLP classifier (``nhid > 0``), as the probing tasks use it, with the L2 grid in lock step.

SentEval's ``MLP`` with ``nhid > 0`` is ``Linear(d, nhid) -> Dropout(p) -> Sigmoid -> Linear(nhid, C)``
(dropout *before* the sigmoid, as written there), built right after ``torch.manual_seed(seed)``,
trained exactly like the logistic regression of ``senteval.classifier`` (mean cross-entropy, torch's
Adam or RMSprop with coupled weight decay = L2 on every weight and bias, ``epoch_size`` passes per
dev check, the never-reset tenacity counter, the best snapshot kept). ``SplitClassifier`` fits one
such model per L2 value, each from the same seeds: they draw the same permutations and, while
training, the same dropout masks, so the K models of one (nhid, dropout) share every mini-batch and
mask and train together here, ``(K, d+1, nhid)`` and ``(K, nhid+1, C)`` weights in one ``bmm``.

Dropout masks: torch's CPU dropout draws ``bernoulli_(1 - p)`` on a tensor shaped like its input,
from the generator ``manual_seed`` set, right after the layers' initialisation consumed their
draws; p = 0 draws nothing. The masks are drawn the same way from a generator holding that state,
on the CPU whatever the device, so a GPU run trains the models a CPU run does (SentEval's CUDA runs
drew their masks from CUDA's generator, which no CPU code reproduces).

The probing protocol (SentEval's README) tunes ``nhid`` in {50, 100, 200} and dropout in
{0, 0.1, 0.2} on the dev set: ``mlp_split_select`` runs ``SplitClassifier`` at each point and keeps
the best rounded dev accuracy (first maximum in the order nhid, then dropout, then L2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from benchharness.core.cpu_share import shared_threads
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import shown
from benchharness.tasks.senteval.classifier import BatchedClassifiers, _adam, _pick, _rmsprop, split_select
from benchharness.tasks.senteval.config import L2_GRID, ClassifierConfig


@dataclass
class TrainedMLP:
    """Best snapshots of K models (one per L2 value), their dev accuracy and stopping epoch."""

    w1: torch.Tensor  # (K, d+1, nhid): first layer, its bias in the last row
    w2: torch.Tensor  # (K, nhid+1, C)
    dev_accuracy: np.ndarray  # (K,), fraction
    epochs: np.ndarray  # (K,)


class BatchedMLP(BatchedClassifiers):
    """K SentEval MLPs of one shape on one feature matrix, one per L2 value, trained in lock step."""

    def __init__(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        nclasses: int,
        config: ClassifierConfig,
        nhid: int,
        dropout: float,
        seed: int = 1111,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if nhid < 1 or not 0.0 <= dropout < 1.0:
            raise InvalidInputError(f"an MLP needs nhid >= 1 and 0 <= dropout < 1, got nhid={nhid}, dropout={dropout}")
        super().__init__(features, labels, nclasses, config, seed, device, dtype)
        self.nhid, self.dropout = nhid, dropout

    def initial_state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The two layers as ``nn.Sequential`` builds them after ``torch.manual_seed(seed)``, and
        torch's CPU generator state right after, from which the dropout masks are drawn."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            first = torch.nn.Linear(self.dim, self.nhid)
            second = torch.nn.Linear(self.nhid, self.nclasses)
            state = torch.get_rng_state()
        w1 = torch.cat([first.weight.detach().T, first.bias.detach().unsqueeze(0)])
        w2 = torch.cat([second.weight.detach().T, second.bias.detach().unsqueeze(0)])
        return w1.to(self.device, self.dtype), w2.to(self.device, self.dtype), state

    def start(self, l2: Sequence[float]) -> dict[str, Any]:
        """The training state of K fresh models, one per L2 value: parameters (weights in
        ``(K, d+1, nhid)`` and ``(K, nhid+1, C)``, biases in the last rows), optimizer moments,
        step counts, the weight decays, and the generator of the dropout masks."""
        w1, w2, rng_state = self.initial_state()
        K = len(l2)
        generator = torch.Generator()
        generator.set_state(rng_state)
        s: dict[str, Any] = {"w1": w1.unsqueeze(0).repeat(K, 1, 1), "w2": w2.unsqueeze(0).repeat(K, 1, 1)}
        for name in ("w1", "w2"):
            s[f"m_{name}"] = torch.zeros_like(s[name])
            s[f"v_{name}"] = torch.zeros_like(s[name])
        s["t"] = torch.zeros(K, 1, 1, dtype=self.dtype, device=self.device)
        s["decay"] = torch.tensor(list(l2), dtype=self.dtype, device=self.device).view(K, 1, 1)
        s["live"] = torch.ones(K, 1, 1, dtype=self.dtype, device=self.device)
        s["generator"] = generator
        return s

    def fit(self, train: np.ndarray, dev: np.ndarray, l2: Sequence[float]) -> TrainedMLP:
        """``MLP(l2reg=l2[k]).fit(X[train], y[train], validation_data=(X[dev], y[dev]))`` for every k."""
        cfg, K, dev_dt = self.config, len(l2), self.device
        s = self.start(l2)
        best = {"w1": s["w1"].clone(), "w2": s["w2"].clone()}
        best_acc = np.full(K, -1.0)
        count = np.zeros(K, dtype=int)
        alive = np.ones(K, dtype=bool)
        stop_epoch = np.zeros(K, dtype=int)
        rng = np.random.RandomState(self.seed)
        train, dev = np.asarray(train), np.asarray(dev)
        desc = f"MLP nhid={self.nhid} dropout={self.dropout}"
        bar = tqdm(total=cfg.max_epoch, desc=desc, leave=False, disable=not shown())
        with shared_threads(dev_dt) as threads, bar:
            nepoch = 0
            while alive.any() and nepoch <= cfg.max_epoch:
                threads.adjust()
                s["live"] = torch.as_tensor(alive, dtype=self.dtype, device=dev_dt).view(K, 1, 1)
                for _ in range(cfg.epoch_size):
                    order = train[rng.permutation(len(train))]
                    for start in range(0, len(order), cfg.batch_size):
                        self.step(s, order[start : start + cfg.batch_size])
                nepoch += cfg.epoch_size
                hits = (self._predict(s["w1"], s["w2"], dev) == self.y[torch.as_tensor(dev)].unsqueeze(0)).sum(1)
                acc = hits.cpu().numpy() / len(dev)
                improved = alive & (acc > best_acc)
                nonimproving = alive & ~improved
                stopping = nonimproving & (count >= cfg.tenacity)  # SentEval: counter never reset
                count += nonimproving
                best_acc = np.where(improved, acc, best_acc)
                if improved.any():
                    keep = torch.as_tensor(improved, device=dev_dt).view(K, 1, 1)
                    for name in ("w1", "w2"):
                        best[name] = torch.where(keep, s[name], best[name])
                stop_epoch = np.where(alive, nepoch, stop_epoch)
                alive &= ~stopping
                bar.update(cfg.epoch_size)
        return TrainedMLP(best["w1"], best["w2"], best_acc, stop_epoch)

    def mask(self, rows: int, generator: torch.Generator) -> torch.Tensor | None:
        """The scaled dropout mask of one training batch of ``rows`` rows (None when p = 0)."""
        if self.dropout == 0.0:
            return None
        noise = torch.empty(rows, self.nhid, dtype=self.dtype).bernoulli_(1 - self.dropout, generator=generator)
        return noise.div_(1 - self.dropout).to(self.device)

    def step(self, s: dict[str, Any], rows: np.ndarray) -> None:
        """One optimizer step of every live model of state ``s`` on the training rows ``rows``."""
        K, H = s["w1"].shape[0], self.nhid
        decay, live = s["decay"], s["live"]
        idx = torch.as_tensor(np.asarray(rows), device=self.device)
        xb = self.X.index_select(0, idx)  # (B, d+1), shared by the K models
        B = len(rows)
        noise = self.mask(B, s["generator"])
        h = torch.matmul(xb, s["w1"])  # (K, B, H)
        if noise is not None:
            h = h * noise
        a = torch.sigmoid(h)
        a1 = torch.cat([a, torch.ones(K, B, 1, dtype=self.dtype, device=self.device)], 2)
        logits = torch.bmm(a1, s["w2"])  # (K, B, C)
        dz = torch.softmax(logits, 2).sub_(self.onehot.index_select(0, idx)).div_(B)  # mean cross-entropy
        g2 = torch.bmm(a1.transpose(1, 2), dz).add_(s["w2"] * decay)
        dh = torch.bmm(dz, s["w2"][:, :H].transpose(1, 2)).mul_(a * (1 - a))
        if noise is not None:
            dh.mul_(noise)
        g1 = torch.matmul(xb.T, dh).add_(s["w1"] * decay)
        s["t"].add_(live)
        for name, grad in (("w1", g1), ("w2", g2)):
            if self.config.optim == "adam":
                _adam(s[name], grad, s[f"m_{name}"], s[f"v_{name}"], s["t"], live)
            else:
                _rmsprop(s[name], grad, s[f"v_{name}"], live)

    def _predict(self, w1: torch.Tensor, w2: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        """Labels (K, n) the models predict for ``rows`` in evaluation mode (no dropout)."""
        out = []
        for start in range(0, len(rows), 4096):  # bounded memory on large dev/test sets
            xb = self.X[torch.as_tensor(np.asarray(rows[start : start + 4096]), device=self.device)]
            a = torch.sigmoid(torch.matmul(xb, w1))
            logits = torch.matmul(a, w2[:, :-1]) + w2[:, -1:]
            out.append(logits.argmax(2))
        return torch.cat(out, 1)

    def predict(self, trained: TrainedMLP, k: int, rows: np.ndarray) -> np.ndarray:
        """Labels that model ``k`` predicts for ``rows`` (first class wins an exact tie, as max())."""
        return self._predict(trained.w1[k : k + 1], trained.w2[k : k + 1], rows)[0].cpu().numpy()


def mlp_split_select(
    train_x: np.ndarray,
    train_y: np.ndarray,
    dev_x: np.ndarray,
    dev_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    nclasses: int,
    config: ClassifierConfig,
    seed: int = 1111,
    nhids: Sequence[int] = (0,),
    dropouts: Sequence[float] = (0.0,),
    device: str | None = None,
    dtype: torch.dtype = torch.float32,
    grid: Sequence[float] = L2_GRID,
) -> dict:
    """``SplitClassifier`` at every (nhid, dropout) point, the best rounded dev accuracy kept.
    ``nhid = 0`` is SentEval's logistic regression (``split_select``; dropout does not apply)."""
    points = [(h, 0.0) for h in nhids if h == 0][:1] + [(h, p) for h in nhids if h > 0 for p in dropouts]
    n_tr, n_dev = len(train_x), len(dev_x)
    features = np.vstack([train_x, dev_x, test_x])
    labels = np.concatenate([train_y, dev_y, test_y])
    train, dev = np.arange(n_tr), np.arange(n_tr, n_tr + n_dev)
    test = np.arange(n_tr + n_dev, len(features))
    best: dict | None = None
    per_point = []
    for nhid, dropout in points:
        if nhid == 0:
            out = split_select(
                train_x, train_y, dev_x, dev_y, test_x, test_y, nclasses, config, seed, device, dtype, grid
            )
            devacc, l2, yhat = out["devacc"], out["chosen_l2"], out["yhat"]
        else:
            mlp = BatchedMLP(features, labels, nclasses, config, nhid, dropout, seed, device, dtype)
            trained = mlp.fit(train, dev, list(grid))
            scores = [round(100 * float(a), 2) for a in trained.dev_accuracy]
            k = _pick(scores)
            devacc, l2 = max(scores), grid[k]
            yhat = mlp.predict(trained, k, test) if best is None or devacc > best["devacc"] else None
        per_point.append({"nhid": nhid, "dropout": dropout, "devacc": devacc, "l2": l2})
        if best is None or devacc > best["devacc"]:
            best = {"devacc": devacc, "nhid": nhid, "dropout": dropout, "chosen_l2": l2, "yhat": yhat}
    assert best is not None
    yhat = np.asarray(best.pop("yhat"))
    return {
        **best,
        "acc": round(100 * float((yhat == np.asarray(test_y)).mean()), 2),
        "fits": len(points) * len(grid),
        "grid_devacc": per_point,
        "yhat": yhat,
    }
