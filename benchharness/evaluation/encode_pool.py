"""Sharded encoding: the chunks the embedding cache lacks, encoded by a pool of Ray actors.

One actor per GPU or CPU slot builds the encoder from its name, as the driver resolves it, and
refuses to start if the identity it computes differs from the driver's (another model, other
weights or another data file under the same name on that node): vectors of another model must
never enter this cache. The driver hands out chunks in the cache's longest-first order and takes
the vectors back in that order, so it stays the cache's only writer (SQLite's WAL, which the cache
relies on, does not work over a network file system) and every chunk holds the rows a single
process would have encoded, bit for bit on the same hardware. An actor that dies is restarted and
the calls it had in flight are retried: at most the chunks in flight are encoded again.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.errors import UserError
from benchharness.core.prompts import DEFAULT, Role
from benchharness.evaluation.ray_cluster import enter_driver_folder, ray_session, slot
from benchharness.evaluation.run_settings import RunSettings

#: restarts of a dead actor, and retries of the calls it had in flight
RETRIES = 3
#: chunks in flight per actor: one encoding, one waiting, so an actor never idles between chunks
IN_FLIGHT = 2

#: what a pool gives the cache: chunks of sentences in, their vectors out, in order
EncodeChunks = Callable[[Iterable[list[str]], Role], Iterator[np.ndarray]]


class IdentityMismatchError(UserError):
    """An actor built a different encoder under the driver's name."""


class EncoderActor:
    """Holds one encoder built from its name; made a Ray actor by ``ActorPools``."""

    def __init__(self, name: str, settings: RunSettings, folder: str, identity: str) -> None:
        from benchharness.evaluation.run_resolver import resolver_for

        enter_driver_folder(folder)
        data = settings.data(verify=False)
        self.encoder = resolver_for(settings.but(train=False), data).get(name)
        if self.encoder.identity != identity:
            raise IdentityMismatchError(
                f"the Ray actor on {os.uname().nodename} (pid {os.getpid()}) builds {name!r} with identity "
                f"{self.encoder.identity}, the driver's is {identity}: refusing to encode with it (another model, "
                "other weights or another data file under that name on this node?)"
            )

    def ready(self) -> str:
        return self.encoder.identity

    def encode(self, sentences: list[str], role: Role = DEFAULT) -> np.ndarray:
        return np.asarray(self.encoder.encode_role(sentences, role), dtype=np.float32)


class Pool:
    """The actors of one encoder; ``__call__`` maps chunks to vectors, in order."""

    def __init__(self, ray: Any, actors: list[Any]) -> None:
        self.ray, self.actors = ray, actors

    def __call__(self, chunks: Iterable[list[str]], role: Role = DEFAULT) -> Iterator[np.ndarray]:
        pending: collections.deque = collections.deque()
        for turn, chunk in enumerate(chunks):
            if len(pending) >= IN_FLIGHT * len(self.actors):
                yield self.ray.get(pending.popleft())
            pending.append(self.actors[turn % len(self.actors)].encode.remote(chunk, role))
        while pending:
            yield self.ray.get(pending.popleft())


class ActorPools:
    """Pools of ``actors`` actors per encoder, started on first need (a run the cache serves starts
    no Ray at all) and stopped, with the Ray session this opened, on ``close``."""

    def __init__(self, settings: RunSettings) -> None:
        self.actors, self.settings, self.address = settings.encode_actors, settings, settings.ray_address
        self._session: Any = None
        self._ray: Any = None
        self._pools: dict[str, Pool] = {}

    def for_encoder(self, encoder: Encoder) -> EncodeChunks:
        """What encodes ``encoder``'s missing chunks: its pool, made when first called."""

        def encode(chunks: Iterable[list[str]], role: Role = DEFAULT) -> Iterator[np.ndarray]:
            return self._pool(encoder)(chunks, role)

        return encode

    def _pool(self, encoder: Encoder) -> Pool:
        if encoder.name in self._pools:
            return self._pools[encoder.name]
        if self._ray is None:
            self._session = ray_session(self.address)
            self._ray = self._session.__enter__()
        ray = self._ray
        kind = "GPU" if slot(ray).get("num_gpus") else "CPU"
        slots = int(ray.cluster_resources().get(kind, 0))
        if self.actors > slots:  # the actors beyond the slots would wait for one forever
            raise UserError(
                f"--encode-actors {self.actors}: the Ray cluster has {slots} {kind} slot(s); ask for at most {slots}"
            )
        remote = ray.remote(max_restarts=RETRIES, max_task_retries=RETRIES, **slot(ray))(EncoderActor)
        actors = [remote.remote(encoder.name, self.settings, os.getcwd(), encoder.identity) for _ in range(self.actors)]
        try:
            ray.get([a.ready.remote() for a in actors])
        except Exception as exc:
            for actor in actors:
                ray.kill(actor)
            cause = getattr(exc, "cause", None) or exc
            if isinstance(cause, IdentityMismatchError) or "IdentityMismatchError" in str(exc):
                raise IdentityMismatchError(str(cause).strip().splitlines()[-1]) from None
            raise
        self._pools[encoder.name] = Pool(ray, actors)
        return self._pools[encoder.name]

    def close(self) -> None:
        for pool in self._pools.values():
            for actor in pool.actors:
                self._ray.kill(actor)
        self._pools.clear()
        if self._session is not None:
            self._session.__exit__(None, None, None)
            self._session = self._ray = None
