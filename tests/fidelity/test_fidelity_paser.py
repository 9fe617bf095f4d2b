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
The project's head is untied the same way: the word embeddings get only the encoder side's
gradient, the output matrix its own.

The official optimizer step is the HF Trainer's (transformers 4.2.1, as SimCSE): legacy
``transformers.AdamW`` (eps 1e-8, no weight decay), gradient norm clipped at 1.0, linear decay
without warmup. Every PaSeR preset configures it; two steps of the loop are checked by hand, with
every dropout off (the two orders of operations could not share dropout draws).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from benchharness.training.methods.paser.model import PRESETS, PaSeR, PaSeROptions, mlm_mask
from benchharness.training.methods.paser.rake import rake
from tests.fidelity.shared_steps import (
    APART,
    TOL,
    AdamW,
    clip_,
    configured_step,
    cross_entropy,
    detached,
    grads,
    linear_lr,
    load_tiny,
    max_abs_diff,
    reached,
    reference_params,
    run_project_steps,
    trainable,
)
from tests.helpers import DATA

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a young girl plays soccer in the park",
    "stock markets fell sharply after the announcement",
    "two men are cooking dinner together",
]
WORD_EMBEDDINGS = "encoder.embeddings.word_embeddings.weight"
OUTPUT_MATRIX = "lm_head.decoder.weight"  # the project's name of the LM head's output matrix


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
    assert (
        not {"quick", "brown", "fox", "jumps", "lazy", "dog", "cat", "red", "wine", "old", "cheese", "pair", "well"}
        & stop
    )
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
    got_inputs, got_labels = mlm_mask(
        ids,
        enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0),
        0.15,
        tokenizer.mask_token_id,
        len(tokenizer),
    )
    torch.manual_seed(11)
    inputs, labels = ids.clone(), ids.clone()
    probability = torch.full(labels.shape, 0.15)
    special = torch.tensor(
        [tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True) for row in labels.tolist()],
        dtype=torch.bool,
    )
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
    x = F.layer_norm(
        x, x.shape[-1:], params["lm_head.transform.LayerNorm.weight"], params["lm_head.transform.LayerNorm.bias"], eps
    )
    return x @ output.T + params["lm_head.bias"]


def official_loss(reference, decoder, params, output, batch, signal: str, cls_id: int) -> torch.Tensor:
    """The official unsupervised PaSeR loss by hand (t = k = 1, m = n = 10, mlm_weight 1)."""
    n = batch["mlm_input_ids"].shape[0]
    rows = {
        k: torch.stack([batch[k][:n], batch[k][n:]], dim=1).flatten(0, 1)  # (bs, 2, len) -> (2 bs, len)
        for k in ("input_ids", "attention_mask", "token_type_ids")
    }
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
    hidden = decoder(
        inputs_embeds=reference.embeddings(input_ids=dec_in),
        encoder_hidden_states=memory,
        encoder_attention_mask=torch.ones(n, 4, dtype=torch.long),
    ).last_hidden_state
    eps = reference.config.layer_norm_eps
    decoder_ce = cross_entropy(lm_head(params, output, hidden, eps).flatten(0, 1), labels.flatten())
    mlm_hidden = reference(
        input_ids=batch["mlm_input_ids"],
        attention_mask=batch["attention_mask"][:n],
        token_type_ids=batch["token_type_ids"][:n],
    ).last_hidden_state
    mlm_ce = cross_entropy(lm_head(params, output, mlm_hidden, eps).flatten(0, 1), batch["mlm_labels"].flatten())
    return decoder_ce + mlm_ce


def build(folder, signal: str, dropout: float | None = None):
    """The project's PaSeR on the tiny BERT and the official side's pieces: a second copy of the
    encoder, a copy of the decoder, the named leaf tensors of the hand computation, and the
    official LM head's output matrix, a copy of the word embeddings (untied), among them."""
    encoder, tokenizer = load_tiny(folder, dropout=dropout)
    torch.manual_seed(0)
    options = PaSeROptions(max_length=32, top_k=3, augment="none", signal=signal, decoder_layers=2, decoder_heads=16)
    method = PaSeR(encoder, tokenizer, options).double()
    assert not method.decoder.config.scale_embedding  # official embed_scale = 1
    if dropout == 0.0:
        no_dropout(method.decoder)
    reference, _ = load_tiny(folder, dropout=dropout)
    decoder = copy.deepcopy(method.decoder)
    params = reference_params(method, reference)
    params.update({f"decoder.{k}": p for k, p in decoder.named_parameters()})
    params[OUTPUT_MATRIX] = reference.embeddings.word_embeddings.weight.detach().clone().requires_grad_(True)
    return method, reference, decoder, params, tokenizer


def no_dropout(decoder: torch.nn.Module) -> None:
    """Every dropout rate of a BartDecoder (kept as float attributes of its modules) set to 0."""
    for module in decoder.modules():
        for attr in ("dropout", "activation_dropout"):
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)


