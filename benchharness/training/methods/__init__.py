"""Training methods and the loop they share.

Each method is one folder: ``model.py`` (its trainable module, loss and presets) and
``command.py`` (its ``benchharness train <method>`` flags, ``options``, ``count_examples`` and
``main``), declared as a ``methods`` plugin in ``pyproject.toml``. What they share: the contract
(``method.py``), settings (``train_config.py``), the base model (``base_model.py``), training data
(``train_data.py``), the loop (``loop.py``), optimizers (``optim.py``), resumption (``resume.py``),
the run's record (``manifest.py``), data-parallel training (``data_parallel.py``) and the command's
common steps (``launch.py``);
``training.py`` gathers them in one import for method authors. The committed recipes of the methods
are ``recipes.toml``.
"""
