"""ConSERT: contrastive learning over augmented views (Yan et al., 2021): ``model.py`` the module,
``method.py`` its declaration."""
