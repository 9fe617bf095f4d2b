"""Names and specs to encoders.

A name is resolved in this order:

1. a retrieval pipeline ``FIRST>>RERANKER?k=K`` or a fusion ``rrf(A,B,...)``
   (``evaluation.pipeline_names``), each part a name of its own; then a composition
   ``base+post(k=v,...)+post`` (``postprocessors`` plugins wrap the encoder on their left);
2. a name of a ``catalogues`` plugin, in their order: the built-in names (``minilm-l6``,
   ``minilm-l3``, ``glove-50d``, e5, bge, gte: ``benchharness.encoders.builtins``), then, at
   ``CONFIG_ORDER``, an encoder registered in ``benchharness.toml`` (``[encoders.NAME] spec =
   "..."``, which may itself stand for a composition, or be ``module:attribute``: an encoder
   defined in Python), then trained recipes (``paser``, ``recipe:<key>``, trained on first use),
   then published checkpoints;
3. a trained or tuned run: a folder holding ``manifest.json``, or the name a manifest under the
   configured runs folder declares; a manifest may stand for a composition too (what ``benchharness
   tune`` registers), and such a registered name may itself contain ``+``;
4. an ad-hoc spec ``<family>:<target>?k=v&k=v`` of a ``families`` plugin:
   ``hf:<id or path>?pooling=avg&max_length=64``, ``st:<id or path>``, ``glove:<path>``.

Anything else fails with the close matches among the known names. Checking a name
(:meth:`Resolver.check`) never loads a model and never trains one.
"""

from __future__ import annotations

import difflib
import inspect
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.kinds import DENSE, PAIRS, SEARCH, KindMismatchError
from benchharness.core.local_paths import check_local_path
from benchharness.core.manifests import (
    MANIFEST,
    RunManifest,
    manifest_spec,
    read_manifest,
    registered_runs,
    unfinished_run,
)
from benchharness.core.plugins import PLUGINS
from benchharness.core.prompts import NO_PROMPTS, PROMPT_KEYS, check_prompt
from benchharness.core.settings import Config
from benchharness.core.specs import (
    COMPOSE,
    MODULE_ATTRIBUTE,
    BuildContext,
    Catalogue,
    EncoderSpec,
    Family,
    UnknownEncoderError,
    parse_params,
    split_composition,
)
from benchharness.evaluation.kinds import kind_of
from benchharness.evaluation.pipeline_names import is_staged, parse_fusion, parse_pipeline

if TYPE_CHECKING:
    from benchharness.evaluation.run_settings import RunSettings

logger = logging.getLogger(__name__)

#: where the configuration's ``[encoders.*]`` stand among the catalogues: after the built-in names
#: (order 0), before the trained recipes (100) and the published checkpoints (200)
CONFIG_ORDER = 50


def families() -> dict[str, Family]:
    return PLUGINS.load_all("families")


def postprocessors() -> dict[str, Callable[..., Encoder]]:
    return PLUGINS.load_all("postprocessors")


def catalogues() -> list[Catalogue]:
    return sorted(PLUGINS.load_all("catalogues").values(), key=lambda c: c.order)


def check_spec(name: str, spec: EncoderSpec) -> Family:
    """The family of ``spec``, once its keys are known to it and a local path it names exists;
    cheap (no model is loaded), so that a typo fails before any encoder is built."""
    kind = spec.get("type")
    if not isinstance(kind, str) or PLUGINS.entry("families", kind) is None:
        raise UnknownEncoderError(f"encoder {name!r}: unknown type {kind!r} ({', '.join(PLUGINS.names('families'))})")
    family: Family = PLUGINS.get("families", kind)  # a plugin that cannot be loaded: its own one-line error
    if family.params is not None:
        accepted = [
            family.target,
            *(p for p in family.params if p != family.target),
            *(PROMPT_KEYS if family.takes_prompts else ()),
        ]
        for key in spec:
            if key != "type" and key not in accepted:
                close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.6)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise UnknownEncoderError(
                    f"encoder {name!r}: {kind} has no parameter {key!r}.{hint} It accepts: {', '.join(accepted)}"
                )
    # hub ids or folders; a family with its own check names its own missing target better
    for key in {"model", "tokenizer", *([family.target] if family.check is None else [])}:
        value = spec.get(key)
        if isinstance(value, str):
            check_local_path(value, f"encoder {name!r} ({key})")
    if family.check is not None:
        family.check(spec)
    if family.takes_prompts:
        spec_prompts(name, spec)
    return family


