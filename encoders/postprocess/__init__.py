"""Post-processors that refine any encoder's vectors, composed as ``base+post(k=v,...)+post``.

Importing this package registers them with ``benchharness.registry``; tuning their parameters on
a dev split is orchestration and lives in ``benchharness.tuning``.
"""

from encoders.postprocess import repal, whitening  # noqa: F401  (registration)
