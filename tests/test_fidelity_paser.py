"""PaSeR, one step against the official implementation (chengzhipanpan/PaSeR, paser/models.py and
train.py), and RAKE against hand-worked sentences.

The official unsupervised forward, rewritten by hand: the sentence ``s`` and its phrase-masked copy
``s~`` in one encoder pass (interleaved rows), [CLS] of the last layer (``cls_before_pooler``);
the signal ``[t(z1 * W z2), k(z1 - W z2), z1, W z2]`` (the paper's is ``[Es, Es~, m|Es - Es~|,
n|Es * Es~|]``: both are tested); a ``BartDecoder`` whose ``embed_tokens`` is the BERT embedding
module (embed_scale 1), no decoder padding mask, input = the labels shifted right after [CLS]
(-100 -> pad 0), labels = phrase tokens + [SEP] padded with -100 to the sentence width; one
``lm_head`` (BertLMPredictionHead: dense, gelu, LayerNorm, output matrix + bias) for the decoder
and for MLM on ``s`` (a second encoder pass); loss = decoder CE + mlm_weight * MLM CE.

Dropout is off on both sides (``eval()``): the official order of operations (encoder, MLM pass,
decoder) differs from the project's (encoder, decoder, MLM pass), so the two could not share dropout
draws; every dropout of the model is a plain ``nn.Dropout``/functional dropout of the same rates.

The official LM head is ``BertLMPredictionHead(config)``, loaded from the checkpoint's
``cls.predictions`` when ``--do_mlm``; its output matrix is then a *copy* of the word embeddings,
an independent parameter (``BertForCL`` defines no ``get_output_embeddings``, so nothing ties it).
The project ties it to the word embeddings: same loss, but the word embeddings' gradient also
receives the LM head's (xfail below).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from conftest import DATA
from encoders.methods.paser import PaSeR, mlm_mask
from encoders.methods.rake import rake
from fidelity import TOL, cross_entropy, grads, load_tiny, max_abs_diff, reference_params, trainable

SENTENCES = ["the quick brown fox jumps over the lazy dog", "a young girl plays soccer in the park",
             "stock markets fell sharply after the announcement", "two men are cooking dinner together"]
WORD_EMBEDDINGS = "encoder.embeddings.word_embeddings.weight"


def nltk_stopwords() -> set[str]:
    path = DATA / "nltk_data" / "corpora" / "stopwords" / "english"
    if not path.exists():
        pytest.skip(f"NLTK stopwords missing at {path}")
    return {w.strip() for w in path.read_text(encoding="utf8").splitlines() if w.strip()}


def test_rake_scores_by_hand():
    """RAKE (Rose et al. 2010) on two worked sentences: candidates are the runs between stopwords
    and punctuation; word score = deg/freq with deg = summed length of the candidates holding the
    word; phrase score = sum of its word scores."""
    stop = nltk_stopwords()
    assert {"the", "over", "and", "with"} <= stop
    assert not {"quick", "brown", "fox", "jumps", "lazy", "dog", "cat", "red", "wine", "old", "cheese", "pair",
                "well"} & stop
    text = "The quick brown fox jumps over the lazy dog and the lazy cat."
    # candidates: quick brown fox jumps (4), lazy dog (2), lazy cat (2)
    # lazy: deg 2 + 2 = 4, freq 2 -> 2; dog, cat: 2 / 1 = 2; quick, brown, fox, jumps: 4 / 1 = 4
    got = rake(text, frozenset(stop))
    assert [(p.text, p.score) for p in got] == [("quick brown fox jumps", 16.0), ("lazy dog", 4.0), ("lazy cat", 4.0)]
    start = text.index("quick")
    assert got[0].spans == ((start, start + len("quick brown fox jumps")),)
    text = "Red wine, red wine and old cheese pair well with red wine."
    # candidates: red wine (2) x 3, old cheese pair well (4); red, wine: deg 6 / freq 3 = 2; old..well: 4
    got = rake(text, frozenset(stop), top_k=3)
    assert [(p.text, p.score) for p in got] == [("old cheese pair well", 16.0), ("red wine", 4.0)]
    starts = [0, text.index("red wine"), text.rindex("red wine")]
    assert got[1].spans == tuple((s, s + len("red wine")) for s in starts)


def test_mlm_masking_draws_as_the_official_collator(tiny_bert):
    """``mask_tokens`` of the official collator, by hand, consumes the same random numbers."""
    _, tokenizer = load_tiny(tiny_bert)
    enc = tokenizer(SENTENCES * 4, padding=True, return_tensors="pt", return_special_tokens_mask=True)
    ids = enc["input_ids"]
    torch.manual_seed(11)
    got_inputs, got_labels = mlm_mask(ids, enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0), 0.15,
                                      tokenizer.mask_token_id, len(tokenizer))
    torch.manual_seed(11)
    inputs, labels = ids.clone(), ids.clone()
    probability = torch.full(labels.shape, 0.15)
    special = torch.tensor([tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True)
                            for row in labels.tolist()], dtype=torch.bool)
    probability.masked_fill_(special, value=0.0)
    masked = torch.bernoulli(probability).bool()
    labels[~masked] = -100
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked
    inputs[replaced] = tokenizer.mask_token_id
    randomised = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked & ~replaced
    words = torch.randint(len(tokenizer), labels.shape, dtype=torch.long)
    inputs[randomised] = words[randomised]
    assert torch.equal(got_inputs, inputs) and torch.equal(got_labels, labels)
    assert int(masked.sum()) > 5


def lm_head(params: dict[str, torch.Tensor], output: torch.Tensor, hidden: torch.Tensor, eps: float) -> torch.Tensor:
    """BertLMPredictionHead by hand: dense, gelu, LayerNorm, then ``output`` matrix and bias."""
    x = F.gelu(hidden @ params["lm_head.transform.dense.weight"].T + params["lm_head.transform.dense.bias"])
    x = F.layer_norm(x, x.shape[-1:], params["lm_head.transform.LayerNorm.weight"],
                     params["lm_head.transform.LayerNorm.bias"], eps)
    return x @ output.T + params["lm_head.bias"]


def official_loss(reference, decoder, params, output, batch, signal: str, cls_id: int) -> torch.Tensor:
    """The official unsupervised PaSeR loss by hand (t = k = 1, m = n = 10, mlm_weight 1)."""
    n = batch["mlm_input_ids"].shape[0]
    rows = {k: torch.stack([batch[k][:n], batch[k][n:]], dim=1).flatten(0, 1)  # (bs, 2, len) -> (2 bs, len)
            for k in ("input_ids", "attention_mask", "token_type_ids")}
    cls = reference(**rows).last_hidden_state[:, 0]
    z1, z2 = cls[0::2], cls[1::2]
    if signal == "official":
        w = z2 @ params["signal.projection.weight"].T + params["signal.projection.bias"]
        memory = torch.stack([z1 * w, z1 - w, z1, w], dim=1)
    else:
        memory = torch.stack([z1, z2, 10 * (z1 - z2).abs(), 10 * (z1 * z2).abs()], dim=1)
    width = batch["input_ids"].shape[1]
    labels = torch.full((n, width), -100, dtype=torch.long)
    labels[:, : batch["decoder_labels"].shape[1]] = batch["decoder_labels"]
    dec_in = torch.zeros_like(labels)  # shift_tokens_right(labels, pad 0, start [CLS])
    dec_in[:, 1:] = labels[:, :-1]
    dec_in[:, 0] = cls_id
    dec_in[dec_in == -100] = 0
    hidden = decoder(inputs_embeds=reference.embeddings(input_ids=dec_in), encoder_hidden_states=memory,
                     encoder_attention_mask=torch.ones(n, 4, dtype=torch.long)).last_hidden_state
    eps = reference.config.layer_norm_eps
    decoder_ce = cross_entropy(lm_head(params, output, hidden, eps).flatten(0, 1), labels.flatten())
    mlm_hidden = reference(input_ids=batch["mlm_input_ids"], attention_mask=batch["attention_mask"][:n],
                           token_type_ids=batch["token_type_ids"][:n]).last_hidden_state
    mlm_ce = cross_entropy(lm_head(params, output, mlm_hidden, eps).flatten(0, 1), batch["mlm_labels"].flatten())
    return decoder_ce + mlm_ce


def run_step(folder, signal: str):
    """The project's loss and gradients on one collated batch, and the official ones by hand; the
    official LM head's output matrix starts as a copy of the word embeddings (untied)."""
    encoder, tokenizer = load_tiny(folder)
    torch.manual_seed(0)
    method = PaSeR(encoder, tokenizer, max_length=32, top_k=3, augment="none", signal=signal, decoder_layers=2,
                   decoder_heads=16).double()
    assert not method.decoder.config.scale_embedding  # official embed_scale = 1
    reference, _ = load_tiny(folder)
    decoder = copy.deepcopy(method.decoder)
    params = reference_params(method, reference)
    params.update({f"decoder.{k}": p for k, p in decoder.named_parameters()})
    output = reference.embeddings.word_embeddings.weight.detach().clone().requires_grad_(True)
    torch.manual_seed(5)
    batch = method.collate(SENTENCES)
    assert int((batch["decoder_labels"] != -100).sum()) > 4 and int((batch["mlm_labels"] != -100).sum()) > 0
    method.eval(), reference.eval(), decoder.eval()

    loss = method(batch).loss
    loss.backward()
    expected = official_loss(reference, decoder, params, output, batch, signal, tokenizer.cls_token_id)
    expected.backward()
    return loss, expected, grads(trainable(method)), grads(params), output.grad


