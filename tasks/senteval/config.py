"""SentEval's classifier settings, apart from the classifier itself (``senteval.classifier``,
torch and scikit-learn) so that the transfer tasks can be listed and built without them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from benchharness.tasks import boards

#: the SentEval groups, declared here once: ``transfer`` is the seven the papers report (what
#: papers mean by it), ``senteval-extra`` the tasks beyond them, ``probing`` the ten probing tasks,
#: ``senteval-all`` STS12-16 and every one of those; a config other than the default appends its name
TRANSFER_GROUP, EXTRA_GROUP, PROBING_GROUP, ALL_GROUP = "transfer", "senteval-extra", "probing", "senteval-all"
#: the leaderboard's table of each group (the default config's tasks: a prototyping config is not
#: comparable to papers, so its tasks are not on the board)
BOARDS = {TRANSFER_GROUP: boards.TRANSFER, EXTRA_GROUP: boards.SENTEVAL_FURTHER, PROBING_GROUP: boards.PROBING}
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

#: SNLI's ``noreg``: SentEval's SplitClassifier replaces the L2 grid by this one value
NOREG_GRID: tuple[float, ...] = (1e-9,)
#: what SentEval's SNLI sets on a copy of the user's classifier config (its comment: fewer epochs)
SNLI_OVERRIDES = {"max_epoch": 15, "epoch_size": 1}

#: SentEval's README, probing tasks: "an MLP with a Sigmoid nonlinearity", nhid and dropout
#: tuned on the dev set over these values (each point with SplitClassifier's L2 grid)
PROBING_NHID: tuple[int, ...] = (50, 100, 200)
PROBING_DROPOUT: tuple[float, ...] = (0.0, 0.1, 0.2)


@dataclass(frozen=True)
class RelatednessConfig:
    """SentEval's ``RelatednessPytorch`` (SICK-R and STS-B, supervised), all hard-coded there: no
    user config reaches it, so the prototyping config changes nothing for these tasks."""

    nclasses: int = 5
    batch_size: int = 64
    passes_per_check: int = 50  # ``trainepoch(nepoches=50)`` between two dev checks
    tenacity: int = 3
    max_epoch: int = 1000
    l2: float = 0.0
    lr: float = 1e-3  # torch.optim.Adam's default

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "model": "Linear(d, 5) + softmax on [|u-v|, u*v]",
            "loss": "MSE between the softmax and the soft target, mean over batch x classes",
            "optimizer": "Adam (torch defaults)",
            "early_stopping": "dev Pearson of probabilities . [1..5]",
        }


RELATEDNESS = RelatednessConfig()


#: task name -> (file under probing/, what it probes); SentEval's names and files
PROBING_TASKS: dict[str, tuple[str, str]] = {
    "Length": ("sentence_length.txt", "sentence length, 6 bins (SentLen)"),
    "WordContent": ("word_content.txt", "which of 1000 words the sentence holds (WC)"),
    "Depth": ("tree_depth.txt", "depth of the syntactic tree, 5..12 (TreeDepth)"),
    "TopConstituents": ("top_constituents.txt", "sequence of top constituents, 20 classes (TopConst)"),
    "BigramShift": ("bigram_shift.txt", "two adjacent words swapped or not (BShift)"),
    "Tense": ("past_present.txt", "tense of the main verb (Tense)"),
    "SubjNumber": ("subj_number.txt", "number of the main clause's subject (SubjNum)"),
    "ObjNumber": ("obj_number.txt", "number of the main clause's direct object (ObjNum)"),
    "OddManOut": ("odd_man_out.txt", "a noun or verb replaced or not (SOMO)"),
    "CoordinationInversion": ("coordination_inversion.txt", "coordinated clauses inverted or not (CoordInv)"),
}
#: the paper's short names, accepted as aliases
PAPER_NAMES = {
    "SentLen": "Length",
    "WC": "WordContent",
    "TreeDepth": "Depth",
    "TopConst": "TopConstituents",
    "BShift": "BigramShift",
    "SubjNum": "SubjNumber",
    "ObjNum": "ObjNumber",
    "SOMO": "OddManOut",
    "CoordInv": "CoordinationInversion",
}
