"""Confidence intervals and paired significance tests computed from per-item outputs.

Everything here is a pure function from NumPy arrays (a cosine per pair, a prediction per test
item, a metric value per query) to plain records, seeded and deterministic, so that intervals and
comparisons can be recomputed from stored outputs without the encoder:

- ``bootstrap``: percentile-bootstrap intervals per task, stratified STS aggregates, Avg.;
- ``paired``: difference of two systems with a paired-bootstrap CI and a permutation p-value;
- ``significance``: Steiger's Z, McNemar's test, Holm's correction;
- ``vectorised``: the row-wise statistics that make thousands of resamples cheap.
"""

from benchharness.scoring.stats.bootstrap import (
    Interval,
    Replicates,
    average,
    bootstrap_accuracy,
    bootstrap_f1,
    bootstrap_fold_mean,
    bootstrap_mean,
    bootstrap_spearman,
    bootstrap_sts,
    derive_seed,
    weighted_average,
)
from benchharness.scoring.stats.paired import (
    Comparison,
    PairedReplicates,
    average_paired,
    paired_accuracy,
    paired_mean,
    paired_spearman,
    paired_sts,
    weighted_average_paired,
)
from benchharness.scoring.stats.significance import (
    McNemarResult,
    SteigerResult,
    holm,
    mcnemar,
    steiger_spearman,
    steiger_z,
)

__all__ = [
    "Comparison",
    "Interval",
    "McNemarResult",
    "PairedReplicates",
    "Replicates",
    "SteigerResult",
    "average",
    "average_paired",
    "bootstrap_accuracy",
    "bootstrap_f1",
    "bootstrap_fold_mean",
    "bootstrap_mean",
    "bootstrap_spearman",
    "bootstrap_sts",
    "derive_seed",
    "holm",
    "mcnemar",
    "paired_accuracy",
    "paired_mean",
    "paired_spearman",
    "paired_sts",
    "steiger_spearman",
    "steiger_z",
    "weighted_average",
    "weighted_average_paired",
]
