"""Published checkpoints by name, their loaders on tiny checkpoints in each exact on-disk format,
the offline rules, and the refusal of a random pooler.

No test touches the network: hub checkpoints are laid out in a temporary Hugging Face cache the way
huggingface_hub stores them (``models--org--name/refs/main`` + ``snapshots/<commit>/``), archives
are built by hand, and the Google Drive exchange is played by a fake opener. Expected vectors are
computed from the model objects themselves, one unpadded sentence at a time.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import zipfile
from collections import Counter
from email.message import Message
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel, RobertaConfig, RobertaForMaskedLM

from benchharness.core.specs import BuildContext
from benchharness.encoders import download as download_mod
from benchharness.encoders import published
from benchharness.encoders.checkpoint import checkpoint_keys, load_complete
from benchharness.encoders.huggingface import HFEncoder
from benchharness.encoders.pooling import POOLINGS
from tests.helpers import MINILM_L3, make_tiny_bert

SENTENCES = [
    "a man is playing a guitar .",
    "hello",
    "the cat sat on the mat and looked very happy about the whole thing .",
]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """The MiniLM (bert-base-uncased) tokenizer files, standing in for any BERT tokenizer: as
    transformers saves it now (tokenizer.json) and as older versions did (vocab.txt)."""
    from huggingface_hub import snapshot_download

    folder = tmp_path_factory.mktemp("tokenizer")
    make_tiny_bert(folder)
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    snapshot = Path(snapshot_download(MINILM_L3, local_files_only=True))
    for name in ("vocab.txt", "special_tokens_map.json"):
        shutil.copy(snapshot / name, folder / name)
    return folder


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face hub cache that snapshot_download reads (offline, as in all tests)."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def publish(cache: Path, repo_id: str, folder: Path) -> None:
    """Lay ``folder`` out in ``cache`` as huggingface_hub stores a downloaded repository."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)


def tiny_config(**kw) -> BertConfig:
    return BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        **kw,
    )


def by_hand(model: torch.nn.Module, tokenizer, texts: list[str], rule, **tok_kw) -> np.ndarray:
    """One sentence at a time, no padding: ``rule(outputs, input_ids)`` -> vector."""
    rows = []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer([text], return_tensors="pt", **tok_kw)
            out = model(**enc, output_hidden_states=True)
            rows.append(rule(out, enc["input_ids"][0]).numpy())
    return np.stack(rows)


def encoder_from(name: str, **overrides) -> HFEncoder:
    """What the resolver builds for a published name (an ``hf`` spec)."""
    spec = {**published.published_spec(name), **overrides}
    assert spec.pop("type") == "hf"
    return HFEncoder(name, batch_size=3, **spec)


# --------------------------------------------------------------------------- the catalogue


def test_catalogue_holds_the_published_checkpoints():
    counts = Counter(c.method for c in published.catalogue())
    # SimCSE README: 4 unsup + 4 sup; DefSent README: 4 models x cls/mean/max; DefSent+: RyuKT's 13
    # DefSentPlus-* repositories; ConSERT README: 10 English models on Google Drive
    assert counts == {
        "SimCSE (unsupervised)": 4,
        "SimCSE (supervised)": 4,
        "DefSent": 12,
        "DefSent+": 13,
        "ConSERT": 10,
    }
    names = [c.name for c in published.catalogue()]
    assert len(set(names)) == len(names) == 43
    assert len({c.source for c in published.catalogue()}) == 43
    for c in published.catalogue():
        assert c.pooling in POOLINGS and c.loader in published.LOADERS
        assert c.reference.startswith("https://")
        assert (c.tokenizer is not None) == (c.loader == "weights_only")
    assert published.published_spec("no-such-checkpoint") is None