@pytest.mark.parametrize("signal", ["official", "paper"])
def test_paser_loss_and_gradients(tiny_bert, signal):
    loss, expected, got, official, head_grad = run_step(tiny_bert, signal)
    loss_diff = abs(float(loss.detach()) - float(expected.detach()))
    tied = got.pop(WORD_EMBEDDINGS)
    untied = official.pop(WORD_EMBEDDINGS)
    diff, where = max_abs_diff(got, official)
    # the project's tied matrix collects the official encoder-side and LM-head-side gradients
    tie_diff = float((tied - (untied + head_grad)).abs().max())
    print(f"paser {signal}: |loss - official| = {loss_diff:.1e}, max |grad - official| = {diff:.1e} ({where}), "
          f"word embeddings vs official emb + head grads: {tie_diff:.1e}")
    assert loss_diff < TOL
    assert diff < TOL, f"gradient of {where} differs by {diff:.2e}"
    assert tie_diff < TOL
    assert float(head_grad.abs().max()) > 1e-3  # the head's share is not negligible


@pytest.mark.xfail(strict=True, reason=(
    "the official lm_head is an untied BertLMPredictionHead (output matrix copied from cls.predictions, then "
    "trained separately); the project ties the LM head's output matrix to the word embeddings, so the word "
    "embeddings also receive the decoder's and MLM's output-layer gradient"))
def test_paser_word_embedding_gradient_with_the_untied_official_head(tiny_bert):
    _, _, got, official, _ = run_step(tiny_bert, "official")
    diff = float((got[WORD_EMBEDDINGS] - official[WORD_EMBEDDINGS]).abs().max())
    print(f"paser word embeddings, project (tied) vs official (untied): {diff:.1e}")
    assert diff < TOL
