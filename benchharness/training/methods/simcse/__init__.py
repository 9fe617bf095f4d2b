"""unsupervised SimCSE: dropout views, InfoNCE (Gao et al., 2021): ``model.py`` the method,
``command.py`` its command."""
