"""DefSent+ on tiny random BERTs and a toy dictionary: entry embeddings against a hand computation
(one unpadded forward per definition), the frozen head, PST restarting from the original weights,
the ICA space's scale, the pooler cases and the 2-d views of the plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from benchharness.training.authoring import load_base, make_optimizer, run_loop, seed_everything
from benchharness.training.methods.defsent_plus import method as defsent_plus_method
from benchharness.training.methods.defsent_plus import model as defsent_plus
from benchharness.training.methods.defsent_plus.dictionary import Dictionary
from benchharness.training.methods.defsent_plus.entry_space import (
    entry_embeddings,
    ica_transform,
    plot_entry_space,
    project_2d,
)
from tests.helpers import TOY_DICTIONARY, make_tiny_bert, training


@pytest.fixture(scope="module")
def toy() -> Dictionary:
    return Dictionary.from_pairs(TOY_DICTIONARY, "toy")


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("dict") / "toy.tsv"
    path.write_text("".join(f"{e}\t{d}\n" for e, d in TOY_DICTIONARY))
    return path


def hand_entry_embeddings(model, tokenizer, dictionary: Dictionary, kind: str) -> torch.Tensor:
    """Per entry, per definition: one forward pass without padding, [CLS] or mean over all tokens."""
    model.eval()
    rows = []
    with torch.no_grad():
        for defs in dictionary.definitions:
            vecs = []
            for d in defs:
                last = model(**tokenizer(d, return_tensors="pt")).last_hidden_state[0]
                vecs.append(last[0] if kind == "ac" else last.mean(dim=0))
            rows.append(torch.stack(vecs).mean(dim=0))
    return torch.stack(rows)


@pytest.mark.parametrize("kind", ["ac", "amp"])
def test_entry_embeddings_match_hand_computation(tiny_bert, toy, kind):
    model, tokenizer, _ = load_base(str(tiny_bert))
    got = entry_embeddings(model, tokenizer, toy, kind, max_length=64, batch_size=3)
    expected = hand_entry_embeddings(model, tokenizer, toy, kind)
    assert got.shape == (len(toy), model.config.hidden_size)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def run_cli(argv: list[str]) -> int:
    from benchharness.cli import main

    return main(["train", "defsent-plus", *argv])


def test_frozen_head_logits_and_training(tiny_bert, toy, tmp_path):
    seed_everything(0)
    encoder, tokenizer, source = load_base(str(tiny_bert))
    original = {k: v.clone() for k, v in encoder.state_dict().items()}
    matrix = torch.randn(len(toy), encoder.config.hidden_size)
    method = defsent_plus.DefSentPlus(encoder, tokenizer, matrix, "mean", max_length=32)
    texts, labels = toy.pairs()
    batch = method.collate(list(zip(texts, labels)))
    # logits by hand: pooler dense+tanh over the masked mean, times the entry matrix, no bias
    encoder.eval()
    with torch.no_grad():
        last = encoder(**batch["inputs"]).last_hidden_state
        mask = batch["inputs"]["attention_mask"].unsqueeze(-1).float()
        mean = (last * mask).sum(1) / mask.sum(1)
        h = torch.tanh(mean @ encoder.pooler.dense.weight.T + encoder.pooler.dense.bias)
        torch.testing.assert_close(method.logits(batch["inputs"]), h @ matrix.T, atol=1e-5, rtol=1e-5)
    optimizer = make_optimizer(method, training("x", tmp_path / "unused")[0])
    in_optimizer = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert id(method.entry_matrix) not in in_optimizer and not method.entry_matrix.requires_grad
    assert id(encoder.pooler.dense.weight) in in_optimizer  # the pooler is trained

    config = training(
        str(tiny_bert),
        tmp_path / "run",
        batch_size=3,
        lr=1e-3,
        epochs=1,
        warmup_ratio=0.0,
        grad_clip=1.0,
        drop_last=False,
        eval_every=None,
        eval_at_start=False,
        adam_eps=1e-6,
    )
    result = run_loop(method, list(zip(texts, labels)), *config, data={"name": "toy"}, base_source=source)
    assert result.steps == 3  # ceil(8 / 3): one epoch, last partial batch kept
    torch.testing.assert_close(method.entry_matrix, matrix)  # frozen
    assert not torch.equal(
        encoder.state_dict()["embeddings.word_embeddings.weight"], original["embeddings.word_embeddings.weight"]
    )


def test_pst_rounds_restart_from_the_original_checkpoint(tiny_bert, toy, toy_file, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))  # --name registers the run there
    out = tmp_path / "runs" / "toy"
    assert (
        run_cli(
            [
                "--base",
                str(tiny_bert),
                "--out",
                str(out),
                "--name",
                "toy",
                "--dictionary",
                str(toy_file),
                "--rounds",
                "2",
                "--batch-size",
                "3",
                "--round-lrs",
                "1e-3,5e-4",
                "--max-length",
                "32",
                "--training-pooling",
                "cls",
                "--quiet",
                "--eval-pooling",
                "cls_before_pooler",
            ]
        )
        == 0
    )
    r1, r2 = out.with_name("toy-r1"), out.with_name("toy-r2")
    m1, m2 = (json.loads((r / "manifest.json").read_text()) for r in (r1, r2))
    assert (m1["name"], m2["name"]) == ("toy-r1", "toy-r2")
    assert m2["encoder"]["pooling"] == "cls_before_pooler"
    assert (m1["hyperparameters"]["lr"], m2["hyperparameters"]["lr"]) == (1e-3, 5e-4)
    assert m2["hyperparameters"]["entry_space_built_by"] == str(r1)
    assert (r1 / "entry_space.png").stat().st_size > 1000 and (r2 / "entry_space_after.png").exists()

    # round 2 by hand: entry space from round 1's encoder, then the ORIGINAL checkpoint trained on it
    round1, tokenizer, source = load_base(str(r1))
    matrix = hand_entry_embeddings(round1, tokenizer, toy, "amp")
    seed_everything(42)
    encoder, tokenizer, source = load_base(str(tiny_bert))
    method = defsent_plus.DefSentPlus(encoder, tokenizer, matrix, "cls", max_length=32)
    texts, labels = toy.pairs()
    config = training(
        str(tiny_bert),
        tmp_path / "by-hand",
        batch_size=3,
        lr=5e-4,
        epochs=1,
        warmup_ratio=0.0,
        grad_clip=1.0,
        drop_last=False,
        eval_every=None,
        eval_at_start=False,
        adam_eps=1e-6,
        optimizer="adamw-legacy",
        max_length=32,
    )
    run_loop(method, list(zip(texts, labels)), *config, data={}, base_source=source)
    trained_r2 = load_base(str(r2))[0].state_dict()
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(trained_r2[name], value, atol=1e-5, rtol=1e-4, msg=name)
    # ... which is not round 1's encoder trained further
    assert not torch.allclose(
        trained_r2["embeddings.word_embeddings.weight"], round1.state_dict()["embeddings.word_embeddings.weight"]
    )

    # a rerun reuses finished rounds instead of retraining them
    stamp = (r2 / "model.safetensors").stat().st_mtime
    assert (
        run_cli(
            [
                "--base",
                str(tiny_bert),
                "--out",
                str(out),
                "--dictionary",
                str(toy_file),
                "--rounds",
                "2",
                "--batch-size",
                "3",
                "--max-length",
                "32",
                "--training-pooling",
                "cls",
                "--quiet",
                "--no-final-space",
                "--round-lrs",
                "1e-3,5e-4",
                "--eval-pooling",
                "cls_before_pooler",
            ]
        )
        == 0
    )
    assert (r2 / "model.safetensors").stat().st_mtime == stamp


def test_protocol_flags_are_refused(tiny_bert, toy_file, tmp_path, capsys):
    import benchharness

    with pytest.raises(ValueError, match="exactly one epoch"):
        benchharness.train("defsent-plus", base=str(tiny_bert), dictionary=str(toy_file), epochs=2)
    argv = ["--base", str(tiny_bert), "--out", str(tmp_path / "x"), "--dictionary", str(toy_file), "--epochs", "2"]
    assert run_cli(argv) == 2
    assert "--epochs cannot be used with it" in capsys.readouterr().err
    assert not (tmp_path / "x-r1").exists()


def test_ica_space_has_the_paper_scale():
    rng = np.random.default_rng(0)
    sources = np.column_stack([rng.laplace(size=2000), rng.uniform(-1, 1, 2000), rng.exponential(size=2000)])
    mixed = sources @ rng.normal(size=(3, 3)) + 5.0
    out = ica_transform(mixed, max_iter=1000, seed=42)
    # unit-variance whitening then x100: every component has standard deviation 100, no correlation
    np.testing.assert_allclose(out.std(axis=0), 100.0, rtol=1e-3)
    corr = np.corrcoef(out.T)
    np.testing.assert_allclose(corr, np.eye(3), atol=1e-6)
    # each recovered component is one of the sources up to sign and scale
    match = np.abs(np.corrcoef(out.T, sources.T)[:3, 3:])
    assert (match.max(axis=1) > 0.99).all()
    with pytest.raises(ValueError, match="at least as many entries"):
        ica_transform(mixed[:2])


def test_a_run_without_matplotlib_keeps_its_weights_and_says_the_plot_is_left_out(
    tiny_bert, toy_file, tmp_path, monkeypatch, caplog
):
    import logging
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed: its import fails
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))  # --name registers the run there
    out = tmp_path / "runs" / "toy"
    args = ["--base", str(tiny_bert), "--out", str(out), "--name", "toy", "--dictionary", str(toy_file)]
    args += ["--rounds", "1", "--batch-size", "3", "--max-length", "32", "--quiet"]
    with caplog.at_level(logging.WARNING):
        assert run_cli(args) == 0
    run = out.with_name("toy-r1") if out.with_name("toy-r1").exists() else out
    assert (run / "model.safetensors").exists() and not list(run.glob("*.png"))
    warnings = [r.getMessage() for r in caplog.records if "matplotlib" in r.getMessage()]
    assert [w.split(": ")[1].split(" ")[0] for w in warnings] == ["entry_space.png", "entry_space_after.png"]


def test_projections_and_plot(tmp_path):
    from sklearn.decomposition import TruncatedSVD

    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 6)) @ np.diag([5, 3, 1, 1, 0.5, 0.2]) + 2.0
    views = project_2d(x)
    svd = TruncatedSVD(n_components=2, algorithm="arpack").fit_transform(x)
    np.testing.assert_allclose(np.abs(views["svd"]), np.abs(svd), atol=1e-8)
    np.testing.assert_allclose(views["pca_whiten"].std(axis=0, ddof=1), 1.0, atol=1e-8)
    np.testing.assert_allclose(views["pca_whiten"].mean(axis=0), 0.0, atol=1e-8)
    assert plot_entry_space(x, "toy")[:8] == b"\x89PNG\r\n\x1a\n"


def test_pooler_cases(tmp_path):
    from transformers import AutoModel, BertConfig, BertModel, RobertaConfig, RobertaForMaskedLM

    # a checkpoint without pooler weights (as paraphrase-MiniLM-L3-v2): the fresh pooler is trained
    no_pooler = tmp_path / "no-pooler"
    cfg = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    BertModel(cfg, add_pooling_layer=False).save_pretrained(no_pooler)
    extra, note = defsent_plus.prepare_pooler(AutoModel.from_pretrained(no_pooler), no_pooler)
    assert extra is None and "no pooler weights" in note
    with_pooler = make_tiny_bert(tmp_path / "with-pooler", hidden=16, layers=1)
    assert "pretrained pooler" in defsent_plus.prepare_pooler(AutoModel.from_pretrained(with_pooler), with_pooler)[1]

    # RoBERTa: pooler dense <- MLM head dense, activation GELU
    rob = tmp_path / "roberta"
    rcfg = RobertaConfig(
        vocab_size=100,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
    )
    torch.manual_seed(0)
    mlm = RobertaForMaskedLM(rcfg)
    mlm.save_pretrained(rob)
    model = AutoModel.from_pretrained(rob)
    extra, note = defsent_plus.prepare_pooler(model, rob)
    assert extra is None and "MLM head" in note
    torch.testing.assert_close(model.pooler.dense.weight, mlm.lm_head.dense.weight)
    torch.testing.assert_close(model.pooler.dense.bias, mlm.lm_head.dense.bias)
    assert isinstance(model.pooler.activation, torch.nn.GELU)


def test_round_learning_rates():
    assert defsent_plus.round_lrs(None, None, 4) == [5e-5, 4e-5, 3e-5, 3e-5]
    assert defsent_plus.round_lrs(None, 2e-5, 2) == [2e-5, 2e-5]
    assert defsent_plus.round_lrs("3e-5,1e-5", 9.0, 3) == [3e-5, 1e-5, 1e-5]
    with pytest.raises(ValueError, match="outside"):
        defsent_plus_method.parse_rounds("4", 3)
