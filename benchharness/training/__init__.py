"""Layer 5, training orchestration: recipes and their keys (``recipes``), the run store
(``runstore``), training on demand (``on_demand``), trained recipes as a catalogue of names
(``catalogue``), the STS-B dev evaluation a training run selects on (``dev_eval``), and the
evaluators for other people's training loops (``evaluators``: sentence-transformers, transformers)."""