def test_catalogue_poolings_are_the_papers():
    specs = {c.name: published.published_spec(c.name) for c in published.catalogue()}
    assert specs["simcse-unsup-roberta-large"] == {
        "type": "hf",
        "model": "princeton-nlp/unsup-simcse-roberta-large",
        "pooling": "cls_before_pooler",
    }
    assert specs["simcse-sup-bert-base"] == {
        "type": "hf",
        "model": "princeton-nlp/sup-simcse-bert-base-uncased",
        "pooling": "cls",
    }
    # DefSent: the pooling is the last part of the hub id; its 'cls' is [CLS] without a pooler
    for c in published.catalogue():
        if c.method == "DefSent":
            suffix = c.source.rsplit("-", 1)[1]
            assert c.pooling == {"cls": "cls_before_pooler", "mean": "avg", "max": "max"}[suffix]
    assert specs["defsent-roberta-large-max"]["model"] == "cl-nagoya/defsent-roberta-large-max"
    # DefSent+ Table 7: Mean for RoBERTa-large 3rd, Prompt for the others; base model's tokenizer
    assert specs["defsent-plus-released-roberta-large"] == {
        "type": "hf",
        "model": "RyuKT/DefSentPlus-roberta-large",
        "pooling": "avg",
        "tokenizer": "roberta-large",
    }
    assert specs["defsent-plus-released-sncse-bert-large"]["tokenizer"] == "bert-large-uncased"
    assert specs["defsent-plus-released-bert-base"]["pooling"] == "prompt"
    # ConSERT: every model evaluated with the last two layers, archives on Google Drive
    assert specs["consert-unsup-base"] == {
        "type": "st-archive",
        "pooling": "avg_top2",
        "url": "https://drive.google.com/file/d/1KIbrhhIfhxO_4b0tbpdhLGkrjr_bhlaa/view",
    }
    assert {s["pooling"] for n, s in specs.items() if n.startswith("consert-")} == {"avg_top2"}


# --------------------------------------------------------------------------- hub checkpoints


def test_simcse_folder_by_name(hub_cache, tokenizer_dir, tmp_path):
    torch.manual_seed(1)
    model = BertModel(tiny_config()).eval()
    folder = tmp_path / "simcse"
    model.save_pretrained(folder)
    for f in tokenizer_dir.iterdir():
        if f.name != "config.json":
            shutil.copy(f, folder / f.name)
    publish(hub_cache, "princeton-nlp/sup-simcse-bert-base-uncased", folder)
    publish(hub_cache, "princeton-nlp/unsup-simcse-bert-base-uncased", folder)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)

    sup = encoder_from("simcse-sup-bert-base")
    np.testing.assert_allclose(
        sup.encode(SENTENCES), by_hand(model, tok, SENTENCES, lambda o, _: o.pooler_output[0]), atol=1e-5
    )
    unsup = encoder_from("simcse-unsup-bert-base")
    np.testing.assert_allclose(
        unsup.encode(SENTENCES), by_hand(model, tok, SENTENCES, lambda o, _: o.last_hidden_state[0, 0]), atol=1e-5
    )
    # the name is the hf spec: same encoder, same identity (so cached embeddings are shared)
    adhoc = HFEncoder("x", "princeton-nlp/unsup-simcse-bert-base-uncased", pooling="cls_before_pooler")
    assert unsup.identity == adhoc.identity and unsup.source.revision == COMMIT


def test_defsent_masked_lm_checkpoint_with_pooling_from_its_name(hub_cache, tokenizer_dir, tmp_path):
    torch.manual_seed(2)
    mlm = BertForMaskedLM(tiny_config()).eval()
    folder = tmp_path / "defsent"
    mlm.save_pretrained(folder)  # keys bert.* and cls.predictions.*, no pooler
    for f in tokenizer_dir.iterdir():
        if f.name != "config.json":
            shutil.copy(f, folder / f.name)
    assert not any("pooler" in k for k in checkpoint_keys(folder))
    for pooling in ("cls", "mean", "max"):
        publish(hub_cache, f"cl-nagoya/defsent-bert-base-uncased-{pooling}", folder)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)

    def masked_max(out, _ids):  # DefSent: max over all real tokens, [CLS] and [SEP] included
        return out.last_hidden_state[0].max(dim=0).values

    rules = {
        "cls": lambda o, _: o.last_hidden_state[0, 0],
        "mean": lambda o, _: o.last_hidden_state[0].mean(0),
        "max": masked_max,
    }
    for pooling, rule in rules.items():
        enc = encoder_from(f"defsent-bert-base-{pooling}")
        # batch of 3 with padding: the padded positions must not count
        np.testing.assert_allclose(enc.encode(SENTENCES), by_hand(mlm.bert, tok, SENTENCES, rule), atol=1e-5)
    with pytest.raises(ValueError, match="no pooler weights"):
        encoder_from("defsent-bert-base-cls", pooling="cls")


def test_masked_lm_encoders_load_completely(tmp_path):
    torch.manual_seed(3)
    rob = RobertaForMaskedLM(
        RobertaConfig(
            vocab_size=100,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=40,
        )
    )
    rob.save_pretrained(tmp_path / "rob")
    loaded = load_complete(tmp_path / "rob", "tiny-roberta").state_dict()
    for key, value in rob.roberta.state_dict().items():
        torch.testing.assert_close(loaded[key], value, rtol=0, atol=0)

    # weights under a prefix transformers does not know: the whole encoder would be random
    from safetensors.torch import save_file

    bad = tmp_path / "bad"
    bad.mkdir()
    BertConfig(
        vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    ).save_pretrained(bad)
    state = BertModel(BertConfig.from_pretrained(bad)).state_dict()
    save_file({f"encoder_model.{k}": v.contiguous() for k, v in state.items()}, str(bad / "model.safetensors"))
    with pytest.raises(ValueError, match=r"encoder weights of BertModel are missing .*embeddings\."):
        load_complete(bad, "bad-prefix")


