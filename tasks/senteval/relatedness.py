"""Supervised relatedness: SentEval's SICKRelatedness and STSBenchmark (here ``SICKRelatedness-sup``
and ``STSBenchmark-sup``; the unsupervised cosine tasks keep the plain names).

SentEval (``sick.py``, ``sts.py``, ``tools/relatedness.py``) trains a small regressor on the pair
features ``[|u-v|, u*v]`` of the train split, stops early on the dev split and scores test:

- target: the gold score ``y`` as a 5-way distribution (Tai, Socher & Manning 2015): weight
  ``y - floor(y)`` on class ``floor(y)+1`` and ``floor(y) - y + 1`` on class ``floor(y)`` (classes
  1..5; a weight whose class is outside 1..5 is dropped). SICK's scores are 1..5; SentEval feeds
  STS-B's 0..5 scores as they are, so a score in [0, 1) gets a target that sums to ``y`` (0 gets an
  all-zero row) and 5 gets class 5 alone; the prediction ``p . [1..5]`` lies in [1, 5] either way.
  Reproduced as is: it is what SentEval's STSBenchmark numbers were computed with.
- model: ``Linear(d, 5)`` then softmax, built right after ``torch.manual_seed(seed)``;
- loss: ``MSELoss`` between the softmax and the target. SentEval's comments speak of
  KL-divergence but the code uses MSE; its ``size_average = False`` set after construction is
  ignored by PyTorch >= 0.4, so the loss is the mean over batch x 5 (as for the classifier);
- optimizer: torch's Adam, defaults (lr 1e-3), no weight decay; batches of 64 in a fresh
  ``np.random.permutation`` per pass from numpy re-seeded with the seed, last batch partial;
- early stopping: after every 50 passes the dev Pearson of ``p . [1..5]`` (NaN counted as 0) is
  checked; a strictly better one snapshots the model, any other increments a counter that is never
  reset and stops training once it had reached 3; at most while ``nepoch <= 1000`` (21 checks);
- score: test Pearson x100 (main), Spearman x100 and MSE of the prediction against the gold scores.

SentEval asserts CUDA for this model; here it runs on CPU (float32 as SentEval), so that scores do
not depend on a GPU's kernels. ``tests/fidelity/test_fidelity_senteval.py`` checks every update against
a re-statement of SentEval's loop with torch's own modules and optimizer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.task import BoardColumn, Embed, Evaluation, Metrics, Task, TaskMetadata
from benchharness.data.readers import SICK_COLUMNS, STSB_COLUMNS, read_scored_tsv, sick_file, stsb_file
from benchharness.tasks.senteval.config import BOARDS, EXTRA_GROUP, RELATEDNESS, RelatednessConfig
from benchharness.tasks.senteval.split import SPLITS, abs_diff_prod, sorted_pairs

if TYPE_CHECKING:
    import torch

REFERENCE = "SentEval (Conneau & Kiela 2018), facebookresearch/SentEval tools/relatedness.py"


def soft_targets(scores: np.ndarray, nclasses: int = 5) -> np.ndarray:
    """SentEval's ``encode_labels``: each score as a distribution over classes 1..nclasses (float32)."""
    y = np.asarray(scores, dtype=np.float64)
    low = np.floor(y)
    out = np.zeros((len(y), nclasses), dtype=np.float32)
    rows = np.arange(len(y))
    upper = low.astype(np.int64)  # 0-based column of class floor(y)+1
    keep = (upper >= 0) & (upper < nclasses)
    out[rows[keep], upper[keep]] = (y - low)[keep]
    lower = upper - 1  # 0-based column of class floor(y)
    keep = (lower >= 0) & (lower < nclasses)
    out[rows[keep], lower[keep]] = (low - y + 1)[keep]
    return out


def dev_pearson(pred: np.ndarray, gold: np.ndarray) -> float:
    """``pearsonr(pred, gold)[0]`` with NaN (a constant side) counted as 0, as SentEval does."""
    from scipy.stats import pearsonr

    if np.ptp(pred) == 0 or np.ptp(gold) == 0:
        return 0.0
    r = float(pearsonr(pred, gold)[0])
    return 0.0 if math.isnan(r) else r


@dataclass
class RegressionFit:
    """What ``RelatednessRegressor.fit`` ends with: the best dev Pearson (a fraction) and when."""

    dev_pearson: float
    best_epoch: int
    stop_epoch: int
    checks: int


