"""``benchharness tune whitening``: the kept dimension k on STS-B dev (Su et al. also report
reduced k, e.g. 256 of 768)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from benchharness.core.errors import InvalidInputError
from benchharness.evaluation.run_settings import RunSettings
from benchharness.training.options import option
from benchharness.tuning import grid as tuning

HELP = "grid over whitening's k on STS-B dev; registers the best as <encoder>+whitening-tuned"


@dataclass(frozen=True)
class WhiteningTuning(tuning.TuneOptions):
    k: str | None = option(None, "comma list of k values (default: multiples of rank/8 up to the fit's rank)")


OPTIONS = WhiteningTuning


def tune(options: WhiteningTuning, settings: RunSettings) -> str:
    """Tune, register the best k, and return the grid and the best point (the command's output)."""
    import numpy as np

    from benchharness.encoders.postprocess.whitening import Whitening

    scorer = tuning.DevScorer(options.task, settings.data())
    fit = "" if options.fit == tuning.DEFAULT_FIT else f"fit={options.fit}"
    chain = f"{options.encoder}+whitening({fit})" if fit else f"{options.encoder}+whitening"
    white = cast(Whitening, tuning.resolver_for(settings).get(chain))
    white.fit()
    full = np.asarray(white.encode(scorer.sentences), dtype=np.float64)
    dim = full.shape[1]  # the fit's rank (see encoders/postprocess/whitening.py)
    ks = [int(k) for k in options.k.split(",")] if options.k else sorted({max(1, dim * i // 8) for i in range(1, 9)})
    if max(ks) > dim:
        raise InvalidInputError(f"k={max(ks)} exceeds the dimension {dim} of {options.encoder}")
    # the transform with k dimensions is the first k columns of the full one
    scored = tuning.grid_search([{"k": k} for k in ks], lambda p: full[:, : p["k"]], scorer)
    best = tuning.best_of(scored)
    if best["k"] < dim:  # k cannot grow beyond the rank
        tuning.warn_on_edge(scored, best, {"k": "--k"})
    params = ",".join(p for p in (f"k={best['k']}" if best["k"] != dim else "", fit) if p)
    spec = f"{options.encoder}+whitening({params})" if params else f"{options.encoder}+whitening"
    tuning.register(options, "whitening", spec, scored, best, {"fit": options.fit}, settings.config.runs_dir)
    return tuning.render_grid(scored, "k", None) + f"\nbest k={best['k']} ({best['score']:.2f})"
