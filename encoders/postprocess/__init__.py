"""Post-processors that refine any encoder's vectors, composed as ``base+post(k=v,...)+post``.

Each is a ``postprocessors`` plugin (``pyproject.toml``); tuning their parameters on a dev split is
orchestration and lives in ``benchharness.tuning``.
"""
