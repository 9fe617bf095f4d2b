"""Layer 4, evaluation: names to encoders (``resolver``), whatever a caller holds as an encoder
(``models``), the run of encoders over tasks (``runner``) behind ``benchharness.evaluate``
(``evaluate``, returning ``results.Results``), the embedding cache (``cache``) and the check that
stored results reproduce (``verify``)."""
