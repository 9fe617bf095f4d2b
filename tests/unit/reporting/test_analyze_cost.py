"""``benchharness analyze`` on a results folder that holds a sparse, a multi-vector and dense models'
(float32, int8 and binary) runs of one retrieval task: each is a point of the cost view at the bytes
per document and operations per pair its stored result implies, with its stored score and interval;
the dense ones are analysed on STS-B too, the others are not; ``report`` shows the same view."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchharness.cli import main
from benchharness.core.results import slug
from tests.helpers import MINILM_L3, cli, needs_data, one_line_error
from tests.multi_vector_helpers import make_colbert
from tests.sparse_helpers import make_tiny_splade

TASK = "tiny-beir"
DOCUMENTS = [
    "Cats sleep for most of the day, curled up.",
    "Paris is the capital of France.",
    "A dog barks at the postman every morning.",
    "Rain falls on the hills in the spring.",
    "The train to Berlin leaves at noon.",
    "Bread is baked early in small ovens.",
]
QUERIES = ["how do cats sleep?", "what is the capital of france?", "when does the train leave?", "who bakes bread?"]
RELEVANT = [0, 1, 4, 5]


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    for name, prefix, texts in (("corpus", "d", DOCUMENTS), ("queries", "q", QUERIES)):
        lines = (json.dumps({"_id": f"{prefix}{i}", "text": t}) + "\n" for i, t in enumerate(texts))
        (folder / f"{name}.jsonl").write_text("".join(lines))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{d}\t1\n" for i, d in enumerate(RELEVANT))
    )
    return folder


@needs_data("glove", "senteval/STS/STSBenchmark")
def test_analyze_draws_every_kind_against_cost_from_the_results_folder(project, tmp_path_factory, capsys):
    models = tmp_path_factory.mktemp("models")
    splade, colbert = f"st:{make_tiny_splade(models / 'splade')}", f"st:{make_colbert(models / 'colbert', MINILM_L3)}"
    beir = os.path.relpath(write_beir(tmp_path_factory.mktemp("files") / "beir"), project)
    (project / "benchharness.toml").write_text(
        f'[paths]\ncache_dir = ".cache"\n\n[tasks.{TASK}]\nkind = "retrieval"\nfolder = "{beir}"\n'
    )
    sizes = "glove-50d+quantize(precision=int8|binary)"
    assert main(["run", "--encoders", f"{splade},{colbert},glove-50d,{sizes}", "--tasks", TASK, "--quiet"]) == 0
    stored = {
        r["encoder"]: r for r in (json.loads(p.read_text()) for p in (project / "results").glob(f"*/{TASK}.json"))
    }
    capsys.readouterr()

    assert main(["analyze", splade, colbert, "glove-50d", sizes, "--out", "figs", "--formats", "svg,png"]) == 0
    shown = capsys.readouterr().out
    cost = json.loads((project / "figs" / "cost.json").read_text())
    points = {p["encoder"]: p for p in cost["tasks"][TASK]}
    assert list(cost["tasks"]) == [TASK] and set(points) == set(stored)
    # what each kind's result records, turned into bytes per document and operations per pair here
    sparse, tokens = stored[splade]["metrics"], stored[colbert]["metrics"]
    expected = {
        splade: ("sparse", sparse["bytes_per_document"], sparse["avg_flops"]),
        colbert: (
            "multi-vector",
            4 * tokens["tokens_per_document"] * tokens["token_dimension"],  # float32 token vectors
            tokens["tokens_per_query"] * tokens["tokens_per_document"] * tokens["token_dimension"],
        ),
        "glove-50d": ("dense float32", 4 * 50, 50),
        "glove-50d+quantize(precision=int8)": ("dense int8", 50, 50),
        # 50 signs packed in 7 whole bytes, and all 56 bits of the code compared
        "glove-50d+quantize(precision=binary)": ("dense binary", 7, 56),
    }
    for name, (kind, size, work) in expected.items():
        point = points[name]
        assert (point["kind"], point["work"]) == (kind, pytest.approx(work)), name
        assert point["bytes_per_document"] == pytest.approx(size), name
        assert point["score"] == stored[name]["main_score"] and point["interval"] == stored[name]["confidence"]["main"]
    assert sparse["bytes_per_document"] == sparse["index_bytes"] / len(DOCUMENTS) and sparse["avg_flops"] > 0
    assert f"{splade}: a sparse encoder" in shown and "no STS-B geometry; drawn against cost" in shown
    assert f"  {colbert} (multi-vector): ndcg@10 " in shown
    written = {p.name for p in (project / "figs").iterdir()}
    assert {"cost.svg", "cost.png", "glove-50d.json", "alignment-uniformity.svg"} <= written
    assert f"{slug(splade)}.json" not in written  # no geometry for a model without a vector a sentence
    assert "multi-vector" in (project / "figs" / "cost.svg").read_text()

    assert main(["report", "--out", "report", "--no-published", "--analysis", "figs"]) == 0
    page = (project / "report" / "index.html").read_text()
    assert page.count("<h2>Quality against cost</h2>") == 1 and 'alt="cost.svg"' in page
    assert f"<td>{colbert}</td><td>multi-vector</td>" in page

    # a sparse model alone, with no stored search result: nothing to draw, said in one line
    empty = cli(project, "analyze", splade, "--out", "nothing", "--results-dir", "elsewhere")
    one_line_error(empty, f"nothing to analyze: no single vector a sentence from {splade}", "under elsewhere/ to draw")
    assert not (project / "nothing").exists()
