"""Ways to run a transformer's forward pass, behind one interface.

* ``eager``: PyTorch as is, the default. It is the reference every other backend is checked
  against, and no other backend was clearly faster end to end (below).
* ``compile``: ``torch.compile`` with dynamic shapes; its compile time is paid in every process.
* ``onnx``: the model exported with ``torch.onnx.export`` (dynamic batch and length axes) and run
  by ONNX Runtime; needs ``pip install onnxruntime onnx onnxscript``. Export happens once per
  encoder object, into a temporary folder.

``benchmarks/backends.py`` on an idle 2-core AMD EPYC without AVX-512 (2026-11-22, minilm-l6,
2,000 STS sentences, 28,437 tokens, 4096-token batches, 2 threads, variants interleaved batch by
batch): onnx takes 0.88x eager's wall time plus 12.5 s of export and session setup, vectors within
2.8e-7 of eager and of ``SentenceTransformer.encode``. On the STS suite (~75 s of eager forward
passes for minilm-l6) that saves about 9 s and pays 12.5 s, so ONNX Runtime stays opt-in.
``compile`` was slower than eager even before its compilation (measured on a loaded machine; not
retaken idle).

Each backend takes a batch of equal-length rows (the inference engine never pads, so there is no
attention mask to pass) and returns an object with ``last_hidden_state`` (and ``hidden_states``
when asked and supported). ``EXACT_TOLERANCE`` is the line between an implementation detail and a
different encoder: a backend whose vectors can move more than that is recorded in the identity.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from benchharness.core.errors import InvalidInputError
from benchharness.encoders import first_token

if TYPE_CHECKING:
    import torch

#: batch tensors of one forward pass, by the model's input names (input_ids, token_type_ids...).
Features = dict[str, "torch.Tensor"]
#: largest output change (max abs, on unit-scale vectors) that keeps an encoder's identity.
EXACT_TOLERANCE = 1e-5


class Backend(ABC):
    """Runs ``model`` (a transformers ``PreTrainedModel``) on one batch of model inputs."""

    name: str
    #: whether vectors can differ from eager PyTorch by more than EXACT_TOLERANCE (then the backend
    #: joins the encoder's identity); set from the measured differences in benchmarks/backends.py.
    changes_outputs: bool = False
    #: whether the backend can return every layer's hidden states (poolings avg_top2, avg_first_last).
    gives_hidden_states: bool = True

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    @abstractmethod
    def __call__(self, features: Features, output_hidden_states: bool = False) -> Any:
        """Model outputs for ``features`` (input_ids and the tokenizer's other per-token inputs)."""


def _model_inputs(features: Features) -> Features:
    # Rows of one batch have equal length, so the attention mask is all ones: leaving it out is
    # the same computation, and lets attention skip the mask addition.
    return {k: v for k, v in features.items() if k != "attention_mask"}


class EagerBackend(Backend):
    """PyTorch as is; for a pooling that reads the first position only (``first_token``), the last
    layer is computed there alone where the model allows it (``benchharness.encoders.first_token``)."""

    name = "eager"

    def __init__(self, model: torch.nn.Module, first_token: bool = False) -> None:
        super().__init__(model)
        self.first_token = first_token

    def __call__(self, features: Features, output_hidden_states: bool = False) -> Any:
        if self.first_token and not output_hidden_states and first_token.supported(self.model):
            return first_token.outputs(self.model, _model_inputs(features))
        return self.model(**_model_inputs(features), output_hidden_states=output_hidden_states)


class CompiledBackend(Backend):
    """``torch.compile(dynamic=True)``: one compiled graph serves every batch shape."""

    name = "compile"

    def __init__(self, model: torch.nn.Module) -> None:
        import torch

        super().__init__(model)
        self._compiled = torch.compile(model, dynamic=True)

    def __call__(self, features: Features, output_hidden_states: bool = False) -> Any:
        return self._compiled(**_model_inputs(features), output_hidden_states=output_hidden_states)


class _LastHiddenState:
    """The transformer as a function of its token inputs only, returning the last layer: the
    graph an ONNX export needs (no optional flags, one tensor out)."""

    def __init__(self, model: torch.nn.Module, input_names: tuple[str, ...]) -> None:
        self.model, self.input_names = model, input_names

    def module(self) -> torch.nn.Module:
        import torch

        model, names = self.model, self.input_names

        class Wrapper(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
                return self.model(**dict(zip(names, inputs))).last_hidden_state

        return Wrapper().eval()


class OnnxBackend(Backend):
    """ONNX Runtime on an export of the model, made at the first batch (its input names are the
    tokenizer's). Only the last hidden state is exported."""

    name = "onnx"
    gives_hidden_states = False

    def __init__(self, model: torch.nn.Module) -> None:
        try:
            import onnxruntime  # noqa: F401  (fail at construction, not at the first batch)
        except ImportError:
            raise ImportError("backend=onnx needs ONNX Runtime: pip install onnxruntime onnx onnxscript") from None
        super().__init__(model)
        self._session: Any = None  # an onnxruntime InferenceSession, made at the first batch
        self._input_names: tuple[str, ...] = ()
        self._folder = tempfile.TemporaryDirectory(prefix="benchharness-onnx-")

    def _export(self, features: Features) -> None:
        import onnxruntime as ort
        import torch

        self._input_names = tuple(features)
        path = Path(self._folder.name) / "model.onnx"
        wrapper = _LastHiddenState(self.model, self._input_names).module()
        example = tuple(features[k] for k in self._input_names)
        batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
        torch.onnx.export(
            wrapper,
            example,
            str(path),
            input_names=list(self._input_names),
            output_names=["last_hidden_state"],
            dynamic_shapes=(tuple({0: batch, 1: length} for _ in example),),
            dynamo=True,
            optimize=True,
            verbose=False,
        )
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, features: Features, output_hidden_states: bool = False) -> Any:
        import torch

        if output_hidden_states:
            raise InvalidInputError(
                "backend=onnx exports only the last hidden state; use backend=eager for this pooling"
            )
        inputs = _model_inputs(features)
        if self._session is None:
            self._export(inputs)
        if tuple(inputs) != self._input_names:
            raise InvalidInputError(f"backend=onnx was exported for inputs {self._input_names}, got {tuple(inputs)}")
        feed = {k: v.cpu().numpy() for k, v in inputs.items()}
        (last,) = self._session.run(["last_hidden_state"], feed)
        return SimpleNamespace(
            last_hidden_state=torch.from_numpy(last).to(inputs["input_ids"].device),
            hidden_states=None,
            pooler_output=None,
        )


BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (EagerBackend, CompiledBackend, OnnxBackend)}


