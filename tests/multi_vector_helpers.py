"""A ColBERT-style model for the multi-vector kind's tests and benchmark, built offline and seeded.

sentence-transformers 6's ``MultiVectorEncoder`` as it builds one on a plain transformer
(``MultiVectorEncoder._load_default_modules``: the ``Transformer`` module, a ``Dense`` projection of
the token states to 128 dimensions without bias, a ``MultiVectorMask``, a token-wise ``Normalize``),
on a MiniLM checkpoint of the shared hub cache, with the projection seeded instead of left to
torch's global generator, and ColBERT's query and document handling switched on so that the tests
exercise it: the prompts ``"[Q] "`` and ``"[D] "``, queries expanded with ``[MASK]`` to a fixed
``QUERY_TOKENS`` (attended, as ColBERT does), documents cut at ``DOCUMENT_TOKENS`` with punctuation
dropped from their scored tokens. Saved with ``save()``, so the folder says ``model_type:
MultiVectorEncoder`` and ``st:<folder>`` loads it.

A random projection of a paraphrase model's token states keeps their dot products roughly
(Johnson-Lindenstrauss), so the model retrieves paraphrases well above chance.
"""

from __future__ import annotations

import string
from pathlib import Path

from tests.helpers import HF_CACHE

DIMENSION = 128
QUERY_TOKENS = 32
DOCUMENT_TOKENS = 128


def make_colbert(folder: Path, base: str, seed: int = 0, similarity: str = "maxsim") -> Path:
    """The model described above on the hub checkpoint ``base``, saved to ``folder`` (returned)."""
    import torch
    from huggingface_hub import snapshot_download
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    from benchharness.encoders.checkpoint import quiet_loading

    checkpoint = snapshot_download(base, cache_dir=HF_CACHE, local_files_only=True)
    with quiet_loading():  # MiniLM-L3 has no pooler: transformers reports it initialised, and it is unused
        transformer = Transformer(
            checkpoint,
            document_length=DOCUMENT_TOKENS,
            query_expansion={"strategy": "fixed", "attend": True, "token": "[MASK]", "length": QUERY_TOKENS},
        )
    torch.manual_seed(seed)
    projection = Dense(
        transformer.get_embedding_dimension(),
        DIMENSION,
        bias=False,
        activation_function=torch.nn.Identity(),
        module_input_name="token_embeddings",
    )
    model = MultiVectorEncoder(
        modules=[
            transformer,
            projection,
            MultiVectorMask(skiplist_words=list(string.punctuation)),
            Normalize(module_input_name="token_embeddings"),
        ],
        prompts={"query": "[Q] ", "document": "[D] "},
        similarity_fn_name=similarity,
        device="cpu",
    )
    with quiet_loading():  # no "Writing model shards" bar
        model.save(str(folder))
    return folder
