"""SentEval transfer readers and tasks: counts against the real shared files, format quirks on
synthetic files, and a small end-to-end evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.tasks.senteval.classifier import ClassifierConfig
from benchharness.tasks.senteval.transfer import BinaryTask, read_binary_file, read_mrpc, read_trec, sorted_samples
from tests.helpers import DATA, needs_data

SENTEVAL = DATA / "senteval"
TINY = ClassifierConfig("tiny", kfold=3, optim="rmsprop", batch_size=16, tenacity=3, epoch_size=10, max_epoch=100)


@needs_data("senteval/CR/custrev.pos", "senteval/MPQA/mpqa.pos")
def test_blank_lines_count_as_senteval_counts_them():
    cr = read_binary_file(SENTEVAL / "CR/custrev.pos") + read_binary_file(SENTEVAL / "CR/custrev.neg")
    mpqa = read_binary_file(SENTEVAL / "MPQA/mpqa.pos") + read_binary_file(SENTEVAL / "MPQA/mpqa.neg")
    assert (len(cr), sum(1 for t in cr if t)) == (3775, 3771)  # data README: 3775 lines, 3771 non-empty
    assert (len(mpqa), sum(1 for t in mpqa if t)) == (10606, 10603)


@needs_data(
    "senteval/MR/rt-polarity.pos",
    "senteval/SST/binary/sentiment-train",
    "senteval/TREC/TREC_10.label",
    "senteval/MRPC/msr_paraphrase_train.txt",
)
def test_all_tasks_load_with_published_sizes():
    data = DataRoot(DATA)
    sizes = {}
    for name in tasks.resolve("transfer"):
        task = tasks.get(name)
        task.load(data)
        sizes[name] = task
    assert len(sizes["MR"].texts) == 10662 and len(sizes["SUBJ"].texts) == 10000
    assert sizes["MR"].labels.sum() == 5331  # 5331 positive, 5331 negative snippets
    assert [len(sizes["SST2"].splits[s][0]) for s in ("train", "dev", "test")] == [67349, 872, 1821]
    assert (len(sizes["TREC"].train[0]), len(sizes["TREC"].test[0])) == (5452, 500)
    assert sorted(set(sizes["TREC"].train[1].tolist())) == [0, 1, 2, 3, 4, 5]
    assert [len(sizes["MRPC"].pairs[s][2]) for s in ("train", "test")] == [4076, 1725]
    assert sizes["MRPC"].pairs["test"][2].sum() == 1147  # MRPC test: 1147 paraphrases (66.5%)
    assert tasks.resolve("transfer-fast")[0] == "MR-fast"
    assert tasks.get("MR-fast").metadata.protocol_details["config"] == "fast"


def test_latin1_bom_header_and_trec_coarse_labels(tmp_path):
    (tmp_path / "a.pos").write_bytes("caf\xe9 au lait\n\nsecond one here\n".encode("latin-1"))
    assert read_binary_file(tmp_path / "a.pos") == [["café", "au", "lait"], [], ["second", "one", "here"]]
    (tmp_path / "trec").write_bytes("NUM:dist How far is it ?\nHUM:ind Who was he ?\n".encode("latin-1"))
    texts, labels = read_trec(tmp_path / "trec")
    assert texts == [["How", "far", "is", "it", "?"], ["Who", "was", "he", "?"]] and labels == [5, 3]
    (tmp_path / "mrpc").write_text(
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA b .\tA  c .\n0\t3\t4\tx\ty z\n", encoding="utf-8"
    )
    a, b, y = read_mrpc(tmp_path / "mrpc")
    assert a == [["A", "b", "."], ["x"]] and b == [["A", "c", "."], ["y", "z"]] and y == [1, 0]
    (tmp_path / "bad").write_text("WHAT:x is this\n")
    with pytest.raises(DataError, match="bad:1"):
        read_trec(tmp_path / "bad")


def test_senteval_sort_order_is_stable_by_length_then_label():
    texts, labels = sorted_samples([["b", "b"], ["a"], ["c"], [], ["d", "d"]], [1, 1, 0, 1, 0])
    assert texts == ["", "c", "a", "d d", "b b"]
    assert labels.tolist() == [1, 0, 1, 0, 1]


def _write_binary(root, n=60):
    rng = np.random.default_rng(0)
    folder = root / "senteval" / "MR"
    folder.mkdir(parents=True)
    words = {1: ["good", "great", "fine"], 0: ["bad", "awful", "poor"]}
    for label, name in ((1, "rt-polarity.pos"), (0, "rt-polarity.neg")):
        lines = [" ".join(rng.choice(words[label], size=rng.integers(1, 4))) + f" w{i}" for i in range(n)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="latin-1")


def test_binary_task_end_to_end_on_separable_synthetic_data(tmp_path):
    _write_binary(tmp_path)
    task = BinaryTask("MR", ("MR/rt-polarity.pos", "MR/rt-polarity.neg"), 120, TINY, "synthetic")
    task.load(DataRoot(tmp_path, verify=False))

    def embed(sentences):
        pos = np.array([sum(w in ("good", "great", "fine") for w in s.split()) for s in sentences], float)
        neg = np.array([sum(w in ("bad", "awful", "poor") for w in s.split()) for s in sentences], float)
        return np.c_[pos, neg, np.ones(len(sentences))]

    out = task.evaluate(embed, 1111)
    assert out["acc"] == 100.0 and out["config"] == "tiny"
    assert len(out["fold_acc"]) == 3 and out["fits"] == 3 * 3 * 4 + 3
    assert task.metadata.protocol_details["classifier"]["optim"] == "rmsprop"


def test_wrong_count_is_reported(tmp_path):
    _write_binary(tmp_path, n=10)
    task = BinaryTask("MR", ("MR/rt-polarity.pos", "MR/rt-polarity.neg"), 10662, TINY, "synthetic")
    with pytest.raises(DataError, match="read 20 samples"):
        task.load(DataRoot(tmp_path, verify=False))
