"""PaSeR on tiny random BERTs: masking alignment, the two signals, teacher forcing, the shared LM
head, the saved encoder (no decoder weights), the supervised loss, and that training lowers the loss."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.helpers import needs_data

STOPWORDS = "nltk_data/corpora/stopwords/english"
pytestmark = needs_data(STOPWORDS)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models on a shared CPU: one thread avoids oversubscription stalls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make(tiny_bert, **kwargs):
    from benchharness.training.authoring import load_base
    from benchharness.training.methods.paser.model import PaSeR, PaSeROptions

    encoder, tokenizer, source = load_base(str(tiny_bert))
    torch.manual_seed(0)
    options = PaSeROptions(**{"max_length": 32, "augment": "none", "decoder_layers": 1, **kwargs})
    return PaSeR(encoder, tokenizer, options, checkpoint=source.path)


def test_masked_copy_aligns_with_the_phrase_tokens(tiny_bert):
    method = make(tiny_bert, top_k=1)
    tok = method.tokenizer
    sentence = "do i need a transit visa for a stop in london ?"
    batch = method.collate([sentence, "the unaffordable housing crisis"])
    n = 2
    original, masked = batch["input_ids"][:n], batch["input_ids"][n:]
    assert original.shape == masked.shape
    # row 0: exactly the word pieces of "transit visa" are masked, everything else is untouched
    pieces = tok("transit visa", add_special_tokens=False)["input_ids"]
    hit = masked[0] != original[0]
    assert original[0][hit].tolist() == pieces
    assert (masked[0][hit] == tok.mask_token_id).all()
    # row 1: a word split into several pieces is masked whole (RAKE: the whole 3-word phrase)
    phrase_pieces = tok("unaffordable housing crisis", add_special_tokens=False)["input_ids"]
    assert len(phrase_pieces) > 3
    assert original[1][masked[1] != original[1]].tolist() == phrase_pieces
    # decoder: input = [CLS] + phrase, labels = phrase + [SEP] (teacher forcing, shifted by one)
    labels = batch["decoder_labels"][0]
    length = len(pieces) + 1
    assert labels[:length].tolist() == pieces + [tok.sep_token_id]
    assert (labels[length:] == -100).all()
    assert batch["decoder_input_ids"][0, :length].tolist() == [tok.cls_token_id] + pieces
    # both views share the attention mask, and MLM never touches special tokens or padding
    assert torch.equal(batch["attention_mask"][:n], batch["attention_mask"][n:])
    mlm_positions = batch["mlm_labels"] != -100
    assert not (mlm_positions & (batch["attention_mask"][:n] == 0)).any()
    assert not (mlm_positions[:, 0]).any()


def test_top3_target_in_sentence_order_and_long_pairs_not_decoded(tiny_bert):
    method = make(tiny_bert, top_k=3, max_length=14)
    tok = method.tokenizer
    short = "do i need a transit visa for a stop ?"  # RAKE: transit visa (4), need (1), stop (1)
    long = "cheap flights from london to paris and rome with free bags and seats and meals today"
    batch = method.collate([short, long])
    expected = tok("need transit visa stop", add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
    assert batch["decoder_labels"][0, : len(expected)].tolist() == expected
    # the long sentence reaches max_length tokens: official collator gives it no decoder loss
    assert int(batch["attention_mask"][1].sum()) == 14
    assert (batch["decoder_labels"][1] == -100).all()


def test_signal_shapes_and_values():
    from benchharness.training.methods.paser.model import DecodingSignal

    z1 = torch.tensor([[1.0, -2.0, 0.5]])
    z2 = torch.tensor([[3.0, 1.0, -1.0]])
    paper = DecodingSignal("paper", 3, m=10.0, n=0.5)(z1, z2)
    assert paper.shape == (1, 4, 3)
    expected = [[1.0, -2.0, 0.5], [3.0, 1.0, -1.0], [20.0, 30.0, 15.0], [1.5, 1.0, 0.25]]
    assert torch.allclose(paper[0], torch.tensor(expected))

    official = DecodingSignal("official", 3, t=2.0, k=3.0)
    with torch.no_grad():
        official.projection.weight.copy_(torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]]))
        official.projection.bias.copy_(torch.tensor([0.0, 0.0, 1.0]))
    out = official(z1, z2)
    w = [1.0, 3.0, -1.0]  # W z2 + b
    assert out.shape == (1, 4, 3)
    expected = [[2.0, -12.0, -1.0], [0.0, -15.0, 4.5], [1.0, -2.0, 0.5], w]  # t(z1*w), k(z1-w), z1, w
    assert torch.allclose(out[0], torch.tensor(expected))
    batch = DecodingSignal("paper", 8)(torch.randn(5, 8), torch.randn(5, 8))
    assert batch.shape == (5, 4, 8)
    with pytest.raises(ValueError, match="unknown signal"):
        DecodingSignal("concat", 3)


def test_decoder_teacher_forcing_is_causal_and_loss_is_token_ce(tiny_bert):
    method = make(tiny_bert, top_k=3).eval()
    batch = method.collate(["a man is playing a large guitar on stage .", "two dogs run across the grassy field"])
    z = torch.randn(2, method.encoder.config.hidden_size)
    z_masked = torch.randn_like(z)
    dec_in, labels = batch["decoder_input_ids"], batch["decoder_labels"]
    memory = method.signal(z, z_masked)
    ones = torch.ones(memory.shape[:2], dtype=torch.long)

    def hidden(ids):
        return method.decoder(
            inputs_embeds=method.decoder_embeddings(ids), encoder_hidden_states=memory, encoder_attention_mask=ones
        ).last_hidden_state

    with torch.no_grad():
        base = hidden(dec_in)
        changed = dec_in.clone()
        changed[:, 2] = 1000  # a later input token cannot change earlier positions
        moved = hidden(changed)
        assert torch.allclose(base[:, :2], moved[:, :2], atol=1e-6)
        assert not torch.allclose(base[:, 2], moved[:, 2])
        # the loss is the mean token cross-entropy of the targets, computed here from log-softmax
        logp = torch.log_softmax(method.lm_head(base), dim=-1)
        keep = labels != -100
        manual = -logp[keep].gather(1, labels[keep].unsqueeze(1)).mean()
        assert float(method.decoder_loss(z, z_masked, dec_in, labels)) == pytest.approx(float(manual), rel=1e-5)
        # the signal matters: other sentence embeddings give other logits
        other = method.decoder_loss(z + 1.0, z_masked, dec_in, labels)
        assert float(other) != pytest.approx(float(manual), rel=1e-6)


def test_lm_head_is_shared_and_untied(tiny_bert):
    """One LM head for the decoder and MLM, whose output matrix is its own parameter (the official
    code's untied BertLMPredictionHead), starting as a copy of the word embeddings."""
    method = make(tiny_bert)
    words = method.encoder.get_input_embeddings().weight
    output = method.lm_head.decoder.weight
    assert output is not words and output.data_ptr() != words.data_ptr() and torch.equal(output, words)
    names = [n for n, _ in method.named_parameters()]
    assert sum(1 for n in names if "word_embeddings" in n) == 1
    assert "lm_head.decoder.weight" in names
    assert not any(n.startswith("decoder.embed_tokens") for n in names)
    assert method.hyperparameters()["mlm_head"] == "initialised randomly: checkpoint has none"
    assert "a copy of the word embeddings" in method.hyperparameters()["lm_head"]
    # separate storage: changing the output matrix leaves the word embeddings as they are
    before = words.detach().clone()
    with torch.no_grad():
        output.add_(1.0)
    assert torch.equal(words, before) and not torch.equal(output, words)


def test_lm_head_loads_a_checkpoints_mlm_head(tmp_path, tiny_bert):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from benchharness.training.authoring import load_base
    from benchharness.training.methods.paser.model import PaSeR, PaSeROptions

    # an untied checkpoint, so that its cls.predictions output matrix differs from its word embeddings
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(3)
    mlm = BertForMaskedLM(config)
    head = mlm.cls.predictions
    with torch.no_grad():
        head.decoder.weight.normal_()
    mlm.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(str(tiny_bert)).save_pretrained(tmp_path)
    encoder, tokenizer, source = load_base(str(tmp_path))
    method = PaSeR(encoder, tokenizer, PaSeROptions(augment="none", decoder_layers=1), checkpoint=source.path)
    assert torch.equal(method.lm_head.transform.dense.weight, head.transform.dense.weight)
    assert torch.equal(method.lm_head.transform.LayerNorm.bias, head.transform.LayerNorm.bias)
    assert torch.equal(method.lm_head.bias, head.bias)
    assert torch.equal(method.lm_head.decoder.weight, head.decoder.weight)
    assert not torch.equal(method.lm_head.decoder.weight, encoder.get_input_embeddings().weight)
    assert method.hyperparameters()["mlm_head"].startswith("initialised from the checkpoint")
    assert "cls.predictions.decoder.weight" in method.hyperparameters()["lm_head"]


def test_supervised_contrastive_matches_hand_computation():
    from benchharness.training.methods.paser.model import nli_triples, supervised_contrastive
    from benchharness.training.train_data import NLI_LABELS, NLIPair

    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 1.0], [0.0, 2.0]])
    n = torch.tensor([[-1.0, 0.0], [1.0, 0.0]])
    t = 0.5
    # cosines, row 0: p0 0.7071, p1 0, n0 -1, n1 1; row 1: p0 0.7071, p1 1, n0 0, n1 0
    rows = [[0.70710678, 0.0, -1.0, 1.0], [0.70710678, 1.0, 0.0, 0.0]]
    expected = 0.0
    for i, row in enumerate(rows):
        logits = [c / t for c in row]
        expected += -(logits[i] - math.log(sum(math.exp(v) for v in logits)))
    assert float(supervised_contrastive(a, p, n, t)) == pytest.approx(expected / 2, rel=1e-5)

    e, c, neu = (NLI_LABELS.index(x) for x in ("entailment", "contradiction", "neutral"))
    pairs = [
        NLIPair("p1", "e1", e),
        NLIPair("p1", "c1", c),
        NLIPair("p2", "n2", neu),
        NLIPair("p2", "e2", e),
        NLIPair("p1", "e1b", e),
        NLIPair("p1", "c1b", c),
    ]
    assert nli_triples(pairs) == [("p1", "e1", "c1"), ("p1", "e1b", "c1b")]


