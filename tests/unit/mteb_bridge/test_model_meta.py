"""ModelMeta of models mteb's registry does not list: parameters, width, token limit, licence,
languages, release date and memory, read offline from the model's own files (``model_facts``).

Each value is checked against one found another way: the loaded model, mteb's registry entry of a
model it does list, or a file written here whose contents are known by hand. No network: the
shared Hugging Face cache only, offline.
"""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

mteb = pytest.importorskip("mteb")

from benchharness.mteb_bridge.as_model import registry_meta  # noqa: E402
from benchharness.mteb_bridge.export import export_results  # noqa: E402
from benchharness.mteb_bridge.model_facts import ModelFacts, model_facts  # noqa: E402
from tests.helpers import MINILM_L3, MINILM_L6, train_tiny_run  # noqa: E402
from tests.unit.mteb_bridge.test_mteb_bridge import _stored  # noqa: E402

#: a tiny hand-written model card: two languages mteb maps, two it cannot (a region, a non-language)
CARD = "---\nlicense: apache-2.0\nlanguage:\n- en\n- de\n- pt-br\n- multilingual\n---\n# tiny\n"


def _exported(stored: Any, out: Path) -> dict[str, Any]:
    """The model_meta.json an export of ``stored`` writes."""
    (exported, *_) = export_results([stored], out).exported
    return json.loads((Path(exported["path"]).parent / "model_meta.json").read_text())


def _validated(meta: dict[str, Any]) -> Any:
    """mteb's own validation of a written model_meta.json, as mteb reads it to submit results
    (``model_validate_json_resolved``: no key ``ModelMeta`` does not know)."""
    from mteb.models import ModelMeta

    with warnings.catch_warnings():  # mteb's to_dict writes its deprecated is_cross_encoder; reading it warns
        warnings.simplefilter("ignore", DeprecationWarning)
        return ModelMeta.model_validate_json_resolved(json.dumps(meta))


def _sts_result(identity: dict[str, Any], metadata: dict[str, Any], encoder: str = "tiny") -> SimpleNamespace:
    """A stored STS12 result (an exportable task) of the encoder ``identity`` describes."""
    return SimpleNamespace(
        encoder=encoder,
        task="STS12",
        metrics={"all.spearman": 50.0, "all.pearson": 40.0},
        protocol={"variant": "senteval-unsup-cosine"},
        encoder_identity={"hash": "0123456789abcdef", **identity},
        encoder_metadata={"similarity": "cosine", **metadata},
        date="2026-11-22T10:00:00+00:00",
    )


