"""The newest surfaces, probed as a user and an attacker would (issue 46): each case is run in its
command-line form, through the real CLI in a fresh process, where the finding was made there."""

from __future__ import annotations

import json
from pathlib import Path

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
