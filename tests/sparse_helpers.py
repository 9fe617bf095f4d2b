"""A tiny SPLADE model for the sparse kind's tests and benchmark, built offline and seeded.

A random BERT with the MiniLM vocabulary (``tests.helpers.make_tiny_bert``) gets a masked-language-
model head and becomes sentence-transformers 6's ``SparseEncoder`` (a ``Transformer`` module for the
fill-mask task, then ``SpladePooling``: max over tokens of relu of the MLM logits), saved with
``save()`` so that the folder says ``model_type: SparseEncoder`` and ``st:<folder>`` loads it.

Its weights are set so that it behaves like a lexical SPLADE rather than noise: word embeddings of
unit scale (the layers' own weights stay small, so a token's hidden state stays close to its word
embedding), the head's transform the identity, and the output embeddings tied to the input ones,
so a token's own word scores highest at its position; a bias of ``bias`` on every logit leaves a
text a few dozen active terms (its words, [CLS], [SEP] and some near neighbours).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import make_tiny_bert

HIDDEN = 64
#: the logit every active term must exceed: about 30 active terms per sentence
BIAS = -30.0
MAX_LENGTH = 64


def make_tiny_splade(folder: Path, seed: int = 0, bias: float = BIAS) -> Path:
    """The model described above, saved to ``folder`` (returned)."""
    import torch
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling
    from transformers import BertForMaskedLM

    from benchharness.encoders.checkpoint import quiet_loading

    bert = make_tiny_bert(folder / "bert", seed=seed, hidden=HIDDEN, dropout=0.0)
    torch.manual_seed(seed)
    with quiet_loading():  # the head is new: transformers reports it initialised
        mlm = BertForMaskedLM.from_pretrained(bert)
    with torch.no_grad():
        mlm.bert.embeddings.word_embeddings.weight.normal_(0.0, 1.0)  # the decoder shares it (tied)
        mlm.cls.predictions.transform.dense.weight.copy_(torch.eye(HIDDEN))
        mlm.cls.predictions.transform.dense.bias.zero_()
        mlm.cls.predictions.bias.fill_(bias)
    with quiet_loading():
        mlm.save_pretrained(bert)
        model = SparseEncoder(
            modules=[
                Transformer(str(bert), transformer_task="fill-mask", max_seq_length=MAX_LENGTH),
                SpladePooling(pooling_strategy="max"),
            ],
            device="cpu",
        )
        model.save(str(folder / "splade"))
    return folder / "splade"
