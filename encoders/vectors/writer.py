"""The writing side of the ``vectors`` format: the lines of ``sentences.jsonl`` that
``benchharness sentences`` writes, in the order the encoder will read them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from benchharness.core.errors import InvalidInputError
from benchharness.core.task import EncoderDrivenTask, Task
from benchharness.encoders.vectors.layout import role_key

#: characters some line splitters (``str.splitlines``) break on that ``json.dumps`` leaves as they are
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def sentence_records(tasks: Sequence[Task]) -> list[dict[str, str]]:
    """Every (sentence, role, instruction) the tasks will ask for, once each, as the lines of
    ``sentences.jsonl``: tasks in the order given, each task's roles in the order it declares them,
    sentences in the order it lists them (first occurrence kept), so the same selection of the
    same data always gives the same file. Tasks must be loaded."""
    for task in tasks:
        if isinstance(task, EncoderDrivenTask):
            raise InvalidInputError(
                f"{task.name} encodes through the encoder itself (its sentences are not known in "
                "advance); leave it out of --tasks"
            )
    seen: dict[tuple[str, str | None, str | None], None] = {}
    for task in tasks:
        for role, sentences in task.requests().items():
            name, instruction = role_key(role)
            for text in sentences:
                seen.setdefault((text, name, instruction), None)
    return [
        {"text": text, "role": name or "default", **({"instruction": instruction} if instruction else {})}
        for text, name, instruction in seen
    ]


def jsonl_line(record: dict[str, Any]) -> str:
    """One JSON object on one line, UTF-8 as it is, except the characters some line splitters break
    on (``\\u2028``...), which are escaped so that every reader sees one record per line."""
    text = json.dumps(record, ensure_ascii=False)
    for char, escaped in _LINE_BREAKS.items():
        text = text.replace(char, escaped)
    return text + "\n"