def run_step(folder, signal: str):
    """The project's loss and gradients on one collated batch, and the official ones by hand."""
    method, reference, decoder, params, tokenizer = build(folder, signal)
    words = method.encoder.embeddings.word_embeddings.weight
    head = method.lm_head.decoder.weight
    assert torch.equal(head, words) and head.data_ptr() != words.data_ptr()  # a copy, untied
    torch.manual_seed(5)
    batch = method.collate(SENTENCES)
    assert int((batch["decoder_labels"] != -100).sum()) > 4 and int((batch["mlm_labels"] != -100).sum()) > 0
    method.eval(), reference.eval(), decoder.eval()

    loss = method(batch).loss
    loss.backward()
    expected = official_loss(reference, decoder, params, params[OUTPUT_MATRIX], batch, signal, tokenizer.cls_token_id)
    expected.backward()
    return loss, expected, grads(trainable(method)), grads(params)


@pytest.mark.parametrize("signal", ["official", "paper"])
def test_paser_loss_and_gradients(tiny_bert, signal):
    loss, expected, got, official = run_step(tiny_bert, signal)
    loss_diff = abs(float(loss.detach()) - float(expected.detach()))
    diff, where = max_abs_diff(got, official)
    print(
        f"paser {signal}: |loss - official| = {loss_diff:.1e}, max |grad - official| = {diff:.1e} ({where}), "
        "LM head output matrix and word embeddings included"
    )
    assert loss_diff < TOL
    assert diff < TOL, f"gradient of {where} differs by {diff:.2e}"


def test_paser_word_embedding_gradient_with_the_untied_official_head(tiny_bert):
    """The word embeddings get the encoder side's gradient only: a head tied to them would add the
    output layer's share, which is far from negligible."""
    _, _, got, official = run_step(tiny_bert, "official")
    diff = float((got[WORD_EMBEDDINGS] - official[WORD_EMBEDDINGS]).abs().max())
    head_diff = float((got[OUTPUT_MATRIX] - official[OUTPUT_MATRIX]).abs().max())
    tied = float((got[WORD_EMBEDDINGS] + got[OUTPUT_MATRIX] - official[WORD_EMBEDDINGS]).abs().max())
    print(
        f"paser word embeddings, project vs official (untied): {diff:.1e}; output matrix: {head_diff:.1e}; "
        f"a tied matrix's gradient would be {tied:.1e} away"
    )
    assert diff < TOL and head_diff < TOL
    assert tied > APART  # the LM head's share is not negligible: the comparison tells tied from untied


#: the official step (HF Trainer defaults of transformers 4.2.1) written as the project's settings
OFFICIAL_SETTINGS = {
    "optimizer": "adamw-legacy",
    "correct_bias": True,
    "adam_eps": 1e-8,
    "weight_decay": 0.0,
    "grad_clip": 1.0,
}


def test_paser_optimizer_steps(tiny_bert, tmp_path):
    """Two steps of the project's loop with the step every PaSeR preset configures, against two
    official steps by hand (legacy AdamW, eps 1e-8, clip 1.0; the untied LM head's output matrix
    updated apart from the word embeddings); lr 1e-3 so that a different optimizer shows above
    1e-5. The torch update without clipping, run by hand as well, must land apart."""
    method, reference, decoder, params, tokenizer = build(tiny_bert, "official", dropout=0.0)
    _, other, other_decoder, other_params, _ = build(tiny_bert, "official", dropout=0.0)
    settings = configured_step(PRESETS)
    assert settings == OFFICIAL_SETTINGS
    lr = 1e-3
    observed = run_project_steps(
        method, SENTENCES, tiny_bert, tmp_path / "run", 2, lr=lr, warmup_ratio=0.0, max_length=32, **settings
    )

    def hand_steps(encoder, dec, named, form: str, clip: float | None) -> None:
        adam = AdamW(form, eps=1e-8)
        encoder.eval(), dec.eval()  # every dropout rate is 0: eval is the same function, without RNG draws
        for step, seen in enumerate(observed):
            for p in named.values():
                p.grad = None
            official_loss(
                encoder, dec, named, named[OUTPUT_MATRIX], seen.batch, "official", tokenizer.cls_token_id
            ).backward()
            gradients = reached(named)
            if clip is not None:
                clip_(gradients, clip)
            adam.step(named, gradients, linear_lr(lr, step, 0, len(observed)))

    hand_steps(reference, decoder, params, "legacy", 1.0)
    hand_steps(other, other_decoder, other_params, "torch", None)
    project = detached(trainable(method))
    diff, where = max_abs_diff(project, detached(params))
    apart, _ = max_abs_diff(project, detached(other_params))
    untied = float((project[OUTPUT_MATRIX] - project[WORD_EMBEDDINGS]).abs().max())
    print(
        f"paser presets: max |param - hand| after 2 steps = {diff:.1e} ({where}); the other update (torch, "
        f"no clip) is {apart:.1e} away; output matrix vs word embeddings after training: {untied:.1e}"
    )
    assert diff < TOL, f"{where} differs by {diff:.2e} after two steps"
    assert apart > APART, "the comparison cannot tell the two updates apart"
    assert untied > APART  # trained separately, they part
