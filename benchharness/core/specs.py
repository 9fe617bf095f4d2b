"""What an encoder name stands for: spec dicts, the contracts of the ``families`` and
``catalogues`` plugins, and the grammar of compositions (``base+post(k=v,...)+post``).

Pure data and parsing: nothing here builds or loads a model. The resolver
(``benchharness.evaluation.resolver``) turns names into encoders with it.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Required, TypedDict
from urllib.parse import parse_qsl

from benchharness.core.encoder import Encoder
from benchharness.core.errors import UserError
from benchharness.core.lists import split_outside_brackets
from benchharness.core.prompts import PROMPT_KEYS
from benchharness.core.settings import HubSettings, default_data_dir, default_hub

#: spec type of a name that stands for a composition string (a tuned post-processor chain)
COMPOSE = "compose"
#: ``module:attribute`` (dotted on both sides): an object defined in Python (the ``python`` family)
MODULE_ATTRIBUTE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


class UnknownEncoderError(UserError, KeyError):
    """A name, spec key, post-processor or parameter that nothing installed knows."""


class EncoderSpec(TypedDict, total=False):
    """What a name stands for: a family ``type`` and that family's parameters (``model``, ``file``,
    ``pooling``...), or ``{"type": "compose", "spec": "<composition>"}``."""

    type: Required[str]
    model: str
    file: str
    spec: str
    # keys the harness itself writes or reads for built-in families; a family takes keys of its own besides
    object: str  # python: <module:attribute>
    url: str  # st-archive
    path: str
    model_name: str  # the name results record for the model (a trained run: its recipe key)
    pooling: str
    max_length: int


@dataclass(frozen=True)
class BuildContext:
    """What the run that builds an encoder says about where and how, beside the spec: the device
    and batch size (None: the encoder's own default), the data root (files a spec names by a
    short name, such as ``glove-50d``) and where Hugging Face models are found. Never part of an
    encoder's identity."""

    device: str | None = None
    batch_size: int | None = None
    data_root: Path = field(default_factory=default_data_dir)
    hub: HubSettings = field(default_factory=default_hub)

    def sizes(self) -> dict[str, Any]:
        """The device and batch size the run sets, as keyword arguments of an encoder."""
        return {k: v for k, v in (("device", self.device), ("batch_size", self.batch_size)) if v is not None}


#: what a family builder is given of a spec: its parameters, without ``type`` and the prompt keys
Params = dict[str, Any]
Builder = Callable[[str, Params, BuildContext], Encoder]


@dataclass(frozen=True)
class Family:
    """A ``families`` plugin: the spec ``type`` it answers to and how its encoders are built."""

    name: str
    build: Builder
    #: the spec key the target of an ad-hoc ``<name>:<target>`` fills (``model``, ``file``)
    target: str = "model"
    #: the ad-hoc form, for help texts (``st:<model>``)
    usage: str = ""
    #: the spec keys the family accepts besides ``target`` (None: not declared, not checked)
    params: tuple[str, ...] | None = None
    #: a cheap check of a spec beyond its keys, run before any encoder is built (raises UserError)
    check: Callable[[EncoderSpec], None] | None = None
    #: a run manifest (data that may come from elsewhere) may name it: it builds a model from
    #: weights alone (``hf``, ``st``, ``glove``). A family that runs code (``python``), calls a
    #: server (``openai``, which would send a key and the sentences) or reads other files is named
    #: by the user only, on the command line or in their own configuration
    from_manifest: bool = False
    #: it takes ``prompt``, ``query_prompt``, ``document_prompt`` and ``instruction_template``
    #: (``benchharness.core.prompts.PROMPT_KEYS``): text its encoders put in front of a sentence
    takes_prompts: bool = False

    @classmethod
    def of(
        cls,
        name: str,
        build: Builder,
        target: str = "model",
        usage: str | None = None,
        accepts: Callable[..., Any] | Collection[str] | None = None,
        check: Callable[[EncoderSpec], None] | None = None,
        from_manifest: bool = False,
        takes_prompts: bool = False,
    ) -> Family:
        """A family whose accepted spec keys are ``accepts``: the encoder class the builder passes
        them to (its constructor's keyword parameters, less ``name``), or the keys themselves. A
        spec with another key is then refused with the accepted ones listed, instead of a
        ``TypeError`` from deep inside."""
        if accepts is None or isinstance(accepts, Collection):
            params = None if accepts is None else tuple(accepts)
        else:
            params = tuple(p for p in inspect.signature(accepts).parameters if p not in ("self", "name", "hub"))
        return cls(name, build, target, usage or f"{name}:<{target}>", params, check, from_manifest, takes_prompts)


