"""SentEval's other tasks: SST5, SICKEntailment, supervised SICK-R and STS-B, SNLI and the probing
tasks. Readers against the shared files (counts taken independently from the files), formats and
missing files on synthetic fixtures, and whole runs through ``evaluate``, ``compare``, the
leaderboard and the report."""

from __future__ import annotations

import csv
import io
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

import benchharness
from benchharness import tasks
from benchharness.cli import main
from benchharness.core.data_root import PROBING_FILES, DataError, DataRoot
from benchharness.core.results import ResultStore
from benchharness.reporting.html_report import write_report
from benchharness.reporting.leaderboard import build
from benchharness.scoring.confidence import column_test_p
from benchharness.scoring.stats import steiger_z
from benchharness.tasks.senteval.classifier import split_select
from benchharness.tasks.senteval.config import CONFIGS, NOREG_GRID, ClassifierConfig
from benchharness.tasks.senteval.mlp import mlp_split_select
from benchharness.tasks.senteval.probing import ProbingTask, read_probing
from benchharness.tasks.senteval.relatedness import RelatednessTask, soft_targets
from benchharness.tasks.senteval.snli import SNLI
from benchharness.tasks.senteval.split import SST5, SICKEntailment, read_sst_fine
from tests.helpers import DATA, needs_data

SENTEVAL = DATA / "senteval"
TINY = ClassifierConfig("tiny", kfold=3, optim="rmsprop", batch_size=16, tenacity=2, epoch_size=2, max_epoch=40)


def test_groups_keep_transfer_the_seven_and_name_every_other_senteval_task():
    groups = tasks.groups()
    assert groups["transfer"] == ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
    extra = ["SST5", "SICKEntailment", "SICKRelatedness-sup", "STSBenchmark-sup", "SNLI"]
    probing = ["Length", "WordContent", "Depth", "TopConstituents", "BigramShift"]
    probing += ["Tense", "SubjNumber", "ObjNumber", "OddManOut", "CoordinationInversion"]
    assert groups["senteval-extra"] == extra and groups["probing"] == probing
    assert groups["senteval-extra-fast"] == ["SST5-fast", "SICKEntailment-fast", *extra[2:4], "SNLI-fast"]
    assert groups["probing-fast"] == [f"{n}-fast" for n in probing]
    assert groups["senteval-all"] == [
        "STS12",
        "STS13",
        "STS14",
        "STS15",
        "STS16",
        *groups["transfer"],
        *extra,
        *probing,
    ]
    assert tasks.resolve("SICK-E,SOMO,WC,SICKRelatedness-sup-fast") == [
        "SICKEntailment",
        "OddManOut",
        "WordContent",
        "SICKRelatedness-sup",
    ]
    # the unsupervised tasks keep their names and protocol
    assert tasks.get("SICKRelatedness").metadata.protocol == "senteval-unsup-cosine"
    assert tasks.get("STSBenchmark-sup").metadata.main_score == "pearson"
    assert tasks.get("SST5-fast").metadata.protocol_details["classifier"]["optim"] == "rmsprop"
    snli = tasks.get("SNLI-fast")
    assert (snli.classifier_config.max_epoch, snli.classifier_config.epoch_size, snli.grid) == (15, 1, NOREG_GRID)
    assert snli.classifier_config.optim == "rmsprop" and snli.classifier_config.batch_size == 128


# --- the shared files ------------------------------------------------------------------------------


@needs_data("senteval/SST/fine/sentiment-train")
def test_sst5_reads_sentevals_fine_grained_files():
    task = tasks.get("SST5")
    task.load(DataRoot(DATA))
    for split, n in (("train", 8544), ("dev", 1101), ("test", 2210)):
        lines = (SENTEVAL / f"SST/fine/sentiment-{split}").read_text(encoding="utf-8").splitlines()
        counts = np.bincount([int(line[0]) for line in lines], minlength=5)
        texts, labels = task.splits[split]
        assert len(texts) == n and np.array_equal(np.bincount(labels, minlength=5), counts)
        keys = [(len(t.split()), y) for t, y in zip(texts, labels)]
        assert keys == sorted(keys)  # SentEval's order: (tokens, label)


