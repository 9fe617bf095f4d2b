"""Layer 2, data: readers of the evaluation file formats (SentEval's STS, TSV, SICK) and the
unlabelled corpora built from them (the fit corpora of post-processors, training sentences)."""
