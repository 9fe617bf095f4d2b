"""The Python API as a notebook user meets it (issue #34): a transformers model loaded by hub id,
failures that raise instead of vanishing, keywords checked before anything loads, and stored
results that are reused only for the weights (identity) they were computed with."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

import benchharness
from benchharness.core.errors import InvalidInputError, UserError
from benchharness.evaluation.models import as_encoder
from tests.fakes import BrokenTask, HashEncoder
from tests.helpers import MINILM_L3, cli

TASK = "STSBenchmark-dev"
SMALL = "SICKRelatedness-trial"


def weights_sha256(module: torch.nn.Module, unused: str | None = None) -> str:
    """sha256 over every parameter and buffer, by name, computed here without the harness; those
    under the prefix ``unused`` left out (a pooler no output depends on)."""
    digest = hashlib.sha256()
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    for name in sorted(n for n in tensors if unused is None or not n.startswith(unused)):
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def spearman_of(results, task: str) -> float:
    """The task's main score recomputed from its per-item outputs (cosine against gold, x100)."""
    result = results.get(results.encoders[0], task)
    items = results.items(result).items
    return 100 * spearmanr(items["cosine"], items["gold"])[0]


# ---- 1. a transformers model loaded by hub id ----------------------------------------------------
def test_a_transformers_model_loaded_by_hub_id_is_evaluated_and_pinned_by_its_weights(project):
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(MINILM_L3), AutoTokenizer.from_pretrained(MINILM_L3)
    assert model.config._name_or_path == MINILM_L3 and not Path(MINILM_L3).exists()  # a hub id, no folder
    info = as_encoder(model, tokenizer=tokenizer, pooling="avg").identity_info()
    assert info["model"] == MINILM_L3 and info["weights_sha256"] == weights_sha256(model, unused="pooler.")
    results = benchharness.evaluate(model, SMALL, tokenizer=tokenizer, pooling="avg")
    assert results.results[0].main_score == pytest.approx(spearman_of(results, SMALL), abs=1e-9)


def test_a_transformers_model_from_a_folder_is_pinned_by_the_weights_in_memory_not_the_files(
    tiny_bert, tmp_path, project
):
    import shutil

    from transformers import AutoModel, AutoTokenizer

    folder = shutil.copytree(tiny_bert, tmp_path / "copy")
    model, tokenizer = AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight.mul_(0.5)  # trained since it was loaded
    for weights in ("model.safetensors", "pytorch_model.bin"):
        (folder / weights).unlink(missing_ok=True)  # the files are gone: nothing may read them
    info = as_encoder(model, tokenizer=tokenizer, pooling="avg").identity_info()
    assert info["weights_sha256"] == weights_sha256(model, unused="pooler.")  # avg pooling never reads it
    assert as_encoder(model, tokenizer=tokenizer, pooling="cls").identity_info()["weights_sha256"] == weights_sha256(
        model
    )
    results = benchharness.evaluate(model, SMALL, tokenizer=tokenizer, pooling="avg")
    assert not results.failed


# ---- 2. failures raise, naming each pair; errors="keep" returns them as rows -----------------------
def test_a_failed_task_raises_after_the_others_are_computed_and_stored(project, register_plugin):
    from benchharness.core.task import TaskProvider

    register_plugin("tasks", "broken", TaskProvider(tasks={"Broken": BrokenTask}))
    with pytest.raises(benchharness.EvaluationFailedError) as caught:
        benchharness.evaluate(HashEncoder(), ["Broken", SMALL], results_dir="stored")
    error = caught.value
    assert isinstance(error, UserError) and "\n" not in str(error)  # one failure: one line
    assert str(error).startswith("evaluation failed, hash on Broken: evaluation: boom (the 1 other(s) are in")
    [good] = error.results.results  # nothing computed is lost ...
    assert good.task == SMALL and good.main_score == pytest.approx(spearman_of(error.results, SMALL), abs=1e-9)
    stored = json.loads((project / "stored" / "hash" / f"{SMALL}.json").read_text())  # ... and it is stored
    assert stored["main_score"] == good.main_score

    with pytest.raises(benchharness.EvaluationFailedError) as caught:  # several: one line each
        benchharness.evaluate([HashEncoder(), HashEncoder("other")], ["Broken", SMALL])
    assert str(caught.value).splitlines()[1:] == [
        "hash on Broken: evaluation: boom",
        "other on Broken: evaluation: boom",
    ]
    assert str(caught.value).startswith("2 of 4 evaluations failed (the 2 other(s) are in this error's .results;")

    again = pickle.loads(pickle.dumps(caught.value))  # a worker's error reaches its driver whole
    assert str(again) == str(caught.value) and len(again.results.failed) == 2

    kept = benchharness.evaluate(HashEncoder(), ["Broken", SMALL], errors="keep")
    frame = kept.to_pandas()
    assert list(frame["task"]) == ["Broken", SMALL] and list(frame["status"]) == ["failed", "computed"]
    assert math.isnan(frame["main_score"][0]) and frame["message"][0] == "evaluation: boom"
    assert frame["main_score"][1] == good.main_score


