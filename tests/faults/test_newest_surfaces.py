"""The newest surfaces, probed as a user and an attacker would (issue 46): each case is run in its
command-line form, through the real CLI in a fresh process, where the finding was made there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli_process

RERANKING = [
    {"query": "where is the cat", "positive": ["the cat is on the mat"], "negative": ["the dog is in the yard"]},
    {"query": "what does the dog do", "positive": ["the dog barks loudly"], "negative": ["the cat sleeps"]},
    {"query": "who sings", "positive": ["a bird sings at dawn"], "negative": ["cars drive fast"]},
]


def _reranking_project(folder: Path, instruction: str) -> None:
    (folder / "rb.jsonl").write_text("".join(json.dumps(line) + "\n" for line in RERANKING))
    (folder / "benchharness.toml").write_text(
        f'[paths]\ncache_dir = ".cache"\n\n[tasks.rb]\nkind = "reranking"\nfile = "rb.jsonl"\n'
        f"instruction = {json.dumps(instruction)}\n"
    )


def _status(stdout: str) -> str:
    row = next(line for line in stdout.splitlines() if line.startswith("| hf:") and "| rb " in line)
    return row.split("|")[3].strip()


def test_changing_only_a_tasks_instruction_recomputes_its_result(tmp_path, tiny_bert):
    """The instruction is part of what the encoder is asked to encode: a stored result computed
    under another one is not reused (it was: 'reused' with the old instruction's score)."""
    spec = f"hf:{tiny_bert}?document_prompt=passage:%20"
    run = ("run", "--encoders", spec, "--tasks", "rb", "--no-cache")
    _reranking_project(tmp_path, "Find the answer to: ")
    first = cli_process(tmp_path, *run)
    assert first.returncode == 0 and _status(first.stdout) == "computed", first.stderr
    _reranking_project(tmp_path, "Retrieve a passage that mentions: ")
    second = cli_process(tmp_path, *run)
    assert second.returncode == 0 and _status(second.stdout) == "computed", second.stdout
    [stored] = (tmp_path / "results").glob("*/rb.json")
    record = json.loads(stored.read_text())
    assert record["protocol"]["instruction"] == "Retrieve a passage that mentions: "
    assert record["encoder_metadata"]["prompts_applied"]["query"] == "Retrieve a passage that mentions: "
    third = cli_process(tmp_path, *run)  # nothing changed: reused, as before
    assert third.returncode == 0 and _status(third.stdout) == "reused", third.stdout


SECRET = "ghp_" + "s3cr3t" * 8


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a cat"}\n{"_id": "d2", "text": "a dog"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "cat"}\n')
    return folder


def test_a_data_file_leading_into_proc_is_refused_and_no_error_quotes_a_files_content(tmp_path):
    """A qrels file or a pairs file that links to /proc/self/environ was followed, and the error
    quoted its first line: every environment variable. Now: refused, naming where it leads; a
    header of a regular file is quoted as a short excerpt only."""
    beir = _beir(tmp_path / "beir")
    (beir / "qrels" / "test.tsv").symlink_to("/proc/self/environ")
    (tmp_path / "pairs.csv").symlink_to("/proc/self/environ")
    (tmp_path / "long.csv").write_text(f"sentence1,sentence2,TOKEN={SECRET}\na,b,1\n")
    (tmp_path / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n[tasks.my-beir]\nkind = "retrieval"\nfolder = "beir"\n\n'
        '[tasks.my-pairs]\nfile = "pairs.csv"\n\n[tasks.my-long]\nfile = "long.csv"\n'
    )
    env = {"CI_DEPLOY_TOKEN": SECRET}
    for task, needle in (("my-beir", "test.tsv: leads to /proc/"), ("my-pairs", "pairs.csv: leads to /proc/")):
        done = cli_process(tmp_path, "run", "--encoders", "glove-50d", "--tasks", task, "--no-cache", env=env)
        assert SECRET not in done.stdout + done.stderr
        assert needle in done.stdout + done.stderr and "a file of the system" in done.stdout + done.stderr
    done = cli_process(tmp_path, "run", "--encoders", "glove-50d", "--tasks", "my-long", "--no-cache", env=env)
    assert SECRET not in done.stdout + done.stderr
    assert "no column 'score'; found 'sentence1, sentence2, TOKEN=ghp_s3cr3t" in done.stdout + done.stderr


def test_a_symlink_to_data_elsewhere_is_followed_and_a_folder_is_not_a_data_file(tmp_path):
    from benchharness.core.data_root import DataError
    from benchharness.data.readers import check_data_file

    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("sentence1,sentence2,score\na,b,1\n")
    (tmp_path / "link.csv").symlink_to(elsewhere)
    check_data_file(tmp_path / "link.csv")  # followed: a researcher's data may live anywhere
    with pytest.raises(DataError, match="not a regular file"):
        check_data_file(tmp_path)
    with pytest.raises(DataError, match="a file of the system"):
        check_data_file(Path("/dev/null"))
