"""Training recipes: the name of a trained encoder -> everything that makes it.

A recipe is a method, a base (a hub id with its revision, a model folder, or another recipe whose
run it continues) and every setting of the run: the preset and the values given on top of it,
resolved into the method's typed options (``benchharness.training.options.resolve``), whose record
names every value the run trains with. Its *key*, a short hash of that canonical record, names the
one run that trains it (``benchharness.training.runstore``): two recipes that train differently
never share a key, and one recipe always gets the same key.

Named recipes are committed in ``recipes.toml`` beside this module; flags on ``benchharness train``
and keywords of ``benchharness.train`` derive unnamed ones, which are then known as
``recipe:<key>``. :func:`command` renders a recipe as the one ``benchharness train`` command that
builds it, from the same declarations the command line's flags come from.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.encoder import stable_hash
from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import PLUGINS
from benchharness.core.settings import Config
from benchharness.training.runstore import RunStore
from benchharness.training.settings import RUNTIME

if TYPE_CHECKING:
    from benchharness.training.method import Method
    from benchharness.training.options import TrainingOptions

#: the committed recipe file (beside the training code that reads it)
RECIPES_FILE = Path(str(files("benchharness.training") / "recipes.toml"))
#: a recipe base that is another recipe's run
RECIPE_PREFIX = "recipe:"
KEY_LENGTH = 12
#: words of ``benchharness train`` that are not options: what picks the recipe (its name, base and
#: preset), what the command does (``--show``, ``--stats-only``, the seed grid's executor) and the run-time
#: keys (``settings.RUNTIME``); never part of a recipe or its key
NOT_OPTIONS = frozenset(
    {"recipe", "base", "preset", "verbose", "progress", "stats_only", "show", "data_dir", "command", "method"}
    | {"seeds", "executor", "address"}
    | set(RUNTIME)
)
ENTRY_KEYS = frozenset({"method", "base", "revision", "preset", "options", "extends", "round", "description"})
THROUGHPUT_KEYS = (
    "method",
    "base",
    "device",
    "batch_size",
    "max_length",
    "seconds_per_step",
    "steps",
    "machine",
    "command",
    "date",
)


class RecipeError(InvalidInputError):
    """A recipe that cannot be read or resolved; the message names the file, recipe and key."""


@dataclass(frozen=True)
class Throughput:
    """Seconds per optimizer step of one method on one base, measured on one kind of machine."""

    method: str
    base: str
    device: str  # "cpu" or "cuda"
    batch_size: int
    max_length: int
    seconds_per_step: float
    steps: int  # how many steps the measurement timed
    machine: str
    command: str
    date: str
    cpu: str = ""  # the CPU kind of a cpu row (``on_demand.cpu_kind``): "avx512-bf16", "avx2"; "" for any
    #: seconds of one STS-B dev evaluation of the method's encoder (None where not measured): a run
    #: evaluates several times, and on a short CPU recipe that is a third of its time
    seconds_per_evaluation: float | None = None
    #: seconds of a run that are neither steps nor dev evaluations (None where not measured): loading
    #: the data and the model, checkpoints and saving, which the user waits for too; counted once
    #: per run (a DefSent+ run reads its dictionary once, and builds round 1's entry matrix in it)
    seconds_setup: float | None = None


@dataclass(frozen=True)
class Recipe:
    """A method, its base and every setting of the run that trains it.

    ``flags`` are what a person wrote (the file's options plus command-line flags, by argument
    name); ``options`` are every setting they resolve to. The key hashes ``canonical()``, which
    leaves out the name, description and preset label (two ways of writing the same run share it).
    """

    method: str
    base: str  # hub id, folder, registered run, or "recipe:<name or key>"
    base_revision: str | None
    preset: str | None
    flags: dict[str, Any]
    options: dict[str, Any]
    name: str | None = None  # the recipe file's name; None for a recipe derived from flags
    round: int | None = None  # DefSent+: which round's encoder the name stands for
    description: str = ""
    base_recipe: Recipe | None = None  # when ``base`` is another recipe
    base_fingerprint: str | None = field(default=None, compare=False)  # weights sha256 of a folder base
    #: the model folder or hub id ``base`` names (``base_model.base_folder``: a run's model, a registered
    #: run's), found once when the recipe is built; None when ``base`` is another recipe
    base_path: str | None = field(default=None, compare=False)
    #: sha256 of the training files the ``data`` option names (``text:<path>``, a .jsonl/.csv file),
    #: or of the sentences a caller holds in memory; None for the named corpora of the data root, which
    #: its pinned checksums already fix
    data_digest: str | None = field(default=None, compare=False)
    #: the typed options ``options`` records (what the method's ``train`` receives)
    typed: TrainingOptions | None = field(default=None, compare=False, repr=False)

    def canonical(self) -> dict[str, Any]:
        """What the key hashes: the method, the base as a machine-independent identity, every option,
        and the content of the training files it names (an edited file is another recipe)."""
        if self.base_recipe is not None:
            base: Any = {"recipe": self.base_recipe.key}
        elif self.base_fingerprint is not None:
            base = {"weights_sha256": self.base_fingerprint}
        else:
            base = self.base
        canonical = {"method": self.method, "base": base, "base_revision": self.base_revision, "options": self.options}
        if self.data_digest is not None:
            canonical["data_sha256"] = self.data_digest
        return canonical

    @property
    def key(self) -> str:
        return stable_hash(self.canonical())[:KEY_LENGTH]

    @property
    def rounds(self) -> int | None:
        """How many rounds the run trains (DefSent+); None for single-stage methods."""
        return self.options.get("rounds")

    @property
    def encoder_round(self) -> int | None:
        """The round whose encoder this recipe names: its own, else the last."""
        return None if self.rounds is None else (self.round or self.rounds)

    @property
    def display_name(self) -> str:
        """The name to use in ``benchharness run --encoders``."""
        if self.name is not None:
            return self.name
        suffix = f"-r{self.round}" if self.round is not None else ""
        return f"{RECIPE_PREFIX}{self.key}{suffix}"

    @property
    def run_name(self) -> str:
        """The name the trained run registers under; DefSent+ appends ``-r<k>`` per round."""
        name = self.display_name
        suffix = f"-r{self.round}"
        return name[: -len(suffix)] if self.rounds is not None and name.endswith(suffix) else name

    def summary(self) -> str:
        revision = f"@{self.base_revision[:7]}" if self.base_revision else ""
        preset = f", preset {self.preset}" if self.preset else ""
        data = self.options.get("data") or self.options.get("dictionary")
        return f"{self.method} on {self.base}{revision}{preset}, data {data}, seed {self.options.get('seed')}" + (
            f", round {self.encoder_round} of {self.rounds}" if self.rounds else ""
        )

    def record(self) -> dict[str, Any]:
        """The recipe as stored in a run's manifest and ``recipe.json``: enough to rebuild and rerun it."""
        return {
            "name": self.name,
            "key": self.key,
            "method": self.method,
            "base": self.base,
            "base_revision": self.base_revision,
            "base_key": self.base_recipe.key if self.base_recipe else None,
            "preset": self.preset,
            "flags": self.flags,
            "round": self.round,
            "options": self.options,
            "command": command_or_none(self),
        }