@needs_data("senteval/SICK/SICK_train.txt")
def test_sick_entailment_reads_the_judgment_column():
    task = tasks.get("SICKEntailment")
    task.load(DataRoot(DATA))
    ids = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}
    for split, name in (("train", "SICK_train.txt"), ("dev", "SICK_trial.txt"), ("test", "SICK_test_annotated.txt")):
        with open(SENTEVAL / "SICK" / name, encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        y = task.pairs[split][2]
        assert len(y) == len(rows) and np.array_equal(
            np.bincount(y, minlength=3), np.bincount([ids[r["entailment_judgment"].strip()] for r in rows], minlength=3)
        )
    assert len(task.pairs["test"][2]) == 4927


@needs_data("senteval/STS/STSBenchmark/sts-train.csv", "senteval/SICK/SICK_train.txt")
def test_supervised_relatedness_reads_sentevals_splits_in_its_order():
    stsb, sick = tasks.get("STSBenchmark-sup"), tasks.get("SICKRelatedness-sup")
    stsb.load(DataRoot(DATA))
    sick.load(DataRoot(DATA))
    assert [len(stsb.pairs[s][2]) for s in ("train", "dev", "test")] == [5749, 1500, 1379]
    assert [len(sick.pairs[s][2]) for s in ("train", "dev", "test")] == [4500, 500, 4927]
    a, b, gold = stsb.pairs["train"]
    keys = [(len(x.split()), len(y.split()), g) for x, y, g in zip(a, b, gold)]
    assert keys == sorted(keys)
    assert gold.min() == 0.0 and gold.max() == 5.0  # STS-B's scores are fed as they are
    assert sick.pairs["test"][2].min() == 1.0
    raw = [float(line.split("\t")[4]) for line in (SENTEVAL / "STS/STSBenchmark/sts-test.csv").open(encoding="utf-8")]
    assert sorted(stsb.pairs["test"][2]) == sorted(raw)


@needs_data("senteval/SNLI/s1.dev")
def test_snli_without_its_train_split_says_what_is_missing_and_where_it_comes_from():
    if (SENTEVAL / "SNLI/s1.train").exists():
        pytest.skip("the shared data has SNLI's train split")
    with pytest.raises(DataError) as err:
        tasks.get("SNLI").load(DataRoot(DATA))
    msg = str(err.value)
    assert "\n" not in msg
    for name in ("s1.train", "s2.train", "labels.train"):
        assert f"senteval/SNLI/{name}" in msg
    assert "s1.dev" not in msg and "snli_1.0.zip" in msg and "get_transfer_data.bash" in msg


# --- synthetic fixtures ----------------------------------------------------------------------------


def keyword_embed(dim: int = 12, words: tuple[str, ...] = (), seed: int = 0):
    """One coordinate per keyword (3x its count), then a hashed random vector per other word, averaged:
    a deterministic sentence encoder whose keyword coordinates make the fixtures separable."""

    def vector(word: str) -> np.ndarray:
        return np.random.default_rng(zlib.crc32(f"{seed}:{word}".encode())).normal(size=dim)

    def embed(sentences):
        out = np.zeros((len(sentences), len(words) + dim), dtype=np.float32)
        for i, s in enumerate(sentences):
            tokens = s.split()
            out[i, : len(words)] = [3.0 * tokens.count(w) for w in words]
            others = [vector(t) for t in tokens if t not in words]
            if others:
                out[i, len(words) :] = np.mean(others, axis=0)
        return out

    return embed


def _write(path: Path, lines: list[str], encoding: str = "utf-8") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding=encoding)


def _words(rng, k):
    return " ".join(f"w{rng.integers(0, 40)}" for _ in range(k))


SST_WORDS = ("awful", "bad", "okay", "good", "great")
SICK_WORDS = ("not", "maybe")
SICK_LABELS = ("ENTAILMENT", "CONTRADICTION", "NEUTRAL")


def write_sst5(root: Path, sizes=(60, 30, 30)) -> None:
    rng = np.random.default_rng(1)
    for split, n in zip(("train", "dev", "test"), sizes):
        labels = rng.integers(0, 5, size=n)
        _write(
            root / f"senteval/SST/fine/sentiment-{split}",
            [f"{y} {_words(rng, rng.integers(1, 5))} {SST_WORDS[y]} {_words(rng, 1)}" for y in labels],
        )