def test_defsent_plus_weights_with_the_base_tokenizer(hub_cache, tokenizer_dir, tmp_path):
    torch.manual_seed(4)
    model = BertModel(tiny_config()).eval()
    folder = tmp_path / "defsent-plus"
    folder.mkdir()
    model.config.save_pretrained(folder)  # exactly what RyuKT ships: config.json + pytorch_model.bin
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    assert checkpoint_keys(folder) == set(model.state_dict())  # read from the .bin, pooler included
    publish(hub_cache, "RyuKT/DefSentPlus-bert-base-uncased", folder)
    publish(hub_cache, "bert-base-uncased", tokenizer_dir)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)

    def at_mask(out, ids):
        return out.last_hidden_state[0, ids.tolist().index(tok.mask_token_id)]

    prompts = [f'This sentence : "{s}" means {tok.mask_token} .' for s in SENTENCES]
    enc = encoder_from("defsent-plus-released-bert-base")
    np.testing.assert_allclose(enc.encode(SENTENCES), by_hand(model, tok, prompts, at_mask), atol=1e-5)
    assert enc.identity_info()["tokenizer"] == {"model": "bert-base-uncased", "revision": COMMIT}
    # alone, the bare weights would get a tokenizer that maps every word to [UNK]
    with pytest.raises(ValueError, match=r"RyuKT/DefSentPlus-bert-base-uncased ships no tokenizer .*tokenizer="):
        HFEncoder("t", "RyuKT/DefSentPlus-bert-base-uncased", pooling="prompt")


def test_offline_hub_checkpoint_names_the_missing_id(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        FileNotFoundError,
        match=re.escape("'cl-nagoya/defsent-roberta-base-mean' is neither a local folder nor in the Hugging Face cache")
        + ".*HF_HUB_OFFLINE",
    ):
        encoder_from("defsent-roberta-base-mean")


# --------------------------------------------------------------------------- ConSERT archives


def st039_folder(root: Path, tokenizer_dir: Path, module: str, model: BertModel, max_seq_length: int) -> Path:
    """A model folder as sentence-transformers 0.3.9 saved it (transformers 3.x configs had no
    model_type; the deprecated models.BERT module is saved as 0_BERT)."""
    top = root / "unsup-consert-base"
    mod = top / f"0_{module}"
    mod.mkdir(parents=True)
    config = model.config.to_dict()
    config.pop("model_type")
    config["architectures"] = ["BertModel"]
    (mod / "config.json").write_text(json.dumps(config))
    torch.save(model.state_dict(), mod / "pytorch_model.bin")
    for name in ("vocab.txt", "special_tokens_map.json"):
        shutil.copy(tokenizer_dir / name, mod / name)
    (mod / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 512}))
    (mod / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length}))
    (top / "1_Pooling").mkdir()
    (top / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
                "pooling_mode_mean_last_2_tokens": False,
            }
        )
    )
    (top / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": f"0_{module}", "type": f"sentence_transformers.models.{module}"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (top / "config.json").write_text(json.dumps({"__version__": "0.3.9"}))
    return root


def pack(folder: Path, archive: Path) -> Path:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive, "w") as zf:
            for f in sorted(folder.rglob("*")):
                zf.write(f, f.relative_to(folder))
    else:
        with tarfile.open(archive, "w:gz") as tf:
            tf.add(folder, arcname=".")
    return archive


@pytest.fixture
def consert_model() -> BertModel:
    torch.manual_seed(5)
    return BertModel(tiny_config()).eval()


