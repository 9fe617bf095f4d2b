"""Any sentence-transformers model, run exactly as its own modules define it (the ``st`` family:
``st:<hub id or folder>``; sentence-transformers is imported when the model is first used)."""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from benchharness.devices import pick_device
from benchharness.encoder import Encoder
from benchharness.registry import Defaults, EncoderSpec, register_family
from encoders import hub


class SentenceTransformerEncoder(Encoder):
    """Delegates to ``SentenceTransformer.encode`` (which sorts by length itself).

    The identity covers the weights and every module's configuration (pooling mode, normalisation,
    max sequence length), since those, not the class, decide the vectors.
    """

    def __init__(self, name: str, model: str, batch_size: int = 64, device: str | None = None) -> None:
        super().__init__(name)
        self.source = hub.resolve(model)
        self.batch_size = int(batch_size)
        self.device = pick_device(device)
        self._model = None

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.source.path), device=str(self.device))
        return self._model

    @property
    def mask_token(self) -> str | None:
        return self.model.tokenizer.mask_token

    def encode(self, sentences: Sequence[str], show_progress: bool = False) -> np.ndarray:
        vecs = self.model.encode(
            list(sentences),
            batch_size=self.batch_size,
            show_progress_bar=show_progress,
            convert_to_numpy=True,
        )
        return np.asarray(vecs, dtype=np.float32)

    def _module_configs(self) -> dict[str, Any]:
        """The JSON configs that define the pipeline, read from the model folder."""
        folder = self.source.path
        configs: dict[str, Any] = {}
        modules_file = folder / "modules.json"
        if modules_file.exists():
            modules = json.loads(modules_file.read_text())
            configs["modules"] = [m.get("type") for m in modules]
            for m in modules:
                for cfg_name in ("config.json", "sentence_bert_config.json"):
                    cfg = folder / m.get("path", "") / cfg_name
                    if m.get("path") and cfg.exists():
                        configs[f"{m['path']}/{cfg_name}"] = json.loads(cfg.read_text())
        sbert_cfg = folder / "sentence_bert_config.json"
        if sbert_cfg.exists():
            configs["sentence_bert_config.json"] = json.loads(sbert_cfg.read_text())
        return configs

    def identity_info(self) -> dict[str, Any]:
        return {
            "family": "sentence-transformers",
            "model": self.source.name,
            "revision": self.source.revision,
            "weights_sha256": self.source.weights_sha256,
            "modules": self._module_configs(),
        }

    @property
    def metadata(self) -> dict[str, Any]:
        cfg = self._module_configs()
        pooling = next((v for k, v in cfg.items() if k.endswith("Pooling/config.json")), None)
        return {
            **super().metadata,
            "base_model": self.source.name,
            "pooling": pooling,
            "modules": cfg.get("modules"),
            "batch_size": self.batch_size,
            "device": str(self.device),
        }


@register_family("st", accepts=SentenceTransformerEncoder)
def build(name: str, spec: EncoderSpec, defaults: Defaults) -> SentenceTransformerEncoder:
    allowed = {k: v for k, v in defaults.items() if k in ("batch_size", "device")}
    return SentenceTransformerEncoder(name, **{**allowed, **spec})