class RelatednessRegressor:
    """SentEval's ``RelatednessPytorch`` on CPU: one softmax regression trained by Adam on a mean
    squared error, with the bias carried by a column of ones (one matmul serves weight and bias)."""

    def __init__(
        self,
        train_x: np.ndarray,
        train_y: np.ndarray,
        config: RelatednessConfig = RELATEDNESS,
        seed: int = 1111,
        dtype: torch.dtype | None = None,
    ) -> None:
        import torch

        self.torch = torch
        self.config = config
        self.dtype = dtype or torch.float32
        X = torch.as_tensor(np.asarray(train_x), dtype=self.dtype)
        self.X = torch.cat([X, torch.ones(len(X), 1, dtype=self.dtype)], 1)
        self.Y = torch.as_tensor(np.asarray(train_y), dtype=self.dtype)
        if self.Y.shape != (len(X), config.nclasses):
            raise InvalidInputError(f"targets of shape {tuple(self.Y.shape)}, expected ({len(X)}, {config.nclasses})")
        self.rng = np.random.RandomState(seed)  # SentEval: np.random.seed(seed) in the constructor
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            layer = torch.nn.Linear(X.shape[1], config.nclasses)
        self.W = torch.cat([layer.weight.detach().T, layer.bias.detach().unsqueeze(0)]).to(self.dtype).contiguous()
        self.m = torch.zeros_like(self.W)
        self.v = torch.zeros_like(self.W)
        self.steps = 0
        self.nepoch = 0

    @property
    def weight(self) -> object:
        """``nn.Linear``'s weight, (nclasses, d)."""
        return self.W[:-1].T

    @property
    def bias(self) -> object:
        return self.W[-1]

    def step(self, rows: np.ndarray) -> None:
        """One Adam step on the mean squared error of the training rows ``rows``."""
        torch = self.torch
        idx = torch.as_tensor(np.asarray(rows, dtype=np.int64))
        xb, yb = self.X[idx], self.Y[idx]
        p = torch.softmax(xb @ self.W, 1)
        dp = (p - yb).mul_(2.0 / p.numel())  # d mean((p - y)^2) / dp
        dz = p * (dp - (dp * p).sum(1, keepdim=True))  # softmax's backward
        grad = xb.T @ dz
        if self.config.l2:
            grad.add_(self.W, alpha=self.config.l2)  # torch's coupled weight decay
        self.steps += 1
        b1, b2, eps, lr = 0.9, 0.999, 1e-8, self.config.lr
        self.m.lerp_(grad, 1 - b1)
        self.v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (self.v.sqrt() / math.sqrt(1 - b2**self.steps)).add_(eps)
        self.W.addcdiv_(self.m, denom, value=-lr / (1 - b1**self.steps))

    def train_pass(self) -> None:
        """One pass over the training rows in a fresh permutation of the stream."""
        bs, n = self.config.batch_size, len(self.X)
        perm = self.rng.permutation(n)
        for start in range(0, n, bs):
            self.step(perm[start : start + bs])

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Softmax outputs, float32 as SentEval's ``predict_proba`` returns them."""
        torch = self.torch
        X = torch.as_tensor(np.asarray(x), dtype=self.dtype)
        with torch.no_grad():
            return torch.softmax(X @ self.W[:-1] + self.W[-1], 1).numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        """``probabilities . [1..nclasses]`` in float64 (numpy's float32 x int64 dot)."""
        return self.probabilities(x).astype(np.float64) @ np.arange(1, self.config.nclasses + 1, dtype=np.float64)

    def fit(self, dev_x: np.ndarray, dev_scores: np.ndarray) -> RegressionFit:
        """SentEval's ``run`` up to the test prediction: train with early stopping on dev Pearson,
        then keep the best snapshot."""
        from benchharness.core.cpu_share import shared_threads

        cfg = self.config
        best, best_W, best_epoch, count, checks, stop = -1.0, self.W.clone(), 0, 0, 0, False
        gold = np.asarray(dev_scores, dtype=np.float64)
        with shared_threads("cpu") as threads:
            while not stop and self.nepoch <= cfg.max_epoch:
                threads.adjust()
                for _ in range(cfg.passes_per_check):
                    self.train_pass()
                self.nepoch += cfg.passes_per_check
                checks += 1
                r = dev_pearson(self.predict(dev_x), gold)
                if r > best:
                    best, best_W, best_epoch = r, self.W.clone(), self.nepoch
                else:
                    stop = count >= cfg.tenacity  # SentEval's counter is never reset
                    count += 1
        self.W = best_W
        return RegressionFit(best, best_epoch, self.nepoch, checks)


