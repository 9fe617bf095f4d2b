"""ConSERT: contrastive learning over augmented views (Yan et al., 2021): ``model.py`` the method,
``command.py`` its command."""
