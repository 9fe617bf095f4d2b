"""The training methods: one folder each, a declaration plus a model: ``model.py`` (its trainable
module, loss, options and presets, which the module's class names) and ``method.py`` (its examples
and the ``Method`` that declares them from the module, a ``methods`` plugin in ``pyproject.toml``).
What they share sits one level up, in ``training/``: the contract (``method.py``), the options
(``options.py``), the harness that runs a method (``harness.py``), the base model, the training
data, the loop and its parts, and the committed recipes (``recipes.toml``).
"""
