"""The settings of one run, as one frozen value.

``benchharness run`` builds it from its arguments and ``benchharness.evaluate`` from its keywords;
the runner, the resolver, the Ray sweep's workers and the encoding actors all receive this one
value (it pickles), so no option is renamed, defaulted or dropped on the way down. The
configuration travels inside it (``config``): read once where the value is made, never below.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.results import OVERWRITE
from benchharness.core.settings import Config, HubSettings, load_config

#: SentEval's seed, used by every task that draws random numbers
DEFAULT_SEED = 1111
#: an encoder's vectors larger than this (MiB) are written to a file and read back a block at a time
DEFAULT_MEMORY_MIB = 4096


@dataclass(frozen=True)
class RunSettings:
    """How a run evaluates, where it reads and whether (and where) it stores.

    ``results_dir`` None: results are returned only, nothing is stored or reused. ``cache_dir`` None:
    no embedding is cached. ``data_dir`` None: the configured data root. ``config``: the
    configuration (benchharness.toml), read when the value is made without one. ``show_progress``: progress
    bars (the command line turns them on). ``intervals=False`` skips bootstrap intervals (a training
    loop's frequent evaluations). ``encode_actors`` encodes what the cache lacks with that many Ray
    actors at ``ray_address`` (or a local Ray).
    """

    device: str | None = None
    batch_size: int | None = None
    seed: int = DEFAULT_SEED
    overwrite: str = "reuse"
    results_dir: Path | None = None
    cache_dir: Path | None = None
    data_dir: Path | None = None
    verify_data: bool = True
    train: bool = True
    add_items: bool = False
    show_progress: bool = False
    intervals: bool = True
    embedding_memory_mib: float = DEFAULT_MEMORY_MIB
    encode_actors: int = 0
    ray_address: str | None = None
    config: Config = field(default_factory=load_config, repr=False)

    def __post_init__(self) -> None:
        for key in ("results_dir", "cache_dir", "data_dir"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, key, Path(value))
        if self.overwrite not in OVERWRITE:
            raise InvalidInputError(f"overwrite={self.overwrite!r}: must be one of {', '.join(OVERWRITE)}")
        if self.batch_size is not None and (
            isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1
        ):
            raise InvalidInputError(f"batch_size={self.batch_size!r}: must be a positive integer")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise InvalidInputError(f"seed={self.seed!r}: must be a non-negative integer")
        if not self.embedding_memory_mib > 0:
            raise InvalidInputError(f"embedding_memory_mib={self.embedding_memory_mib!r}: must be positive")
        if self.encode_actors < 0:
            raise InvalidInputError(f"encode_actors={self.encode_actors!r}: must be 0 or more")
        if self.encode_actors and self.cache_dir is None:
            raise InvalidInputError(
                "encode_actors fills the embedding cache; give a cache folder too (cache_dir=, or leave out --no-cache)"
            )

    def data(self, verify: bool | None = None) -> DataRoot:
        """The run's data root (``data_dir``, else the configured one), checked as ``verify_data`` says."""
        return DataRoot(self.config.data_root(self.data_dir), self.verify_data if verify is None else verify)

    @property
    def hub(self) -> HubSettings:
        """Where the run finds Hugging Face models, and whether it may download them."""
        return self.config.hub()

    def but(self, **changes: object) -> RunSettings:
        """A copy with ``changes`` (checked like the original)."""
        return replace(self, **changes)  # type: ignore[arg-type]