def test_the_run_command_still_reports_failures_in_its_table_and_exits_1(project, data_dir):
    (project / "data").mkdir()  # a data root with the word vectors but not the task: the task fails, the run goes on
    (project / "data" / "glove").symlink_to(data_dir / "glove")
    done = cli(
        project,
        "run",
        "--encoders",
        "glove-50d",
        "--tasks",
        SMALL,
        "--data-dir",
        "data",
        "--no-cache",
        "--results-dir",
        "r",
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert any(SMALL in line and "failed" in line for line in done.stdout.splitlines()), done.stdout


# ---- 8. every keyword checked, in one line, before anything loads ----------------------------------
@pytest.mark.parametrize(
    "keywords, needle",
    [
        ({"tasks": None}, "tasks=None"),
        ({"model": []}, "model=[] names no model"),
        ({"name": 3}, "name=3: must be a non-empty string"),
        ({"name": ""}, "name='': must be a non-empty string"),
        ({"model": "glove-50d", "name": "mine"}, "is named by itself"),
        ({"model": "glove-50d", "pooling": "avg"}, "tokenizer= and pooling= go with a transformers model"),
        ({"identity": "x", "model": "glove-50d"}, "identity= pins a plain callable"),
        ({"overwrite": "sometimes"}, "overwrite='sometimes': must be one of reuse, stale, always"),
        ({"batch_size": 0}, "batch_size=0: must be a positive integer"),
        ({"device": 3}, "device=3: give a device name"),
        ({"device": "gpu"}, "'gpu' is not a device"),
        ({"errors": "ignore"}, "errors='ignore': must be one of 'raise', 'keep'"),
        ({"intervals": "no"}, "intervals='no': must be True or False"),
        ({"results_dir": 3}, "results_dir=3: must be a folder"),
        ({"embedding_memory_mib": "1"}, "embedding_memory_mib='1': must be a number"),
    ],
)
def test_every_keyword_is_checked_in_one_line(project, keywords, needle):
    call = {"model": lambda batch: np.ones((len(batch), 4)), "tasks": SMALL, **keywords}
    with pytest.raises(InvalidInputError) as caught:
        benchharness.evaluate(call.pop("model"), call.pop("tasks"), **call)
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    assert not (project / "results").exists()


def test_a_callable_returning_no_values_per_sentence_is_refused(project):
    with pytest.raises(benchharness.EvaluationFailedError, match=r"returned an array of shape \(8, 0\) for 8"):
        benchharness.evaluate(lambda batch: np.ones((len(batch), 0)), SMALL, identity="empty", batch_size=8)


def test_a_callable_whose_width_changes_is_refused_naming_the_batch_and_both_widths(project):
    def changing(batch: list[str]) -> np.ndarray:
        changing.calls += 1
        return np.ones((len(batch), 4 if changing.calls == 1 else 6))

    changing.calls = 0
    with pytest.raises(benchharness.EvaluationFailedError) as caught:
        benchharness.evaluate(changing, SMALL, identity="changing", batch_size=8)
    [line] = [line for line in str(caught.value).splitlines() if SMALL in line]
    assert "6-dimensional vectors for batch 2 (sentences 9-16) but 4-dimensional ones before" in line


# ---- 11. a stored result is reused only for the identity it was computed with ----------------------
def test_a_model_changed_in_place_is_recomputed_not_given_the_old_stored_result(project, tiny_bert):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    word = Transformer(str(tiny_bert), max_seq_length=128)
    model = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device="cpu")
    store = {"results_dir": "results", "cache_dir": "cache"}
    first = benchharness.evaluate(model, SMALL, **store)
    assert benchharness.evaluate(model, SMALL, **store).outcomes[0].status == "reused"  # same weights
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    second = benchharness.evaluate(model, SMALL, **store)
    assert second.outcomes[0].status == "computed"
    fresh = benchharness.evaluate(copy.deepcopy(model), SMALL)  # the same weights, nothing stored or cached
    assert second.results[0].main_score == fresh.results[0].main_score != first.results[0].main_score
    [stored] = benchharness.load_results("results")
    assert stored.main_score == second.results[0].main_score
    # the Transformer module's pooler reaches no output of a SentenceTransformer: not hashed
    assert stored.encoder_identity["weights_sha256"] == weights_sha256(model, unused="0.model.pooler.")


