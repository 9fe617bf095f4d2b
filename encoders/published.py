"""Published checkpoints by name, each with the pooling its authors evaluated it with.

``published_spec(name)`` turns a catalogue name into an encoder spec the resolver builds like any
other: the hub checkpoints become plain ``hf`` specs (SimCSE's BertModel/RobertaModel folders,
DefSent's ``*ForMaskedLM`` checkpoints whose encoder part ``AutoModel`` loads, DefSent+'s bare
weights with their base model's tokenizer), so ``simcse-unsup-bert-base`` and
``hf:princeton-nlp/unsup-simcse-bert-base-uncased?pooling=cls_before_pooler`` are one encoder with
one identity; ConSERT's sentence-transformers 0.3.9 archives on Google Drive become ``st-archive``
specs, built by ``build_archive`` (download once into the published cache, convert, evaluate).

Hub checkpoints download through the standard Hugging Face cache; archives into
``$BENCHHARNESS_PUBLISHED_CACHE`` (default ``~/.cache/benchharness/published``). With downloads
off (``HF_HUB_OFFLINE``) a missing checkpoint fails naming the hub id or URL and what to do.

Every fact below (ids, URLs, poolings) comes from the page in the entry's ``reference``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchharness.core.errors import MissingFileError
from benchharness.core.settings import default_hub
from benchharness.core.specs import BuildContext, Catalogue, Family, Resolved
from benchharness.encoders import hub
from benchharness.encoders.download import download, drive_file_id
from benchharness.encoders.huggingface import HFEncoder
from benchharness.encoders.st_archive import convert, converted_max_length, model_root, unpack

#: how a checkpoint is stored, hence loaded
LOADERS = {
    "hf": "a transformers BertModel/RobertaModel folder with its tokenizer",
    "masked_lm": "a *ForMaskedLM checkpoint: AutoModel keeps the encoder, drops the MLM head",
    "weights_only": "config.json + weights, no tokenizer: the base model's tokenizer is used",
    "st_archive": "a sentence-transformers 0.3.9 archive (zip/tar) at a URL, converted once",
}

SIMCSE_REF = "https://github.com/princeton-nlp/SimCSE#model-list"
SIMCSE_POOLING_REF = "https://github.com/princeton-nlp/SimCSE#evaluation"
DEFSENT_REF = "https://github.com/hppRC/defsent#pretrained-checkpoints"
DEFSENT_PLUS_REF = "https://github.com/ryuliuxiaodong/DefSent-Plus (DefSentPlus-Readme.pdf, defsentplus/model.py)"
DEFSENT_PLUS_POOLING_REF = "https://arxiv.org/abs/2405.16153 (Table 7: pooling for STS)"
CONSERT_REF = "https://github.com/yym6472/ConSERT#pre-trained-models--results"


@dataclass(frozen=True)
class Checkpoint:
    name: str  # our name
    method: str
    loader: str  # a key of LOADERS
    source: str  # hub id, or the archive's URL
    pooling: str  # the pooling the authors evaluated it with
    base_model: str  # what it was trained from
    reference: str  # where the checkpoint and its pooling are documented
    tokenizer: str | None = None  # hub id of the tokenizer, for checkpoints that ship none
    note: str = ""

    @property
    def description(self) -> str:
        text = f"{self.method} checkpoint {self.source}, evaluated with pooling {self.pooling}"
        return f"{text} ({self.note})" if self.note else text


def _simcse() -> list[Checkpoint]:
    """Unsupervised SimCSE is evaluated on [CLS] without the pooler (its MLP is dropped after
    training); supervised SimCSE keeps the MLP, saved as the BERT pooler, hence ``cls``."""
    rows = []
    for kind, setting, pooling in (("unsup", "unsupervised", "cls_before_pooler"), ("sup", "supervised", "cls")):
        for base, hub_base in (
            ("bert-base", "bert-base-uncased"),
            ("bert-large", "bert-large-uncased"),
            ("roberta-base", "roberta-base"),
            ("roberta-large", "roberta-large"),
        ):
            rows.append(
                Checkpoint(
                    f"simcse-{kind}-{base}",
                    f"SimCSE ({setting})",
                    "hf",
                    f"princeton-nlp/{kind}-simcse-{hub_base}",
                    pooling,
                    hub_base,
                    f"{SIMCSE_REF}; pooling: {SIMCSE_POOLING_REF}",
                )
            )
    return rows


#: DefSent's pooling names (the last part of each hub id) in this harness's terms: its ``cls`` is the
#: [CLS] hidden state, a MaskedLM checkpoint has no pooler
DEFSENT_POOLINGS = {"cls": "cls_before_pooler", "mean": "avg", "max": "max"}


def _defsent() -> list[Checkpoint]:
    rows = []
    for base, hub_base in (
        ("bert-base", "bert-base-uncased"),
        ("bert-large", "bert-large-uncased"),
        ("roberta-base", "roberta-base"),
        ("roberta-large", "roberta-large"),
    ):
        for theirs, ours in DEFSENT_POOLINGS.items():
            rows.append(
                Checkpoint(
                    f"defsent-{base}-{theirs}",
                    "DefSent",
                    "masked_lm",
                    f"cl-nagoya/defsent-{hub_base}-{theirs}",
                    ours,
                    hub_base,
                    DEFSENT_REF,
                )
            )
    return rows


_UNPUBLISHED_POOLING = (
    "not in the paper's tables, so no pooling is published for it: prompt, the pooling of the repository's examples"
)

#: (hub id suffix, base model, STS pooling of the paper's Table 7, note); the paper's encoder name
_DEFSENT_PLUS = (
    ("bert-base-uncased", "bert-base-uncased", "prompt", "paper: DefSent+ BERT-base (ICA) 3rd (CLS,AMP) a"),
    ("bert-large-uncased", "bert-large-uncased", "prompt", "paper: DefSent+ BERT-large (ICA) 3rd (CLS,AMP) a"),
    ("roberta-base", "roberta-base", "prompt", "paper: DefSent+ RoBERTa-base 3rd (Mean,AC) a"),
    ("roberta-large", "roberta-large", "avg", "paper: DefSent+ RoBERTa-large 3rd (Mean,AC) a"),
    ("simcse-bert-base-uncased", "bert-base-uncased", "prompt", "paper: DefSent+ simcse-BERT-base 1st (CLS,AMP) a"),
    ("simcse-bert-large-uncased", "bert-large-uncased", "prompt", "paper: DefSent+ simcse-BERT-large 1st (CLS,AMP) a"),
    ("simcse-roberta-base", "roberta-base", "prompt", "paper: DefSent+ simcse-RoBERTa-base 1st (CLS,AC) a"),
    ("simcse-roberta-large", "roberta-large", "prompt", "paper: DefSent+ simcse-RoBERTa-large 2nd (CLS,AC) a"),
    ("sncse-bert-large-uncased", "bert-large-uncased", "prompt", "paper: DefSent+ sncse-BERT-large 1st (CLS,AMP) a"),
    ("sncse-roberta-base", "roberta-base", "prompt", "paper: DefSent+ sncse-RoBERTa-base 1st (Mean,AC) a"),
    ("sncse-roberta-large", "roberta-large", "prompt", "paper: DefSent+ sncse-RoBERTa-large 2nd (Mean,AC) a"),
    (
        "syncse-partial-roberta-base",
        "roberta-base",
        "prompt",
        f"further trained from SynCSE-partial-RoBERTa-base; {_UNPUBLISHED_POOLING}",
    ),
    (
        "syncse-partial-roberta-large",
        "roberta-large",
        "prompt",
        f"further trained from SynCSE-partial-RoBERTa-large; {_UNPUBLISHED_POOLING}",
    ),
)


def _defsent_plus() -> list[Checkpoint]:
    """RyuKT ships config.json + pytorch_model.bin only; the official code loads the tokenizer of
    the backbone (``bert-base-uncased``... as named there)."""
    rows = []
    for suffix, base, pooling, note in _DEFSENT_PLUS:
        # "released" keeps the authors' checkpoints apart from this project's recipes of the same
        # method and backbone (``defsent-plus-bert-base`` is the paper recipe, trained here)
        name = "defsent-plus-released-" + suffix.replace("-uncased", "")
        rows.append(
            Checkpoint(
                name,
                "DefSent+",
                "weights_only",
                f"RyuKT/DefSentPlus-{suffix}",
                pooling,
                base,
                f"{DEFSENT_PLUS_REF}; pooling: {DEFSENT_PLUS_POOLING_REF}",
                tokenizer=base,
                note=note,
            )
        )
    return rows


#: (our name, the README's model id, Google Drive file id)
_CONSERT = (
    ("consert-unsup-base", "unsup-consert-base", "1KIbrhhIfhxO_4b0tbpdhLGkrjr_bhlaa"),
    ("consert-unsup-large", "unsup-consert-large", "1sYlJ_O43QHC1WYY9h3HW_bWLhxvb7lEH"),
    ("consert-sup-sbert-base", "sup-sbert-base", "1Q5wN6FRikBKEJ3jeJlPGPQ0WWEf0mkdi"),
    ("consert-sup-sbert-large", "sup-sbert-large", "1JJjvxiyJEdS62GpH0mDz1qK0AApBPQ3Z"),
    ("consert-sup-joint-base", "sup-consert-joint-base", "1uCNWUWPyjuTfyIqP4zsVNNxeGRNyXOrw"),
    ("consert-sup-joint-large", "sup-consert-joint-large", "1cE8wauMEHGKn52kyCpOcIKKeJ7p3-cTq"),
    ("consert-sup-unsup-base", "sup-consert-sup-unsup-base", "1w3SmCC6ibm8NSvh80ZB0ERDonpPvm8mz"),
    ("consert-sup-unsup-large", "sup-consert-sup-unsup-large", "15E8nAFprUFTv5KPPgxvedgigXXwcRVeT"),
    ("consert-joint-unsup-base", "sup-consert-joint-unsup-base", "14jcb8NCDB3PGr0LZI_tZcmBATxkB4OEc"),
    ("consert-joint-unsup-large", "sup-consert-joint-unsup-large", "1xo5QrlG_TJ6NetqSX1nYtaVLPzee2kpx"),
)


def _consert() -> list[Checkpoint]:
    """All ten are evaluated with the mean of the last two layers (eval.py ``--last2avg``, which
    main.py runs after every training), although they are saved with mean pooling."""
    rows = []
    for name, theirs, file_id in _CONSERT:
        base = "bert-large-uncased" if theirs.endswith("large") else "bert-base-uncased"
        note = "ConSERT authors' re-implementation of SBERT-NLI" if "sbert" in theirs else ""
        rows.append(
            Checkpoint(
                name,
                "ConSERT",
                "st_archive",
                f"https://drive.google.com/file/d/{file_id}/view",
                "avg_top2",
                base,
                f"{CONSERT_REF} (model {theirs})",
                note=note,
            )
        )
    return rows


CHECKPOINTS: tuple[Checkpoint, ...] = (*_simcse(), *_defsent(), *_defsent_plus(), *_consert())
PUBLISHED: dict[str, Checkpoint] = {c.name: c for c in CHECKPOINTS}


def catalogue() -> list[Checkpoint]:
    return list(CHECKPOINTS)


def published_spec(name: str) -> dict[str, Any] | None:
    """The encoder spec of a catalogue name, or None when ``name`` is not one."""
    entry = PUBLISHED.get(name)
    if entry is None:
        return None
    if entry.loader == "st_archive":
        return {"type": "st-archive", "url": entry.source, "pooling": entry.pooling}
    spec = {"type": "hf", "model": entry.source, "pooling": entry.pooling}
    if entry.tokenizer is not None:
        spec["tokenizer"] = entry.tokenizer
    return spec


def published_cache() -> Path:
    """Where downloaded archives and their converted models live (not in the HF hub cache, whose
    layout belongs to huggingface_hub)."""
    env = os.environ.get("BENCHHARNESS_PUBLISHED_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "benchharness" / "published"


def archive_folder(url: str, cache: Path | None = None, offline: bool | None = None) -> Path:
    """The converted model of the archive at ``url``: downloaded, unpacked and converted once;
    ``offline`` forbids the download (None: as the environment says).

    ``<cache>/<key>/archive`` holds the download (a browser download saved there works as well),
    ``<cache>/<key>/model`` the converted folder; ``key`` is the Drive file id or a URL hash.
    """
    key = drive_file_id(url) or hashlib.sha256(url.encode()).hexdigest()[:16]
    folder = (cache or published_cache()) / key
    model, archive = folder / "model", folder / "archive"
    if model.is_dir():
        return model
    folder.mkdir(parents=True, exist_ok=True)
    if not archive.is_file():
        if default_hub().offline if offline is None else offline:
            raise MissingFileError(
                f"the archive {url} is not in the published cache ({archive}) and HF_HUB_OFFLINE is set, "
                f"so it cannot be downloaded. Download it in a browser and save it as {archive}, or "
                "unset HF_HUB_OFFLINE (or point BENCHHARNESS_PUBLISHED_CACHE at a cache that holds it)."
            )
        download(url, archive)
    unpacked = Path(tempfile.mkdtemp(dir=folder, prefix=".unpacked."))
    try:
        unpack(archive, unpacked)
        convert(model_root(unpacked), model)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    return model


class ArchiveEncoder(HFEncoder):
    """An ``HFEncoder`` over a converted archive whose name, in identity and results, is the archive's
    URL: the local cache folder differs between machines, the checkpoint does not."""

    def __init__(self, name: str, url: str, folder: Path, **options: Any) -> None:
        super().__init__(name, str(folder), **options)
        self.source = hub.ModelSource(url, self.source.path, None)


def build_archive(name: str, spec: dict[str, Any], context: BuildContext | None = None) -> ArchiveEncoder:
    """The ``st-archive`` family: ``{"type": "st-archive", "url": ..., "pooling": ...}``; the
    truncation of sentence-transformers 0.3.x is kept unless ``max_length`` is given."""
    context = context or BuildContext()
    options: dict[str, Any] = {**context.sizes(), "hub": context.hub}
    options.update({k: v for k, v in spec.items() if k not in ("type", "url")})
    folder = archive_folder(spec["url"], offline=context.hub.offline)
    options.setdefault("max_length", converted_max_length(folder))
    return ArchiveEncoder(name, spec["url"], folder, **options)


def _rows() -> list[dict[str, str]]:
    return [
        {
            "name": c.name,
            "source": f"published: {c.reference}",
            "settings": json.dumps(published_spec(c.name)),
            "description": c.description,
        }
        for c in CHECKPOINTS
    ]


def _resolve(name: str, **_: Any) -> Resolved | None:
    spec = published_spec(name)
    return None if spec is None else Resolved(spec)  # type: ignore[arg-type]


#: the ``st-archive`` family (``families`` plugin) and the published checkpoints (``catalogues`` plugin),
#: consulted after the trained recipes
ARCHIVE_FAMILY = Family.of(
    "st-archive", build_archive, target="url", accepts=HFEncoder, usage="st-archive:<url>?pooling=..."
)
CATALOGUE = Catalogue(resolve=_resolve, rows=_rows, order=200)
