"""The shared training loop on tiny random BERTs: schedule, resumption, selection, early stopping,
the output folder and its registration with the harness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from benchharness.evaluation.resolver import Resolver
from benchharness.training.authoring import (
    base_folder,
    linear_schedule,
    load_base,
    make_optimizer,
    run_loop,
    seed_everything,
)
from benchharness.training.methods.simcse.model import SimCSE
from tests.helpers import DATA, needs_data, training

TEXTS = [
    f"sentence {i} talks about {w} and {v} ."
    for i, (w, v) in enumerate(
        zip(
            ["cats", "dogs", "rain", "music", "trains", "bread", "chess", "rivers"] * 5,
            ["maps", "tea", "snow", "glass", "wood", "salt", "ink", "wool"] * 5,
        )
    )
]


def _config(tmp_path, name="run", **kw):
    """The options, settings and plan of a tiny run into ``tmp_path / name``."""
    base = {
        "batch_size": 8,
        "lr": 1e-3,
        "warmup_ratio": 0.0,
        "eval_every": None,
        "eval_at_start": False,
        "log_every": 1,
        "threads": 1,
    }
    base.update(kw)
    return training("unused", tmp_path / name, **base)


def _simcse(tiny_bert, seed=42):
    seed_everything(seed)  # the MLP head is drawn at construction
    encoder, tokenizer, source = load_base(str(tiny_bert))
    return SimCSE(encoder, tokenizer), source


def _losses(folder):
    return [r["loss"] for r in map(json.loads, (folder / "metrics.jsonl").open()) if "loss" in r]


def test_linear_schedule_by_hand():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=1.0)
    sched = linear_schedule(opt, warmup=2, total=6)
    lrs = []
    for _ in range(6):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.0, 0.5, 1.0, 0.75, 0.5, 0.25])


def test_weight_decay_spares_biases_and_layernorm(tiny_bert, tmp_path):
    method, _ = _simcse(tiny_bert)
    opt = make_optimizer(method, _config(tmp_path, weight_decay=0.01)[0])
    decayed, plain = opt.param_groups
    names = {id(p): n for n, p in method.named_parameters()}
    assert decayed["weight_decay"] == 0.01 and plain["weight_decay"] == 0.0
    assert all(names[id(p)].endswith("bias") or "LayerNorm" in names[id(p)] for p in plain["params"])
    assert not any("LayerNorm" in names[id(p)] or names[id(p)].endswith("bias") for p in decayed["params"])


@pytest.mark.parametrize(
    "step",
    [{}, {"optimizer": "adamw-legacy", "correct_bias": False, "grad_clip": 1.0}],
    ids=["torch-adamw", "adamw-legacy"],
)
def test_resume_continues_exactly(tiny_bert, tmp_path, step):
    # 40 sentences in batches of 8: 5 steps an epoch, so 8 steps cross an epoch boundary; dropout
    # makes every step depend on the RNG state, which the checkpoint must carry; the optimizer's
    # state (moments, step counts) must come back too, for either optimizer
    dev = lambda encoder: float(encoder.embeddings.word_embeddings.weight[:50].detach().sum())
    method, source = _simcse(tiny_bert)
    straight = run_loop(
        method,
        TEXTS,
        *_config(tmp_path, "straight", max_steps=8, eval_every=3, **step),
        data={},
        base_source=source,
        dev=dev,
    )
    assert straight.completed and straight.steps == 8
    training = straight.manifest["training"]
    assert (training["epochs_completed"], training["batches_into_next_epoch"]) == (1, 3)  # 8 steps of 5 per epoch
    method2, _ = _simcse(tiny_bert)
    paused = run_loop(
        method2,
        TEXTS,
        *_config(tmp_path, "resumed", max_steps=8, eval_every=3, stop_after=4, **step),
        data={},
        base_source=source,
        dev=dev,
    )
    assert not paused.completed and paused.steps == 4
    saved = torch.load(tmp_path / "resumed" / "checkpoint" / "state.pt", weights_only=False)
    assert all(s["step"] == 4 for s in saved["optimizer"]["state"].values())
    method3, _ = _simcse(tiny_bert)  # a fresh process would start from the base weights again
    resumed = run_loop(
        method3,
        TEXTS,
        *_config(tmp_path, "resumed", max_steps=8, eval_every=3, **step),
        data={},
        base_source=source,
        dev=dev,
    )
    assert resumed.completed and resumed.steps == 8
    recorded = {k: resumed.manifest["hyperparameters"][k] for k in ("optimizer", "correct_bias", "grad_clip")}
    assert recorded == {"optimizer": "torch-adamw", "correct_bias": True, "grad_clip": None, **step}
    assert _losses(tmp_path / "resumed") == pytest.approx(_losses(tmp_path / "straight"), rel=1e-6)
    for (n, a), (_, b) in zip(method.state_dict().items(), method3.state_dict().items()):
        torch.testing.assert_close(a, b, msg=n)
    a = json.loads((tmp_path / "straight" / "manifest.json").read_text())
    b = json.loads((tmp_path / "resumed" / "manifest.json").read_text())
    np.testing.assert_allclose(a["dev_curve"], b["dev_curve"], rtol=1e-6)
    assert a["selection"] == b["selection"]
    assert not (tmp_path / "resumed" / "checkpoint").exists()  # removed once the run is complete


def test_resume_refuses_other_settings(tiny_bert, tmp_path):
    method, source = _simcse(tiny_bert)
    run_loop(method, TEXTS, *_config(tmp_path, max_steps=4, stop_after=2), data={}, base_source=source)
    method, _ = _simcse(tiny_bert)
    with pytest.raises(ValueError, match="lr"):
        run_loop(method, TEXTS, *_config(tmp_path, max_steps=4, lr=5e-4), data={}, base_source=source)
    with pytest.raises(ValueError, match="optimizer: 'torch-adamw' -> 'adamw-legacy'"):
        run_loop(method, TEXTS, *_config(tmp_path, max_steps=4, optimizer="adamw-legacy"), data={}, base_source=source)


def test_a_checkpoint_older_than_a_setting_resumes_with_its_default(tiny_bert, tmp_path):
    """A checkpoint written before ``optimizer`` and ``correct_bias`` existed was made with
    torch.optim.AdamW, the default: it resumes under the default, and only under it."""
    method, source = _simcse(tiny_bert)
    run_loop(method, TEXTS, *_config(tmp_path, max_steps=4, stop_after=2), data={}, base_source=source)
    path = tmp_path / "run" / "checkpoint" / "state.pt"
    saved = torch.load(path, weights_only=False)
    del saved["config"]["optimizer"], saved["config"]["correct_bias"]
    torch.save(saved, path)
    method, _ = _simcse(tiny_bert)
    with pytest.raises(ValueError, match="optimizer: 'torch-adamw' -> 'adamw-legacy'"):
        run_loop(method, TEXTS, *_config(tmp_path, max_steps=4, optimizer="adamw-legacy"), data={}, base_source=source)
    result = run_loop(method, TEXTS, *_config(tmp_path, max_steps=4), data={}, base_source=source)
    assert result.completed and result.steps == 4


def test_selection_and_early_stopping(tiny_bert, tmp_path):
    scores = iter([50.0, 60.0, 55.0, 58.0, 70.0])  # best at the first trained evaluation
    method, source = _simcse(tiny_bert)
    snapshot = {}

    def dev(encoder):
        score = next(scores)
        if score == 60.0:
            snapshot.update({k: v.clone() for k, v in encoder.state_dict().items()})
        return score

    result = run_loop(
        method,
        TEXTS,
        *_config(tmp_path, max_steps=20, eval_every=2, eval_at_start=True, patience=2),
        data={},
        base_source=source,
        dev=dev,
    )
    manifest = result.manifest
    # step 0 (the base) is recorded; 60 at step 2 is best; 55 and 58 are two bad evaluations -> stop at step 6
    assert manifest["dev_curve"] == [[0, 50.0], [2, 60.0], [4, 55.0], [6, 58.0]]
    assert result.steps == 6 and manifest["training"]["stopped_early"]
    assert manifest["selection"]["best_step"] == 2
    saved, _, _ = load_base(str(tmp_path / "run"))
    for k, v in saved.state_dict().items():
        torch.testing.assert_close(v, snapshot[k], msg=k)


def test_in_memory_a_run_writes_nothing_and_its_module_ends_with_the_selected_weights(tiny_bert, tmp_path):
    scores = iter([50.0, 60.0, 55.0, 58.0])  # the best is the first trained evaluation
    method, source = _simcse(tiny_bert)
    snapshot: dict[str, torch.Tensor] = {}

    def dev(encoder):
        score = next(scores)
        if score == 60.0:
            snapshot.update({k: v.detach().clone() for k, v in encoder.state_dict().items()})
        return score

    options, settings, plan = _config(tmp_path, max_steps=6, eval_every=2, eval_at_start=True)
    from dataclasses import replace

    result = run_loop(method, TEXTS, options, settings, replace(plan, out=None), data={}, base_source=source, dev=dev)
    assert not (tmp_path / "run").exists() and result.out is None
    assert result.manifest["selection"]["best_step"] == 2 and result.manifest["dev_curve"][-1] == [6, 58.0]
    assert [r["step"] for r in result.metrics if "dev_spearman" in r] == [0, 2, 4, 6]
    for k, v in method.encoder.state_dict().items():
        torch.testing.assert_close(v, snapshot[k], rtol=0, atol=0, msg=k)
    with pytest.raises(ValueError, match="stop_after pauses a run"):
        stopping = replace(settings, stop_after=1)
        run_loop(method, TEXTS, options, stopping, replace(plan, out=None), data={}, base_source=source, dev=dev)


def test_no_dev_selection_keeps_final_weights(tiny_bert, tmp_path):
    method, source = _simcse(tiny_bert)
    result = run_loop(
        method, TEXTS, *_config(tmp_path, epochs=1, grad_clip=1.0), data={"name": "x"}, base_source=source
    )
    assert result.steps == len(TEXTS) // 8  # one epoch, full batches only
    assert result.manifest["selection"] == {"rule": "final weights", "best_step": 5}
    assert (
        result.manifest["training"]["epochs_completed"],
        result.manifest["training"]["batches_into_next_epoch"],
    ) == (1, 0)
    saved, _, _ = load_base(str(tmp_path / "run"))
    for k, v in saved.state_dict().items():
        torch.testing.assert_close(v, method.encoder.state_dict()[k], msg=k)


def test_refuses_to_overwrite_a_finished_run(tiny_bert, tmp_path):
    method, source = _simcse(tiny_bert)
    run_loop(method, TEXTS, *_config(tmp_path, max_steps=1), data={}, base_source=source)
    with pytest.raises(ValueError, match="finished run"):
        run_loop(method, TEXTS, *_config(tmp_path, max_steps=1), data={}, base_source=source)
    run_loop(method, TEXTS, *_config(tmp_path, max_steps=1, overwrite=True), data={}, base_source=source)


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
def test_manifest_registers_and_the_harness_reproduces_the_dev_score(tiny_bert, tmp_path):
    method, source = _simcse(tiny_bert)
    config = _config(tmp_path, "simcse-tiny", max_steps=4, eval_every=2, eval_at_start=True)
    from benchharness.training.dev_eval import DevEvaluator, for_training

    dev = for_training(method, *config[:2])  # what training hands the loop
    result = run_loop(
        method, TEXTS, *config, data={"name": "synthetic", "n_examples": len(TEXTS)}, base_source=source, dev=dev
    )
    manifest = json.loads((tmp_path / "simcse-tiny" / "manifest.json").read_text())
    for key in (
        "name",
        "method",
        "base_model",
        "base_revision",
        "data",
        "hyperparameters",
        "code_version",
        "dev_curve",
        "encoder",
    ):
        assert key in manifest
    assert manifest["name"] == "simcse-tiny" and manifest["method"] == "simcse"
    assert manifest["encoder"] == {"type": "hf", "model": ".", "pooling": "cls_before_pooler", "max_length": 512}
    assert manifest["hyperparameters"]["lr"] == 1e-3 and manifest["hyperparameters"]["total_steps"] == 4
    assert [s for s, _ in manifest["dev_curve"]] == [0, 2, 4]

    encoder = Resolver().get(str(tmp_path / "simcse-tiny"))
    task_name = "STSBenchmark-dev"
    from benchharness import tasks
    from benchharness.core.data_root import DataRoot

    task = tasks.get(task_name)
    task.load(DataRoot(DATA))
    sentences = list(dict.fromkeys(task.sentences()))
    vectors = encoder.encode(sentences)
    row = {s: i for i, s in enumerate(sentences)}
    score = task.evaluate(lambda xs: vectors[[row[s] for s in xs]], seed=0)["spearman"]
    assert score == pytest.approx(result.best_dev, abs=1e-3)
    # a run folder can be the base of another run (ConSERT sup-unsup, joint-unsup): its model is its own files
    assert Path(base_folder(str(tmp_path / "simcse-tiny"), tmp_path / "runs")) == tmp_path / "simcse-tiny"
    # and the in-loop evaluator pools exactly as the registered encoder does
    evaluator = DevEvaluator(method.tokenizer, "cls_before_pooler", 512, 64, torch.device("cpu"), "fp32")
    saved, _, _ = load_base(str(tmp_path / "simcse-tiny"))
    np.testing.assert_allclose(
        evaluator.encoder(saved).encode(evaluator.sentences), encoder.encode(evaluator.sentences), atol=1e-5
    )


def test_manifest_is_the_typed_record_and_the_folder_holds_no_leftovers(tiny_bert, tmp_path):
    import subprocess

    from benchharness.core.manifests import RunManifest

    method, source = _simcse(tiny_bert)
    run_loop(method, TEXTS, *_config(tmp_path, max_steps=2), data={"name": "x"}, base_source=source)
    folder = tmp_path / "run"
    # atomic writes leave no temporary siblings; a completed run drops its checkpoint; the model's files
    # (a sentence-transformers model: weights, tokenizer, how it pools) sit beside the run's records
    model = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    pooling = ["1_Pooling", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*model, *pooling, "manifest.json", "metrics.jsonl"])
    manifest = json.loads((folder / "manifest.json").read_text())
    trained = {
        "schema_version",
        "name",
        "method",
        "base_model",
        "base_revision",
        "base_weights_sha256",
        "data",
        "hyperparameters",
        "code_version",
        "dev_task",
        "dev_curve",
        "selection",
        "training",
        "encoder",
        "date",
    }
    assert set(manifest) == trained and trained <= RunManifest.__optional_keys__ | RunManifest.__required_keys__
    assert RunManifest.__required_keys__ == {"encoder"}  # what a tuned run shares with a trained one
    assert manifest["schema_version"] == 1 and manifest["dev_task"] is None and manifest["dev_curve"] == []
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent
    ).stdout.strip()
    assert manifest["code_version"]["git_commit"] == head
    assert manifest["code_version"]["torch"] == torch.__version__


def test_dev_evaluation_without_a_dev_callback_is_refused(tiny_bert, tmp_path):
    method, source = _simcse(tiny_bert)
    with pytest.raises(ValueError, match="no dev evaluator"):
        run_loop(method, TEXTS, *_config(tmp_path, max_steps=2, eval_every=1), data={}, base_source=source)
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_cpu_bf16_training_needs_native_bf16_and_runs_the_step_under_bf16_autocast(tiny_bert, tmp_path, monkeypatch):
    """``precision=bf16`` on CPU: refused (with the CPU flags to look for) where the CPU has no native
    bf16, before anything trains; where it has, the forward's matrix products run in bf16 while the
    weights and the optimizer stay fp32, and the manifest records the precision. (torch emulates
    bf16 on any CPU, so the test runs everywhere with the check answered both ways.)"""
    from benchharness.core import devices

    monkeypatch.setattr(devices, "has_native_bf16", lambda: False)
    method, source = _simcse(tiny_bert)
    with pytest.raises(ValueError, match="avx512_bf16 or amx_bf16"):
        run_loop(
            method, TEXTS, *_config(tmp_path, max_steps=1, precision="bf16", device="cpu"), data={}, base_source=source
        )
    assert not (tmp_path / "run" / "manifest.json").exists()

    monkeypatch.setattr(devices, "has_native_bf16", lambda: True)
    dtypes: set[torch.dtype] = set()
    hook = method.encoder.encoder.layer[0].intermediate.dense.register_forward_hook(
        lambda module, args, output: dtypes.add(output.dtype)
    )
    result = run_loop(
        method,
        TEXTS,
        *_config(tmp_path, name="bf16", max_steps=2, precision="bf16", device="cpu"),
        data={},
        base_source=source,
    )
    hook.remove()
    assert dtypes == {torch.bfloat16}
    assert {p.dtype for p in method.parameters()} == {torch.float32}
    assert result.manifest["training"]["precision"] == "bf16"


def test_a_run_interrupted_before_the_layout_change_finishes_in_the_new_one(tiny_bert, tmp_path):
    """A run begun by an earlier version keeps its selected encoder so far in ``model/``; resumed, it
    finishes with the model's files beside its manifest and no ``model/`` left."""
    import shutil

    dev = iter([50.0, 60.0, 55.0, 54.0])  # the best is step 2's, selected before the interruption
    method, source = _simcse(tiny_bert)
    config = _config(tmp_path, max_steps=6, eval_every=2, eval_at_start=True, stop_after=3, checkpoint_every=3)
    run_loop(method, TEXTS, *config, data={}, base_source=source, dev=lambda encoder: next(dev))
    folder = tmp_path / "run"
    shutil.move(folder / "checkpoint" / "model", folder / "model")  # where the earlier version kept it
    selected = load_base(str(folder / "model"))[0].state_dict()
    method, _ = _simcse(tiny_bert)
    config = _config(tmp_path, max_steps=6, eval_every=2, eval_at_start=True, checkpoint_every=3)
    result = run_loop(method, TEXTS, *config, data={}, base_source=source, dev=lambda encoder: next(dev))
    assert result.manifest["selection"]["best_step"] == 2
    assert not (folder / "model").exists() and (folder / "model.safetensors").is_file()
    saved = load_base(str(folder))[0].state_dict()
    assert all(torch.equal(saved[k], selected[k]) for k in selected)  # step 2's weights, kept
    assert Resolver().get(str(folder)).encode(["a cat"]).shape == (1, 32)
