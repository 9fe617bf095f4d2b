"""PaSeR: paraphrase-augmented sentence representations: ``model.py`` the method, ``command.py`` its command."""
