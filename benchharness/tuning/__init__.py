"""Layer 5, tuning: ``benchharness tune repal|whitening``, a grid search of a post-processor's
parameters on a dev split, then a run manifest that registers the winner under a name (``grid``).

Each tuner (``repal_grid``, ``whitening_grid``) is a ``tuners`` plugin module with ``HELP``,
``OPTIONS`` (its typed options, from which the command takes its flags) and ``tune(options,
settings) -> str``; the post-processors themselves (``benchharness.encoders.postprocess``) know
nothing of tuning.
"""
