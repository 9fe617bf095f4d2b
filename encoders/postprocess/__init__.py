"""Post-processors that refine any encoder's vectors, composed as ``base+post(k=v,...)+post``.

Importing this package registers them with ``benchharness.registry``; ``TUNERS`` plugs their
dev-set tuning into ``benchharness tune``.
"""

from encoders.postprocess import repal, tune_repal, tune_whitening, whitening  # noqa: F401  (registration)

TUNERS = {"repal": tune_repal, "whitening": tune_whitening}