def _tiny_folder(folder: Path, card: str = CARD) -> Path:
    """A model folder: a safetensors file of a 6x4 matrix and a bias of 4 (28 parameters) beside
    BERT's int64 ``position_ids`` buffer, a config (4 wide, 32 positions) and the model card ``card``."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    weights = {"encoder.weight": torch.zeros(6, 4), "encoder.bias": torch.zeros(4), "position_ids": torch.arange(8)}
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"hidden_size": 4, "max_position_embeddings": 32}))
    (folder / "README.md").write_text(card)
    return folder


def _hf_identity(folder: Path, **changes: Any) -> dict[str, Any]:
    """The identity an ``hf:<folder>`` encoder records (``HFEncoder.identity_info``)."""
    from benchharness.encoders.hub import weights_fingerprint

    identity = {
        "family": "hf",
        "model": str(folder),
        "revision": None,
        "weights_sha256": weights_fingerprint(str(folder)),
        "pooling": "avg",
        "max_length": 64,
        "precision": "fp32",
        "normalize": False,
    }
    return {**identity, **changes}


# --- a hub model mteb does not list ----------------------------------------------------------------


def test_a_hub_model_mteb_does_not_list_exports_the_facts_of_its_cached_files(tmp_path):
    from huggingface_hub import snapshot_download
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer

    stored = [_stored("minilm-l3", task) for task in ("STS12", "STS16")]
    revision = stored[0].encoder_identity["revision"]
    assert registry_meta(MINILM_L3) is None  # the case at hand: mteb's registry has no entry to start from
    export_results(stored, tmp_path)
    folder = tmp_path / "results" / "sentence-transformers__paraphrase-MiniLM-L3-v2" / revision
    meta = json.loads((folder / "model_meta.json").read_text())

    path = Path(snapshot_download(MINILM_L3, revision=revision, local_files_only=True))
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    # transformers gives the BertModel a pooler this checkpoint lacks, freshly initialised (mean
    # pooling never reads it): not a parameter of the published model
    with safe_open(str(path / "model.safetensors"), framework="numpy") as weights:
        assert not [name for name in weights.keys() if name.startswith("pooler.")]  # noqa: SIM118
    added = sum(p.numel() for p in model[0].auto_model.pooler.parameters())
    assert meta["n_parameters"] == sum(p.numel() for p in model.parameters()) - added
    assert meta["embed_dim"] == model.get_embedding_dimension()
    assert meta["max_tokens"] == model.max_seq_length
    assert meta["memory_usage_mb"] == round(meta["n_parameters"] * 4 / 2**20)  # fp32
    # the cached snapshot has no model card: no licence or language rather than a guess; the
    # release date is the Hub's first commit, which an offline export cannot know
    assert not (path / "README.md").exists()
    assert meta["license"] is None and meta["languages"] is None and meta["release_date"] is None

    assert _validated(meta).n_parameters == meta["n_parameters"]
    (loaded,) = mteb.ResultCache(tmp_path).load_results(models=[MINILM_L3]).model_results
    assert loaded.model_meta.n_parameters == meta["n_parameters"]
    assert sorted(r.task_name for r in loaded.task_results) == ["STS12", "STS16"]


def test_the_files_of_a_model_mteb_lists_give_what_its_registry_says():
    """mteb's registry entry of all-MiniLM-L6-v2 was written from the Hub: the same facts read
    from the cached files agree, buffers left out of the parameters as the registry leaves them."""
    facts = model_facts(_stored("minilm-l6", "STS12").encoder_identity)
    registered = registry_meta(MINILM_L6)
    assert registered is not None
    for field in ("n_parameters", "embed_dim", "max_tokens", "license", "languages"):
        assert getattr(facts, field) == getattr(registered, field), field


def test_a_post_processed_encoder_gets_its_base_files_facts_and_the_width_its_stages_leave(tmp_path):
    tuned = _stored("minilm-l3+whitening-tuned", "STS12")  # whitening(k=95)
    meta = _exported(tuned, tmp_path / "tuned")
    assert meta["embed_dim"] == 95 == tuned.encoder_metadata["post_processing"][-1]["dimensions_kept"][0]
    base = model_facts(tuned.encoder_identity["base"])
    assert meta["n_parameters"] == base.n_parameters is not None
    assert meta["max_tokens"] == base.max_tokens is not None
    # whitening at the fit's rank, from a result that does not record the dimensions it kept: unknown
    at_rank = _exported(_stored("minilm-l3+whitening", "STS12"), tmp_path / "rank")
    assert at_rank["embed_dim"] is None and at_rank["n_parameters"] == base.n_parameters
    _validated(meta)


# --- files written here -----------------------------------------------------------------------------


def test_licence_languages_and_parameters_come_from_the_card_and_the_safetensors_header(tmp_path):
    folder = _tiny_folder(tmp_path / "model")
    assert model_facts(_hf_identity(folder)) == ModelFacts(
        n_parameters=6 * 4 + 4,  # the int64 position ids are a buffer
        embed_dim=4,  # every hf pooling keeps the hidden size
        max_tokens=32,  # max_length 64, but the model has 32 positions
        license="apache-2.0",
        languages=["deu-Latn", "eng-Latn"],  # pt-br and multilingual are not mteb codes
        release_date=None,
    )
    meta = _exported(_sts_result(_hf_identity(folder), {}), tmp_path / "out")
    assert meta["license"] == "apache-2.0" and meta["languages"] == ["deu-Latn", "eng-Latn"]
    valid = _validated(meta)
    assert valid.n_parameters == 28 and valid.memory_usage_mb == round(28 * 4 / 2**20)


def test_a_licence_mteb_does_not_name_and_a_broken_card_are_left_out(tmp_path):
    other = _tiny_folder(tmp_path / "other", card="---\nlicense: llama2\nlanguage: fr\n---\n")
    facts = model_facts(_hf_identity(other))
    assert (facts.license, facts.languages) == (None, ["fra-Latn"])  # llama2 is none of mteb's licence names
    broken = _tiny_folder(tmp_path / "broken", card="---\nlicense: [unclosed\n---\n")
    facts = model_facts(_hf_identity(broken))
    assert facts.license is None and facts.languages is None and facts.n_parameters == 28


def test_pickled_weights_are_never_unpickled_and_other_weights_are_not_described(tmp_path):
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "pytorch_model.bin").write_bytes(b"not a pickle: loading this would fail")
    (pickled / "config.json").write_text(json.dumps({"hidden_size": 8, "max_position_embeddings": 16}))
    facts = model_facts(_hf_identity(pickled))
    assert facts.n_parameters is None and (facts.embed_dim, facts.max_tokens) == (8, 16)
    # a folder whose weights are not those the identity fingerprinted says nothing of that model;
    # the identity's own truncation length still holds
    changed = _tiny_folder(tmp_path / "changed")
    assert model_facts(_hf_identity(changed, weights_sha256="0" * 64)) == ModelFacts(max_tokens=64)


def test_the_width_follows_the_modules_and_each_post_processor(tmp_path, register_plugin):
    absent = {"family": "sentence-transformers", "model": "nobody/absent", "revision": "0" * 40}

    def st_width(**modules: Any) -> int | None:
        return model_facts({**absent, "modules": {"modules": [], **modules}}).embed_dim

    legacy = {"word_embedding_dimension": 16, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}
    assert st_width(**{"1_Pooling/config.json": legacy}) == 32  # two modes concatenated
    current = {"embedding_dimension": 16, "pooling_mode": ["mean", "cls"]}  # sentence-transformers 6
    assert st_width(**{"1_Pooling/config.json": current, "2_Dense/config.json": {"out_features": 5}}) == 5

    base = _hf_identity(_tiny_folder(tmp_path / "model"))  # 4 wide

    def width(postprocessor: str, params: dict[str, Any], step: dict[str, Any] | None = None) -> int | None:
        stage = {"postprocessor": postprocessor, "params": params, "base": base}
        metadata = {"post_processing": [{"name": postprocessor, **(step or {})}]}
        return model_facts(stage, metadata).embed_dim

    assert width("truncate", {"d": 3}) == 3
    assert width("whitening", {"k": 2}) == 2
    assert width("whitening", {"k": "rank (eigenvalues > 1e-10 x largest)"}, {"dimensions_kept": [3, 4]}) == 3
    assert width("whitening", {"k": "rank (eigenvalues > 1e-10 x largest)"}) is None
    assert width("quantize", {"precision": "binary", "similarity": "cosine"}) == 8  # bits padded to a byte
    assert width("quantize", {"precision": "int8", "calibration": "task"}) == 4
    assert width("repal", {"l1": 0.0, "l2": 2.0}) == 4
    assert width("someone-elses-plugin", {}) is None  # not installed here

    from benchharness.encoders.postprocess.fitting import PostProcessor

    class Doubled(PostProcessor):  # a plugin that says what its width is
        kind = "doubled"

        @classmethod
        def recorded_width(cls, params: Any, step: Any, width: int | None) -> int | None:
            return None if width is None else 2 * width

    class Silent(PostProcessor):  # one that does not
        kind = "silent"

    register_plugin("postprocessors", "doubled", Doubled)
    register_plugin("postprocessors", "silent", Silent)
    register_plugin("postprocessors", "made-by-a-function", lambda base, name: base)
    assert width("doubled", {}) == 8
    assert width("silent", {}) is None and width("made-by-a-function", {}) is None


# --- trained runs ------------------------------------------------------------------------------------


def test_a_trained_run_exports_its_checkpoint_facts_found_by_path_or_by_recipe_name(
    project, tiny_bert, tmp_path, register_plugin
):
    from transformers import AutoModel

    from benchharness.core.manifests import manifest_spec, read_manifest
    from benchharness.core.specs import Catalogue, Resolved
    from benchharness.evaluation.resolver import Resolver

    ran = train_tiny_run(project, tiny_bert, "run")
    assert ran.returncode == 0, ran.stderr
    run = project / "run"
    encoder = Resolver(train_missing=False).get(str(run))
    identity, metadata = encoder.identity_record(), encoder.metadata
    assert identity["model"] == str(run) and "training" in metadata

    meta = _exported(_sts_result(identity, metadata, encoder.name), tmp_path / "by-path")
    loaded = AutoModel.from_pretrained(run)  # what the hf encoder loads
    assert meta["n_parameters"] == sum(p.numel() for p in loaded.parameters())
    assert meta["embed_dim"] == encoder.encode(["a man plays a guitar"]).shape[1]
    assert meta["max_tokens"] == min(identity["max_length"], loaded.config.max_position_embeddings)
    saved = datetime.fromisoformat(read_manifest(run)["date"])  # when the weights were saved
    assert meta["release_date"] == saved.date().isoformat()
    assert abs((datetime.now(UTC) - saved).total_seconds()) < 3600
    _validated(meta)

    # a stored result names a recipe's run recipe:<key>, found in the runs folder as the resolver
    # finds it (the recipes catalogue, here one that knows this run, without training anything)
    def resolve(name: str, **_: Any) -> Resolved | None:
        return Resolved(manifest_spec(run, read_manifest(run))) if name == "recipe:0123abcd" else None

    register_plugin("catalogues", "this-run", Catalogue(resolve=resolve, rows=list, order=-1))
    dated = {**metadata, "training": {**metadata["training"], "date": "2026-11-20T09:30:00+00:00"}}
    by_name = _exported(_sts_result({**identity, "model": "recipe:0123abcd"}, dated), tmp_path / "by-name")
    assert (by_name["n_parameters"], by_name["embed_dim"]) == (meta["n_parameters"], meta["embed_dim"])
    assert _validated(by_name).release_date == "2026-11-20"  # the day the manifest records


def test_a_recipe_run_missing_here_leaves_its_file_facts_unknown_and_trains_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))
    stored = _stored("simcse", "STS12")
    meta = _exported(stored, tmp_path / "out")
    assert (meta["n_parameters"], meta["embed_dim"], meta["memory_usage_mb"]) == (None, None, None)
    assert meta["max_tokens"] == stored.encoder_identity["max_length"]  # the encoder's truncation, in its identity
    assert not (tmp_path / "runs").exists()
    _validated(meta)


def test_the_training_datasets_a_card_declares_are_exported_as_written(tmp_path):
    """all-MiniLM-L6-v2's card lists Hugging Face dataset ids; they go in the export's own record
    (``benchharness/provenance.json``) as the card writes them (no id names an mteb task's dataset, so mteb's
    ``training_datasets`` keeps the registry's task names)."""
    import yaml

    from benchharness.mteb_bridge.export import PROVENANCE

    stored = _stored("minilm-l6", "STS12")
    (exported,) = export_results([stored], tmp_path).exported
    folder = Path(exported["path"]).parent
    meta = json.loads((folder / "model_meta.json").read_text())
    card_datasets = json.loads((folder / PROVENANCE).read_text())["card_datasets"]
    snapshot = Path(_minilm_l6_snapshot())
    front = (snapshot / "README.md").read_text().split("---")[1]
    assert card_datasets == yaml.safe_load(front)["datasets"] and len(card_datasets) == 21
    assert set(meta["training_datasets"]) == set(registry_meta(MINILM_L6).training_datasets)


def _minilm_l6_snapshot() -> str:
    """The hub cache's snapshot of all-MiniLM-L6-v2 at the commit the stored results ran."""
    from huggingface_hub import snapshot_download

    revision = _stored("minilm-l6", "STS12").encoder_identity["revision"]
    return snapshot_download(MINILM_L6, revision=revision, local_files_only=True)
