"""Encoder families (Hugging Face transformers, sentence-transformers, static word vectors),
post-processors that wrap any encoder, and the training methods that produce new encoders."""
