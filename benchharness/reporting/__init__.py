"""Layer 5, reporting from stored results: the leaderboard, paired comparisons (``compare``) and
the representation analysis (alignment, uniformity, isotropy) with its figures."""
