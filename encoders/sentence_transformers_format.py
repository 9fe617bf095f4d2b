"""A saved Hugging Face encoder made loadable by ``SentenceTransformer(path)``, pooled as evaluated.

A trained run keeps its encoder as transformers weights; the pooling it was evaluated with lives in
its manifest, which sentence-transformers does not read, so a colleague loading the folder got
mean pooling over whatever the run used. Here the same folder gets the sentence-transformers module
stack that computes exactly the harness's vectors (``encoders.pooling``):

- ``cls_before_pooler``, ``avg``, ``max``: a ``Pooling`` of that mode (``max`` ignores padding the
  same way);
- ``cls``: ``Pooling`` ``cls`` then a ``Dense`` layer carrying the model's pooler weights and tanh,
  which is what BERT's pooler computes;
- ``avg_top2`` and ``avg_first_last``: ``WeightedLayerPooling`` over the hidden states, weight 1 on
  the two layers averaged and 0 between them, then mean pooling;
- a ``Normalize`` module where the encoder normalises.

``prompt`` pooling (a mask token's state inside a template) has no sentence-transformers module;
such a run is refused with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchharness.core.atomic import atomic_dir
from benchharness.core.errors import InvalidInputError
from benchharness.encoders.checkpoint import quiet_loading

#: poolings that map to a module stack (see the module docstring)
EXPORTABLE = ("cls", "cls_before_pooler", "avg", "max", "avg_top2", "avg_first_last")


def module_stack(
    model_dir: Path, pooling: str, max_length: int | None, normalize: bool = False, first_layer: int = 1
) -> list[Any]:
    """The sentence-transformers modules that pool ``model_dir``'s model as ``pooling`` does."""
    if pooling not in EXPORTABLE:
        raise InvalidInputError(
            f"pooling {pooling!r} has no sentence-transformers equivalent (exportable: "
            f"{', '.join(EXPORTABLE)}); the run stays a benchharness encoder only"
        )
    import torch
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import AutoConfig

    layered = pooling in ("avg_top2", "avg_first_last")
    config = AutoConfig.from_pretrained(model_dir)
    with quiet_loading():
        transformer = models.Transformer(
            str(model_dir), max_seq_length=max_length, config_kwargs={"output_hidden_states": True} if layered else None
        )
    dim = transformer.get_embedding_dimension()
    modules: list[Any] = [transformer]
    if layered:
        layers = config.num_hidden_layers  # hidden states 0 (embeddings) .. layers
        start = layers - 1 if pooling == "avg_top2" else first_layer
        weights = torch.zeros(layers + 1 - start)
        weights[0] = weights[-1] = 1.0
        modules.append(models.WeightedLayerPooling(dim, layers, start, torch.nn.Parameter(weights)))
    mode = {
        "cls": "cls",
        "cls_before_pooler": "cls",
        "avg": "mean",
        "avg_top2": "mean",
        "avg_first_last": "mean",
        "max": "max",
    }[pooling]
    modules.append(models.Pooling(dim, pooling_mode=mode))
    if pooling == "cls":
        pooler = getattr(transformer.auto_model, "pooler", None)
        if pooler is None:
            raise InvalidInputError(f"{model_dir}: pooling 'cls' needs the model's pooler, which it has not")
        dense = models.Dense(dim, dim, activation_function=torch.nn.Tanh())
        dense.linear.load_state_dict(pooler.dense.state_dict())
        modules.append(dense)
    if normalize:
        modules.append(models.Normalize())
    return modules


def save_as_sentence_transformer(model_dir: Path, spec: dict[str, Any]) -> None:
    """Make ``model_dir`` (a ``save_pretrained`` folder) a sentence-transformers model pooled as the
    encoder ``spec`` says, by adding sentence-transformers' own files beside the model's: the module
    list, the root module's configuration and each further module's folder. The weights are the
    folder's already and are not written again (``SentenceTransformer.save`` would write them anew);
    the tokenizer's files are, with the truncation (``max_length``) that sentence-transformers reads
    there, and ``config.json`` where the pooling needs every layer's hidden states."""
    import json

    from sentence_transformers import SentenceTransformer

    stack = module_stack(
        model_dir,
        spec.get("pooling", "avg"),
        spec.get("max_length"),
        bool(spec.get("normalize")),
        int(spec.get("first_layer", 1)),
    )
    model = SentenceTransformer(modules=stack, device="cpu")
    model.similarity_fn_name = "cosine"
    root, *others = stack
    entries = [_entry(0, "", root)]
    with quiet_loading():
        root.save_config(str(model_dir))
        root.processor.save_pretrained(str(model_dir))
        if root.model.config.output_hidden_states:  # a layer-weighted pooling reads every layer
            root.model.config.save_pretrained(str(model_dir))
        for idx, module in enumerate(others, 1):
            path = f"{idx}_{type(module).__name__}"
            with atomic_dir(model_dir / path) as tmp:
                module.save(str(tmp))
            entries.append(_entry(idx, path, module))
    settings = model._get_model_config()  # what SentenceTransformer.save writes there: versions, prompts, similarity
    (model_dir / "config_sentence_transformers.json").write_text(json.dumps(settings, indent=2, sort_keys=True))
    (model_dir / "modules.json").write_text(json.dumps(entries, indent=2))


def _entry(idx: int, path: str, module: Any) -> dict[str, Any]:
    """A module's line of ``modules.json``, as ``SentenceTransformer.save`` writes it."""
    return {"idx": idx, "name": str(idx), "path": path, "type": f"{type(module).__module__}.{type(module).__name__}"}