@dataclass(frozen=True)
class RecipeBook:
    """The recipe file: raw entries by name, and the throughput measurements; ``config`` says where
    a recipe's base is looked up (the runs folder, the Hugging Face cache) when it is built."""

    path: Path
    entries: dict[str, dict[str, Any]]
    throughput: tuple[Throughput, ...]
    config: Config = field(default_factory=Config, compare=False, repr=False)

    def names(self) -> list[str]:
        return list(self.entries)

    def lookup(self, name: str, bases: tuple[str, ...] = ()) -> Recipe | None:
        """The recipe a name stands for: an entry, or ``<DefSent+ entry>-r<k>``; None if neither.
        ``bases`` are the recipes whose ``base`` led here, to refuse a cycle through bases."""
        if name in self.entries:
            return self.resolve(name, bases)
        m = re.fullmatch(r"(.+)-r(\d+)", name)
        if m and m.group(1) in self.entries:
            recipe = self.resolve(m.group(1), bases)
            if recipe.rounds is not None:
                return with_round(recipe, int(m.group(2)), name)
        return None

    def written(self, name: str) -> tuple[str, int | None] | None:
        """The entry a name stands for and the round it names (``<entry>-r<k>``), without building
        anything; None when it names no entry."""
        if name in self.entries:
            return name, None
        m = re.fullmatch(r"(.+)-r(\d+)", name)
        if m is None or m.group(1) not in self.entries:
            return None
        method = self.source(m.group(1)).get("method")  # only a method that trains in rounds names them
        trains_in_rounds = isinstance(method, str) and "rounds" in fields_of(method)
        return (m.group(1), int(m.group(2))) if trains_in_rounds else None

    def get(self, name: str) -> Recipe:
        recipe = self.lookup(name)
        if recipe is None:
            raise RecipeError(f"unknown recipe {name!r}; {self.path} names: {', '.join(self.entries)}")
        return recipe

    def source(self, name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        """An entry with what it ``extends`` merged in (options merge key by key)."""
        if name in seen:
            raise RecipeError(f"{self.path}: recipe {name!r} extends itself ({' -> '.join((*seen, name))})")
        entry = self.entries.get(name)
        if entry is None:
            where = f"recipe {seen[-1]!r} extends" if seen else "no recipe"
            raise RecipeError(f"{self.path}: {where} {name!r}; known: {', '.join(self.entries)}")
        if "extends" not in entry:
            return {**entry, "options": dict(entry.get("options", {}))}
        parent = self.source(entry["extends"], (*seen, name))
        merged = {**parent, **{k: v for k, v in entry.items() if k not in ("options", "extends")}}
        if "base" in entry and "revision" not in entry:
            merged.pop("revision", None)  # a new base does not inherit the parent's pinned revision
        merged["options"] = {**parent["options"], **entry.get("options", {})}
        if "description" not in entry:
            merged.pop("description", None)
        return merged

    def resolve(self, name: str, bases: tuple[str, ...] = ()) -> Recipe:
        if name in bases:
            raise RecipeError(
                f"{self.path}: recipe {name!r} is its own base "
                f"({' -> '.join(f'recipe:{b}' for b in (*bases, name))}); point one base at a model"
            )
        src = self.source(name)
        where = f"{self.path}: recipe {name!r}"
        if "method" not in src or "base" not in src:
            raise RecipeError(f"{where} needs 'method' and 'base' (directly or through 'extends')")
        try:
            return build(
                src["method"],
                src["base"],
                src.get("preset"),
                src["options"],
                revision=src.get("revision"),
                name=name,
                round=src.get("round"),
                description=src.get("description", ""),
                book=self,
                bases=(*bases, name),
            )
        except RecipeError as exc:
            if str(exc).startswith(f"{self.path}:"):  # already names the file and recipe (a base's error)
                raise
            raise RecipeError(f"{where}: {exc}") from None


def _entry_errors(path: Path, name: str, entry: Any) -> None:
    if not isinstance(entry, dict):
        raise RecipeError(f"{path}: recipes.{name} must be a table")
    unknown = sorted(set(entry) - ENTRY_KEYS)
    if unknown:
        raise RecipeError(
            f"{path}: recipes.{name}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(ENTRY_KEYS))}"
        )
    if not isinstance(entry.get("options", {}), dict):
        raise RecipeError(f"{path}: recipes.{name}.options must be a table of flag = value")


def read_book(path: Path) -> RecipeBook:
    """Parse a recipe file; errors name the file and the entry."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise RecipeError(f"recipe file {path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: invalid TOML: {exc}") from None
    entries = raw.get("recipes", {})
    for name, entry in entries.items():
        _entry_errors(path, name, entry)
    measured = []
    for i, row in enumerate(raw.get("throughput", [])):
        missing = [k for k in THROUGHPUT_KEYS if k not in row]
        if missing:
            raise RecipeError(f"{path}: throughput entry {i + 1} lacks {', '.join(missing)}")
        measured.append(
            Throughput(
                **{k: row[k] for k in THROUGHPUT_KEYS},
                cpu=str(row.get("cpu", "")),
                seconds_per_evaluation=row.get("seconds_per_evaluation"),
                seconds_setup=row.get("seconds_setup"),
            )
        )
    return RecipeBook(path, entries, tuple(measured))


@lru_cache(maxsize=4)
def _cached_book(path: Path, mtime: float) -> RecipeBook:
    return read_book(path)


def load_book(path: Path | None = None, config: Config | None = None) -> RecipeBook:
    """The recipe file (``RECIPES_FILE`` by default), re-read when it changes, whose recipes find
    their bases where ``config`` says (None: the defaults and the environment)."""
    path = path or RECIPES_FILE
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        raise RecipeError(f"recipe file {path} not found") from None
    book = _cached_book(path, mtime)
    return book if config is None else replace(book, config=config)


# ----------------------------------------------------------------------------------------------
# resolving given values into every setting


def method_named(name: str) -> Method[Any]:
    """The ``methods`` plugin of that name; an unknown name is refused with the installed ones."""
    if PLUGINS.entry("methods", name) is None:
        raise RecipeError(f"unknown method {name!r}; choose one of {', '.join(PLUGINS.names('methods'))}")
    method: Method[Any] = PLUGINS.get("methods", name)
    return method


def fields_of(method: str) -> set[str]:
    """The option names a method declares (none for a method not installed)."""
    if PLUGINS.entry("methods", method) is None:
        return set()
    return set(method_named(method).options.__dataclass_fields__)


def preset_of(method: str, preset: str | None) -> str | None:
    """The preset a recipe of ``method`` trains with: the one named, else the method's default; None
    for a method without presets."""
    declared = method_named(method)
    if not declared.presets:
        return None
    return declared.default_preset if preset is None else preset


def resolve_options(method: str, given: dict[str, Any], preset: str | None) -> tuple[TrainingOptions, dict[str, Any]]:
    """The typed options the preset (the method's default preset when None) and the given values
    resolve to, and their record (``options.resolve``); refusals are ``RecipeError``s."""
    from benchharness.training.options import resolve

    declared = method_named(method)
    try:
        value, record = resolve(
            method, declared.options, declared.presets, preset_of(method, preset), given, declared.adjust
        )
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    return value, record


def cached_revision(hub_id: str, cache: Path) -> str | None:
    """The revision the Hugging Face cache ``cache`` holds for a hub id (``refs/main``), or None."""
    ref = cache / f"models--{hub_id.replace('/', '--')}" / "refs" / "main"
    return ref.read_text().strip() if ref.is_file() else None


def build(
    method: str,
    base: str,
    preset: str | None,
    flags: dict[str, Any],
    *,
    revision: str | None = None,
    name: str | None = None,
    round: int | None = None,
    description: str = "",
    book: RecipeBook | None = None,
    bases: tuple[str, ...] = (),
    data_digest: str | None = None,
) -> Recipe:
    """A recipe from its written form; a base ``recipe:<name>`` is resolved through ``book``.

    A hub base takes ``revision`` (pinned), else the one the cache holds now; a folder base is
    identified by its weights, not its path, so its key is the same on every machine.
    ``data_digest`` pins data the options cannot name (sentences held in memory).
    """
    book = book or load_book()
    flags = {k.replace("-", "_"): v for k, v in flags.items()}
    runtime = sorted(set(flags) & NOT_OPTIONS)
    if runtime:
        raise RecipeError(f"{', '.join(runtime)} say where or how a run goes, not what it trains: not recipe options")
    base_recipe = None
    fingerprint = None
    folder = None
    if base.startswith(RECIPE_PREFIX):
        base_recipe = base_recipe_named(base[len(RECIPE_PREFIX) :], book, bases)
        revision = None
    else:
        from benchharness.training.base_model import base_folder

        folder = base_folder(base, book.config.runs_dir)
        if Path(folder).expanduser().is_dir():
            from benchharness.encoders.hub import weights_fingerprint

            fingerprint = weights_fingerprint(str(Path(folder).expanduser().resolve()))
            revision = None
        elif revision is None:
            revision = cached_revision(base, book.config.hub().cache)
    preset = preset_of(method, preset)
    typed, options = resolve_options(method, flags, preset)
    recipe = Recipe(
        method,
        base,
        revision,
        preset,
        flags,
        options,
        name,
        round,
        description,
        base_recipe,
        fingerprint,
        folder,
        data_digest or training_files_digest(options.get("data")),
        typed,
    )
    if round is not None:
        recipe = with_round(recipe, round, name)
    return recipe


def training_files_digest(data: Any) -> str | None:
    """sha256 over the local files a ``data`` option names (``+``-joined parts; ``text:<path>`` or a
    path), or None when it names none (a corpus of the data root)."""
    if not isinstance(data, str):
        return None
    files = []
    for part in (p.strip() for p in data.split("+")):
        path = Path(part.removeprefix("text:")).expanduser()
        if path.is_file():
            files.append(path)
    if not files:
        return None
    from benchharness.core.digests import sha256_file

    return stable_hash([[f.name, sha256_file(f)] for f in files])


def base_recipe_named(name: str, book: RecipeBook, bases: tuple[str, ...] = ()) -> Recipe:
    """The recipe a ``recipe:<name>`` base names: a recipe of the file, else a key in the run store."""
    recipe = book.lookup(name, bases) or stored_recipe(RunStore(book.config.runs_dir), name, book)
    if recipe is None:
        raise RecipeError(f"base recipe:{name} is neither a recipe of {book.path} nor a key in the run store")
    return recipe


def stored_recipe(store: RunStore, key: str, book: RecipeBook | None = None) -> Recipe | None:
    """The recipe a run of the store recorded, by key; None when the store has no such key."""
    record = store.stored_record(key)
    return None if record is None else from_record(record, book)


def round_recipe(recipe: Recipe, round: int) -> Recipe:
    """The recipe of one round's encoder of a run (itself for a run without rounds), as that round's
    manifest records it: a named recipe's round is named ``<run name>-r<k>``."""
    if recipe.rounds is None:
        return recipe
    return with_round(recipe, round, f"{recipe.run_name}-r{round}" if recipe.name is not None else None)


def with_round(recipe: Recipe, round: int, name: str | None) -> Recipe:
    if recipe.rounds is None:
        raise RecipeError(f"{recipe.display_name}: a {recipe.method} run has no rounds")
    if not 1 <= round <= recipe.rounds:
        raise RecipeError(f"{name or recipe.display_name}: round {round} outside 1..{recipe.rounds}")
    return replace(recipe, round=round, name=name)


def derive(
    method: str,
    given: dict[str, Any],
    *,
    recipe: str | None = None,
    base: str | None = None,
    preset: str | None = None,
    book: RecipeBook | None = None,
    data_digest: str | None = None,
) -> Recipe:
    """The recipe ``benchharness train <method> [--recipe NAME] [flags]`` (or ``benchharness.train``)
    asks for, built once.

    It starts from ``recipe`` (default: the recipe named after the method; a method without one, a
    plugin's, starts from its defaults and needs ``base``); ``base``, ``preset`` and every option
    ``given`` change it. When they change what is trained, the result is unnamed (``recipe:<key>``);
    values that repeat the recipe keep its name.
    """
    book = book or load_book()
    start_name = recipe or method
    written = book.written(start_name)
    if written is None:
        if recipe is not None:
            book.get(start_name)  # refused: an unknown recipe, named with the file's
        method_named(method)  # an unknown method is named as such, not as a missing recipe
        if base is None:
            raise RecipeError(
                f"{method} has no recipe of its own in {book.path}: give the model to start from "
                "(--base, or base= in Python)"
            )
        return build(method, base, preset, dict(given), book=book, data_digest=data_digest)
    src = book.source(written[0])
    if src.get("method") != method:
        raise RecipeError(
            f"recipe {start_name!r} trains {src.get('method')}, not {method}: "
            f"run `benchharness train {src.get('method')} --recipe {start_name}`"
        )
    start_preset = preset_of(method, src.get("preset"))
    same_base = base is None or base == src["base"]
    if not given and same_base and (preset is None or preset == start_preset) and data_digest is None:
        return book.get(start_name)
    flags = {k.replace("-", "_"): v for k, v in src["options"].items()}
    derived = build(
        method,
        src["base"] if same_base else str(base),
        preset or src.get("preset"),
        {**flags, **given},
        revision=src.get("revision") if same_base else None,
        round=written[1] or src.get("round"),
        book=book,
        data_digest=data_digest,
    )
    if same_base and data_digest is None and derived.options == resolve_options(method, flags, start_preset)[1]:
        return replace(derived, name=start_name, description=src.get("description", ""))  # the recipe itself
    return derived


def from_record(record: dict[str, Any], book: RecipeBook | None = None) -> Recipe:
    """A recipe rebuilt from the record a run stored (``recipe.json``), checked against its key."""
    base = record["base"]
    recipe = build(
        record["method"],
        base,
        record.get("preset"),
        record.get("flags", {}),
        revision=record.get("base_revision"),
        name=record.get("name"),
        round=record.get("round"),
        book=book,
    )
    if recipe.key != record["key"]:
        raise RecipeError(
            f"the recipe stored as {record['key']} now resolves to key {recipe.key}: the method's "
            "defaults, the base or the content of its training files changed since it was trained"
        )
    return recipe


# ----------------------------------------------------------------------------------------------
# the command that builds a recipe


def _flag_words(method: Method[Any], name: str, value: Any) -> list[str]:
    """The command-line words that set ``name`` to ``value``: a method's option, or a run-time
    setting; a switch is its flag (``--no-...`` for False where one exists), or nothing for False."""
    from benchharness.training.options import declared, flag_text

    runtime = RUNTIME.get(name)
    if runtime is not None:
        if runtime.switch:
            return [runtime.flags[0]] if value else []
        return [runtime.flags[0], str(value)]
    meta = next(m for n, m, _ in declared(method.options) if n == name)
    flag = meta.flag_for(name)
    if flag is None or value is None:
        raise RecipeError(f"no flag of `benchharness train {method.name}` sets {name} to {value!r}")
    if isinstance(value, bool):
        if value:
            return [flag]
        return [meta.off_flag] if meta.off_flag else []
    return [flag, flag_text(value)]


def command_words(recipe: Recipe, **settings: Any) -> list[str]:
    """The arguments (after ``benchharness``) of the one ``train`` command that trains this recipe,
    with run-time ``settings`` (``out``, ``name``, ``device``...) as their flags."""
    words = ["train", recipe.method]
    flags = {k: v for k, v in settings.items() if v is not None}
    if recipe.name is not None:
        name = recipe.run_name
        if name != recipe.method:
            words += ["--recipe", name]
    else:
        words += ["--base", recipe.base]
        if recipe.preset:
            words += ["--preset", recipe.preset]
        flags = {**recipe.flags, **flags}
    if flags:  # the method's declaration (which imports its plugin) only when there are flags to render
        method = method_named(recipe.method)
        for dest, value in flags.items():
            words += _flag_words(method, dest, value)
    return words


def command(recipe: Recipe) -> str:
    """The one ``benchharness train`` command that trains this recipe."""
    return shlex.join(["benchharness", *command_words(recipe)])


def command_or_none(recipe: Recipe) -> str | None:
    """The command that trains this recipe, or None where no command can: a recipe made in Python
    with sentences held in memory, or with a value no flag sets (an option set back to None)."""
    from benchharness.training.train_data import IN_MEMORY

    if recipe.options.get("data") == IN_MEMORY:
        return None
    try:
        return command(recipe)
    except RecipeError:
        return None
