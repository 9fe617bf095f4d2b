"""The model card (``README.md``) of a trained run: what a colleague needs to trust and load it.

Hugging Face reads the YAML front matter: ``library_name``, ``base_model`` and ``model-index``, one
entry per stored STS or transfer result with its score and the dataset, which the hub shows as the
model's evaluation results. The body says how the run was made (recipe command, base model and
revision, training data, selection) and gives the STS and transfer tables with 95% intervals,
from the same board the leaderboard prints (with the prompts its results were computed with, if any:
a user encoding without them gets other vectors). A run trained on a corpus that holds the STS test
sentences (``sts-unlabeled``) is transductive, and the card says so in its body and beside each STS
result of its model-index.
"""

from __future__ import annotations

import html
import json
import shlex
from typing import Any

from benchharness.core.manifests import RunManifest
from benchharness.core.results import Result, ResultStore
from benchharness.reporting.escape import md_code, one_line
from benchharness.reporting.leaderboard import build, ci_text
from benchharness.reporting.table_formats import md_prompt_notes

#: task -> (model-index task type, dataset name as the hub knows it)
_TASK_TYPES = {
    "STS12": "STS",
    "STS13": "STS",
    "STS14": "STS",
    "STS15": "STS",
    "STS16": "STS",
    "STSBenchmark": "STS",
    "SICKRelatedness": "STS",
    "MR": "Classification",
    "CR": "Classification",
    "SUBJ": "Classification",
    "MPQA": "Classification",
    "SST2": "Classification",
    "TREC": "Classification",
    "MRPC": "PairClassification",
}


def transductive_corpus(manifest: RunManifest) -> str | None:
    """The run's training corpus when it holds the unlabeled sentences of the STS test sets (then its
    STS scores are transductive: ``benchharness.data.corpora``), else None."""
    from benchharness.encoders.postprocess.fitting import TRANSDUCTIVE

    corpus = (manifest.get("data") or {}).get("name")
    return corpus if corpus in TRANSDUCTIVE else None


def _yaml(value: Any) -> str:
    """A YAML scalar: JSON strings and numbers are valid YAML flow scalars."""
    return json.dumps(value)


def model_index(name: str, results: list[Result], transductive: str | None = None) -> list[str]:
    """The hub's ``model-index``; with ``transductive`` (the training corpus), each STS entry says that
    the model was trained on that test set's unlabeled sentences."""
    lines = ["model-index:", f"- name: {_yaml(name)}", "  results:"]
    for r in sorted(results, key=lambda r: r.task):
        kind = _TASK_TYPES.get(r.task)
        if kind is None:
            continue
        metric = "spearman_cosine" if kind == "STS" else "accuracy"
        label = str(r.protocol.get("variant", r.main_metric))
        if kind == "STS" and transductive:
            lines.append(f"  # transductive: the training corpus {transductive} holds this test set's sentences")
            label += f" (transductive: trained on {transductive}, which holds these test sentences unlabeled)"
        lines += [
            f"  - task: {{type: {kind}}}",
            f"    dataset: {{name: {_yaml(r.task)}, type: {_yaml(r.task)}, split: test}}",
            f"    metrics: [{{type: {metric}, value: {round(r.main_score, 2)}, name: {_yaml(label)}}}]",
        ]
    return lines


def _tables(store: ResultStore, name: str) -> list[str]:
    board = build(store, None, encoders=[name], tasks=set(_TASK_TYPES))
    parts = []
    for table in board.tables:
        line = next(line for line in table.lines if line.encoder == name)
        head = ["", *table.headers]
        parts += [
            f"**{table.section.title}**",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
            "| score | " + " | ".join(c.text for c in line.cells) + " |",
            "| 95% CI | " + " | ".join(ci_text(c.interval) for c in line.cells) + " |",
            "",
        ]
        parts += [note for n in md_prompt_notes(table) for note in (n, "")]  # the text put before its inputs
    return parts


def card(name: str, manifest: RunManifest, store: ResultStore, repo_id: str | None = None) -> str:
    """The README.md of the run ``name`` (its manifest), with its results stored in ``store``, to be
    loaded from the hub repository ``repo_id`` (a placeholder when not known yet).

    Every value from the run (its name, which may be a path, the command, the base model) is set as
    text: one line, in code spans no backtick of its own can close."""
    results = [r for r in store if r.encoder == name]
    recipe: dict[str, Any] = manifest.get("recipe") or {}
    base = manifest.get("base_model", "")
    pooling = manifest["encoder"].get("pooling", "avg")
    transductive = transductive_corpus(manifest)
    front = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: sentence-similarity",
        f"tags: [sentence-transformers, sentence-similarity, benchharness, {_yaml(manifest.get('method', 'trained'))}]",
    ]
    if base and "/" in base and not base.startswith(("/", ".")):
        front.append(f"base_model: {_yaml(base)}")
    front += model_index(name, results, transductive) + ["---", ""]
    training = manifest.get("training", {})
    # a Python string literal that no backtick in it can turn into the end of the code block
    repository = json.dumps(repo_id or "<this repository>").replace("`", "\\u0060")
    body = [
        f"# {html.escape(one_line(name))}",
        "",
        (
            f"A sentence encoder trained with **{html.escape(one_line(str(manifest.get('method', '?'))))}** by "
            "benchharness and evaluated with the protocols of the method papers (SentEval STS and transfer)."
        ),
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        f"model = SentenceTransformer({repository})",
        'embeddings = model.encode(["A man is playing a guitar."])',
        "```",
        "",
        (
            f"The modules pool with {md_code(str(pooling))}, as the scores below were computed; "
            "cosine similarity compares sentences."
        ),
        "",
    ]
    if transductive:
        body += [
            (
                f"**Transductive.** The training corpus {md_code(transductive)} holds the unlabeled sentences of "
                "the STS test sets scored below (STS12-16, STS-B test, SICK-R test): those scores are transductive, "
                "as in ConSERT and PaSeR, and not comparable with those of a model that never saw the test "
                "sentences."
            ),
            "",
        ]
    body += [
        "## Training",
        "",
        (
            f"- recipe: {md_code(recipe.get('name') or 'recipe:' + str(recipe.get('key', '?')))} "
            f"(key {md_code(str(recipe.get('key', '?')))})"
        ),
        f"- command: {md_code(str(recipe.get('command', '?')))}",
        f"- base model: {md_code(str(base))} at revision {md_code(str(manifest.get('base_revision')))}",
        f"- training data: {md_code(json.dumps(manifest.get('data', {}), sort_keys=True))}"
        + (" (transductive: includes the STS test sentences, unlabeled)" if transductive else ""),
        (
            f"- steps: {training.get('steps', '?')}, selection: "
            f"{md_code(json.dumps(manifest.get('selection', {}), sort_keys=True))}"
        ),
        f"- code: {md_code(json.dumps(manifest.get('code_version', {}), sort_keys=True))}",
        "",
        "## Evaluation",
        "",
    ]
    tables = _tables(store, name)
    run = md_code(f"benchharness run --encoders {shlex.quote(name)} --tasks sts,transfer")
    body += tables or [f"No stored results yet: {run}.", ""]
    return "\n".join(front + body)
