"""A prompt is text, wherever it comes from: a lone surrogate in a loaded SentenceTransformer's
``prompts`` or in a model folder's configuration is refused when the encoder is built, in one line
naming the prompt and the fix (it reached the tokenizer as a bare ``TypeError``), as a spec's
``?prompt=`` is."""

from __future__ import annotations

import json
import shutil

import pytest

import benchharness
from benchharness.core.errors import InvalidInputError
from benchharness.encoders.sentence_transformers_format import save_as_sentence_transformer
from tests.helpers import cli

BAD = "query\ud800: "  # a lone surrogate: what a byte that failed to decode under surrogateescape becomes


@pytest.fixture
def st_folder(tiny_bert, tmp_path):
    """A tiny sentence-transformers model folder whose configuration names a query prompt."""
    folder = tmp_path / "prompted"
    shutil.copytree(tiny_bert, folder)
    save_as_sentence_transformer(folder, {"pooling": "avg"})
    return folder


def _configure(folder, prompts: dict[str, str]) -> None:
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    settings.update(prompts=prompts, default_prompt_name=None)
    config.write_text(json.dumps(settings))  # json escapes the surrogate as \ud800, which it reads back


def test_a_loaded_models_prompt_with_a_lone_surrogate_is_refused_naming_it(st_folder, project):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(st_folder), device="cpu")
    model.prompts = {"query": BAD, "passage": "passage: "}
    with pytest.raises(InvalidInputError) as refused:
        benchharness.evaluate(model, "STSBenchmark-dev", name="mine")
    message = str(refused.value)
    assert "\n" not in message and message.startswith("mine: prompt 'query' holds '\\ud800' at character 5")
    assert "a prompt must be valid UTF-8 text" in message and "remove the surrogate" in message


def test_an_unused_prompt_is_not_checked(st_folder, project):
    """Only the prompts the harness applies reach a tokenizer: another named one is left alone."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(st_folder), device="cpu")
    model.prompts = {"query": "query: ", "classification": BAD}
    results = benchharness.evaluate(model, "STSBenchmark-dev", name="mine", intervals=False)
    assert not results.failed


def test_a_configured_prompt_with_a_lone_surrogate_fails_the_encoder_in_one_line(st_folder, project):
    """A model folder is a name of the run: it fails as an encoder that cannot be built (exit 1, a
    failed row), with one line naming the file and the prompt, and no traceback."""
    _configure(st_folder, {"query": BAD})
    done = cli(project, "run", "--encoders", f"st:{st_folder}", "--tasks", "STSBenchmark-dev", "--no-cache")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    [line] = lines
    assert "cannot build encoder" in line and "config_sentence_transformers.json: prompt 'query' holds" in line
    assert "a prompt must be valid UTF-8 text" in line
    assert not list(project.glob("results/*/*.json"))