def test_the_run_command_recomputes_a_result_stored_with_another_identity(project):
    args = ["run", "--encoders", "glove-50d", "--tasks", SMALL, "--no-cache", "--results-dir", "r"]
    assert cli(project, *args).returncode == 0
    path = project / "r" / "glove-50d" / f"{SMALL}.json"
    record = json.loads(path.read_text())
    real, record["encoder_identity"]["hash"], record["main_score"] = record["encoder_identity"]["hash"], "0" * 16, -1.0
    path.write_text(json.dumps(record))  # a result of other weights under the same name
    done = cli(project, *args)
    assert done.returncode == 0, done.stderr
    assert any("computed" in line for line in done.stdout.splitlines() if SMALL in line), done.stdout
    assert "another identity" in done.stderr
    record = json.loads(path.read_text())
    assert record["encoder_identity"]["hash"] == real and record["main_score"] > 0


def test_reuse_still_keeps_a_result_of_the_same_identity_whose_data_record_changed(project):
    first = benchharness.evaluate(HashEncoder(), SMALL, results_dir="results")
    path = project / "results" / "hash" / f"{SMALL}.json"
    record = json.loads(path.read_text())
    record["data"]["sha256"] = "0" * 64  # a stale data record, the same weights
    path.write_text(json.dumps(record))
    again = HashEncoder()
    reused = benchharness.evaluate(again, SMALL, results_dir="results")
    assert reused.outcomes[0].status == "reused" and "other data or protocol" in reused.outcomes[0].message
    assert again.calls == [] and reused.results[0].main_score == first.results[0].main_score
    assert (
        benchharness.evaluate(again, SMALL, results_dir="results", overwrite="stale").outcomes[0].status == "computed"
    )


# ---- weak: one identity= for two different callables ----------------------------------------------
def test_one_identity_string_for_two_functions_shares_nothing(project):
    rng = np.random.default_rng(0)
    table: dict[str, np.ndarray] = {}

    def first(batch: list[str]) -> np.ndarray:
        return np.stack([table.setdefault(s, rng.normal(size=8)) for s in batch])

    def second(batch: list[str]) -> np.ndarray:
        second.calls += len(batch)
        return first(batch) ** 2  # another function: other cosines

    second.calls = 0
    a = benchharness.evaluate(first, SMALL, identity="v1", cache_dir="cache", results_dir="results", name="a")
    b = benchharness.evaluate(second, SMALL, identity="v1", cache_dir="cache", results_dir="results", name="a")
    assert second.calls > 0  # no vector of ``first`` was served for ``second``
    assert b.outcomes[0].status == "computed"
    assert b.results[0].main_score == pytest.approx(spearman_of(b, SMALL), abs=1e-9) != a.results[0].main_score
    with pytest.raises(InvalidInputError, match="identity= belongs to one model"):
        benchharness.evaluate([first, second], SMALL, identity="v1")
    with pytest.raises(InvalidInputError, match=r"2 models of this call are named 'callable:.*<lambda>'"):
        benchharness.evaluate([lambda batch: first(batch), lambda batch: second(batch)], SMALL)
