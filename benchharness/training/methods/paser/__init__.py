"""PaSeR: paraphrase-augmented sentence representations: ``model.py`` the module, ``method.py`` its declaration."""
