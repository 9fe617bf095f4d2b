"""Roles and prompts: which side of a task a sentence is encoded for, and the text a model expects
in front of it.

Models trained with asymmetric prefixes (e5's ``"query: "`` / ``"passage: "``, bge's retrieval
instruction on the query side only) lose many points when their inputs lack them, so a task asks
for each side by its ``Role`` and the encoder decides what that means. For most encoders it means
nothing: their prompts are empty and every role gets the same vectors, computed once.

A prompt is text put in front of each sentence before tokenization, exactly as
sentence-transformers' ``encode(prompt=...)`` does (``include_prompt=False`` pooling, which leaves
the prompt's tokens out of the mean, is not reproduced: the ``st`` family refuses such a model with
a prompt rather than score it differently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchharness.core.errors import InvalidInputError

#: the role names a task may ask for; None is the symmetric default (STS, classification)
ROLE_NAMES = ("query", "document")
#: the longest prompt: far beyond any model's max_length in tokens, short of what takes a tokenizer
#: minutes (a prompt goes before every sentence)
MAX_PROMPT_CHARS = 4096
#: the spec keys every prompt-taking family accepts, and the ``Prompts`` fields they set
PROMPT_KEYS = {
    "prompt": "default",
    "query_prompt": "query",
    "document_prompt": "document",
    "instruction_template": "instruction_template",
}


@dataclass(frozen=True)
class Role:
    """The side of a task a sentence is encoded for: ``name`` is None (symmetric), ``"query"`` or
    ``"document"``; ``instruction`` is the task's instruction, given to a model that takes
    instructions on the query side (and on both sides of a symmetric task)."""

    name: str | None = None
    instruction: str | None = None

    def __post_init__(self) -> None:
        if self.name is not None and self.name not in ROLE_NAMES:
            raise ValueError(f"role must be None, 'query' or 'document', not {self.name!r}")

    def __str__(self) -> str:
        return self.name or "default"

    def to_dict(self) -> dict[str, Any]:
        return {"role": str(self), **({"instruction": self.instruction} if self.instruction else {})}


DEFAULT = Role()
QUERY = Role("query")
DOCUMENT = Role("document")


@dataclass(frozen=True)
class Prompts:
    """The prompts of one encoder, by role. None means "not set": a role without its own prompt
    gets ``default``, as sentence-transformers falls back to ``default_prompt_name``. An empty
    string is a prompt set to nothing (bge's documents).

    ``instruction_template`` turns a task's instruction into the query prompt
    (``"Instruct: {instruction}\\nQuery: "``). A task instruction reaches an encoder that has any
    prompt or a template; a plain encoder ignores it, as mteb's models without instructions do.
    """

    default: str | None = None
    query: str | None = None
    document: str | None = None
    instruction_template: str | None = None

    def __post_init__(self) -> None:
        template = self.instruction_template
        if template is not None and "{instruction}" not in template:
            raise ValueError(f"instruction_template {template!r} has no {{instruction}} placeholder")

    @property
    def empty(self) -> bool:
        return not any(self.record().values())

    def for_role(self, role: Role) -> str:
        """The text put in front of each sentence encoded for ``role``: a task's instruction goes to
        the query side, or to every sentence of a symmetric task that has one (an mteb task)."""
        if role.name != "document" and role.instruction and not self.empty:
            return (self.instruction_template or "{instruction}").replace("{instruction}", role.instruction)
        specific = {"query": self.query, "document": self.document}.get(role.name or "")
        return (specific if specific is not None else self.default) or ""

    def record(self) -> dict[str, str]:
        """The prompts that are set, by spec key: what identities, results and tables show."""
        values = {
            "prompt": self.default,
            "query_prompt": self.query,
            "document_prompt": self.document,
            "instruction_template": self.instruction_template,
        }
        return {key: value for key, value in values.items() if value is not None}

    def but(self, **spec: str | None) -> Prompts:
        """These prompts with those given as spec keys (``query_prompt=...``) replacing their own."""
        given = {PROMPT_KEYS[k]: v for k, v in spec.items() if v is not None}
        return Prompts(**{**{f: getattr(self, f) for f in PROMPT_KEYS.values()}, **given})


NO_PROMPTS = Prompts()


def check_prompt(where: str, which: str, value: object) -> str:
    """``value`` as a prompt, or one line saying what to fix: ``where`` names the encoder (and its
    file), ``which`` the prompt (a spec key, a configured prompt's name). Wherever a prompt comes
    from (a spec, a model's configuration, a loaded model's ``prompts``), it must be a string of at
    most ``MAX_PROMPT_CHARS`` characters that is text: a lone surrogate (a byte that failed to decode
    under ``surrogateescape``, an escape written into JSON) reaches the tokenizer as a bare
    ``TypeError`` that names neither the prompt nor the fix."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{where}: {which} must be a string, not {type(value).__name__}")
    if len(value) > MAX_PROMPT_CHARS:
        raise InvalidInputError(
            f"{where}: {which} is {len(value):,} characters; a prompt is at most {MAX_PROMPT_CHARS:,} "
            "(it goes before every sentence, within the model's max_length)"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{where}: {which} holds {value[exc.start]!r} at character {exc.start}, which is not text (a lone "
            "surrogate); a prompt must be valid UTF-8 text: decode the bytes it came from as UTF-8, or remove "
            "the surrogate"
        ) from None
    return value
