"""``benchharness tune repal``: l1 x l2 grid on STS-B dev (the paper's model selection).

The paper gives no grid. It reports that the best corpus weight l2 is often above 1 (Appendix C.2:
"a larger lambda" than whitening's implicit 1.0), so l2 spans 0..4 in steps of 0.2; l1 spans 0..1
in steps of 0.05 (small values matter: on sentence-trained encoders the best l1 is near 0).
"""

from __future__ import annotations

import argparse
import logging
from typing import cast

from benchharness.core.flag_types import positive_int
from benchharness.tuning import grid as tuning

logger = logging.getLogger(__name__)

HELP = "grid over RepAL's l1, l2 on STS-B dev; registers the best as <encoder>+repal-tuned"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    tuning.add_common(parser)
    parser.add_argument(
        "--l1", default="0:1:0.05", help="l1 values: start:stop:step or a comma list (default 0:1:0.05)"
    )
    parser.add_argument("--l2", default="0:4:0.2", help="l2 values: start:stop:step or a comma list (default 0:4:0.2)")
    parser.add_argument(
        "--keywords", type=positive_int, default=20, help="words masked per sentence (default 20, Jieba's topK)"
    )
    parser.add_argument(
        "--tfidf", default=tuning.DEFAULT_FIT, help="corpus of the IDF statistics (default train-splits)"
    )


def composition(args: argparse.Namespace, l1: float, l2: float) -> str:
    """The composition string, naming only the options that differ from RepAL's defaults."""
    params = [f"l1={tuning.format_number(l1)}", f"l2={tuning.format_number(l2)}"]
    if args.keywords != 20:
        params.append(f"keywords={args.keywords}")
    if args.fit != tuning.DEFAULT_FIT:
        params.append(f"fit={args.fit}")
    if args.tfidf != tuning.DEFAULT_FIT:
        params.append(f"tfidf={args.tfidf}")
    return f"{args.encoder}+repal({','.join(params)})"


def main(args: argparse.Namespace) -> str:
    """Tune, register the best chain, and return the grid and the best point (the command's output)."""
    from benchharness.encoders.postprocess.repal import RepAL, refine

    registry, data = tuning.setup(args)
    scorer = tuning.DevScorer(args.task, data)
    repal = cast(RepAL, registry.get(composition(args, 0.0, 0.0)))  # the chain's last step: RepAL
    logger.info(
        "encoding %d %s sentences and their masked forms with %s; v_mean over %s",
        len(scorer.sentences),
        args.task,
        args.encoder,
        args.fit,
    )
    fx, fx_star, v_mean = repal.components(scorer.sentences)
    points = [{"l1": a, "l2": b} for a in tuning.parse_grid(args.l1) for b in tuning.parse_grid(args.l2)]
    scored = tuning.grid_search(points, lambda p: refine(fx, fx_star, v_mean, p["l1"], p["l2"]), scorer)
    best = tuning.best_of(scored)
    tuning.warn_on_edge(scored, best, {"l1": "--l1", "l2": "--l2"})
    bare = scorer.score(fx)
    spec = composition(args, best["l1"], best["l2"])
    name = args.name or f"{args.encoder}+repal-tuned"
    tuning.register(
        name,
        spec,
        "repal",
        args.encoder,
        args.task,
        scored,
        best,
        {"base_score": bare, "keywords": args.keywords, "fit": args.fit, "tfidf": args.tfidf},
        args.configuration.runs_dir,
    )
    return (
        tuning.render_grid(scored, "l1", "l2") + "\n"
        f"{args.task} {scorer.task.metadata.main_score}: {args.encoder} {bare:.2f} -> best {best['score']:.2f} "
        f"at l1={tuning.format_number(best['l1'])}, l2={tuning.format_number(best['l2'])}"
    )