def test_supervised_forward_logs_every_part(tiny_bert):
    method = make(tiny_bert, supervised=True, alpha=0.5, mlm_weight=0.0)
    batch = method.collate(
        [
            ("a man plays a guitar", "a person plays music", "nobody plays anything"),
            ("a dog runs in a field", "an animal runs outside", "a cat sleeps indoors"),
        ]
    )
    out = method(batch)
    assert set(out.logs) == {"decoder_ce", "contrastive"}
    assert float(out.loss.detach()) == pytest.approx(out.logs["contrastive"] + 0.5 * out.logs["decoder_ce"], rel=1e-5)


def test_short_run_lowers_the_loss(tiny_bert):
    method = make(tiny_bert, top_k=2)
    torch.manual_seed(1)
    batch = method.collate(
        [
            "a man is playing a large guitar on stage .",
            "two dogs run across the grassy field",
            "the stock market fell sharply on monday",
            "a woman is slicing a ripe onion",
        ]
    )
    optimizer = torch.optim.AdamW(method.parameters(), lr=1e-2)
    losses = []
    for _ in range(10):
        out = method(batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses.append(float(out.loss.detach()))
    assert losses[-1] < 0.7 * losses[0], losses


def test_cli_run_saves_an_encoder_without_decoder_weights(tmp_path, tiny_bert, monkeypatch):
    from safetensors import safe_open

    from benchharness.cli import main
    from benchharness.evaluation.resolver import Resolver

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "a man is playing a guitar .\nthe red car and the red bus hit a car\n"
        "do i need a transit visa for a stop in london ?\ntwo dogs run across the grassy field\n"
    )
    out = tmp_path / "runs" / "paser-tiny"
    code = main(
        [
            "train",
            "paser",
            "--base",
            str(tiny_bert),
            "--out",
            str(out),
            "--data",
            str(corpus),
            "--batch-size",
            "2",
            "--max-steps",
            "3",
            "--eval-every",
            "0",
            "--decoder-layers",
            "1",
            "--decoder-heads",
            "2",
            "--augment",
            "none",
            "--threads",
            "1",
            "--quiet",
        ]
    )
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["method"] == "paser" and manifest["encoder"]["pooling"] == "cls_before_pooler"
    assert manifest["hyperparameters"]["mlm_head"] == "initialised randomly: checkpoint has none"
    with safe_open(str(out / "model.safetensors"), "pt") as fh:
        saved = set(fh.keys())
    with safe_open(str(tiny_bert / "model.safetensors"), "pt") as fh:
        base = set(fh.keys())
    assert saved == base
    assert not any(w in k for k in saved for w in ("decoder", "lm_head", "signal", "predictions"))
    # the run folder is an encoder the resolver builds at once
    encoder = Resolver().get(str(out))
    vectors = encoder.encode(["a man is playing a guitar ."])
    assert vectors.shape == (1, 32)


def test_cli_runs_with_one_seed_train_the_same_weights(tmp_path, tiny_bert):
    """The heads PaSeR draws at construction (decoder, signal, MLM head) come from the seed: two runs
    of one command end with equal encoder weights (unseeded heads would make them differ)."""
    from safetensors.torch import load_file

    from benchharness.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "a man is playing a guitar .\nthe red car and the red bus hit a car\n"
        "do i need a transit visa for a stop in london ?\ntwo dogs run across the grassy field\n"
    )
    weights = []
    for run in ("a", "b"):
        torch.manual_seed(len(run) * 1000 + ord(run))  # a different global state before each run
        out = tmp_path / run
        code = main(
            [
                "train",
                "paser",
                "--base",
                str(tiny_bert),
                "--out",
                str(out),
                "--data",
                str(corpus),
                "--batch-size",
                "2",
                "--max-steps",
                "2",
                "--eval-every",
                "0",
                "--decoder-layers",
                "1",
                "--decoder-heads",
                "2",
                "--augment",
                "none",
                "--threads",
                "1",
                "--quiet",
                "--seed",
                "7",
            ]
        )
        assert code == 0
        weights.append(load_file(str(out / "model.safetensors")))
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]), name
