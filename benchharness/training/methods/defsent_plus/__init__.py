"""DefSent+: sentence embeddings from dictionary definitions, in rounds: ``model.py`` the method,
``command.py`` its command."""
