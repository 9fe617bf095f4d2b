"""What a checkpoint folder holds, and loading that refuses silent random stand-ins.

transformers does not fail on an incomplete checkpoint. It fills every weight the checkpoint lacks
with a random one, saying so only in a log line; and given a folder without vocabulary files it
builds a tokenizer that knows only the special tokens, so every word becomes [UNK], silently.
Three cases are refused here:

- no tokenizer (DefSent+ ships config and weights only): refused before loading, from the files;
- ``pooling=cls`` without pooler weights (paraphrase-MiniLM-L3-v2 and every ``*ForMaskedLM``
  checkpoint have no pooler): refused before loading, from the names in the weight files;
- missing encoder weights (a checkpoint of an architecture other than its config declares, whose
  prefix transformers does not strip): refused on the loading report.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.errors import InvalidInputError, MissingFileError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

#: weight files in the order transformers prefers them
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)

#: files that carry a tokenizer's vocabulary (fast, WordPiece, BPE, SentencePiece)
VOCABULARY_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)

#: the pooler's parameters, relative to the base model (``bert.`` / ``roberta.`` prefixes vary)
POOLER_PREFIX = "pooler."
POOLER_WEIGHT = "pooler.dense.weight"


def weights_file(folder: Path) -> Path:
    """The weight file transformers would load from ``folder``."""
    for name in WEIGHT_FILES:
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    raise MissingFileError(f"no weight file ({', '.join(WEIGHT_FILES)}) in {folder}")


def checkpoint_keys(folder: Path) -> set[str]:
    """Parameter names stored in a checkpoint, read without loading the tensors.

    safetensors and index files are read from their headers; a ``pytorch_model.bin`` is memory
    mapped (pickled in the legacy format it is read whole, there is no other way).
    """
    path = weights_file(folder)
    if path.name.endswith(".index.json"):
        try:
            return set(json.loads(path.read_text())["weight_map"])
        except (json.JSONDecodeError, KeyError) as exc:
            raise InvalidInputError(f"{path}: not a weight index (no valid 'weight_map': {exc})") from None
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), "np") as fh:
            return set(fh.keys())
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # saved before torch 1.6's zip format: cannot be mapped
        state = torch.load(path, map_location="cpu", weights_only=True)
    return set(state)


def has_pooler(folder: Path) -> bool:
    return any(k == POOLER_WEIGHT or k.endswith("." + POOLER_WEIGHT) for k in checkpoint_keys(folder))


def refuse_random_pooler(folder: Path, pooling: str, model: str) -> None:
    """Raise when ``pooling='cls'`` would read a pooler the checkpoint does not have."""
    if pooling != "cls" or has_pooler(folder):
        return
    raise InvalidInputError(
        f"pooling 'cls' on {model}: 'cls' is the output of BERT's pooler (a trained dense+tanh layer "
        f"over [CLS]), but {weights_file(folder)} holds no pooler weights ({POOLER_WEIGHT}), so "
        "transformers would initialise that layer at random and every vector would depend on the "
        "random seed. Use pooling=cls_before_pooler for the [CLS] hidden state itself, or avg."
    )


def refuse_missing_tokenizer(folder: Path, model: str) -> None:
    """Raise when ``folder`` has no vocabulary (transformers would silently map every word to [UNK])."""
    if any((Path(folder) / name).is_file() for name in VOCABULARY_FILES):
        return
    raise InvalidInputError(
        f"{model} ships no tokenizer ({Path(folder)} has none of {', '.join(VOCABULARY_FILES)}); "
        "transformers would build one that maps every word to [UNK]. Name the model whose tokenizer "
        "it was trained with: tokenizer=<hub id or folder> (for DefSent+, its base model)."
    )


#: the transformers module that logs the load report (which weights were missing, unexpected or
#: mismatched) and, in older releases, its "newly initialized" warnings
LOAD_REPORT_LOGGER = "transformers.modeling_utils"


class _ToDebug(logging.Filter):
    """Stops transformers' loading messages and logs them again at DEBUG under this module."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING:
            return True
        logger.debug("%s", record.getMessage())
        return False


def _silent_bar(previous: Callable[..., Any] | None) -> Callable[..., Any]:
    """A tqdm hook that creates every bar disabled, chained to the hook that was set before."""

    def hook(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        kwargs = {**kwargs, "disable": True}
        return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

    return hook


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' weight-loading (and -saving) progress bars and load reports kept off the console.

    The report transformers logs lists weights it initialised at random; the harness checks them
    itself (``load_complete`` refuses any but the pooler, and ``refuse_random_pooler`` keeps
    ``pooling=cls`` away from a missing one), so the report only repeats, at length, what is either
    refused in one line or unused; it goes to this module's DEBUG log instead.

    Neither transformers' nor huggingface_hub's verbosity or progress-bar switches are touched: a
    library call must leave the process's logging as it found it. Both the filter on
    transformers' loading logger and the bar hook are scoped to the block, whatever it raises; while
    the block runs they apply to every thread (transformers keeps both process-wide).
    """
    from transformers.utils import logging as hf_logging

    report = logging.getLogger(LOAD_REPORT_LOGGER)
    to_debug = _ToDebug()
    set_hook = getattr(hf_logging, "set_tqdm_hook", None)  # transformers >= 5: "Loading weights" bars
    previous = None
    report.addFilter(to_debug)
    try:
        if set_hook is not None:
            previous = set_hook(None)
            set_hook(_silent_bar(previous))
        yield
    finally:
        report.removeFilter(to_debug)
        if set_hook is not None:
            set_hook(previous)


def load_complete(folder: Path, model: str) -> PreTrainedModel:
    """``AutoModel`` from ``folder``, refusing any encoder weight the checkpoint does not hold.

    The one loader of transformers weights: the ``hf`` family, the published checkpoints and
    converted archives (``hf`` encoders too) and every training base (``methods.base_model``).
    Only the pooler may be missing (a ``*ForMaskedLM`` checkpoint has none, and
    ``refuse_random_pooler`` keeps ``pooling=cls`` away from it); the prediction heads of such a
    checkpoint are the expected unused weights and are dropped.
    """
    from transformers import AutoModel

    with quiet_loading():  # the load report is checked below instead of printed
        loaded, info = AutoModel.from_pretrained(str(folder), output_loading_info=True)
    missing = sorted(k for k in info["missing_keys"] if not k.startswith(POOLER_PREFIX))
    if missing or info.get("mismatched_keys"):
        shown = missing or [str(k) for k in info["mismatched_keys"]]
        raise InvalidInputError(
            f"{model}: {len(shown)} encoder weights of {type(loaded).__name__} are missing from or "
            f"mismatched in {weights_file(folder)} ({', '.join(shown[:5])}{', ...' if len(shown) > 5 else ''}); "
            "transformers would initialise them at random. The checkpoint is not the architecture its "
            "config.json declares, or it is damaged: download it again."
        )
    return loaded