@pytest.mark.parametrize("fmt,module", [("zip", "Transformer"), ("tar.gz", "BERT")])
def test_consert_archive_in_the_cache(tmp_path, monkeypatch, tokenizer_dir, consert_model, fmt, module):
    spec = published.published_spec("consert-unsup-base")
    cache = tmp_path / "published"
    monkeypatch.setenv("BENCHHARNESS_PUBLISHED_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a browser download saved in the cache works offline
    target = cache / "1KIbrhhIfhxO_4b0tbpdhLGkrjr_bhlaa" / "archive"
    target.parent.mkdir(parents=True)
    pack(st039_folder(tmp_path / "src", tokenizer_dir, module, consert_model, 6), tmp_path / f"a.{fmt}")
    shutil.copy(tmp_path / f"a.{fmt}", target)

    enc = published.build_archive("consert-unsup-base", spec, BuildContext(batch_size=3))
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)

    def st039_tokens(text: str) -> list[int]:
        # sentence-transformers 0.3.9: word pieces cut to max_seq_length + 1, then [CLS] ... [SEP]
        return [tok.cls_token_id, *tok.convert_tokens_to_ids(tok.tokenize(text))[:7], tok.sep_token_id]

    expected = []
    with torch.no_grad():
        for text in SENTENCES:
            out = consert_model(input_ids=torch.tensor([st039_tokens(text)]), output_hidden_states=True)
            expected.append(((out.hidden_states[-1] + out.hidden_states[-2]) / 2)[0].mean(0).numpy())
    assert len(tok.tokenize(SENTENCES[2])) > 7  # the long sentence is truncated
    np.testing.assert_allclose(enc.encode(SENTENCES), np.stack(expected), atol=1e-5)
    info = enc.identity_info()
    assert info["model"] == spec["url"] and info["pooling"] == "avg_top2" and info["max_length"] == 9
    assert str(cache) not in json.dumps(info)  # the identity does not depend on where the cache is
    assert not target.with_name("model").joinpath("1_Pooling").exists()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []  # nothing half-done left


def test_consert_archive_downloads_when_online(tmp_path, monkeypatch, tokenizer_dir, consert_model):
    archive = pack(st039_folder(tmp_path / "src", tokenizer_dir, "Transformer", consert_model, 6), tmp_path / "a.zip")
    calls = []

    def fake_download(url: str, dest: Path) -> Path:
        calls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(archive, dest)
        return dest

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the environment wins over the checkout's hf_offline
    monkeypatch.setattr(published, "download", fake_download)
    spec = published.published_spec("consert-sup-joint-base")
    folder = published.archive_folder(spec["url"], tmp_path / "cache")
    assert calls == [spec["url"]]
    assert published.archive_folder(spec["url"], tmp_path / "cache") == folder and len(calls) == 1


