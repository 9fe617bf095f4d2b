"""The configuration file: the one named (``--config FILE``, ``config=``, ``$BENCHHARNESS_CONFIG``), else
``benchharness.toml`` in the working directory or a parent (a project's own), else the per-user
``$XDG_CONFIG_HOME/benchharness/config.toml`` (``~/.config/...``); without any, the defaults. The
first found gives everything; the per-user file, when it is not that one, adds its ``[tasks.*]``
beneath (``load_config``), so that one's own tasks are declared once, outside any checkout.

It holds the paths of this installation (data root, results, embedding cache, the Hugging Face
cache and whether to stay offline), user-registered encoders and tasks declared from files::

    [paths]
    data_dir = "../shared/data"        # relative paths are relative to this file
    hf_hub_cache = "../shared/hf/hub"
    hf_offline = true

    [encoders.bert-avg]
    spec = "hf:bert-base-uncased?pooling=avg"
    description = "BERT-base, mean of the last layer"

    [tasks.my-pairs]
    file = "data/pairs.tsv"            # relative to this file
    kind = "pairs"                     # or "labels", "reranking"; "retrieval" names a folder = "..."

Relative paths are relative to the file that names them, except that results go to ``./results``
of the working directory when the configuration is the per-user one: a project's results stay in
the project, and a checkout's stored baselines are written only from inside the checkout.

Environment variables win over the file (``BENCHHARNESS_DATA``, ``HF_HUB_CACHE``,
``BENCHHARNESS_RUNS``...), so CI and users can point elsewhere without editing it.

Trained runs go outside the checkout by default (``$XDG_DATA_HOME/benchharness/runs``, else
``~/.local/share/benchharness/runs``), so every checkout of the machine shares them and a recipe
is trained once (``benchharness.training.runstore``); ``[paths] runs_dir`` or ``BENCHHARNESS_RUNS`` move them.

The configuration is read once, at the edge: by the command line (``--config`` is an argument), by
``benchharness.evaluate`` and ``benchharness.train`` (``config=``: a path or a loaded ``Config``), or
when a ``RunSettings`` is made without one. From there it travels as this frozen value, inside
``RunSettings``; nothing below reads the file again.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from benchharness.core.errors import InvalidInputError

CONFIG_NAME = "benchharness.toml"
CONFIG_ENV = "BENCHHARNESS_CONFIG"
#: the data root, above the configuration file
DATA_ENV = "BENCHHARNESS_DATA"
RUNS_ENV = "BENCHHARNESS_RUNS"
#: the protocol variants of tasks declared from files (``[tasks.*]``) start with this, so that their results
#: are told apart where the declaring configuration is not the one loaded (the leaderboard, ``export mteb``)
FILE_PROTOCOL_PREFIX = "file-"
#: a path setting's default: a path, or None where the setting may stay unset
_Default = TypeVar("_Default", bound=Path | None)


def user_config() -> Path:
    """The per-user configuration file, used when no project file is found."""
    home = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(home) / "benchharness" / "config.toml"


def default_runs_dir() -> Path:
    """Where trained runs live when the config file does not say: ``$BENCHHARNESS_RUNS``, else the
    per-user data folder."""
    if os.environ.get(RUNS_ENV):
        return Path(os.environ[RUNS_ENV]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "benchharness" / "runs"


def default_cache_dir() -> Path:
    """Where the embedding cache and the digest store live when the config file does not say."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "benchharness"


@dataclass(frozen=True)
class Config:
    file: Path | None = None
    data_dir: Path | None = None
    results_dir: Path = Path("results")
    cache_dir: Path = field(default_factory=default_cache_dir)
    runs_dir: Path = field(default_factory=default_runs_dir)
    hf_hub_cache: Path | None = None
    hf_offline: bool = False
    encoders: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: tasks declared from files, by name (``file`` made absolute)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the configuration file declaring each of ``tasks`` (``file``, or the per-user file)
    task_files: dict[str, Path] = field(default_factory=dict)

    def data_root(self, given: str | Path | None = None) -> Path:
        """The data root: ``given``, else ``$BENCHHARNESS_DATA``, else ``[paths] data_dir``, else ``./data``."""
        if given is not None:
            return Path(given).expanduser()
        if os.environ.get(DATA_ENV):
            return Path(os.environ[DATA_ENV]).expanduser()
        return self.data_dir if self.data_dir is not None else Path("data")

    def hub(self) -> HubSettings:
        """The Hugging Face cache and offline mode of this configuration (``hub_settings``)."""
        return hub_settings(self)