def spec_prompts(name: str, spec: EncoderSpec) -> dict[str, str]:
    """The prompt keys of ``spec``, checked (``check_prompt``), and a template with its placeholder."""
    given = {key: spec[key] for key in PROMPT_KEYS if key in spec}  # type: ignore[literal-required]
    for key, value in given.items():
        check_prompt(f"encoder {name!r}", key, value)
    try:
        NO_PROMPTS.but(**given)
    except ValueError as exc:
        raise InvalidInputError(f"encoder {name!r}: {exc}") from None
    return given


def build(name: str, spec: EncoderSpec, context: BuildContext | None = None) -> Encoder:
    """Instantiate an encoder from a spec dict ``{"type": ..., **params}`` in the run's ``context``
    (default: no device or batch size set, the environment's data root and hub cache); prompts
    given in the spec replace those the model configures for the same role."""
    family = check_spec(name, spec)
    params = {k: v for k, v in spec.items() if k != "type" and k not in PROMPT_KEYS}
    encoder = family.build(name, params, context or BuildContext())
    given = spec_prompts(name, spec) if family.takes_prompts else {}
    if given:
        encoder.prompts = encoder.prompts.but(**given)
    return encoder


def parse_adhoc(spec: str) -> EncoderSpec | None:
    """``<family>:<target>?k=v&k=v`` -> spec dict, or None if ``spec`` is not of that form."""
    m = re.fullmatch(r"([\w-]+):([^?]+)(?:\?(.*))?", spec)
    if not m or PLUGINS.entry("families", m.group(1)) is None:
        return None
    kind, target, query = m.groups()
    family: Family = PLUGINS.get("families", kind)
    built = {"type": kind, family.target: target, **parse_params(query or "", "&")}
    return cast(EncoderSpec, built)  # the family's own target key and parameters: keys the TypedDict cannot list


def _refuse_cycle(name: str, chain: tuple[str, ...], config_file: Path | None) -> None:
    """A config entry met again while resolving itself: a cycle, named link by link."""
    if name in chain:
        loop = " -> ".join([*chain[chain.index(name) :], name])
        raise UnknownEncoderError(
            f"encoder {name!r} in {config_file or 'benchharness.toml'} refers to itself via "
            f"{loop}; point one of these entries at a model spec instead"
        )


