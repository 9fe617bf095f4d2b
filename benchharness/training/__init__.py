"""Layer 5, training: one settings value and a plan, built once at each edge and handed to
``train.train_with`` (``settings``, ``plan``, ``train``); the harness's side of a method's run and its
loop (``harness``, ``loop``); recipes and their keys (``recipes``), the run store (``runstore``), the
time estimates (``estimate``), trained recipes as a catalogue of names trained on demand
(``catalogue``), the STS-B dev evaluation a training run selects on (``dev_eval``), and the evaluators
for other people's training loops (``evaluators``: sentence-transformers, transformers)."""
