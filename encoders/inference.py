"""The transformer encoding loop shared by the ``hf:`` and ``st:`` encoders.

Sentences are tokenized once, with the model's fast tokenizer and its truncation, and grouped by
their exact token length; each group is cut into batches of at most ``token_budget`` tokens. A
batch of equal-length sentences needs no padding, so its attention mask is all ones and no FLOP is
spent on pad tokens, and every batch holds about the same number of tokens, which keeps the
matrix products large (a fixed sentence count gives tiny products for short sentences and huge
ones for long sentences). Pooling stays with the caller, so each encoder family keeps its own
definition of a sentence vector; rows come back in input order.

Vectors differ from padded batching only in the last float bits (the same sums in another order),
well under the 1e-5 that would require a new encoder identity. A batch that does not fit in the
device's memory is split and the batches after it capped (``_BatchCap``), with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from benchharness.core.cpu_share import shared_threads
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import shown
from benchharness.encoders.backends import Backend, Features, make_backend

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

#: tokens per batch for each unit of an encoder's ``batch_size``: the default batch_size 64 gives
#: 4096-token batches, large enough for matrix products near sgemm peak, small enough that
#: activations (tokens x intermediate size x 4 bytes, 25 MiB for MiniLM) stay near the 32 MiB L3.
#: batch_size keeps its meaning as the memory knob: halving it halves the largest batch.
#: ``benchmarks/backends.py --budgets`` (minilm-l6, 1,000 STS sentences, loaded 2-core machine)
#: found 1024-8192 within noise of each other: speed-up over ``SentenceTransformer.encode`` 1.40x,
#: 1.37x, 1.32x, 1.15x with one thread, while with two threads 4096 led 2048 by 6%.
TOKENS_PER_SENTENCE = 64
TOKEN_BUDGET = 64 * TOKENS_PER_SENTENCE


def token_batches(lengths: Sequence[int] | np.ndarray, token_budget: int = TOKEN_BUDGET) -> Iterator[np.ndarray]:
    """Index batches in which every sentence has the same token length and the tokens number at
    most ``token_budget`` (a sentence longer than the budget forms a batch on its own).

    Longest first, so an out-of-memory error surfaces in the first batch rather than the last;
    within a length, input order.
    """
    if token_budget < 1:
        raise InvalidInputError(f"token_budget must be a positive number of tokens, got {token_budget}")
    sizes = np.asarray(lengths, dtype=np.int64)
    if not len(sizes):
        return
    order = np.argsort(-sizes, kind="stable")
    starts = np.flatnonzero(np.diff(sizes[order], prepend=-1))
    for group in np.split(order, starts[1:]):
        per_batch = max(1, token_budget // max(1, int(sizes[group[0]])))
        for start in range(0, len(group), per_batch):
            yield group[start : start + per_batch]


#: texts per tokenizer call: the fast tokenizer's per-text objects (offsets, token strings) live
#: until a call returns, so one call over a whole suite held ~100 MB at once
TOKENIZE_CHUNK = 2048


@dataclass(frozen=True)
class Tokens:
    """Every text's token ids (and the tokenizer's other per-token inputs), unpadded: one flat int32
    array per input name, with each text's length (its start follows from the lengths).

    Compact on purpose: nested lists of Python ints cost ~40 bytes a token, ~100 MB for the STS
    suite's 376,361 tokens, against 1.5 MB here; and an equal-length batch is one vectorised
    gather (``batch``) instead of a Python loop over rows.
    """

    flat: dict[str, np.ndarray]
    lengths: np.ndarray

    @cached_property
    def starts(self) -> np.ndarray:
        """Where each text's ids begin in ``flat``."""
        return np.cumsum(self.lengths) - self.lengths

    @classmethod
    def from_rows(cls, rows: dict[str, list[list[int]]]) -> Tokens:
        """From per-text id lists, as a tokenizer returns them (every input name has the same lengths)."""
        lengths = np.array([len(r) for r in rows["input_ids"]], dtype=np.int64)
        flat = {
            key: np.fromiter(chain.from_iterable(values), dtype=np.int32, count=int(lengths.sum()))
            for key, values in rows.items()
        }
        return cls(flat, lengths)

    @classmethod
    def concatenate(cls, parts: Sequence[Tokens]) -> Tokens:
        if not parts:
            return cls({"input_ids": np.zeros(0, np.int32)}, np.zeros(0, np.int64))
        return cls(
            {key: np.concatenate([p.flat[key] for p in parts]) for key in parts[0].flat},
            np.concatenate([p.lengths for p in parts]),
        )

    def __len__(self) -> int:
        return len(self.lengths)

    def row(self, key: str, i: int) -> list[int]:
        return self.flat[key][self.starts[i] : self.starts[i] + self.lengths[i]].tolist()

    def batch(self, key: str, idx: np.ndarray) -> np.ndarray:
        """The ``(len(idx), length)`` ids of texts that all have the same length."""
        length = int(self.lengths[idx[0]])
        return self.flat[key][self.starts[idx][:, None] + np.arange(length)]