def default_data_dir() -> Path:
    """The data root of a call given none: ``$BENCHHARNESS_DATA``, else ``./data`` (no file read)."""
    return Config().data_root()


def default_hub() -> HubSettings:
    """The Hugging Face settings of a call given none: the environment's, else huggingface_hub's
    defaults. Below the entry points no configuration file is read: a run passes its own down."""
    return Config().hub()


def configuration(config: Config | str | Path | None = None) -> Config:
    """The configuration an entry point runs with: ``config`` itself when loaded, the file it names,
    else the one ``find_config`` finds. The one place a library entry point reads the file."""
    if isinstance(config, Config):
        return config
    if config is not None:
        path = Path(config).expanduser()
        if not path.is_file():
            raise InvalidInputError(f"configuration file {path} (config=) does not exist")
        return load_config(path.resolve())
    return load_config()


def find_config(start: Path | None = None) -> Path | None:
    """``$BENCHHARNESS_CONFIG``, else ``benchharness.toml`` here or in a parent folder, else the
    per-user file, else None."""
    if os.environ.get(CONFIG_ENV):
        path = Path(os.environ[CONFIG_ENV]).expanduser()
        if not path.is_file():
            raise InvalidInputError(f"configuration file {path} (--config / ${CONFIG_ENV}) does not exist")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return user_config() if user_config().is_file() else None


def load_config(path: Path | None = None) -> Config:
    """The configuration ``path`` (else the one ``find_config`` finds) holds, with the per-user file's
    ``[tasks.*]`` added beneath it, or the defaults when there is no file. Called by the entry points
    only (``configuration``, the command line, ``RunSettings``): what it finds depends on the working
    directory and the environment at that moment, and the value it returns is what the rest of the
    call uses.

    One file gives the paths and encoders, the first found; tasks are a researcher's own data, so
    those declared in the per-user file are known in every project too (a name both declare is the
    nearer file's), without editing a checkout's tracked ``benchharness.toml``."""
    path = path or find_config()
    if path is None:
        return Config()
    config = _read(path)
    user = user_config()
    if user.is_file() and user.resolve() != path.resolve():
        mine = _read(user)  # read whole: a mistake in it is named whichever file comes first
        config = replace(
            config,
            tasks={**mine.tasks, **config.tasks},
            task_files={**mine.task_files, **config.task_files},
        )
    return config


