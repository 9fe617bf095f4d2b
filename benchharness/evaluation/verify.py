"""Does a fresh computation reproduce the stored results? The check behind ``run --verify`` and the
regression tests.

A stored result is reproduced when the fresh one was computed by the same encoder (identity hash),
on the same data (sha256 of the files read) under the same protocol, and every stored metric agrees
within ``TOLERANCE`` on the x100 scale.

``TOLERANCE`` comes from a measurement, not a guess (``benchmarks/regression_noise.py``, minilm-l3
on the STS suite, 2026-11-22, a 2-core AMD EPYC with AVX2, no AVX-512): rerunning under torch
thread counts 1 and 2 moved no metric at a fixed batch size, nor did MKL/oneDNN restricted to AVX2
or to SSE4.2 kernels (``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``: the code paths of other
CPUs); other batch compositions (batch size 7 or 32 instead of the stored 64: other padding, other
GEMM shapes) moved subset Spearmans by up to 0.0102, and another machine of this kind was seen to
differ by 0.0018. Post-processor chains add their own: stored (fit vectors out of the cache,
encoded in other batches) against a fresh ``run --verify``, STS12's surprise.SMTnews Spearman moved
by 0.0614 for ``minilm-l3+whitening+repal-tuned`` (0.0462 for ``minilm-l3+whitening``, 0.0259 for
``minilm-l3+repal-tuned``) while ``all.spearman`` moved 0.0002-0.01: ~1e-7 changes of the vectors
reorder the tied cosines of that subset's many identical-sentence pairs. The inference engine (the
default backend since 2026-11-22) does the same: its exact-length batches change vectors by ~1e-7
from the reference path the stored results were computed with, and ``run --verify`` of all 168
stored STS results of transformer encoders (2026-11-22) moved STS12's surprise.SMTnews Spearman by
up to 0.0869 (``minilm-l3+whitening(fit=sts-unlabeled)``; minilm-l6 0.0766, minilm-l3 0.0569),
every other task's metrics by at most 0.0008, main scores by at most 0.01. The tolerance is twice
the largest of these, so float noise never fails a check, while a real change (a loader, the pooling,
the metric code) moves main scores by tenths of a point and fails it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchharness.core.results import Result

#: largest metric deviation measured with batch compositions other than the stored one (x100 scale)
BATCH_DEVIATION = 0.0102
#: largest metric deviation measured with MKL/oneDNN limited to AVX2 or SSE4.2 kernels (x100 scale)
ISA_DEVIATION = 0.0
#: the largest deviation seen between two machines of this kind (x100 scale)
CROSS_MACHINE_DEVIATION = 0.0018
#: largest deviation of a post-processor chain, stored (fit vectors from the cache) vs fresh (x100)
CHAIN_DEVIATION = 0.0614
#: largest deviation of the inference engine (default backend) from the stored reference-path results (x100)
ENGINE_DEVIATION = 0.0869
#: on the x100 scale: twice the largest measured float-noise deviation (see the module docstring)
TOLERANCE = round(
    2 * max(BATCH_DEVIATION, ISA_DEVIATION, CROSS_MACHINE_DEVIATION, CHAIN_DEVIATION, ENGINE_DEVIATION), 2
)


@dataclass(frozen=True)
class Check:
    """One (encoder, task) comparison of a stored result with a fresh one."""

    encoder: str
    task: str
    verdict: str  # reproduced | differs | identity changed | data changed | protocol changed | not stored
    stored: float | None
    fresh: float
    max_deviation: float | None  # the largest |fresh - stored| over every stored metric
    worst_metric: str | None

    @property
    def ok(self) -> bool:
        return self.verdict == "reproduced"


def compare(stored: Result | None, fresh: Result, tolerance: float = TOLERANCE) -> Check:
    """Compare every numeric metric of ``stored`` with ``fresh``; say why they are not comparable
    when identity, data or protocol differ (then the numbers need not agree)."""
    if stored is None:
        return Check(fresh.encoder, fresh.task, "not stored", None, fresh.main_score, None, None)
    worst, worst_key = 0.0, None
    for key, value in stored.metrics.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        other = fresh.metrics.get(key)
        deviation = math.inf if not isinstance(other, (int, float)) else abs(float(other) - float(value))
        if deviation > worst or worst_key is None:
            worst, worst_key = deviation, key
    if stored.encoder_identity.get("hash") != fresh.encoder_identity.get("hash"):
        verdict = "identity changed"
    elif stored.data.get("sha256") != fresh.data.get("sha256"):
        verdict = "data changed"
    elif stored.fingerprint()[2] != fresh.fingerprint()[2]:
        verdict = "protocol changed"
    else:
        verdict = "reproduced" if worst <= tolerance else "differs"
    return Check(fresh.encoder, fresh.task, verdict, stored.main_score, fresh.main_score, worst, worst_key)
