"""SentEval's classifier settings, apart from the classifier itself (``senteval_classifier``,
torch and scikit-learn) so that the transfer tasks can be listed and built without them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: SentEval's grid for the PyTorch classifier: 10**t for t in -5..-2
L2_GRID: tuple[float, ...] = tuple(10.0**t for t in range(-5, -1))
VALIDATION_SPLIT = 0.05


@dataclass(frozen=True)
class ClassifierConfig:
    """One of SentEval's documented classifier settings (plus the k of its cross-validations)."""

    name: str
    kfold: int
    optim: str  # "adam" | "rmsprop", torch defaults
    batch_size: int
    tenacity: int
    epoch_size: int
    max_epoch: int = 200

    def to_dict(self) -> dict:
        return {**asdict(self), "l2_grid": list(L2_GRID), "classifier": "logistic regression (nhid=0)"}


CONFIGS: dict[str, ClassifierConfig] = {
    # what the literature reports (SentEval README "default config")
    "default": ClassifierConfig("default", kfold=10, optim="adam", batch_size=64, tenacity=5, epoch_size=4),
    # SentEval README "for prototyping": model selection only, not comparable to papers
    "fast": ClassifierConfig("fast", kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2),
}
