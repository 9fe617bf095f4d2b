"""The training methods: one folder each, ``model.py`` (its trainable module, loss and presets) and
``method.py`` (its options, its ``train(options, context)`` and the ``Method`` that declares them, a
``methods`` plugin in ``pyproject.toml``). What they share sits one level up, in ``training/``: the
contract (``method.py``), the options (``options.py``), the base model, the training data, the loop
and its parts, and the committed recipes (``recipes.toml``).
"""
