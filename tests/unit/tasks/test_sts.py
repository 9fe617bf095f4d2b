"""STS loaders against the published pair counts, and the three aggregations by hand."""

import numpy as np
import pytest
from scipy import stats

from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.tasks.sts import STSYear


@pytest.mark.parametrize(
    "name,pairs",
    [
        ("STS12", 3108),
        ("STS13", 1500),
        ("STS14", 3750),
        ("STS15", 3000),
        ("STS16", 1186),
        ("STSBenchmark", 1379),
        ("SICKRelatedness", 4927),
        ("STSBenchmark-dev", 1500),
        ("SICKRelatedness-trial", 500),
        ("STSBenchmark-raw", 1379),
    ],
)
def test_pair_counts_match_published(data_dir, name, pairs):
    task = tasks.get(name)
    task.load(DataRoot(data_dir))
    assert sum(len(g) for _, _, g in task.subsets.values()) == pairs
    assert len(task.sentences()) == 2 * pairs


def test_sts_subsets_and_gold_filtering(data_dir):
    task = tasks.get("STS16")
    task.load(DataRoot(data_dir))
    assert list(task.subsets) == ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"]
    # STS16 inputs hold 9183 lines, of which only 1186 carry a gold score (SemEval released the rest unscored)
    raw = sum(
        1
        for f in (data_dir / "senteval/STS/STS16-en-test").glob("STS.input.*.txt")
        for _ in f.read_text(encoding="utf8").splitlines()
    )
    assert raw == 9183


def test_senteval_whitespace_rejoin(data_dir):
    task = tasks.get("SICKRelatedness")
    task.load(DataRoot(data_dir))
    a, b, gold = task.subsets["test"]
    # first test pair of SICK, pair_ID 6
    assert a[0] == "There is no boy playing outdoors and there is no man smiling"
    assert gold[0] == 3.3
    assert all("  " not in s and s == s.strip() for s in a + b)


def test_groups_resolve_to_seven_tasks():
    assert tasks.resolve("sts") == ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]


def test_unknown_task_suggests():
    with pytest.raises(tasks.UnknownTaskError, match="STSBenchmark"):
        tasks.resolve("STSBenchmrk")


def _fake_year() -> STSYear:
    """STS12 task object with hand-made subsets instead of files."""
    task = STSYear("STS12")
    task.subsets = {
        "x": (["a", "b", "c", "d"], ["a2", "b2", "c2", "d2"], np.array([1.0, 2.0, 3.0, 4.0])),
        "y": (["e", "f", "g"], ["e2", "f2", "g2"], np.array([5.0, 0.0, 2.0])),
    }
    return task


def test_aggregations_by_hand():
    # embeddings chosen so that cosine(s, s2) is a known number per sentence
    cos = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.7, "e": 0.3, "f": 0.2, "g": 0.8}

    def embed(sentences):
        rows = []
        for s in sentences:
            c = cos[s[0]]
            rows.append([1.0, 0.0] if not s.endswith("2") else [c, np.sqrt(1 - c * c)])
        return np.array(rows)

    m = _fake_year().evaluate(embed, seed=0)
    px, py = [0.9, 0.1, 0.5, 0.7], [0.3, 0.2, 0.8]
    gx, gy = [1, 2, 3, 4], [5, 0, 2]
    # subset x: pred ranks 4,1,2,3 vs gold 1,2,3,4 -> d^2 = 9+1+1+1 = 12 -> rho = 1 - 72/60 = -0.2
    assert m["x.spearman"] == pytest.approx(-20.0)
    # subset y: pred ranks 2,1,3 vs gold 3,1,2 -> d^2 = 1+0+1 = 2 -> rho = 1 - 12/24 = 0.5
    assert m["y.spearman"] == pytest.approx(50.0)
    assert m["mean.spearman"] == pytest.approx((-20.0 + 50.0) / 2)
    assert m["wmean.spearman"] == pytest.approx((-20.0 * 4 + 50.0 * 3) / 7)
    assert m["all.spearman"] == pytest.approx(100 * stats.spearmanr(px + py, gx + gy)[0])
    assert m["all.pearson"] == pytest.approx(100 * stats.pearsonr(px + py, gx + gy)[0])
    assert m["n"] == 7


def test_wrong_pair_count_is_an_error(tmp_path, data_dir):
    folder = tmp_path / "senteval/STS/STSBenchmark"
    folder.mkdir(parents=True)
    src = (data_dir / "senteval/STS/STSBenchmark/sts-test.csv").read_text(encoding="utf8").splitlines()
    (folder / "sts-test.csv").write_text("\n".join(src[:-1]) + "\n", encoding="utf8")
    with pytest.raises(DataError, match="corrupt or modified"):
        tasks.get("STSBenchmark").load(DataRoot(tmp_path))
    with pytest.raises(DataError, match="expected 1379"):
        tasks.get("STSBenchmark").load(DataRoot(tmp_path, verify=False))
