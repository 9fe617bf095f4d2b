"""The command line end to end: list, run (glove-50d on the STS suite), rerun resumes, leaderboard."""

import json

import pytest

from benchharness.cli import main


def test_run_then_leaderboard(project, capsys):
    assert main(["run", "--encoders", "glove-50d", "--tasks", "sts", "--quiet"]) == 0
    files = sorted(p.name for p in (project / "results" / "glove-50d").glob("*.json"))
    assert files == sorted(
        f"{t}.json" for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    )
    stored = json.loads((project / "results/glove-50d/STS12.json").read_text())
    assert stored["protocol"]["variant"] == "senteval-unsup-cosine"
    assert stored["main_metric"] == "all.spearman"
    assert {"all.spearman", "mean.spearman", "wmean.spearman", "MSRpar.pearson"} <= set(stored["metrics"])

    capsys.readouterr()
    assert main(["run", "--encoders", "glove-50d", "--tasks", "STS12,STSBenchmark", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("reused") == 2 and "computed" not in out

    assert main(["leaderboard", "--papers", "paser"]) == 0
    board = capsys.readouterr().out
    row = next(line for line in board.splitlines() if line.startswith("| glove-50d"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    scores = [
        json.loads((project / f"results/glove-50d/{t}.json").read_text())["main_score"]
        for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    ]
    assert cells[2:9] == [f"{s:.2f}" for s in scores]
    assert cells[9] == f"{sum(scores) / 7:.2f}"
    assert "published: paser Table 1" in board and "published: consert" not in board


def test_bad_names_exit_with_suggestions(project, capsys):
    assert main(["run", "--encoders", "minilm-l66", "--tasks", "sts"]) == 2
    assert "Did you mean: minilm-l6" in capsys.readouterr().err
    assert main(["run", "--encoders", "glove-50d", "--tasks", "STS17"]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_list_commands(project, capsys):
    assert main(["list", "encoders"]) == 0
    out = capsys.readouterr().out
    assert "minilm-l6" in out and "glove-50d" in out
    assert main(["list", "tasks"]) == 0
    assert "SICKRelatedness" in capsys.readouterr().out


def test_verify_recomputes_and_compares_with_the_stored_results(project, capsys):
    """``run --verify`` encodes afresh and reports each stored result as reproduced or not; a stored
    score moved by 0.5 (25x the tolerance) is caught, and nothing in the results folder changes."""
    import shutil
    from pathlib import Path

    stored = Path(__file__).resolve().parents[3] / "results" / "glove-50d"
    target = project / "results" / "glove-50d"
    target.mkdir(parents=True)
    for name in ("STS12", "STSBenchmark"):
        shutil.copy(stored / f"{name}.json", target / f"{name}.json")
    assert main(["run", "--encoders", "glove-50d", "--tasks", "STS12,STSBenchmark", "--verify", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("| reproduced") == 2 and "2 of 2 stored results reproduced" in out

    doctored = json.loads((target / "STS12.json").read_text())
    doctored["metrics"]["MSRvid.spearman"] += 0.5
    (target / "STS12.json").write_text(json.dumps(doctored))
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    assert main(["run", "--encoders", "glove-50d", "--tasks", "STS12,STSBenchmark", "--verify", "--quiet"]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "| STS12" in line)
    assert "differs" in row and "0.5000" in row
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before


def test_a_user_error_is_one_line_and_a_programming_error_keeps_its_traceback(monkeypatch, capsys):
    from benchharness.cli import listing
    from benchharness.core.errors import InvalidInputError

    def user_error(args):
        raise InvalidInputError("--tasks names no task")

    monkeypatch.setattr(listing, "main", user_error)
    assert main(["list", "tasks"]) == 2
    assert capsys.readouterr().err == "benchharness: error: --tasks names no task\n"

    def shape_mismatch(args):
        import numpy as np

        return np.ones(2) @ np.ones(3)

    monkeypatch.setattr(listing, "main", shape_mismatch)
    with pytest.raises(ValueError, match="mismatch"):
        main(["list", "tasks"])


def test_list_encoders_fits_a_100_column_terminal_and_long_keeps_everything(capsys):
    assert main(["list", "encoders"]) == 0
    short = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in short) <= 100
    assert main(["list", "encoders", "--long"]) == 0
    long = capsys.readouterr().out
    assert "settings" in long.splitlines()[0] and all(
        line.split("|")[1].strip().rstrip("…") in long for line in short[2:] if line.startswith("|")
    )
