"""Names and specs to encoders.

A name is resolved in this order:

1. a composition ``base+post(k=v,...)+post`` (post-processors wrap the encoder on their left);
2. a built-in name (``minilm-l6``, ``minilm-l3``, ``glove-50d``);
3. an encoder registered in ``benchharness.toml`` (``[encoders.NAME] spec = "..."``);
4. a trained run: a folder holding ``manifest.json`` (``runs/consert-l3``), or the name a manifest
   under the configured runs folder declares (``consert-l3``); a manifest (or a config entry) may
   also stand for a composition (``{"type": "compose", "spec": "minilm-l6+repal(l1=0.1)"}``, what
   ``benchharness tune`` registers), and such a registered name may itself contain ``+``;
5. an ad-hoc spec ``<family>:<target>?k=v&k=v`` of a registered encoder family:
   ``hf:<id or path>?pooling=avg&max_length=64``, ``st:<id or path>``, ``glove:<path>``.

Anything else fails with the close matches among the known names.

Plugins register themselves with decorators: encoder families (``@register_family``, a spec
``type`` and the builder of its encoders) and post-processors (``@register_postprocessor``). The
registry discovers them by importing every top-level module of the ``encoders`` package and
``encoders.postprocess``, so adding a family is one new module there; those modules import torch
and transformers only where they build or run a model, which keeps discovery (and ``benchharness
list encoders``) cheap.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import json
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Required, TypedDict
from urllib.parse import parse_qsl

from benchharness.config import apply_environment, load_config
from benchharness.encoder import Encoder
from benchharness.local_paths import check_local_path

MANIFEST = "manifest.json"
#: spec type of a name that stands for a composition string (a tuned post-processor chain)
COMPOSE = "compose"


class UnknownEncoderError(KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class EncoderSpec(TypedDict, total=False):
    """What a name stands for: a family ``type`` and that family's parameters (``model``, ``file``,
    ``pooling``...), or ``{"type": "compose", "spec": "<composition>"}``."""

    type: Required[str]
    model: str
    file: str
    spec: str


class RunManifest(TypedDict, total=False):
    """The ``manifest.json`` of a trained or tuned run, as far as the registry reads it (training
    manifests hold more: the recipe, which results copy into their metadata)."""

    encoder: Required[EncoderSpec]
    name: str
    method: str
    base_model: str
    date: str
    #: a tuned run's dev-set grid and choice (``benchharness tune``)
    tuning: dict[str, Any]


#: the defaults ``Registry`` hands every family builder: device, batch_size, data_dir (None = unset)
Defaults = dict[str, Any]
Builder = Callable[[str, EncoderSpec, Defaults], Encoder]


@dataclass(frozen=True)
class Family:
    """An encoder family: the spec ``type`` it answers to and how its encoders are built."""

    name: str
    build: Builder
    #: the spec key the target of an ad-hoc ``<name>:<target>`` fills (``model``, ``file``)
    target: str
    #: the ad-hoc form, for help texts (``st:<model>``)
    usage: str
    #: the spec keys the family accepts besides ``target`` (None: not declared, not checked)
    params: tuple[str, ...] | None = None


#: spec type -> family; filled by the family modules under ``encoders``
FAMILIES: dict[str, Family] = {}


def register_family(name: str, target: str = "model", usage: str | None = None,
                    accepts: Callable[..., Any] | Collection[str] | None = None) -> Callable[[Builder], Builder]:
    """Register ``builder(name, spec, defaults) -> Encoder`` for specs ``{"type": name, ...}``.

    ``accepts`` declares the spec keys: the encoder class the builder passes them to (its
    constructor's keyword parameters, less ``name``), or the keys themselves. A spec with another
    key is then refused with the accepted ones listed, instead of a ``TypeError`` from deep inside.
    """
    if accepts is None or isinstance(accepts, Collection):
        params = None if accepts is None else tuple(accepts)
    else:
        params = tuple(p for p in inspect.signature(accepts).parameters if p not in ("self", "name"))

    def deco(builder: Builder) -> Builder:
        FAMILIES[name] = Family(name, builder, target, usage or f"{name}:<{target}>", params)
        return builder

    return deco


@dataclass(frozen=True)
class Catalogue:
    """Names an encoder module publishes (published checkpoints, say): ``resolve(name) -> spec or
    None`` and ``rows()`` for ``list encoders`` (name, source, settings, description)."""

    name: str
    resolve: Callable[[str], "EncoderSpec | None"]
    rows: Callable[[], list[dict[str, str]]]


#: named entries contributed by encoder modules; filled by ``register_catalogue``
CATALOGUES: dict[str, Catalogue] = {}


def register_catalogue(name: str, resolve: Callable[[str], "EncoderSpec | None"],
                       rows: Callable[[], list[dict[str, str]]]) -> None:
    """Let an encoder module publish names (resolved after built-ins and config entries)."""
    CATALOGUES[name] = Catalogue(name, resolve, rows)


#: hub ids of the MiniLMs every comparison here starts from (one place for registry and benchmarks)
MINILMS: dict[str, str] = {
    "minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
    "minilm-l3": "sentence-transformers/paraphrase-MiniLM-L3-v2",
}


@dataclass(frozen=True)
class BuiltIn:
    spec: EncoderSpec
    description: str


BUILTINS: dict[str, BuiltIn] = {
    "minilm-l6": BuiltIn(
        {"type": "st", "model": MINILMS["minilm-l6"]},
        "all-MiniLM-L6-v2 as sentence-transformers defines it (mean pooling, normalize)",
    ),
    "minilm-l3": BuiltIn(
        {"type": "st", "model": MINILMS["minilm-l3"]},
        "paraphrase-MiniLM-L3-v2 as sentence-transformers defines it (mean pooling)",
    ),
    "glove-50d": BuiltIn(
        {"type": "glove", "file": "glove-50d"},
        "average of GloVe 6B 50d vectors (lowercased whitespace tokens, OOV skipped)",
    ),
}

#: name -> factory(base encoder, **params); filled by the post-processor modules.
POSTPROCESSORS: dict[str, Callable[..., Encoder]] = {}


def register_postprocessor(name: str) -> Callable[[Callable[..., Encoder]], Callable[..., Encoder]]:
    def deco(factory: Callable[..., Encoder]) -> Callable[..., Encoder]:
        POSTPROCESSORS[name] = factory
        return factory

    return deco


@functools.cache
def discover() -> None:
    """Import the plugin modules once: every top-level module of ``encoders`` (the families) and
    ``encoders.postprocess`` (the post-processors). A checkout without them has no plugins."""
    try:
        package = importlib.import_module("encoders")
    except ModuleNotFoundError as exc:
        if exc.name != "encoders":
            raise
        return
    for info in pkgutil.iter_modules(package.__path__, "encoders."):
        if not info.ispkg:
            importlib.import_module(info.name)
    importlib.import_module("encoders.postprocess")


def families() -> dict[str, Family]:
    discover()
    return FAMILIES


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
    return {k: _coerce(v) for k, v in parse_qsl(text, keep_blank_values=True, separator=sep)}


def split_outside_parentheses(text: str, sep: str) -> list[str]:
    """Split on ``sep`` where it is not inside parentheses (post-processor parameters)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        raise UnknownEncoderError(f"unbalanced parentheses in {text!r}")
    return [*parts, current]


def split_composition(name: str) -> list[str]:
    """Split ``a+b(x=1,y=2)+c`` on the ``+`` signs outside parentheses."""
    try:
        parts = split_outside_parentheses(name, "+")
    except UnknownEncoderError:
        parts = [""]
    if any(not p.strip() for p in parts):
        raise UnknownEncoderError(f"malformed encoder composition {name!r}; expected base+post(k=v)+post")
    return [p.strip() for p in parts]


def check_spec(name: str, spec: EncoderSpec) -> Family:
    """The family of ``spec``, once its keys are known to it and a local path it names exists;
    cheap (no model is loaded), so that a typo fails before any encoder is built."""
    kind = spec.get("type")
    family = families().get(kind)  # type: ignore[arg-type]
    if family is None:
        raise UnknownEncoderError(f"encoder {name!r}: unknown type {kind!r} ({', '.join(FAMILIES)})")
    if family.params is not None:
        accepted = [family.target, *(p for p in family.params if p != family.target)]
        for key in spec:
            if key != "type" and key not in accepted:
                close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.6)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise UnknownEncoderError(f"encoder {name!r}: {kind} has no parameter {key!r}.{hint} "
                                          f"It accepts: {', '.join(accepted)}")
    for key in (family.target, "tokenizer"):
        value = spec.get(key)
        if isinstance(value, str):
            check_local_path(value, f"encoder {name!r} ({key})")
    return family