#: the leaderboard's column headers: "sup." tells them from the unsupervised STS columns
BOARD_HEADERS = {"SICKRelatedness-sup": "SICK-R sup.", "STSBenchmark-sup": "STS-B sup."}
#: per dataset: SentEval's files (train, dev, test), score columns, header, published split sizes
DATASETS = {
    "SICKRelatedness-sup": (
        tuple(sick_file(s) for s in ("train", "trial", "test")),
        SICK_COLUMNS,
        True,
        (4500, 500, 4927),
        "SICK relatedness (1-5), supervised: SentEval's regression on pair features, 4500 train / 4927 test pairs",
    ),
    "STSBenchmark-sup": (
        tuple(stsb_file(s) for s in SPLITS),
        STSB_COLUMNS,
        False,
        (5749, 1500, 1379),
        "STS Benchmark (0-5 as is), supervised: SentEval's regression on pair features, 5749 train / 1379 test",
    ),
}


class RelatednessTask(Task):
    """SICK-R or STS-B with SentEval's supervised regressor; per test pair the predicted score."""

    def __init__(
        self, name: str, config: RelatednessConfig = RELATEDNESS, sizes: tuple[int, int, int] | None = None
    ) -> None:
        """``sizes``: the pairs expected in train, dev and test (SentEval's files by default)."""
        super().__init__()
        self.rels, self.cols, self.header, self.sizes, description = DATASETS[name]
        self.sizes = sizes or self.sizes
        self.config = config
        self.metadata = TaskMetadata(
            name=name,
            family="relatedness",
            description=description,
            split="test",
            main_score="pearson",
            protocol="senteval-relatedness",
            reference=REFERENCE,
            groups=(EXTRA_GROUP,),
            n_samples=self.sizes[2],
            protocol_details={
                "regressor": config.to_dict(),
                "features": "[|u-v|, u*v]",
                "target": "gold score y as SentEval's encode_labels (Tai et al. 2015), scores as in the file",
                "order": "each split sorted by (tokens of A, tokens of B, score), as SentEval",
                "text": "whitespace tokens re-joined by single spaces",
                "device": "cpu, float32",
                "seed_regressor": "run seed",
                "scores": "test Pearson x100 (main), Spearman x100, MSE; dev Pearson x100 as devpearson",
                "per_item": "the 'cosine' array holds the regressor's predicted score p . [1..5]",
            },
            board=BOARDS[EXTRA_GROUP],
            board_columns=(BoardColumn(BOARD_HEADERS[name]),),
        )

    def _load(self, data: DataRoot) -> None:
        self.pairs = {}
        for split, rel, expected in zip(SPLITS, self.rels, self.sizes):
            path = self._path(data, rel, "senteval")
            a, b, gold = read_scored_tsv(path, self.cols, self.header)
            if len(gold) != expected:
                raise DataError(f"{path}: {len(gold)} scored pairs, expected {expected}; the file is not SentEval's")
            a, b, gold = sorted_pairs([s.split() for s in a], [s.split() for s in b], gold)
            self.pairs[split] = (a, b, np.asarray(gold, dtype=np.float64))

    def sentences(self) -> list[str]:
        return [s for split in SPLITS for s in (*self.pairs[split][0], *self.pairs[split][1])]

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics, and per test pair (in SentEval's order) the predicted score and the gold score."""
        from benchharness.scoring.metrics import constant_value, correlations

        t0 = time.perf_counter()
        feats = {s: abs_diff_prod(embed(self.pairs[s][0]), embed(self.pairs[s][1])) for s in SPLITS}
        gold = {s: self.pairs[s][2] for s in SPLITS}
        model = RelatednessRegressor(
            feats["train"], soft_targets(gold["train"], self.config.nclasses), self.config, seed
        )
        fit = model.fit(feats["dev"], gold["dev"])
        yhat = model.predict(feats["test"])
        value = constant_value(yhat)
        if value is not None:  # SentEval would report 0; no correlation with a constant exists
            raise InvalidInputError(
                f"{self.name}: the regressor predicts {value:.6g} for every test pair (are the pair "
                "features all alike?); a correlation with a constant is undefined"
            )
        metrics: Metrics = {
            **correlations(yhat, gold["test"]),
            "mse": float(np.mean((yhat - gold["test"]) ** 2)),
            "devpearson": 100.0 * fit.dev_pearson,
            "best_epoch": fit.best_epoch,
            "stop_epoch": fit.stop_epoch,
            **{f"n{s}": len(gold[s]) for s in SPLITS},
            "regressor_seconds": round(time.perf_counter() - t0, 3),
        }
        items = {
            "cosine": yhat,
            "gold": gold["test"],
            "subset": np.zeros(len(yhat), dtype=np.int16),
            "subset_names": np.array(["test"]),
        }
        return Evaluation(metrics, items, "sts")
