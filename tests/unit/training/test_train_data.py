"""Training data readers on small fixtures in the canonical formats, the STS unlabeled corpus size
counted independently from the raw files, and `benchharness train` end to end."""

from __future__ import annotations

import json

import pytest

from benchharness.cli import main as cli_main
from benchharness.core.data_root import DataError
from benchharness.training.train_data import NLI_LABELS, load_nli, load_sentences, read_senteval_snli
from tests.helpers import DATA, needs_data

E, N, C = (NLI_LABELS.index(x) for x in ("entailment", "neutral", "contradiction"))


def test_snli_jsonl_drops_pairs_without_gold_label(tmp_path):
    rows = [
        {"sentence1": "A man plays.", "sentence2": "A person plays.", "gold_label": "entailment"},
        {"sentence1": "A man plays.", "sentence2": "Nobody plays.", "gold_label": "contradiction"},
        {"sentence1": "A man plays.", "sentence2": "He is good.", "gold_label": "-"},
        {"sentence1": "Kids run.", "sentence2": "Kids run fast.", "gold_label": "neutral"},
    ]
    path = tmp_path / "snli_1.0_train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pairs = load_nli(str(path))
    assert [(p.hypothesis, p.label) for p in pairs] == [
        ("A person plays.", E),
        ("Nobody plays.", C),
        ("Kids run fast.", N),
    ]


def test_jsonl_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"sentence1": "a", "sentence2": "b", "gold_label": "entailment"}\n{"sentence1": "a"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: missing field 'sentence2'"):
        load_nli(str(path))
    path.write_text('{"sentence1": "a", "sentence2": "b", "gold_label": "maybe"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:1: unknown NLI label 'maybe'"):
        load_nli(str(path))


def test_simcse_csv_gives_an_entailment_and_a_contradiction_per_row(tmp_path):
    path = tmp_path / "nli_for_simcse.csv"
    path.write_text(
        'sent0,sent1,hard_neg\n"A dog, wet, runs.",A dog runs.,A cat sleeps.\nTwo men talk.,Men speak.,Nobody talks.\n'
    )
    pairs = load_nli(str(path))
    assert [(p.premise, p.hypothesis, p.label) for p in pairs] == [
        ("A dog, wet, runs.", "A dog runs.", E),
        ("A dog, wet, runs.", "A cat sleeps.", C),
        ("Two men talk.", "Men speak.", E),
        ("Two men talk.", "Nobody talks.", C),
    ]
    path.write_text("premise,hypothesis\na,b\n")
    with pytest.raises(DataError, match="sent0,sent1,hard_neg"):
        load_nli(str(path))


def test_senteval_snli_files(tmp_path):
    (tmp_path / "s1.train").write_text("a man plays .\nkids run .\n")
    (tmp_path / "s2.train").write_text("a person plays .\nkids sleep .\n")
    (tmp_path / "labels.train").write_text("entailment\ncontradiction\n")
    pairs = load_nli(f"{tmp_path}:train")
    assert [(p.premise, p.label) for p in pairs] == [("a man plays .", E), ("kids run .", C)]
    (tmp_path / "labels.train").write_text("entailment\n")
    with pytest.raises(DataError, match="must align"):
        read_senteval_snli(tmp_path, "train")


@needs_data("senteval/SNLI/labels.dev")
def test_shared_senteval_snli_dev_size():
    pairs = load_nli("senteval-snli:dev")
    # the data README gives 9842 dev lines; SentEval's copy has no '-' labels
    assert len(pairs) == 9842


def test_text_file_one_sentence_per_line(tmp_path):
    path = tmp_path / "wiki.txt"
    path.write_text("First sentence.\n\n  Second sentence.  \n")
    assert load_sentences(str(path)) == ["First sentence.", "Second sentence."]
    assert load_sentences(f"text:{path}") == ["First sentence.", "Second sentence."]


@needs_data("senteval/STS/STS12-en-test", "senteval/STS/STSBenchmark/sts-dev.csv", "senteval/SICK/SICK_train.txt")
def test_sts_unlabeled_has_89192_sentences():
    # count from the raw files: two sentences per line (every STS12-16 input pair, gold or not),
    # minus SICK's header lines; ConSERT's Table 1 gives 89,192
    sts = DATA / "senteval/STS"
    count = 0
    for folder in sorted(sts.glob("STS1?-en-test")):
        count += 2 * sum(len(f.read_text(encoding="utf8").splitlines()) for f in folder.glob("STS.input.*.txt"))
    count += 2 * sum(
        len((sts / f"STSBenchmark/sts-{s}.csv").read_text(encoding="utf8").splitlines())
        for s in ("train", "dev", "test")
    )
    sick = DATA / "senteval/SICK"
    count += 2 * sum(
        len((sick / f).read_text(encoding="utf8").splitlines()) - 1
        for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")
    )
    assert count == 89192
    assert len(load_sentences("sts-unlabeled")) == count


@needs_data("senteval/STS/STSBenchmark/sts-dev.csv")
def test_cli_trains_consert_joint_and_the_run_evaluates(tiny_bert, tmp_path, capsys):
    csv = tmp_path / "nli.csv"
    csv.write_text(
        "sent0,sent1,hard_neg\n"
        + "".join(
            f"a sentence about {w} number {i} .,{w} number {i} again .,nothing about {w} .\n"
            for i, w in enumerate(["cats", "dogs", "rain", "music", "trains", "bread", "chess", "rivers"])
        )
    )
    out = tmp_path / "consert-joint"
    assert (
        cli_main(
            [
                "train",
                "consert",
                "--preset",
                "joint-base",
                "--base",
                str(tiny_bert),
                "--data",
                str(csv),
                "--out",
                str(out),
                "--batch-size",
                "8",
                "--max-steps",
                "2",
                "--eval-every",
                "2",
                "--threads",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["hyperparameters"]["objective"] == "joint"
    assert manifest["hyperparameters"]["view2"] == "token_cutoff" and manifest["hyperparameters"]["rate2"] == 0.1
    assert manifest["data"]["n_examples"] == 16  # 8 rows -> 8 entailment + 8 contradiction pairs
    assert manifest["encoder"]["pooling"] == "avg_top2"
    assert [s for s, _ in manifest["dev_curve"]] == [0, 2]  # the base, then the final weights, selected
    assert manifest["selection"]["best_step"] == 2
    assert (
        cli_main(
            [
                "run",
                "--encoders",
                str(out),
                "--tasks",
                "STSBenchmark-dev",
                "--results-dir",
                str(tmp_path / "results"),
                "--no-cache",
                "--quiet",
            ]
        )
        == 0
    )
    stored = json.loads(next((tmp_path / "results").rglob("STSBenchmark-dev.json")).read_text())
    assert stored["main_score"] == pytest.approx(manifest["dev_curve"][-1][1], abs=1e-3)


def test_missing_senteval_snli_split_says_where_to_get_it(tmp_path):
    with pytest.raises(DataError, match=r"(?s)labels\.train.*benchharness data download senteval"):
        read_senteval_snli(tmp_path, "train")
