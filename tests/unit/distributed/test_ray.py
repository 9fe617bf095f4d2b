"""Ray sweeps and sharded encoding on a local cluster of two one-CPU nodes (tests/ray_fixtures.py): results
equal a sequential run, a lost node's unit is retried, sharded vectors are bit-identical to one
process, a wrong identity is refused and a killed actor's chunk is encoded again."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from benchharness.cli import main
from benchharness.core.results import ResultStore
from benchharness.evaluation.cache import EmbeddingCache, sentence_key
from benchharness.evaluation.run_settings import RunSettings
from tests.helpers import DATA, needs_data

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.usefixtures("hang_guard"),
    needs_data("senteval/STS/STSBenchmark", "senteval/SICK", "glove"),
]

TASKS = "STSBenchmark,SICKRelatedness"
#: what differs between two computations of one result: when and how fast
VOLATILE = ("date", "timings")


@pytest.fixture
def ray_project(project, ray_cluster):
    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n[encoders.slow]\nspec = "ray_fakes:slow"\n'
    )
    return project


def results(folder) -> dict[tuple[str, str], dict]:
    """Every result under ``folder`` without its volatile fields, with its per-item arrays."""
    store = ResultStore(folder)
    out = {}
    for result in store:
        record = {k: v for k, v in result.to_dict().items() if k not in VOLATILE}
        record["items"] = {k: v.tolist() for k, v in store.load_items(result).items.items()}
        out[result.encoder, result.task] = record
    return out


def test_a_sweep_stores_what_a_sequential_run_stores_and_reuses_it_without_submitting(ray_project, capsys):
    encoders = "glove-50d,glove-50d+whitening,slow"
    assert (
        main(
            [
                "run",
                "--encoders",
                encoders,
                "--tasks",
                TASKS,
                "--results-dir",
                "sequential",
                "--quiet",
                "--cache-dir",
                "sequential-cache",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "run",
                "--encoders",
                encoders,
                "--tasks",
                TASKS,
                "--results-dir",
                "swept",
                "--cache-dir",
                "swept-cache",
                "--executor",
                "ray",
            ]
        )
        == 0
    )
    out = capsys.readouterr().err  # messages go to standard error
    assert "ray sweep: 2 unit(s) to run" in out  # glove-50d and its whitening share a unit
    sequential, swept = results(ray_project / "sequential"), results(ray_project / "swept")
    assert len(sequential) == 6 and swept == sequential
    assert main(["run", "--encoders", encoders, "--tasks", TASKS, "--results-dir", "swept", "--executor", "ray"]) == 0
    assert "ray sweep: 0 unit(s) to run, 6 result(s) reused without running" in capsys.readouterr().err


def test_a_unit_on_a_removed_node_is_retried_on_another_and_nothing_is_lost(ray_project, ray_cluster, tmp_path):
    _, cluster = ray_cluster
    assert (
        main(["run", "--encoders", "slow", "--tasks", TASKS, "--results-dir", "sequential", "--quiet", "--no-cache"])
        == 0
    )
    marks = tmp_path / "marks"
    marks.mkdir()
    (ray_project / "ray_test.json").write_text(json.dumps({"marks": str(marks), "pause": 3}))
    removed: list[str] = []

    def remove_the_busy_node() -> None:
        deadline = time.time() + 120
        while not any(marks.iterdir()) and time.time() < deadline:
            time.sleep(0.1)
        busy = next(marks.iterdir()).name.split("-")[0]
        node = next(n for n in cluster.list_all_nodes() if n.node_id == busy)
        cluster.remove_node(node)
        removed.append(busy)

    remover = threading.Thread(target=remove_the_busy_node)
    remover.start()
    try:
        status = main(
            [
                "run",
                "--encoders",
                "slow",
                "--tasks",
                TASKS,
                "--results-dir",
                "swept",
                "--quiet",
                "--no-cache",
                "--executor",
                "ray",
            ]
        )
    finally:
        remover.join()
        cluster.add_node(num_cpus=1)  # the session's cluster keeps two worker nodes
        cluster.wait_for_nodes()
    assert status == 0 and removed
    nodes = {p.name.split("-")[0] for p in marks.iterdir()}
    assert len(nodes) == 2 and removed[0] in nodes  # begun on the removed node, finished on the other
    assert results(ray_project / "swept") == results(ray_project / "sequential")


def stored_rows(cache_dir, identity: str) -> tuple[list[bytes], np.ndarray]:
    """The cache's keys and rows in storage order."""
    keys, rows = [], []
    EmbeddingCache(cache_dir).lookup(identity, lambda k, r: (keys.extend(k), rows.append(r.copy())))
    return keys, np.concatenate(rows)


@pytest.mark.parametrize("encoder", ["glove-50d", "tiny"])
def test_sharded_encoding_fills_the_cache_bit_for_bit_as_one_process(ray_project, encoder, tiny_bert):
    """Each actor has one CPU slot, hence one torch thread; the single process runs with one thread
    too, as a transformer's CPU vectors move in their last bit with the thread count (6e-8 here)."""
    import torch

    from benchharness.evaluation.evaluate import evaluate
    from benchharness.evaluation.resolver import Resolver

    name = encoder if encoder == "glove-50d" else f"hf:{tiny_bert}?pooling=avg"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = evaluate(name, TASKS, cache_dir=ray_project / "one", intervals=False)
    finally:
        torch.set_num_threads(threads)
    two = evaluate(name, TASKS, cache_dir=ray_project / "two", encode_actors=2, intervals=False)
    assert [r.metrics for r in two] == [r.metrics for r in one]
    identity = Resolver().get(name).identity
    keys_one, rows_one = stored_rows(ray_project / "one", identity)
    keys_two, rows_two = stored_rows(ray_project / "two", identity)
    sentences = [s for t in ("STSBenchmark", "SICKRelatedness") for s in _task_sentences(t)]
    assert len(keys_two) == len(set(keys_two)) == len({sentence_key(s) for s in sentences})  # each once
    assert keys_two == keys_one  # merged in the single process's order (longest first, chunk by chunk)
    np.testing.assert_array_equal(rows_two, rows_one)