def write_sick(root: Path, sizes=(60, 30, 30)) -> None:
    rng = np.random.default_rng(2)
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
    for name, n in zip(("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"), sizes):
        lines = [header]
        for i in range(n):
            label = int(rng.integers(0, 3))
            a = _words(rng, rng.integers(2, 6))
            b = a + {0: "", 1: " not", 2: " maybe"}[label]
            lines.append(f"{i}\t{a}\t{b}\t{rng.uniform(1, 5):.1f}\t{SICK_LABELS[label]}")
        _write(root / "senteval/SICK" / name, lines)


def write_stsb(root: Path, sizes=(80, 40, 40)) -> None:
    rng = np.random.default_rng(3)
    for split, n in zip(("train", "dev", "test"), sizes):
        lines = []
        for i in range(n):
            a = [f"w{rng.integers(0, 40)}" for _ in range(5)]
            keep = int(rng.integers(0, 6))
            b = a[:keep] + [f"w{rng.integers(0, 40)}" for _ in range(5 - keep)]
            lines.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{keep:.3f}\t{' '.join(a)}\t{' '.join(b)}")
        _write(root / f"senteval/STS/STSBenchmark/sts-{split}.csv", lines)


def test_sst5_reader_splits_at_the_first_space_and_names_a_bad_line(tmp_path):
    _write(tmp_path / "f", ["4 a  stirring , funny", "0 x"])
    assert read_sst_fine(tmp_path / "f") == ([["a", "stirring", ",", "funny"], ["x"]], [4, 0])
    _write(tmp_path / "bad", ["4 fine", "7 what"])
    with pytest.raises(DataError, match=r"bad:2: expected '<label 0-4> <sentence>'"):
        read_sst_fine(tmp_path / "bad")
    write_sst5(tmp_path, (10, 5, 5))
    with pytest.raises(DataError, match=r"sentiment-train: 10 sentences, expected 8544"):
        tasks.get("SST5").load(DataRoot(tmp_path, verify=False))


