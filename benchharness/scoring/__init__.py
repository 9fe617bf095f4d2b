"""Layer 2, scoring: the metrics (Pearson, Spearman, cosine), ranking metrics with one tie rule,
bootstrap intervals of stored results (``confidence``) and paired statistics (``stats``)."""