def _task_sentences(name: str) -> list[str]:
    from benchharness import tasks
    from benchharness.core.data_root import DataRoot

    task = tasks.get(name)
    task.load(DataRoot(DATA))
    return task.sentences()


def test_an_actor_that_builds_another_identity_is_refused(ray_project):
    from benchharness.evaluation.encode_pool import ActorPools, IdentityMismatchError
    from tests.fakes import HashEncoder

    impostor = HashEncoder("glove-50d")  # what the driver holds under the name; the actors build GloVe
    pools = ActorPools(RunSettings(encode_actors=1, cache_dir=ray_project / "cache"))
    try:
        with pytest.raises(
            IdentityMismatchError, match=f"builds 'glove-50d' with identity .* the driver's is {impostor.identity}"
        ):
            list(pools.for_encoder(impostor)([["a sentence"]]))
    finally:
        pools.close()


def test_asking_for_more_actors_than_slots_is_refused_not_left_waiting(ray_project):
    from benchharness.core.errors import UserError
    from benchharness.evaluation.encode_pool import ActorPools
    from benchharness.evaluation.resolver import Resolver

    pools = ActorPools(RunSettings(encode_actors=3, cache_dir=ray_project / "cache"))
    try:
        with pytest.raises(UserError, match="has 2 CPU slot"):
            list(pools.for_encoder(Resolver().get("glove-50d"))([["a sentence"]]))
    finally:
        pools.close()


def test_a_killed_actor_loses_only_its_chunks_in_flight(ray_project, ray_cluster, tmp_path):
    from benchharness.evaluation.encode_pool import ActorPools
    from benchharness.evaluation.resolver import Resolver
    from tests.fakes import HashEncoder

    ray, _ = ray_cluster
    marks = tmp_path / "marks"
    marks.mkdir()
    (ray_project / "ray_test.json").write_text(json.dumps({"marks": str(marks), "pause": 0.5}))
    chunks = [[f"sentence {i} of chunk {c}" for i in range(5)] for c in range(8)]
    pools = ActorPools(RunSettings(encode_actors=2, cache_dir=ray_project / "cache"))
    try:
        encode = pools.for_encoder(Resolver().get("slow"))
        out = []
        for i, vectors in enumerate(encode(chunks)):
            out.append(vectors)
            if i == 1:
                ray.kill(pools._pools["slow"].actors[0], no_restart=False)
        calls = len(list(marks.iterdir()))
    finally:
        pools.close()
    expected = [HashEncoder("slow").encode(c) for c in chunks]
    assert all(np.array_equal(a, b) for a, b in zip(out, expected)) and len(out) == 8
    assert calls >= 3  # the restarted actor is a new process: it left its own mark


def test_a_seed_grid_trains_each_seed_as_a_ray_task_as_one_process_would(ray_project, tiny_bert, tmp_path):
    """``train --seeds 1,2 --executor ray``: one Ray task per seed; seed 1's weights are bit-identical
    to seed 1 trained here (one torch thread in both), seed 2's differ."""
    import torch
    from safetensors.numpy import load_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i} about topic {i % 7}\n" for i in range(40)))
    common = [
        "train",
        "simcse",
        "--base",
        str(tiny_bert),
        "--data",
        f"text:{corpus}",
        "--batch-size",
        "4",
        "--max-steps",
        "3",
        "--max-length",
        "16",
        "--eval-every",
        "0",
        "--threads",
        "1",
        "--quiet",
    ]
    assert main([*common, "--seeds", "1,2", "--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    threads = torch.get_num_threads()
    try:
        assert main([*common, "--seeds", "1", "--out", str(tmp_path / "here")]) == 0
    finally:
        torch.set_num_threads(threads)

    def weights(folder):
        (file,) = folder.glob("*.safetensors")  # the model's weights, beside the run's manifest
        return load_file(file)

    here, ray_1, ray_2 = weights(tmp_path / "here-s1"), weights(tmp_path / "ray-s1"), weights(tmp_path / "ray-s2")
    assert here.keys() == ray_1.keys() and all(np.array_equal(here[k], ray_1[k]) for k in here)
    assert any(not np.array_equal(here[k], ray_2[k]) for k in here)


def test_ray_flags_without_their_grid_are_refused_in_one_line(ray_project, capsys):
    assert main(["train", "simcse", "--executor", "ray"]) == 2
    assert "give --seeds too" in capsys.readouterr().err
    assert main(["run", "--encoders", "glove-50d", "--tasks", "STSBenchmark", "--address", "x:1"]) == 2
    assert "--address names a Ray cluster for --executor ray or --encode-actors" in capsys.readouterr().err
    assert (
        main(["run", "--encoders", "glove-50d", "--tasks", "STSBenchmark", "--encode-actors", "2", "--no-cache"]) == 2
    )
    assert "leave out --no-cache" in capsys.readouterr().err
