"""Names, specs, compositions, config-registered encoders and run manifests."""

import json

import pytest

from benchharness.core.manifests import registered_runs
from benchharness.core.results import ResultStore
from benchharness.core.specs import UnknownEncoderError, split_composition
from benchharness.evaluation.resolver import Resolver, parse_adhoc


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Run from an empty folder with its own benchharness.toml, and its own runs folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(tmp_path / "runs"))
    return tmp_path


def test_unknown_name_suggests_close_matches(isolated):
    with pytest.raises(UnknownEncoderError) as err:
        Resolver().get("minilm-l7")
    assert "Did you mean: minilm-l6, minilm-l3" in str(err.value)


def test_adhoc_spec_parses_typed_parameters():
    spec = parse_adhoc("hf:some/model?pooling=avg_first_last&first_layer=0&normalize=true")
    assert spec == {
        "type": "hf",
        "model": "some/model",
        "pooling": "avg_first_last",
        "first_layer": 0,
        "normalize": True,
    }
    assert parse_adhoc("minilm-l6") is None


def test_split_composition_respects_parentheses():
    assert split_composition("a+b(x=1,y=2)+c") == ["a", "b(x=1,y=2)", "c"]
    with pytest.raises(UnknownEncoderError, match="malformed"):
        split_composition("a+b(x=1")
    with pytest.raises(UnknownEncoderError, match="malformed"):
        split_composition("a++b")


def test_unknown_postprocessor_is_named(isolated, tiny_bert):
    with pytest.raises(UnknownEncoderError, match="unknown post-processor 'nosuchpost'"):
        Resolver().get(f"hf:{tiny_bert}?pooling=avg+nosuchpost(k=3)")


def test_config_registered_encoder(isolated, tiny_bert):
    (isolated / "benchharness.toml").write_text(
        f'[encoders.tiny-avg]\nspec = "hf:{tiny_bert}?pooling=avg"\ndescription = "tiny"\n'
    )
    enc = Resolver().get("tiny-avg")
    assert enc.pooling == "avg" and enc.name == "tiny-avg"
    assert "tiny-avg" in [r["name"] for r in Resolver().describe()]


def test_run_manifest_registers_by_folder_and_by_name(isolated, tiny_bert):
    run = isolated / "runs" / "my-run"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(
        json.dumps(
            {
                "name": "my-trained",
                "method": "test",
                "encoder": {"type": "hf", "model": str(tiny_bert), "pooling": "cls_before_pooler"},
            }
        )
    )
    assert registered_runs(isolated / "runs") == {"my-trained": run}
    by_name, by_path = Resolver().get("my-trained"), Resolver().get(str(run))
    assert by_name.identity == by_path.identity
    assert by_name.encode(["hello world"]).shape == (1, 32)
    # results carry the training recipe, since run folders are not kept with them
    assert by_name.metadata["training"] == {"name": "my-trained", "method": "test"}
    assert "training" not in Resolver().get(f"hf:{tiny_bert}?pooling=cls_before_pooler").metadata


def test_corrupt_manifest_names_file_and_line(isolated):
    run = isolated / "bad"
    run.mkdir()
    (run / "manifest.json").write_text('{"encoder": {\n  "type": "hf",\n  oops\n}')
    with pytest.raises(ValueError, match=r"manifest.json: invalid JSON at line 3"):
        Resolver().get(str(run))


def test_an_encoder_defined_in_python_is_named_module_attribute_in_the_config(project, monkeypatch, capsys):
    from benchharness.cli import main

    (project / "bh_config_encoder.py").write_text(
        "import numpy as np\n"
        "from benchharness.core.encoder import Encoder\n\n\n"
        "class Letters(Encoder):\n"
        "    def encode(self, sentences):\n"
        "        counts = [np.bincount([ord(c) % 16 for c in s], minlength=16) for s in sentences]\n"
        "        return np.stack(counts).astype('f4')\n\n"
        "    def identity_info(self):\n"
        "        return {'family': 'letters'}\n"
    )
    monkeypatch.syspath_prepend(str(project))
    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n[encoders.letters]\nspec = "bh_config_encoder:Letters"\n'
    )
    assert (
        main(["run", "--encoders", "letters,python:bh_config_encoder:Letters", "--tasks", "STSBenchmark", "--quiet"])
        == 0
    )
    stored = [
        json.loads(ResultStore(project / "results").path(name, "STSBenchmark").read_text())
        for name in ("letters", "python:bh_config_encoder:Letters")
    ]
    assert stored[0]["main_score"] == stored[1]["main_score"]
    assert stored[0]["encoder_identity"]["family"] == "letters"
    assert main(["run", "--encoders", "python:bh_config_encoder:Nope", "--tasks", "STSBenchmark"]) == 2
    assert "cannot load encoder 'bh_config_encoder:Nope'" in capsys.readouterr().err