def build(name: str, spec: EncoderSpec, defaults: Defaults | None = None) -> Encoder:
    """Instantiate an encoder from a spec dict ``{"type": ..., **params}``."""
    family = check_spec(name, spec)
    params = {k: v for k, v in spec.items() if k != "type"}
    return family.build(name, params, {k: v for k, v in (defaults or {}).items() if v is not None})  # type: ignore[arg-type]


def parse_adhoc(spec: str) -> EncoderSpec | None:
    """``<family>:<target>?k=v&k=v`` -> spec dict, or None if ``spec`` is not of that form."""
    known = families()
    m = re.fullmatch(r"([\w-]+):([^?]+)(?:\?(.*))?", spec)
    if not m or m.group(1) not in known:
        return None
    kind, target, query = m.groups()
    return {"type": kind, known[kind].target: target, **parse_params(query or "", "&")}  # type: ignore[typeddict-item]


def read_manifest(folder: Path) -> RunManifest:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if "encoder" not in manifest:
        raise ValueError(f"{path}: not a benchharness run manifest (no 'encoder' entry)")
    return manifest


def manifest_spec(folder: Path, manifest: RunManifest) -> EncoderSpec:
    """A trained run's encoder spec with its model path made absolute."""
    spec: EncoderSpec = dict(manifest["encoder"])  # type: ignore[assignment]
    for key in ("model", "file"):
        if key in spec and not Path(spec[key]).is_absolute():
            spec[key] = str((folder / spec[key]).resolve())
    return spec


