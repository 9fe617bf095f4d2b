"""The model card (``README.md``) of a trained run: what a colleague needs to trust and load it.

Hugging Face reads the YAML front matter: ``library_name``, ``base_model`` and ``model-index``, one
entry per stored STS or transfer result with its score and the dataset, which the hub shows as the
model's evaluation results. The body says how the run was made (recipe command, base model and
revision, training data, selection) and gives the STS and transfer tables with 95% intervals,
from the same board the leaderboard prints.
"""

from __future__ import annotations

import json
from typing import Any

from benchharness.core.manifests import RunManifest
from benchharness.core.results import Result, ResultStore
from benchharness.reporting.leaderboard import SECTIONS, build, ci_text

#: task -> (model-index task type, dataset name as the hub knows it)
_TASK_TYPES = {"STS12": "STS", "STS13": "STS", "STS14": "STS", "STS15": "STS", "STS16": "STS",
               "STSBenchmark": "STS", "SICKRelatedness": "STS", "MR": "Classification", "CR": "Classification",
               "SUBJ": "Classification", "MPQA": "Classification", "SST2": "Classification",
               "TREC": "Classification", "MRPC": "PairClassification"}


def _yaml(value: Any) -> str:
    """A YAML scalar: JSON strings and numbers are valid YAML flow scalars."""
    return json.dumps(value)


def model_index(name: str, results: list[Result]) -> list[str]:
    lines = ["model-index:", f"- name: {_yaml(name)}", "  results:"]
    for r in sorted(results, key=lambda r: r.task):
        kind = _TASK_TYPES.get(r.task)
        if kind is None:
            continue
        metric = "spearman_cosine" if kind == "STS" else "accuracy"
        lines += [f"  - task: {{type: {kind}}}",
                  f"    dataset: {{name: {_yaml(r.task)}, type: {_yaml(r.task)}, split: test}}",
                  f"    metrics: [{{type: {metric}, value: {round(r.main_score, 2)}, "
                  f"name: {_yaml(r.protocol.get('variant', r.main_metric))}}}]"]
    return lines


def _tables(store: ResultStore, name: str) -> list[str]:
    board = build(store, None, encoders=[name], tasks={c.task for s in SECTIONS[:2] for c in s.columns})
    parts = []
    for table in board.tables:
        line = next(line for line in table.lines if line.encoder == name)
        head = ["", *table.headers]
        parts += [f"**{table.section.title}**", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head),
                  "| score | " + " | ".join(c.text for c in line.cells) + " |",
                  "| 95% CI | " + " | ".join(ci_text(c.interval) for c in line.cells) + " |", ""]
    return parts


def card(name: str, manifest: RunManifest, store: ResultStore) -> str:
    """The README.md of the run ``name`` (its manifest), with its results stored in ``store``."""
    results = [r for r in store if r.encoder == name]
    recipe: dict[str, Any] = manifest.get("recipe") or {}
    base = manifest.get("base_model", "")
    pooling = manifest["encoder"].get("pooling", "avg")
    front = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity",
             "tags: [sentence-transformers, sentence-similarity, benchharness, "
             f"{_yaml(manifest.get('method', 'trained'))}]"]
    if base and "/" in base and not base.startswith(("/", ".")):
        front.append(f"base_model: {_yaml(base)}")
    front += model_index(name, results) + ["---", ""]
    training = manifest.get("training", {})
    body = [f"# {name}", "",
            f"A sentence encoder trained with **{manifest.get('method', '?')}** by benchharness and "
            "evaluated with the protocols of the method papers (SentEval STS and transfer).", "",
            "```python", "from sentence_transformers import SentenceTransformer",
            "model = SentenceTransformer(\"<this repository>\")",
            "embeddings = model.encode([\"A man is playing a guitar.\"])", "```", "",
            f"The modules pool with `{pooling}`, as the scores below were computed; "
            "cosine similarity compares sentences.", "", "## Training", "",
            f"- recipe: `{recipe.get('name') or 'recipe:' + str(recipe.get('key', '?'))}` "
            f"(key `{recipe.get('key', '?')}`)",
            f"- command: `{recipe.get('command', '?')}`",
            f"- base model: `{base}` at revision `{manifest.get('base_revision')}`",
            f"- training data: `{json.dumps(manifest.get('data', {}), sort_keys=True)}`",
            f"- steps: {training.get('steps', '?')}, selection: "
            f"{json.dumps(manifest.get('selection', {}), sort_keys=True)}",
            f"- code: {json.dumps(manifest.get('code_version', {}), sort_keys=True)}", "",
            "## Evaluation", ""]
    tables = _tables(store, name)
    body += tables or ["No stored results yet: `benchharness run --encoders <this run> --tasks sts,transfer`.", ""]
    return "\n".join(front + body)
