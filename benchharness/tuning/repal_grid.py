"""``benchharness tune repal``: l1 x l2 grid on STS-B dev (the paper's model selection).

The paper gives no grid. It reports that the best corpus weight l2 is often above 1 (Appendix C.2:
"a larger lambda" than whitening's implicit 1.0), so l2 spans 0..4 in steps of 0.2; l1 spans 0..1
in steps of 0.05 (small values matter: on sentence-trained encoders the best l1 is near 0).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import cast

from benchharness.core.flag_types import positive_int
from benchharness.evaluation.run_settings import RunSettings
from benchharness.training.options import option
from benchharness.tuning import grid as tuning

logger = logging.getLogger(__name__)

HELP = "grid over RepAL's l1, l2 on STS-B dev; registers the best as <encoder>+repal-tuned"


@dataclass(frozen=True)
class RepALTuning(tuning.TuneOptions):
    l1: str = option("0:1:0.05", "l1 values: start:stop:step or a comma list (default 0:1:0.05)")
    l2: str = option("0:4:0.2", "l2 values: start:stop:step or a comma list (default 0:4:0.2)")
    keywords: int = option(20, "words masked per sentence (default 20, Jieba's topK)", parse=positive_int)
    tfidf: str = option(tuning.DEFAULT_FIT, "corpus of the IDF statistics (default train-splits)")


OPTIONS = RepALTuning


def composition(options: RepALTuning, l1: float, l2: float) -> str:
    """The composition string, naming only the options that differ from RepAL's defaults."""
    params = [f"l1={tuning.format_number(l1)}", f"l2={tuning.format_number(l2)}"]
    if options.keywords != 20:
        params.append(f"keywords={options.keywords}")
    if options.fit != tuning.DEFAULT_FIT:
        params.append(f"fit={options.fit}")
    if options.tfidf != tuning.DEFAULT_FIT:
        params.append(f"tfidf={options.tfidf}")
    return f"{options.encoder}+repal({','.join(params)})"


def tune(options: RepALTuning, settings: RunSettings) -> str:
    """Tune, register the best chain, and return the grid and the best point (the command's output)."""
    from benchharness.encoders.postprocess.repal import RepAL, refine

    scorer = tuning.DevScorer(options.task, settings.data())
    repal = cast(RepAL, tuning.resolver_for(settings).get(composition(options, 0.0, 0.0)))  # the chain's last step
    logger.info(
        "encoding %d %s sentences and their masked forms with %s; v_mean over %s",
        len(scorer.sentences),
        options.task,
        options.encoder,
        options.fit,
    )
    fx, fx_star, v_mean = repal.components(scorer.sentences)
    points = [{"l1": a, "l2": b} for a in tuning.parse_grid(options.l1) for b in tuning.parse_grid(options.l2)]
    scored = tuning.grid_search(points, lambda p: refine(fx, fx_star, v_mean, p["l1"], p["l2"]), scorer)
    best = tuning.best_of(scored)
    tuning.warn_on_edge(scored, best, {"l1": "--l1", "l2": "--l2"})
    bare = scorer.score(fx)
    spec = composition(options, best["l1"], best["l2"])
    extra = {"base_score": bare, "keywords": options.keywords, "fit": options.fit, "tfidf": options.tfidf}
    tuning.register(options, "repal", spec, scored, best, extra, settings.config.runs_dir)
    return (
        tuning.render_grid(scored, "l1", "l2") + "\n"
        f"{options.task} {scorer.task.metadata.main_score}: {options.encoder} {bare:.2f} -> best {best['score']:.2f} "
        f"at l1={tuning.format_number(best['l1'])}, l2={tuning.format_number(best['l2'])}"
    )