def make_backend(name: str, model: torch.nn.Module, first_token: bool = False) -> Backend:
    """The backend ``name`` on ``model``; ``first_token``: the pooling reads only the first position
    of the last layer (the eager backend then computes no more of that layer)."""
    if name not in BACKENDS:
        raise InvalidInputError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == EagerBackend.name:
        return EagerBackend(model, first_token)
    return BACKENDS[name](model)


#: sentence-transformers' own ``encode`` (for ``hf:``, padded batches of character-length-sorted
#: sentences): the path the stored scores were first computed with, kept as ``backend=reference``
#: for checking the engine against it.
REFERENCE = "reference"

#: The engine with eager PyTorch is the default at every precision: it is the faster path
#: (minilm-l6, STS suite, cold, end to end: see benchmarks/sts_vs_sentence_transformers.py) and
#: keeps every identity, since its vectors are within ~1e-7 of the reference. Those ~1e-7 reorder
#: the tied cosines of identical-sentence pairs, which moves a few subset Spearmans (STS12
#: surprise.SMTnews) by up to 0.087 (``benchharness.evaluation.verify.ENGINE_DEVIATION``): float noise within
#: ``benchharness.evaluation.verify.TOLERANCE``; main scores move by at most 0.01.
DEFAULT_BACKEND = "eager"


def changes_outputs(backend: str) -> bool:
    """Whether ``backend`` moves vectors past 1e-5 from the reference path, so that the encoder's
    identity must name it (the reference path itself never does)."""
    return backend != REFERENCE and BACKENDS[backend].changes_outputs


def check_backend(backend: str) -> str:
    if backend != REFERENCE and backend not in BACKENDS:
        raise InvalidInputError(f"unknown backend {backend!r}; choose one of {REFERENCE}, {', '.join(BACKENDS)}")
    return backend