def _read(path: Path) -> Config:
    """The configuration one file holds."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"{path}: invalid TOML: nested too deeply to read") from None
    _refuse_unknown(path, raw)
    base = path.parent
    paths = raw.get("paths", {})

    def rel(key: str, default: _Default) -> Path | _Default:
        value = paths.get(key)
        return (base / value).resolve() if value is not None else default

    defaults = Config()
    per_user = path == user_config()
    tasks = {}
    for name, entry in raw.get("tasks", {}).items():
        source = "folder" if isinstance(entry, dict) and "folder" in entry and "file" not in entry else "file"
        if not isinstance(entry, dict) or source not in entry:
            raise InvalidInputError(
                f'{path}: [tasks.{name}] needs a file = "..." (pairs, labelled sentences, '
                'reranking) or a folder = "..." (a BEIR retrieval folder)'
            )
        # made absolute, not resolved: the file keeps the name (and suffix) it is declared by, and a
        # symlink is checked where it is read (``data.readers.check_data_file``)
        tasks[name] = {**entry, source: os.path.abspath(base / Path(entry[source]).expanduser())}
    return Config(
        file=path,
        data_dir=rel("data_dir", None),
        results_dir=rel("results_dir", Path.cwd() / "results" if per_user else base / "results"),
        cache_dir=rel("cache_dir", defaults.cache_dir),
        runs_dir=Path(os.environ[RUNS_ENV]).expanduser()
        if os.environ.get(RUNS_ENV)
        else rel("runs_dir", default_runs_dir()),
        hf_hub_cache=rel("hf_hub_cache", None),
        hf_offline=bool(paths.get("hf_offline", False)),
        encoders=raw.get("encoders", {}),
        tasks=tasks,
        task_files=dict.fromkeys(tasks, path),
    )


TABLES = ("paths", "encoders", "tasks")
PATH_KEYS = ("data_dir", "results_dir", "cache_dir", "runs_dir", "hf_hub_cache", "hf_offline")


def _refuse_unknown(path: Path, raw: dict[str, Any]) -> None:
    """A misspelt table or key would otherwise be ignored without a word: one line naming the file,
    the table and the key, with the close match."""
    import difflib

    def refuse(where: str, key: str, known: tuple[str, ...]) -> None:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(known)}"
        raise InvalidInputError(f"{path}: unknown {where} {key!r}{hint}")

    for table in raw:
        if table not in TABLES:
            refuse("table", table, TABLES)
    if not isinstance(raw.get("paths", {}), dict):
        raise InvalidInputError(f"{path}: paths must be a table ([paths])")
    for key in raw.get("paths", {}):
        if key not in PATH_KEYS:
            refuse("key in [paths]", key, PATH_KEYS)


def offline_cache_missing(cfg: Config) -> bool:
    """True when the config describes an offline cache that this machine does not have.

    The committed config points at the shared cache beside the checkout and asks for offline
    mode; a clone anywhere else must not inherit that (every model lookup would fail, and the
    cache folder would be created empty), so it gets the normal Hugging Face hub behaviour.
    """
    return cfg.hf_offline and cfg.hf_hub_cache is not None and not cfg.hf_hub_cache.is_dir()


_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class HubSettings:
    """Where Hugging Face models are found and whether they may be downloaded.

    Library code passes these to every hub call (``cache_dir=``, ``local_files_only=``) instead
    of exporting ``HF_HUB_CACHE``/``HF_HUB_OFFLINE``: an export would outlive the call (a notebook
    that evaluated once in an offline project would stay offline), and huggingface_hub reads those
    variables once, at its import, so an export made later would not even be seen."""

    cache: Path
    offline: bool

    def kwargs(self) -> dict[str, Any]:
        """The arguments of ``snapshot_download``, ``hf_hub_download`` and ``from_pretrained`` of a hub id."""
        return {"cache_dir": str(self.cache), "local_files_only": self.offline}


def hub_settings(cfg: Config) -> HubSettings:
    """The Hugging Face cache and offline mode of this configuration.

    The environment wins, as it does for huggingface_hub itself (``HF_HUB_CACHE``, then the
    configured ``hf_hub_cache``, then ``$HF_HOME/hub``, ``~/.cache/huggingface/hub``;
    ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` when set, else ``hf_offline``). The configured
    cache and offline mode apply only where that cache exists (``offline_cache_missing``)."""
    usable = not offline_cache_missing(cfg)
    env_cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env_cache:
        cache = Path(env_cache)
    elif cfg.hf_hub_cache is not None and usable:
        cache = cfg.hf_hub_cache
    else:
        xdg_cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        cache = Path(os.environ.get("HF_HOME") or Path(xdg_cache) / "huggingface") / "hub"
    env_offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    offline = env_offline.strip().lower() in _TRUE if env_offline else cfg.hf_offline and usable
    return HubSettings(cache.expanduser(), offline)


def apply_environment(cfg: Config) -> None:
    """Export the Hugging Face settings for the whole process, before transformers or
    huggingface_hub are imported (they read them once, at import), without overriding the user's
    environment. For the owner of the process only (the command line, a benchmark script): library
    code passes ``hub_settings(config)`` to each call and leaves ``os.environ`` as it found it.

    Offline mode, and the cache it relies on, apply only where the configured cache exists."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if offline_cache_missing(cfg):
        return
    if cfg.hf_hub_cache is not None:
        os.environ.setdefault("HF_HUB_CACHE", str(cfg.hf_hub_cache))
    if cfg.hf_offline:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
