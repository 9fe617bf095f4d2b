"""The resolver of one run's settings: encoders built by name, through the run's embedding cache
and, for ``encode_actors``, its pools of Ray actors. Shared by ``evaluate``, the sweep's workers and
the actors themselves, so that every process builds an encoder the same way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchharness.core.data_root import DataRoot
from benchharness.core.encoder import Encoder
from benchharness.core.kinds import DENSE
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import RunSettings


def resolver_for(settings: RunSettings, data: DataRoot, cache: Any = None, pools: Any = None) -> Resolver:
    """The resolver of a run with these settings: its encoders go through ``cache`` (the run's one
    ``EmbeddingCache``) when there is one, base encoders' missing chunks through ``pools``."""
    return Resolver(
        wrap=None if cache is None else caching(cache, pools),
        train_missing=settings.train,
        settings=settings.but(data_dir=data.root, verify_data=data.verify),
    )


def cache_at(cache_dir: str | Path) -> Any:
    from benchharness.evaluation.cache import EmbeddingCache

    return EmbeddingCache(Path(cache_dir))


def caching(cache: Any, pools: Any = None) -> Callable[[Encoder], Encoder]:
    """Wraps each dense encoder in the cache (but one that says it is not ``cacheable``); a model of
    another kind caches its own outputs through its kind's view (``evaluation.kinds.outputs``). A
    post-processor's rows are computed from its base's, so only base encoders encode through the
    pools."""
    from benchharness.encoders.postprocess.fitting import PostProcessor
    from benchharness.evaluation.cache import CachingEncoder

    def wrap(encoder: Encoder) -> Encoder:
        if not encoder.cacheable or encoder.model_kind != DENSE:
            return encoder
        chunks = None if pools is None or isinstance(encoder, PostProcessor) else pools.for_encoder(encoder)
        return CachingEncoder(encoder, cache, encode_chunks=chunks)

    return wrap
