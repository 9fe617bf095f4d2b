"""unsupervised SimCSE: dropout views, InfoNCE (Gao et al., 2021): ``model.py`` the module,
``method.py`` its declaration."""