@dataclass(frozen=True)
class Resolved:
    """A catalogue's answer: the spec to build, and the run manifest it comes from (trained runs:
    its provenance is copied into every result)."""

    spec: EncoderSpec
    manifest: dict[str, Any] | None = None


@dataclass(frozen=True)
class Catalogue:
    """A ``catalogues`` plugin: names it publishes (published checkpoints, trained recipes).

    ``resolve(name, train=..., settings=...)`` gives the spec of a name it knows, else None; ``train``
    says whether it may train a model now to answer, and ``settings`` are the settings of the run that
    asks (``evaluation.run_settings.RunSettings``: the device and data root such a training uses; a
    catalogue whose ``resolve`` takes no ``settings`` is not given them).
    ``on_demand(name)`` says a name
    would be trained on resolution, so a check that must stay cheap leaves it alone.
    Catalogues are consulted in increasing ``order``.
    """

    resolve: Callable[..., Resolved | None]
    rows: Callable[[], list[dict[str, str]]]
    on_demand: Callable[[str], bool] = field(default=lambda name: False)
    order: int = 100


def _coerce(value: str) -> Any:
    """Query-string values to int/float/bool where they look like one."""
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_params(text: str, sep: str) -> dict[str, Any]:
    """``k=v`` pairs, values coerced (``_coerce``) except prompts, which are text whatever they
    look like (``prompt=1`` is the prompt "1")."""
    return {k: v if k in PROMPT_KEYS else _coerce(v) for k, v in parse_qsl(text, keep_blank_values=True, separator=sep)}


def split_outside_parentheses(text: str, sep: str) -> list[str]:
    """Split on ``sep`` where it is not inside parentheses (post-processor parameters)."""
    try:
        return split_outside_brackets(text, sep)
    except ValueError as exc:
        raise UnknownEncoderError(str(exc)) from None


def split_composition(name: str) -> list[str]:
    """Split ``a+b(x=1,y=2)+c`` on the ``+`` signs outside parentheses."""
    try:
        parts = split_outside_parentheses(name, "+")
    except UnknownEncoderError:
        parts = [""]
    if any(not p.strip() for p in parts):
        raise UnknownEncoderError(f"malformed encoder composition {name!r}; expected base+post(k=v)+post")
    return [p.strip() for p in parts]


#: a post-processor stage, ``name(params)``, of a composition
_STAGE = re.compile(r"([\w-]+)\((.*)\)")


def expand_variants(name: str) -> list[str]:
    """The encoders a composition with value lists stands for, one per combination: a ``|`` between
    values of a post-processor's parameter lists them (``minilm-l6+truncate(d=64|128)`` is
    ``minilm-l6+truncate(d=64)`` and ``minilm-l6+truncate(d=128)``; two lists give every pair, the
    first one varying slowest). Only stage parameters are expanded: a base spec is left as written."""
    if "|" not in name or "+" not in name:
        return [name]
    base, *stages = split_composition(name)
    choices: list[list[str]] = []
    for stage in stages:
        m = _STAGE.fullmatch(stage)
        if m is None or "|" not in m.group(2):
            choices.append([stage])
            continue
        lists = []
        for pair in split_outside_parentheses(m.group(2), ","):
            key, sep, value = pair.partition("=")
            if sep and "|" in value:
                values = [v.strip() for v in value.split("|")]
                if not all(values):
                    raise UnknownEncoderError(f"an empty value in {key.strip()}={value!r} of {name!r}")
                lists.append([f"{key}={v}" for v in values])
            else:
                lists.append([pair])
        choices.append([f"{m.group(1)}({','.join(combo)})" for combo in itertools.product(*lists)])
    return ["+".join([base, *combo]) for combo in itertools.product(*choices)]


def encoder_list(text: str) -> list[str]:
    """A comma list of encoder names or specs (commas inside a stage's parentheses kept), each
    expanded into its variants (``expand_variants``), duplicates dropped."""
    names = [n.strip() for n in split_outside_parentheses(text, ",") if n.strip()]
    return list(dict.fromkeys(v for n in names for v in expand_variants(n)))
