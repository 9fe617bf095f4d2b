"""Layer 5, training orchestration: recipes and their keys (``recipes``), the run store
(``runstore``), training on demand (``on_demand``), trained recipes as a catalogue of names
(``catalogue``), and the STS-B dev evaluation a training run selects on (``dev_eval``)."""
