"""Layer 5, tuning: ``benchharness tune repal|whitening``, a grid search of a post-processor's
parameters on a dev split, then a run manifest that registers the winner under a name (``grid``).

Each tuner (``repal_grid``, ``whitening_grid``) is a ``tuners`` plugin with ``HELP``,
``add_arguments(parser)`` and ``main(args) -> int``; the post-processors themselves
(``benchharness.encoders.postprocess``) know nothing of tuning.
"""