def test_consert_archive_offline_error_names_url_and_place(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BENCHHARNESS_PUBLISHED_CACHE", str(tmp_path))
    url = published.published_spec("consert-joint-unsup-large")["url"]
    expected = tmp_path / "1xo5QrlG_TJ6NetqSX1nYtaVLPzee2kpx" / "archive"
    with pytest.raises(FileNotFoundError) as err:
        published.build_archive("consert-joint-unsup-large", published.published_spec("consert-joint-unsup-large"))
    assert url in str(err.value) and f"save it as {expected}" in str(err.value)


def test_archive_with_modules_that_change_vectors_is_refused(tmp_path, tokenizer_dir, consert_model):
    root = st039_folder(tmp_path / "src", tokenizer_dir, "Transformer", consert_model, 6) / "unsup-consert-base"
    modules = json.loads((root / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (root / "modules.json").write_text(json.dumps(modules))
    from benchharness.encoders.st_archive import ArchiveError, convert, unpack

    with pytest.raises(ArchiveError, match=r"modules \['Dense'\] change the vectors"):
        convert(root, tmp_path / "out")
    (tmp_path / "page.zip").write_text("<html>quota exceeded</html>")
    with pytest.raises(ArchiveError, match="neither a zip nor a tar"):
        unpack(tmp_path / "page.zip", tmp_path / "x")


# --------------------------------------------------------------------------- Google Drive


class FakeResponse(io.BytesIO):
    def __init__(self, body: bytes, content_type: str, url: str) -> None:
        super().__init__(body)
        self.headers = Message()
        self.headers["Content-Type"] = content_type
        self.url = url

    def geturl(self) -> str:
        return self.url


class FakeDrive:
    """Answers the first request with ``page`` and a request carrying the confirmation with the file."""

    def __init__(self, page: str, payload: bytes, confirmed: str) -> None:
        self.page, self.payload, self.confirmed, self.urls = page, payload, confirmed, []

    def open(self, url: str, timeout: float = 0) -> FakeResponse:
        self.urls.append(url)
        if self.confirmed in url:
            return FakeResponse(self.payload, "application/octet-stream", url)
        return FakeResponse(self.page.encode(), "text/html; charset=utf-8", url)


def test_drive_virus_scan_confirmation(tmp_path):
    page = (
        '<html><body><form id="download-form" action="https://drive.usercontent.google.com/download" '
        'method="get"><input type="submit" value="Download anyway"/>'
        '<input type="hidden" name="id" value="FILEID"><input type="hidden" name="export" value="download">'
        '<input type="hidden" name="confirm" value="t"><input type="hidden" name="uuid" value="u-1"></form>'
        "</body></html>"
    )
    drive = FakeDrive(page, b"PK\x03\x04archive bytes", "uuid=u-1")
    out = download_mod.download("https://drive.google.com/file/d/FILEID/view?usp=sharing", tmp_path / "a", drive)
    assert out.read_bytes() == b"PK\x03\x04archive bytes"
    assert drive.urls == [
        "https://drive.usercontent.google.com/download?id=FILEID&export=download",
        "https://drive.usercontent.google.com/download?id=FILEID&export=download&confirm=t&uuid=u-1",
    ]

    legacy = '<a id="uc-download-link" href="/uc?export=download&amp;confirm=Ab_1&amp;id=FILEID">Download</a>'
    drive = FakeDrive(legacy, b"tar bytes", "confirm=Ab_1")
    download_mod.download("https://drive.google.com/uc?id=FILEID&export=download", tmp_path / "b", drive)
    assert drive.urls[1] == "https://drive.usercontent.google.com/uc?export=download&confirm=Ab_1&id=FILEID"

    quota = FakeDrive("<html>Too many users have viewed or downloaded this file recently</html>", b"", "never")
    with pytest.raises(download_mod.DownloadError, match=r"not shared publicly, or .* quota"):
        download_mod.download("https://drive.google.com/file/d/FILEID/view", tmp_path / "c", quota)
    assert not (tmp_path / "c").exists()


# --------------------------------------------------------------------------- no random pooler


def test_cls_pooling_refused_without_pooler_weights(tmp_path, tokenizer_dir):
    torch.manual_seed(6)
    folder = tmp_path / "no-pooler"
    model = BertModel(tiny_config(), add_pooling_layer=False).eval()
    model.save_pretrained(folder)
    for f in tokenizer_dir.iterdir():
        if f.name != "config.json":
            shutil.copy(f, folder / f.name)
    with pytest.raises(
        ValueError,
        match=r"pooling 'cls' .* holds no pooler weights \(pooler\.dense\.weight\).*"
        r"cls_before_pooler",
    ):
        HFEncoder("t", str(folder), pooling="cls")
    with pytest.raises(ValueError, match="no pooler weights"):
        HFEncoder("t", str(folder))  # 'cls' is the default
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    got = HFEncoder("t", str(folder), pooling="cls_before_pooler", batch_size=3).encode(SENTENCES)
    np.testing.assert_allclose(got, by_hand(model, tok, SENTENCES, lambda o, _: o.last_hidden_state[0, 0]), atol=1e-5)


def test_cls_pooling_refused_on_paraphrase_minilm_l3():
    # a real case from the shared cache: its checkpoint has no pooler
    with pytest.raises(ValueError, match="paraphrase-MiniLM-L3-v2: 'cls' is the output of BERT's pooler"):
        HFEncoder("t", MINILM_L3, pooling="cls")


def test_checkpoint_keys_from_a_sharded_index(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {},
                "weight_map": {
                    "bert.pooler.dense.weight": "model-00002.safetensors",
                    "bert.embeddings.word_embeddings.weight": "model-00001.safetensors",
                },
            }
        )
    )
    assert checkpoint_keys(tmp_path) == {"bert.pooler.dense.weight", "bert.embeddings.word_embeddings.weight"}


def test_catalogue_names_resolve_through_the_registry():
    """Published names are encoder names: the resolver maps them to the catalogue's spec and
    lists them, with no import of the catalogue module by the core."""
    from benchharness.encoders.published import CHECKPOINTS, published_spec
    from benchharness.evaluation.resolver import Resolver

    registry = Resolver()
    for entry in CHECKPOINTS:
        assert registry.spec_for(entry.name) == published_spec(entry.name)
    listed = {row["name"] for row in registry.describe()}
    assert {c.name for c in CHECKPOINTS} <= listed
    assert sum(c.method.startswith("SimCSE") for c in CHECKPOINTS) == 8  # the SimCSE README lists 8


def test_no_name_is_both_a_recipe_and_a_published_checkpoint():
    """A recipe name trains on demand, a catalogue name downloads: one name must mean one thing."""
    from benchharness.encoders.builtins import BUILTINS
    from benchharness.encoders.published import PUBLISHED
    from benchharness.training.recipes import load_book

    recipes = set(load_book().names())
    assert not recipes & set(PUBLISHED) and not recipes & set(BUILTINS) and not set(PUBLISHED) & set(BUILTINS)