def tokenize(tokenizer, texts: Sequence[str], max_length: int | None) -> Tokens:
    """Token ids (and the tokenizer's other per-token inputs) of every text, unpadded.

    Truncation is the tokenizer's own (``longest_first`` to ``max_length``), exactly what a padded
    batch call would produce row by row; the attention mask is left out because unpadded rows are
    all ones.
    """
    texts = list(texts)
    return Tokens.concatenate(
        [
            Tokens.from_rows(
                dict(
                    tokenizer(
                        texts[i : i + TOKENIZE_CHUNK],
                        truncation=True,
                        max_length=max_length,
                        padding=False,
                        return_attention_mask=False,
                    )
                )
            )
            for i in range(0, len(texts), TOKENIZE_CHUNK)
        ]
    )


def batch_features(tokens: Tokens, idx: np.ndarray, device: torch.device) -> Features:
    """The model inputs of one equal-length batch, with its (all-ones) attention mask."""
    import torch

    feats = {key: torch.from_numpy(tokens.batch(key, idx)).long() for key in tokens.flat}
    feats["attention_mask"] = torch.ones_like(feats["input_ids"])
    return {key: value.to(device) for key, value in feats.items()}


def encode_tokens(
    tokens: Tokens,
    run_batch: Callable[[Features], torch.Tensor],
    device: torch.device,
    token_budget: int = TOKEN_BUDGET,
    progress: Callable[[Iterator[np.ndarray], int], Iterator[np.ndarray]] | None = None,
) -> np.ndarray:
    """Run ``run_batch`` (model forward plus pooling, returning one vector per row) over token
    batches and return float32 vectors in input order."""
    import torch

    batches = list(token_batches(tokens.lengths, token_budget))
    out: np.ndarray | None = None
    fits = _BatchCap()

    def forward(rows: np.ndarray) -> torch.Tensor:
        return run_batch(batch_features(tokens, rows, device))

    with torch.inference_mode(), shared_threads(device) as threads:
        for idx in progress(iter(batches), len(batches)) if progress else batches:
            threads.adjust()  # cores a busy neighbour holds are given back: see core.cpu_share
            for part, vecs in fits.run(idx, int(tokens.lengths[idx[0]]), forward):
                if out is None:
                    out = np.empty((len(tokens), vecs.shape[1]), dtype=np.float32)
                out[part] = vecs
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


class _BatchCap:
    """Out-of-memory back-off: a batch that does not fit on the device is split in halves and each
    half run alone, and the sentences per batch are capped at what fitted for the rest of the
    encoding. Every sentence still gets its vector from one whole forward pass of its own batch
    (equal-length batches need no padding, so a smaller batch computes the same vectors); what the
    failed pass computed is dropped. Said once per encoding, in one line; a single sentence that
    does not fit is the out-of-memory error itself."""

    def __init__(self) -> None:
        self.cap: int | None = None  # sentences per batch, once a batch did not fit

    def run(
        self, idx: np.ndarray, length: int, forward: Callable[[np.ndarray], torch.Tensor]
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        import torch

        pending = [idx[start : start + self.cap] for start in range(0, len(idx), self.cap)] if self.cap else [idx]
        while pending:
            part = pending.pop(0)
            try:
                vecs = forward(part).float().cpu().numpy()
            except torch.OutOfMemoryError:
                if len(part) == 1:
                    raise
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()  # the failed pass's activations
                half = (len(part) + 1) // 2
                if self.cap is None:
                    logger.warning(
                        "out of device memory on a batch of %d sentences of %d tokens: running batches of at most "
                        "%d sentences from here on (lower batch_size to start there)",
                        len(part),
                        length,
                        half,
                    )
                self.cap = half if self.cap is None else min(self.cap, half)
                pending[:0] = [part[:half], part[half:]]
                continue
            yield part, vecs


class TransformerEngine:
    """Tokenize once, batch by exact token length, run a backend, hand each batch to ``pool``.

    ``pool(outputs, features)`` turns the model outputs of one batch into sentence vectors; it is
    the encoder family's own definition (``benchharness.encoders.pooling`` for ``hf:``, the sentence-transformers
    modules for ``st:``).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        max_length: int | None,
        device: torch.device,
        precision: str = "fp32",
        backend: str = "eager",
        token_budget: int = TOKEN_BUDGET,
        first_token: bool = False,
    ) -> None:
        self.tokenizer, self.max_length, self.device = tokenizer, max_length, device
        self.precision, self.token_budget = precision, int(token_budget)
        self.backend: Backend = make_backend(backend, model, first_token)

    def encode(
        self,
        texts: Sequence[str],
        pool: Callable[[Any, Features], torch.Tensor],
        output_hidden_states: bool = False,
        desc: str = "encode",
    ) -> np.ndarray:
        return self.encode_tokens(tokenize(self.tokenizer, texts, self.max_length), pool, output_hidden_states, desc)

    def encode_tokens(
        self,
        tokens: Tokens,
        pool: Callable[[Any, Features], torch.Tensor],
        output_hidden_states: bool = False,
        desc: str = "encode",
    ) -> np.ndarray:
        """``encode`` of texts tokenized beforehand (``tokenize``): a caller that encodes the same
        texts again and again (a dev evaluation during training) tokenizes them once."""
        from tqdm.auto import tqdm

        from benchharness.core.devices import autocast

        def run_batch(features: Features) -> torch.Tensor:
            with autocast(self.device, self.precision):
                outputs = self.backend(features, output_hidden_states=output_hidden_states)
            return pool(outputs, features)

        def progress(batches: Iterator[np.ndarray], total: int) -> Iterator[np.ndarray]:
            return tqdm(batches, total=total, desc=desc, disable=not shown(), unit="batch")

        return encode_tokens(tokens, run_batch, self.device, self.token_budget, progress)