def test_sick_entailment_classifies_pair_features_by_sentevals_split_protocol(tmp_path):
    write_sick(tmp_path)
    task = SICKEntailment(TINY, sizes={"train": 60, "dev": 30, "test": 30})
    task.load(DataRoot(tmp_path, verify=False))
    embed = keyword_embed(words=SICK_WORDS)
    ev = task.evaluate_items(embed, 1111)
    # the same protocol by hand: SentEval's order, [|u-v|, u*v], split_select
    feats, labels = {}, {}
    for split, name in (("train", "SICK_train.txt"), ("dev", "SICK_trial.txt"), ("test", "SICK_test_annotated.txt")):
        rows = [line.split("\t") for line in (tmp_path / "senteval/SICK" / name).read_text().splitlines()[1:]]
        rows.sort(key=lambda r: (len(r[1].split()), len(r[2].split()), {"CONTRADICTION": 0, "NEUTRAL": 1}.get(r[4], 2)))
        u, v = embed([r[1] for r in rows]), embed([r[2] for r in rows])
        feats[split] = np.c_[np.abs(u - v), u * v]
        labels[split] = np.array([{"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}[r[4]] for r in rows])
    ref = split_select(*(x for s in ("train", "dev", "test") for x in (feats[s], labels[s])), 3, TINY, 1111)
    assert (ev.metrics["acc"], ev.metrics["devacc"], ev.metrics["chosen_l2"]) == (
        ref["acc"],
        ref["devacc"],
        ref["chosen_l2"],
    )
    assert ev.kind == "classification" and np.array_equal(ev.items["gold"], labels["test"])
    assert ev.metrics["acc"] == round(100 * float((ev.items["pred"] == ev.items["gold"]).mean()), 2)
    assert ev.metrics["acc"] > 60  # well above chance: "not" and "maybe" show in |u-v|


def _write_snli(root: Path, sizes=(90, 30, 30), skip_train=False):
    rng = np.random.default_rng(4)
    names = ("entailment", "neutral", "contradiction")
    for split, n in zip(("train", "dev", "test"), sizes):
        if skip_train and split == "train":
            continue
        s1, s2, gold = [], [], []
        for _ in range(n):
            label = int(rng.integers(0, 3))
            premise = _words(rng, rng.integers(2, 6))
            s1.append(premise + " . ")  # SentEval's files end lines with a space
            s2.append(f"{_words(rng, rng.integers(1, 4))} {('yes', 'perhaps', 'no')[label]} . ")
            gold.append(names[label])
        _write(root / f"senteval/SNLI/s1.{split}", s1, "latin-1")
        _write(root / f"senteval/SNLI/s2.{split}", s2, "latin-1")
        _write(root / f"senteval/SNLI/labels.{split}", gold)


def test_snli_fixture_runs_sentevals_pipeline(tmp_path):
    _write_snli(tmp_path)
    task = SNLI(TINY, sizes={"train": 90, "dev": 30, "test": 30})
    task.load(DataRoot(tmp_path, verify=False))
    embed = keyword_embed(words=("yes", "perhaps", "no"))
    ev = task.evaluate_items(embed, 1111)
    ids = {"entailment": 0, "neutral": 1, "contradiction": 2}
    x, y = {}, {}
    for split in ("train", "dev", "test"):
        s1, s2, gold = (
            (tmp_path / f"senteval/SNLI/{k}.{split}").read_text(encoding="latin-1").splitlines()
            for k in ("s1", "s2", "labels")
        )
        order = sorted(zip(s2, s1, gold), key=lambda z: (len(z[0].split()), len(z[1].split()), z[2]))
        u = embed([" ".join(p.split()) for _, p, _ in order])
        v = embed([" ".join(h.split()) for h, _, _ in order])
        x[split] = np.hstack((u, v, u * v, np.abs(u - v)))
        y[split] = np.array([ids[g] for _, _, g in order])
    cfg = ClassifierConfig("tiny", 3, "rmsprop", 16, 2, epoch_size=1, max_epoch=15)  # SNLI's overrides
    ref = split_select(*(v for s in ("train", "dev", "test") for v in (x[s], y[s])), 3, cfg, 1111, grid=(1e-9,))
    assert (ev.metrics["acc"], ev.metrics["devacc"], ev.metrics["chosen_l2"]) == (ref["acc"], ref["devacc"], 1e-9)
    assert np.array_equal(ev.items["gold"], y["test"]) and ev.metrics["fits"] == 1
    assert task.metadata.protocol_details["features"] == "[u, v, u*v, |u-v|]"


def test_snli_with_a_missing_split_or_bad_label_fails_in_one_line(tmp_path):
    _write_snli(tmp_path, skip_train=True)
    with pytest.raises(DataError, match=r"missing senteval/SNLI/s1\.train, senteval/SNLI/s2\.train, .*labels\.train"):
        SNLI(TINY).load(DataRoot(tmp_path, verify=False))
    _write_snli(tmp_path)
    (tmp_path / "senteval/SNLI/labels.dev").write_text("neutral\n-\n" + "neutral\n" * 28)
    with pytest.raises(DataError, match=r"labels\.dev:2: label '-'"):
        SNLI(TINY, sizes={"train": 90, "dev": 30, "test": 30}).load(DataRoot(tmp_path, verify=False))


# --- probing -----------------------------------------------------------------------------------------


def _write_probing(root: Path, file: str = "past_present.txt", sizes=(90, 30, 30), labels=("PAST", "PRES")) -> Path:
    rng = np.random.default_rng(5)
    lines = []
    for token, n in zip(("tr", "va", "te"), sizes):
        for _ in range(n):
            label = labels[int(rng.integers(0, len(labels)))]
            marker = f"k{labels.index(label)}"
            lines.append(f"{token}\t{label}\t{_words(rng, rng.integers(1, 4))} {marker} {_words(rng, 1)}")
    path = root / "probing" / file
    _write(path, lines)
    return path


def test_probing_reader_takes_split_label_and_last_field(tmp_path):
    path = tmp_path / "p.txt"
    _write(path, ["tr\tPRES\textra\tthe  cat sits", "tr\tPAST\tx\tit sat", "va\tPAST\ta b", "te\tPRES\tc"])
    splits, names = read_probing(path)
    assert names == ["PAST", "PRES"]
    assert splits["train"] == ([["the", "cat", "sits"], ["it", "sat"]], [1, 0])
    assert splits["dev"] == ([["a", "b"]], [0]) and splits["test"] == ([["c"]], [1])
    _write(path, ["tr\tPRES\ta", "va\tPRES\tb", "te\tFUT\tc"])
    with pytest.raises(DataError, match=r"p\.txt:3: label 'FUT' of the test split never occurs in train"):
        read_probing(path)
    _write(path, ["tr\tPRES\ta", "xx\tPRES\tb"])
    with pytest.raises(DataError, match=r"p\.txt:2: expected 'tr\|va\|te"):
        read_probing(path)
    _write(path, ["tr\tPRES\ta", "te\tPRES\tb"])
    with pytest.raises(DataError, match=r"no dev lines"):
        read_probing(path)


def test_a_missing_probing_file_says_how_to_download_it(tmp_path):
    (tmp_path / "probing").mkdir()
    with pytest.raises(DataError) as err:
        tasks.get("Tense").load(DataRoot(tmp_path))
    msg = str(err.value)
    assert "probing/past_present.txt" in msg and "benchharness data download probing" in msg
    assert "facebookresearch/SentEval" in msg


@pytest.mark.parametrize("config", ["fast", "default"])
def test_probing_task_classifies_with_its_configs_classifier(tmp_path, config):
    _write_probing(tmp_path, labels=("PAST", "PRES", "FUT"))  # any label set; ids by sorted name
    task = ProbingTask("Tense", CONFIGS[config])
    task.load(DataRoot(tmp_path))
    assert task.nclasses == 3 and task.label_names == ["FUT", "PAST", "PRES"]
    embed = keyword_embed(words=("k0", "k1", "k2"))
    ev = task.evaluate_items(embed, 1111)
    # the protocol by hand: the file's splits, label ids by sorted name, SentEval's (tokens, label) order
    ids = {"FUT": 0, "PAST": 1, "PRES": 2}
    rows = [line.split("\t") for line in (tmp_path / "probing/past_present.txt").read_text().splitlines()]
    x, y = [], []
    for token in ("tr", "va", "te"):
        part = sorted(((r[-1].split(), ids[r[1]]) for r in rows if r[0] == token), key=lambda z: (len(z[0]), z[1]))
        x.append(embed([" ".join(t) for t, _ in part]))
        y.append(np.array([label for _, label in part]))
    nhids, dropouts = ((0,), (0.0,)) if config == "fast" else ((50, 100, 200), (0.0, 0.1, 0.2))
    ref = mlp_split_select(x[0], y[0], x[1], y[1], x[2], y[2], 3, CONFIGS[config], 1111, nhids, dropouts)
    assert (ev.metrics["acc"], ev.metrics["devacc"], ev.metrics["nhid"]) == (ref["acc"], ref["devacc"], ref["nhid"])
    assert ev.kind == "classification" and np.array_equal(ev.items["gold"], y[2])
    assert ev.metrics["acc"] > 90  # the marker word decides the label
    if config == "fast":  # SentEval's prototyping config: logistic regression
        assert (ev.metrics["nhid"], ev.metrics["fits"]) == (0, 4)
    else:  # the README's MLP grid: nhid x dropout x L2
        assert ev.metrics["fits"] == 3 * 3 * 4 and ev.metrics["nhid"] in (50, 100, 200)
        assert [(p["nhid"], p["dropout"]) for p in ev.metrics["grid_devacc"]][:2] == [(50, 0.0), (50, 0.1)]


def test_labels_beyond_int8_are_kept_whole_in_the_items(tmp_path):
    n = 130  # WordContent has 1000 target words
    lines = [
        f"{split}\tt{i:03d}\tw1 k{i} w2"
        for split, times in (("tr", 2), ("va", 1), ("te", 1))
        for _ in range(times)
        for i in range(n)
    ]
    _write(tmp_path / "probing/word_content.txt", lines)
    task = tasks.get("WordContent-fast")
    task.load(DataRoot(tmp_path))
    ev = task.evaluate_items(keyword_embed(dim=4, words=tuple(f"k{i}" for i in range(n))), 1111)
    assert ev.items["gold"].dtype == np.int16 and ev.items["gold"].max() > 127
    assert ev.metrics["acc"] == round(100 * float((ev.items["pred"] == ev.items["gold"]).mean()), 2)


def test_word_content_always_uses_logistic_regression():
    task = tasks.get("WordContent")
    assert (task.nhids, task.dropouts) == ((0,), (0.0,))
    assert tasks.get("Length").nhids == (50, 100, 200)


def test_data_download_probing_fetches_the_ten_files_from_sentevals_repository(tmp_path, monkeypatch):
    asked = []

    def fake(url, timeout):
        asked.append(url)
        return io.BytesIO(b"tr\tX\ta\n")

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    assert main(["data", "download", "probing", "--data-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "probing").iterdir()) == sorted(PROBING_FILES)
    assert all(
        u.startswith("https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing/") for u in asked
    )
    assert len(asked) == 10


# --- whole runs: evaluate, compare, leaderboard, report ----------------------------------------------


def test_the_new_tasks_run_through_evaluate_compare_leaderboard_and_report(tmp_path):
    write_sst5(tmp_path)
    write_sick(tmp_path)
    write_stsb(tmp_path)
    fast = CONFIGS["fast"]
    selection = [
        SST5(fast, sizes={"train": 60, "dev": 30, "test": 30}),
        SICKEntailment(fast, sizes={"train": 60, "dev": 30, "test": 30}),
        RelatednessTask("STSBenchmark-sup", sizes=(80, 40, 40)),
    ]
    words = SST_WORDS + SICK_WORDS
    runs = {}
    for name, seed in (("enc-a", 0), ("enc-b", 1)):
        runs[name] = benchharness.evaluate(
            keyword_embed(words=words, seed=seed),
            selection,
            name=name,
            identity=f"keyword embed {seed}",
            data_dir=tmp_path,
            verify_data=False,
            results_dir=tmp_path / "results",
        )
    rel = runs["enc-a"].get("enc-a", "STSBenchmark-sup")
    items = rel.per_item.items
    assert rel.main_metric == "pearson" and rel.per_item.kind == "sts"
    assert rel.main_score == pytest.approx(100 * pearsonr(items["cosine"], items["gold"])[0], abs=1e-9)
    assert rel.metrics["spearman"] == pytest.approx(100 * spearmanr(items["cosine"], items["gold"])[0], abs=1e-9)
    assert rel.metrics["mse"] == pytest.approx(float(np.mean((items["cosine"] - items["gold"]) ** 2)))
    assert items["cosine"].min() >= 1.0 and items["cosine"].max() <= 5.0  # p . [1..5]
    low, high = rel.confidence["main"]
    assert low < rel.main_score < high and rel.confidence["intervals"]["pearson"]["unit"] == "pairs"
    # compare: Pearson's paired test and Steiger's Z on Pearson correlations
    table = benchharness.compare(runs["enc-a"], runs["enc-b"])
    rows = {r.task: r for r in table.rows}
    b_items = runs["enc-b"].get("enc-b", "STSBenchmark-sup").per_item.items
    row = rows["STSBenchmark-sup"]
    assert row.difference == pytest.approx(rel.main_score - runs["enc-b"].get("enc-b", "STSBenchmark-sup").main_score)
    g = items["gold"]
    expected = steiger_z(
        pearsonr(g, items["cosine"])[0],
        pearsonr(g, b_items["cosine"])[0],
        pearsonr(items["cosine"], b_items["cosine"])[0],
        len(g),
    )
    assert row.crosscheck["steiger"]["z"] == pytest.approx(expected.z)
    b_eval = runs["enc-b"].get("enc-b", "STSBenchmark-sup").per_item
    assert column_test_p("STSBenchmark-sup", "pearson", rel.per_item, b_eval) == pytest.approx(expected.p_value)
    assert "mcnemar" in rows["SST5-fast"].crosscheck
    # leaderboard and report read the stored results
    store = ResultStore(tmp_path / "results")
    board = build(store, None)
    (section,) = [t for t in board.tables if t.section.title.startswith("SentEval, further tasks")]
    assert {line.encoder for line in section.lines} == {"enc-a", "enc-b"}
    assert section.headers == ["SST5", "SICK-E", "SICK-R sup.", "STS-B sup.", "SNLI"]
    html = write_report(store, tmp_path / "report", None).read_text()
    assert "SentEval, further tasks" in html and "STS-B sup." in html


def test_relatedness_targets_reach_the_regressor_as_sentevals(tmp_path):
    write_stsb(tmp_path)
    task = RelatednessTask("STSBenchmark-sup", sizes=(80, 40, 40))
    task.load(DataRoot(tmp_path, verify=False))
    gold = task.pairs["train"][2]
    np.testing.assert_allclose(soft_targets(gold).sum(1)[gold >= 1], 1.0, rtol=1e-6)
    assert soft_targets(np.array([0.0])).sum() == 0  # STS-B's 0 scores: SentEval's all-zero target
    with pytest.raises(DataError, match=r"sts-train\.csv: 80 scored pairs, expected 5749"):
        tasks.get("STSBenchmark-sup").load(DataRoot(tmp_path, verify=False))
