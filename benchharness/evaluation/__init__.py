"""Layer 4, evaluation: names to encoders (``resolver``), the run of encoders over tasks
(``runner``), the embedding cache (``cache``) and the check that stored results reproduce
(``verify``)."""
