"""Names and specs to encoders.

A name is resolved in this order:

1. a composition ``base+post(k=v,...)+post`` (post-processors wrap the encoder on their left);
2. a built-in name (``minilm-l6``, ``minilm-l3``, ``glove-50d``);
3. an encoder registered in ``benchharness.toml`` (``[encoders.NAME] spec = "..."``);
4. a trained run: a folder holding ``manifest.json`` (``runs/consert-l3``), or the name a manifest
   under the configured runs folder declares (``consert-l3``); a manifest (or a config entry) may
   also stand for a composition (``{"type": "compose", "spec": "minilm-l6+repal(l1=0.1)"}``, what
   ``benchharness tune`` registers), and such a registered name may itself contain ``+``;
5. an ad-hoc spec ``hf:<id or path>?pooling=avg&max_length=64``, ``st:<id or path>``,
   ``glove:<path>``.

Anything else fails with the close matches among the known names.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl

from benchharness.config import apply_environment, load_config
from benchharness.encoder import Encoder

MANIFEST = "manifest.json"
#: spec type of a name that stands for a composition string (a tuned post-processor chain)
COMPOSE = "compose"


class UnknownEncoderError(KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class BuiltIn:
    spec: dict[str, Any]
    description: str


BUILTINS: dict[str, BuiltIn] = {
    "minilm-l6": BuiltIn(
        {"type": "st", "model": "sentence-transformers/all-MiniLM-L6-v2"},
        "all-MiniLM-L6-v2 as sentence-transformers defines it (mean pooling, normalize)",
    ),
    "minilm-l3": BuiltIn(
        {"type": "st", "model": "sentence-transformers/paraphrase-MiniLM-L3-v2"},
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


def glove_file(data_dir: Path) -> Path:
    """The full GloVe 6B 50d file when the user has it, else the shared subset."""
    for rel in ("glove/glove.6B.50d.txt", "glove/glove.6B.50d.txt.gz", "glove/glove.6B.50d.subset.txt.gz"):
        if (data_dir / rel).exists():
            return data_dir / rel
    return data_dir / "glove/glove.6B.50d.subset.txt.gz"


def build(name: str, spec: dict[str, Any], defaults: dict[str, Any] | None = None) -> Encoder:
    """Instantiate an encoder from a spec dict ``{"type": ..., **params}``."""
    spec = dict(spec)
    kind = spec.pop("type")
    opts = {k: v for k, v in (defaults or {}).items() if v is not None}
    if kind == "hf":
        from encoders.huggingface import HFEncoder

        allowed = {k: v for k, v in opts.items() if k in ("batch_size", "device")}
        return HFEncoder(name, **{**allowed, **spec})
    if kind == "st":
        from encoders.sbert import SentenceTransformerEncoder

        allowed = {k: v for k, v in opts.items() if k in ("batch_size", "device")}
        return SentenceTransformerEncoder(name, **{**allowed, **spec})
    if kind == "glove":
        from benchharness.data import DataRoot
        from encoders.glove import WordVectorAverage

        path = spec.pop("file")
        if path == "glove-50d":
            path = glove_file(DataRoot(opts.get("data_dir")).root)
        return WordVectorAverage(name, path, **spec)
    raise UnknownEncoderError(f"encoder {name!r}: unknown type {kind!r} (hf, st, glove)")


def parse_adhoc(spec: str) -> dict[str, Any] | None:
    """``hf:<id>?k=v&k=v`` -> spec dict, or None if ``spec`` is not of that form."""
    m = re.fullmatch(r"(hf|st|glove):([^?]+)(?:\?(.*))?", spec)
    if not m:
        return None
    kind, target, query = m.groups()
    key = "file" if kind == "glove" else "model"
    return {"type": kind, key: target, **parse_params(query or "", "&")}


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if "encoder" not in manifest:
        raise ValueError(f"{path}: not a benchharness run manifest (no 'encoder' entry)")
    return manifest


def manifest_spec(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A trained run's encoder spec with its model path made absolute."""
    spec = dict(manifest["encoder"])
    for key in ("model", "file"):
        if key in spec and not Path(spec[key]).is_absolute():
            spec[key] = str((folder / spec[key]).resolve())
    return spec


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

    def __init__(self, defaults: dict[str, Any] | None = None,
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
        self._import_postprocessors()

    @staticmethod
    def _import_postprocessors() -> None:
        import importlib

        for module in ("encoders.postprocess",):
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise

    def known_names(self) -> list[str]:
        from benchharness.recipes import load_book

        return [*BUILTINS, *self.config.encoders, *load_book().names(), *registered_runs(self.config.runs_dir)]

    def spec_for(self, name: str) -> dict[str, Any]:
        """The spec dict behind a single (uncomposed) name."""
        return self._resolve(name)[0]

    def _resolve(self, name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The spec behind a single name, and the run manifest it comes from (None if not a run)."""
        if name in BUILTINS:
            return dict(BUILTINS[name].spec), None
        if name in self.config.encoders:
            entry = dict(self.config.encoders[name])
            if "spec" in entry:
                if len(split_composition(entry["spec"])) > 1:
                    return {"type": COMPOSE, "spec": entry["spec"]}, None
                return self._resolve(entry["spec"])
            entry.pop("description", None)
            return entry, None
        from benchharness.on_demand import trained_encoder

        trained = trained_encoder(name, train=self.train_missing, progress=self.progress)
        if trained is not None:
            return trained
        folder = Path(name).expanduser()
        if not (folder / MANIFEST).is_file():
            folder = registered_runs(self.config.runs_dir).get(name)
        if folder is not None:
            manifest = read_manifest(folder)
            return manifest_spec(folder, manifest), manifest
        adhoc = parse_adhoc(name)
        if adhoc is not None:
            return adhoc, None
        close = difflib.get_close_matches(name, self.known_names(), n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownEncoderError(
            f"unknown encoder {name!r}.{hint} Known names: {', '.join(self.known_names())}; or write "
            "hf:<model>?pooling=..., st:<model>, glove:<file>, a run folder with manifest.json, and "
            f"compose post-processors with + ({', '.join(sorted(POSTPROCESSORS)) or 'none installed'})."
        )

    def _registered_whole(self, name: str) -> bool:
        """A registered name may itself contain ``+`` (``minilm-l6+repal-tuned``)."""
        return name in self.config.encoders or name in registered_runs(self.config.runs_dir)

    def get(self, name: str) -> Encoder:
        parts = [name] if self._registered_whole(name) else split_composition(name)
        base_name = parts[0]
        spec, manifest = self._resolve(base_name)
        if spec["type"] == COMPOSE:  # a registered chain: its stages are wrapped as they are built
            encoder = self.get(spec["spec"])
            prefix = spec["spec"]
        else:
            built = build(base_name, spec, self.defaults)
            if manifest is not None:
                built.provenance = {k: v for k, v in manifest.items() if k != "encoder"}
            encoder = self.wrap(built)
            prefix = base_name
        for part in parts[1:]:
            m = re.fullmatch(r"([\w-]+)(?:\((.*)\))?", part)
            if not m or m.group(1) not in POSTPROCESSORS:
                post = m.group(1) if m else part
                close = difflib.get_close_matches(post, list(POSTPROCESSORS), n=3, cutoff=0.4)
                hint = f" Did you mean: {', '.join(close)}?" if close else ""
                raise UnknownEncoderError(
                    f"unknown post-processor {post!r} in {name!r}.{hint} "
                    f"Available: {', '.join(sorted(POSTPROCESSORS)) or 'none'}"
                )
            prefix = f"{prefix}+{part}"
            params = parse_params(m.group(2) or "", ",")
            factory = POSTPROCESSORS[m.group(1)]
            signature = inspect.signature(factory).parameters
            accepted = [p for p in list(signature)[1:] if p not in ("name", "data_dir")]
            unknown = sorted(set(params) - set(accepted))
            if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.values()):
                raise UnknownEncoderError(f"post-processor {m.group(1)!r} in {name!r} has no parameter "
                                          f"{', '.join(unknown)}; it takes: {', '.join(accepted) or 'none'}")
            if "data_dir" in signature:  # fit corpora live under the data root
                params["data_dir"] = self.defaults.get("data_dir")
            encoder = self.wrap(factory(encoder, name=prefix, **params))
        return encoder

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
        for n in sorted(POSTPROCESSORS):
            doc = (POSTPROCESSORS[n].__doc__ or "").strip().splitlines()
            rows.append({"name": f"+{n}", "source": "post-processor", "settings": "",
                         "description": doc[0] if doc else ""})
        return rows
