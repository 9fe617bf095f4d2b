"""``benchharness tune repal|whitening``: grid search of a post-processor's parameters on a dev
split, then a run manifest that registers the winner under a name (see ``grid``).

This is orchestration (registry, cache, runner, tasks), so it lives in the core; the
post-processors themselves (``encoders.postprocess``) know nothing of it. Each tuner is a module
with ``HELP``, ``add_arguments(parser)`` and ``main(args) -> int``, registered in ``TUNERS``.
"""

from benchharness.tuning import repal, whitening

TUNERS = {"repal": repal, "whitening": whitening}