def _refuse_cycle(name: str, chain: tuple[str, ...], config_file: Path | None) -> None:
    """A config entry met again while resolving itself: a cycle, named link by link."""
    if name in chain:
        loop = " -> ".join([*chain[chain.index(name):], name])
        raise UnknownEncoderError(f"encoder {name!r} in {config_file or 'benchharness.toml'} refers to itself via "
                                  f"{loop}; point one of these entries at a model spec instead")


def registered_runs(runs_dir: Path) -> dict[str, Path]:
    """Manifests under the runs folder, by the name they declare (else their folder name)."""
    runs: dict[str, Path] = {}
    if runs_dir.is_dir():
        for manifest in sorted(runs_dir.glob(f"*/{MANIFEST}")):
            try:
                name = json.loads(manifest.read_text()).get("name") or manifest.parent.name
            except json.JSONDecodeError:
                continue
            runs[name] = manifest.parent
    return runs


class Registry:
    """Resolves names to encoders; ``defaults`` (device, batch_size, data_dir) apply to all."""

    def __init__(self, defaults: Defaults | None = None,
                 wrap: Callable[[Encoder], Encoder] | None = None, train_missing: bool = True,
                 progress: bool = True) -> None:
        self.config = load_config()
        #: a training recipe's name without its run: train it (else fail with the command)
        self.train_missing = train_missing
        self.progress = progress
        apply_environment(self.config)  # HF cache/offline settings, for library use outside the CLI
        self.defaults = defaults or {}
        #: applied to the base encoder and to every post-processor stage (the runner's cache)
        self.wrap: Callable[[Encoder], Encoder] = wrap or (lambda encoder: encoder)
        discover()

    def known_names(self) -> list[str]:
        from benchharness.recipes import load_book

        published = [row["name"] for c in CATALOGUES.values() for row in c.rows()]
        return [*BUILTINS, *self.config.encoders, *load_book().names(), *registered_runs(self.config.runs_dir),
                *published]

    def spec_for(self, name: str) -> EncoderSpec:
        """The spec dict behind a single (uncomposed) name."""
        return self._resolve(name)[0]

    def _resolve(self, name: str, chain: tuple[str, ...] = ()
                 ) -> tuple[EncoderSpec, RunManifest | None, tuple[str, ...]]:
        """The spec behind a single name, the run manifest it comes from (None if not a run), and
        the config entries followed to get there. ``chain`` holds those followed before, to refuse
        an entry that refers to itself (a cycle would otherwise recurse without end)."""
        if name in BUILTINS:
            return dict(BUILTINS[name].spec), None, chain
        if name in self.config.encoders:
            _refuse_cycle(name, chain, self.config.file)
            entry = dict(self.config.encoders[name])
            if "spec" in entry:
                if len(split_composition(entry["spec"])) > 1:
                    return {"type": COMPOSE, "spec": entry["spec"]}, None, (*chain, name)
                return self._resolve(entry["spec"], (*chain, name))
            entry.pop("description", None)
            return entry, None, (*chain, name)  # type: ignore[return-value]
        from benchharness.on_demand import trained_encoder

        trained = trained_encoder(name, train=self.train_missing, progress=self.progress)
        if trained is not None:
            return (*trained, chain)  # type: ignore[return-value]
        folder = Path(name).expanduser()
        if not (folder / MANIFEST).is_file():
            folder = registered_runs(self.config.runs_dir).get(name)
        if folder is not None:
            manifest = read_manifest(folder)
            return manifest_spec(folder, manifest), manifest, chain
        for catalogue in CATALOGUES.values():
            spec = catalogue.resolve(name)
            if spec is not None:
                return spec, None, chain
        adhoc = parse_adhoc(name)
        if adhoc is not None:
            return adhoc, None, chain
        close = difflib.get_close_matches(name, self.known_names(), n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownEncoderError(
            f"unknown encoder {name!r}.{hint} Known names: {', '.join(self.known_names())}; or write "
            f"{', '.join(f'{f.name}:<{f.target}>' for f in FAMILIES.values())}, a run folder with manifest.json, and "
            f"compose post-processors with + ({', '.join(sorted(POSTPROCESSORS)) or 'none installed'})."
        )

    def _registered_whole(self, name: str) -> bool:
        """A registered name may itself contain ``+`` (``minilm-l6+repal-tuned``)."""
        return name in self.config.encoders or name in registered_runs(self.config.runs_dir)

    def check(self, name: str, _chain: tuple[str, ...] = ()) -> None:
        """Everything ``get`` would refuse, found without loading a model: unknown names, spec keys
        and post-processors or their parameters, missing local folders, config cycles."""
        parts = [name] if self._registered_whole(name) else split_composition(name)
        from benchharness.on_demand import recipe_for

        if parts[0] in self.config.encoders or not self.train_missing or recipe_for(parts[0]) is None:
            spec, _, chain = self._resolve(parts[0], _chain)
            if spec["type"] == COMPOSE:
                self.check(spec["spec"], chain)
            else:
                check_spec(parts[0], spec)
        # else: a recipe to train on demand, checked when the recipe file loads (resolving it now
        # would train it); with --no-train it resolves above, and fails there if it has no run yet
        for part in parts[1:]:
            self._stage(name, part)

    def get(self, name: str, _chain: tuple[str, ...] = ()) -> Encoder:
        parts = [name] if self._registered_whole(name) else split_composition(name)
        base_name = parts[0]
        spec, manifest, chain = self._resolve(base_name, _chain)
        if spec["type"] == COMPOSE:  # a registered chain: its stages are wrapped as they are built
            encoder = self.get(spec["spec"], chain)
            prefix = spec["spec"]
        else:
            built = build(base_name, spec, self.defaults)
            if manifest is not None:
                built.provenance = {k: v for k, v in manifest.items() if k != "encoder"}
            encoder = self.wrap(built)
            prefix = base_name
        for part in parts[1:]:
            factory, params = self._stage(name, part)
            prefix = f"{prefix}+{part}"
            if "data_dir" in inspect.signature(factory).parameters:  # fit corpora live under the data root
                params["data_dir"] = self.defaults.get("data_dir")
            encoder = self.wrap(factory(encoder, name=prefix, **params))
        return encoder

    @staticmethod
    def _stage(name: str, part: str) -> tuple[Callable[..., Encoder], dict[str, Any]]:
        """The post-processor factory and parameters of one ``post(k=v,...)`` stage of ``name``."""
        m = re.fullmatch(r"([\w-]+)(?:\((.*)\))?", part)
        if not m or m.group(1) not in POSTPROCESSORS:
            post = m.group(1) if m else part
            close = difflib.get_close_matches(post, list(POSTPROCESSORS), n=3, cutoff=0.4)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise UnknownEncoderError(
                f"unknown post-processor {post!r} in {name!r}.{hint} "
                f"Available: {', '.join(sorted(POSTPROCESSORS)) or 'none'}"
            )
        params = parse_params(m.group(2) or "", ",")
        factory = POSTPROCESSORS[m.group(1)]
        signature = inspect.signature(factory).parameters
        accepted = [p for p in list(signature)[1:] if p not in ("name", "data_dir")]
        unknown = sorted(set(params) - set(accepted))
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.values()):
            close = difflib.get_close_matches(unknown[0], accepted, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownEncoderError(f"post-processor {m.group(1)!r} in {name!r} has no parameter "
                                      f"{', '.join(unknown)}; it takes: {', '.join(accepted) or 'none'}.{hint}")
        return factory, params

    def describe(self) -> list[dict[str, str]]:
        """Rows for ``benchharness list encoders``: every name with its source and settings."""
        rows = [{"name": n, "source": "built-in", "settings": json.dumps(b.spec), "description": b.description}
                for n, b in BUILTINS.items()]
        for n, entry in self.config.encoders.items():
            rows.append({"name": n, "source": str(self.config.file), "settings": entry.get("spec", json.dumps(entry)),
                         "description": entry.get("description", "")})
        from benchharness.recipes import load_book

        book = load_book()
        for n in book.names():
            entry = book.source(n)
            rows.append({"name": n, "source": book.path.name, "settings": f"benchharness train {entry['method']}"
                         + ("" if n == entry["method"] else f" --recipe {n}"),
                         "description": f"recipe, trained on demand: {entry.get('description', '')}"})
        for n, folder in registered_runs(self.config.runs_dir).items():
            m = read_manifest(folder)
            rows.append({"name": n, "source": str(folder), "settings": json.dumps(m["encoder"]),
                         "description": f"{'tuned' if m['encoder'].get('type') == COMPOSE else 'trained'}: "
                                         f"{m.get('method', '?')} on {m.get('base_model', '?')}"})
        for catalogue in CATALOGUES.values():
            rows.extend(catalogue.rows())
        for n in sorted(POSTPROCESSORS):
            doc = (POSTPROCESSORS[n].__doc__ or "").strip().splitlines()
            rows.append({"name": f"+{n}", "source": "post-processor", "settings": "",
                         "description": doc[0] if doc else ""})
        return rows
