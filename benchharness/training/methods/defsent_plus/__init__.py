"""DefSent+: sentence embeddings from dictionary definitions, in rounds: ``model.py`` the module,
``method.py`` its declaration and rounds."""