class Resolver:
    """Resolves names to encoders, with the run's ``settings`` (its configuration: encoders
    registered in benchharness.toml, the runs folder; its device, batch size, data root and hub
    cache, handed to every family as a ``BuildContext``).

    ``settings`` None: a default run's (``RunSettings()``, which reads the configuration), or of
    ``config`` when given. ``wrap`` is applied to the base encoder and to every post-processor
    stage (the runner passes the embedding cache). ``train_missing`` lets a recipe catalogue train a
    recipe that has no run yet (else it fails with the command that trains it), with the run's
    settings.
    """

    def __init__(
        self,
        wrap: Callable[[Encoder], Encoder] | None = None,
        train_missing: bool = True,
        settings: RunSettings | None = None,
        config: Config | None = None,
    ) -> None:
        from benchharness.evaluation.run_settings import RunSettings

        if settings is None:
            settings = RunSettings() if config is None else RunSettings(config=config)
        elif config is not None:
            raise ValueError("give the resolver settings= or config=, not both: the settings hold their config")
        self.settings = settings
        self.config = settings.config
        self.train_missing = train_missing
        #: registered run names passed over because they are compositions (warned about once)
        self._passed_over: set[str] = set()
        self.context = BuildContext(settings.device, settings.batch_size, settings.data().root, settings.hub)
        self.wrap: Callable[[Encoder], Encoder] = wrap or (lambda encoder: encoder)
        #: the last base encoder built, by name: the variants of one base (``x+truncate(d=64|128)``)
        #: come one after the other and share it, one model loaded (only the last is kept)
        self._last_base: tuple[str, Encoder] | None = None
        #: the parts of the last pipeline or fusion built, by name, shared with the next one (the
        #: rerankers and depths over one first stage come one after another); those of the one being built
        self._parts: dict[str, Encoder] = {}
        self._building: dict[str, Encoder] | None = None

    def known_names(self) -> list[str]:
        listed = [row["name"] for c in catalogues() for row in c.rows()]
        return [*self.config.encoders, *registered_runs(self.config.runs_dir), *listed]

    def spec_for(self, name: str) -> EncoderSpec:
        """The spec dict behind a single (uncomposed) name."""
        return self._resolve(name)[0]

    def _resolve(
        self, name: str, chain: tuple[str, ...] = ()
    ) -> tuple[EncoderSpec, RunManifest | None, tuple[str, ...]]:
        """The spec behind a single name, the run manifest it comes from (None if not a run), and
        the config entries followed to get there. ``chain`` holds those followed before, to refuse
        an entry that refers to itself (a cycle would otherwise recurse without end)."""
        configured_seen = False
        for catalogue in catalogues():
            if not configured_seen and catalogue.order > CONFIG_ORDER:
                configured_seen = True
                configured = self._configured(name, chain)
                if configured is not None:
                    return configured
            takes_settings = "settings" in inspect.signature(catalogue.resolve).parameters
            found = (
                catalogue.resolve(name, train=self.train_missing, settings=self.settings)
                if takes_settings
                else catalogue.resolve(name, train=self.train_missing)
            )
            if found is not None:
                return found.spec, found.manifest, chain  # type: ignore[return-value]
        if not configured_seen:
            configured = self._configured(name, chain)
            if configured is not None:
                return configured
        folder = Path(name).expanduser()
        try:
            is_run = (folder / MANIFEST).is_file()
            unfinished = None if is_run else unfinished_run(folder)
        except OSError:  # a name too long to be a path (an ad-hoc spec with a long prompt) names no folder
            is_run, unfinished = False, None
        run = folder if is_run else registered_runs(self.config.runs_dir).get(name)
        if run is not None:
            manifest = read_manifest(run)
            return manifest_spec(run, manifest), manifest, chain
        adhoc = parse_adhoc(name)
        if adhoc is not None:
            return adhoc, None, chain
        if unfinished is not None:
            raise InvalidInputError(f"encoder {name!r}: {folder} is {unfinished}")
        known = self.known_names()
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        # one line: the close matches, then where the rest is (the full list runs to dozens of names)
        raise UnknownEncoderError(
            f"unknown encoder {name!r}.{hint} 'benchharness list encoders' lists every name; or give a run "
            f"folder with manifest.json, or <family>:<target> ({', '.join(PLUGINS.names('families'))})"
        )

    def _configured(
        self, name: str, chain: tuple[str, ...]
    ) -> tuple[EncoderSpec, RunManifest | None, tuple[str, ...]] | None:
        """The spec an ``[encoders.<name>]`` table of the configuration gives, or None."""
        if name not in self.config.encoders:
            return None
        _refuse_cycle(name, chain, self.config.file)
        entry = dict(self.config.encoders[name])
        if "spec" in entry:
            spec = entry["spec"]
            if MODULE_ATTRIBUTE.fullmatch(spec) and PLUGINS.entry("families", spec.split(":")[0]) is None:
                return {"type": "python", "object": spec}, None, (*chain, name)
            if is_staged(spec) or len(split_composition(spec)) > 1:
                return {"type": COMPOSE, "spec": spec}, None, (*chain, name)
            return self._resolve(entry["spec"], (*chain, name))
        entry.pop("description", None)
        if "type" not in entry:
            close = difflib.get_close_matches(next(iter(entry), ""), ["spec", "type", "description"], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close and entry else ""
            raise UnknownEncoderError(
                f"{self.config.file or 'benchharness.toml'}: [encoders.{name}] needs "
                f'spec = "..." or a family type = "..."; it has '
                f"{', '.join(sorted(entry)) or 'nothing'}{hint}"
            )
        return entry, None, (*chain, name)  # type: ignore[return-value]

    def _registered_whole(self, name: str) -> bool:
        """A registered name may itself contain ``+`` (``minilm-l6+repal-tuned``). A run in the runs
        folder (which may be shared) may not take a name that is a composition as written
        (``glove-50d+whitening``): it would silently stand in for that composition, so the name keeps
        its meaning and the run is passed over, with a warning. The user's own configuration may."""
        if name in self.config.encoders:
            return True
        if name not in registered_runs(self.config.runs_dir):
            return False
        parts = split_composition(name)
        try:
            for part in parts[1:]:
                self._stage(name, part)
        except UnknownEncoderError:  # not a composition ("minilm-l3+whitening-tuned"): the run's name
            return True
        if len(parts) == 1:
            return True
        if name not in self._passed_over:
            self._passed_over.add(name)
            logger.warning(
                "the run %s is named %r, which is a composition: %r means that composition, and the run is "
                "passed over (rename it in its manifest.json to use it)",
                registered_runs(self.config.runs_dir)[name],
                name,
                name,
            )
        return False

    def check(self, name: str, _chain: tuple[str, ...] = ()) -> None:
        """Everything ``get`` would refuse, found without loading a model: unknown names, spec keys
        and post-processors or their parameters, missing local folders, config cycles. A name a
        catalogue trains on demand is checked when it is resolved (resolving it now would train it);
        without training allowed it resolves here, and fails if it has no run yet. A pipeline or a
        fusion is checked part by part."""
        staged = self._staged_parts(name)
        if staged is not None:
            for part in staged:
                self.check(part, _chain)
            return
        parts = [name] if self._registered_whole(name) else split_composition(name)
        deferred = (
            parts[0] not in self.config.encoders
            and self.train_missing
            and any(c.on_demand(parts[0]) for c in catalogues())
        )
        if not deferred:
            spec, _, chain = self._resolve(parts[0], _chain)
            if spec["type"] == COMPOSE:
                self.check(spec["spec"], chain)
            else:
                check_spec(parts[0], spec)
        for part in parts[1:]:
            self._stage(name, part)

    def get(self, name: str, _chain: tuple[str, ...] = ()) -> Encoder:
        if self._staged_parts(name) is not None:
            return self._staged(name)
        if self._building is None:  # another model than a pipeline's part: the last pipeline's parts go
            self._parts = {}
        parts = [name] if self._registered_whole(name) else split_composition(name)
        base_name = parts[0]
        spec, manifest, chain = self._resolve(base_name, _chain)
        if spec["type"] == COMPOSE:  # a registered chain: its stages are wrapped as they are built
            encoder = self.get(spec["spec"], chain)
            prefix = spec["spec"]
        else:
            encoder = self._base(base_name, spec, manifest, shared=len(parts) > 1)
            prefix = base_name
        for part in parts[1:]:
            factory, params = self._stage(name, part)
            if encoder.model_kind != DENSE:
                kind = kind_of(encoder)
                raise KindMismatchError(
                    f"encoder {name!r}: {part.partition('(')[0]} post-processes dense vectors, and {prefix} is "
                    f"{kind.title} ({kind.gives}); evaluate {prefix} without post-processors"
                )
            prefix = f"{prefix}+{part}"
            if "data_dir" in inspect.signature(factory).parameters:  # fit corpora live under the data root
                params["data_dir"] = self.context.data_root
            encoder = self.wrap(factory(encoder, name=prefix, **params))
        return encoder

    def _staged_parts(self, name: str) -> list[str] | None:
        """The parts of a pipeline (first stage, reranker) or a fusion (its first stages); None for any
        other name (a name the configuration registers is its own)."""
        if name in self.config.encoders:
            return None
        pipeline = parse_pipeline(name)
        return [pipeline.first, pipeline.reranker] if pipeline is not None else parse_fusion(name)

    def _staged(self, name: str) -> Encoder:
        """A pipeline or a fusion, its parts built by name (``_part``); a first stage whose kind does not
        search, or a reranker whose kind scores no pair, is refused in one line before anything runs."""
        from benchharness.encoders.pipeline import Fusion, Pipeline

        top = self._building is None
        if top:
            self._building = {}
        try:
            pipeline = parse_pipeline(name)
            if pipeline is None:
                return Fusion(name, [self._part(name, member, SEARCH) for member in parse_fusion(name) or []])
            first = self._part(name, pipeline.first, SEARCH)
            return Pipeline(name, first, self._part(name, pipeline.reranker, PAIRS), pipeline.k, pipeline.variant)
        finally:
            if top:
                self._parts, self._building = self._building or {}, None

    def _part(self, whole: str, name: str, operation: str) -> Encoder:
        """The part ``name`` of the pipeline or fusion ``whole``, the last one's if it had it; it must
        offer ``operation`` (a first stage searches, a reranker scores pairs)."""
        assert self._building is not None
        part = self._building.get(name) or self._parts.get(name) or self.get(name)
        self._building[name] = part
        kind = kind_of(part)
        if operation not in kind.offers:
            role = "a first stage, which searches a corpus" if operation == SEARCH else "a reranker, which scores pairs"
            raise KindMismatchError(f"encoder {whole!r}: {name} is {kind.title} ({kind.gives}) and cannot be {role}")
        return part

    def _base(self, name: str, spec: EncoderSpec, manifest: RunManifest | None, shared: bool) -> Encoder:
        """A base encoder, built and wrapped; the base of a composition is shared with the next
        composition of the same base (its variants, which a run evaluates one after another)."""
        if shared and self._last_base is not None and self._last_base[0] == name:
            return self._last_base[1]
        self._last_base = None  # the previous base's model is let go before the next one loads
        built = build(name, spec, self.context)
        if manifest is not None:
            built.provenance = {k: v for k, v in manifest.items() if k != "encoder"}
        encoder = self.wrap(built)
        if shared:
            self._last_base = (name, encoder)
        return encoder

    @staticmethod
    def _stage(name: str, part: str) -> tuple[Callable[..., Encoder], dict[str, Any]]:
        """The post-processor factory and parameters of one ``post(k=v,...)`` stage of ``name``."""
        m = re.fullmatch(r"([\w-]+)(?:\((.*)\))?", part)
        available = PLUGINS.names("postprocessors")
        if not m or m.group(1) not in available:
            post = m.group(1) if m else part
            close = difflib.get_close_matches(post, available, n=3, cutoff=0.4)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise UnknownEncoderError(
                f"unknown post-processor {post!r} in {name!r}.{hint} "
                f"Available: {', '.join(sorted(available)) or 'none'}"
            )
        params = parse_params(m.group(2) or "", ",")
        factory = PLUGINS.get("postprocessors", m.group(1))
        signature = inspect.signature(factory).parameters
        accepted = [p for p in list(signature)[1:] if p not in ("name", "data_dir")]
        unknown = sorted(set(params) - set(accepted))
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.values()):
            close = difflib.get_close_matches(unknown[0], accepted, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownEncoderError(
                f"post-processor {m.group(1)!r} in {name!r} has no parameter "
                f"{', '.join(unknown)}; it takes: {', '.join(accepted) or 'none'}.{hint}"
            )
        return factory, params

    def describe(self) -> list[dict[str, str]]:
        """Rows for ``benchharness list encoders``: every name with its source and settings."""
        configured = [
            {
                "name": n,
                "source": str(self.config.file),
                "settings": entry.get("spec", json.dumps(entry)),
                "description": entry.get("description", ""),
            }
            for n, entry in self.config.encoders.items()
        ]
        rows: list[dict[str, str]] = []
        for catalogue in catalogues():
            if configured and catalogue.order > CONFIG_ORDER:
                rows, configured = rows + configured, []
            rows.extend(catalogue.rows())
        rows.extend(configured)
        for n, folder in registered_runs(self.config.runs_dir).items():
            try:  # one broken run folder is listed as such, not a failed listing of every name
                m = read_manifest(folder)
            except UserError as exc:
                rows.append({"name": n, "source": str(folder), "settings": "", "description": f"unusable: {exc}"})
                continue
            rows.append(
                {
                    "name": n,
                    "source": str(folder),
                    "settings": json.dumps(m["encoder"]),
                    "description": f"{'tuned' if m['encoder'].get('type') == COMPOSE else 'trained'}: "
                    f"{m.get('method', '?')} on {m.get('base_model', '?')}",
                }
            )
        for n, factory in sorted(postprocessors().items()):
            # the docstring's first paragraph, on one line (a docstring's lines are wrapped at 120 columns)
            summary = " ".join(inspect.cleandoc(factory.__doc__ or "").split("\n\n")[0].split())
            rows.append({"name": f"+{n}", "source": "post-processor", "settings": "", "description": summary})
        return rows
