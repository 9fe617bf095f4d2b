"""A benchmark of retrieval through benchharness against a sentence-transformers information-retrieval
evaluator, whatever the kind of model: a script declares its model and evaluator (``Versus``:
``benchmarks/multi_vector_retrieval.py``, ``benchmarks/sparse_retrieval.py``) and ``main`` does the
rest: the command line, a BEIR folder of real sentences at the size asked, the evaluator's inputs for
it, both tools run alternately, each in a fresh process (``benchmarks/versus_st.py``), the fastest
run of each compared.

The folder is STS-B test as ``benchmarks/beir_stsb.py`` builds it (first sentences as queries,
second sentences as the corpus, gold >= 4 relevant), its corpus grown to the size asked with the
other sentences of the shared data's tasks as distractors. A distractor is added only if no text
already in the folder reads the same to an uncased BERT vocabulary (``distinct_key``): STS-B's
sentences come from STS12-16, and an unjudged copy of a judged document ties with it exactly, so
that float rounding, which differs between any two implementations, would decide the metric. The
evaluator gets the task's own
reading of it (the same texts, scored queries and judgements) with corpus ids named in corpus order,
so that it breaks ties as benchharness does, and is asked for the task's metrics at the task's depth.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the metrics compared, named alike by the task and (after the similarity's prefix) the evaluator
METRICS = ("ndcg@10", "mrr@10", "map@100", "recall@100")
#: texts a batch, for both tools (sentence-transformers' evaluators' default)
BATCH_SIZE = 32
#: the tasks whose sentences are the distractors, in order (about 25,000 distinct sentences)
DISTRACTORS = ("STS12", "STS13", "STS14", "STS15", "STS16", "SICKRelatedness")
#: the tools, in the order they run each round: the sentence-transformers evaluator, then benchharness
TOOLS = ("st", "benchharness")


def distinct_key(text: str) -> tuple[str, ...]:
    """What an uncased BERT tokenizer (all the models here use one) sees of ``text`` before its
    vocabulary: lower case, accents stripped, split at spaces and punctuation. Two texts with one
    key get the same token ids, so any model scores them alike."""
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normal = BertNormalizer(lowercase=True, strip_accents=True).normalize_str(text)
    return tuple(piece for piece, _ in BertPreTokenizer().pre_tokenize_str(normal))


def write_folder(
    folder: Path, root: Any, corpus_size: int, distractors: Sequence[str] = DISTRACTORS, pairs: int | None = None
) -> dict:
    """The BEIR folder described above, from the data root ``root`` (``pairs``: STS-B test's first
    pairs only); its counts."""
    from beir_stsb import write_stsb_beir  # imported by scripts, whose folder is on the path

    from benchharness import tasks

    stsb = tasks.get("STSBenchmark")
    stsb.load(root)
    ((first, second, gold),) = stsb.subsets.values()
    counts = write_stsb_beir(folder, first[:pairs], second[:pairs], gold[:pairs])
    seen = {
        distinct_key(json.loads(line)["text"])
        for name in ("corpus", "queries")
        for line in (folder / f"{name}.jsonl").open()
    }
    room = corpus_size - counts["corpus"]
    added = 0
    with (folder / "corpus.jsonl").open("a") as fh:
        for name in distractors:
            if added >= room:
                break
            task = tasks.get(name)
            task.load(root)
            for sentence in (s.strip() for s in task.sentences()):
                if added >= room:
                    break
                key = distinct_key(sentence)
                if key and key not in seen:
                    seen.add(key)
                    fh.write(json.dumps({"_id": f"x{added}", "title": "", "text": sentence}) + "\n")
                    added += 1
    return {**counts, "corpus": counts["corpus"] + added, "distractors": added}


def evaluator_inputs(data: Any) -> dict[str, Any]:
    """The keyword arguments of an information-retrieval evaluator for a BEIR folder as the task reads
    it (``tasks.files.beir.BeirData``): ids in corpus order, the task's metrics at its cutoffs."""
    return {
        "queries": {f"q{i:07d}": text for i, text in enumerate(data.queries)},
        "corpus": {f"{i:07d}": text for i, text in enumerate(data.documents)},
        "relevant_docs": {f"q{i:07d}": {f"{j:07d}" for j in rel} for i, rel in enumerate(data.relevant)},
        "mrr_at_k": [10],
        "ndcg_at_k": [10],
        "map_at_k": [100],
        "precision_recall_at_k": [100],
        "accuracy_at_k": [1],
        "batch_size": BATCH_SIZE,
        "write_csv": False,
    }


def run_benchharness(model: Path, folder: Path, task: str, root: Path, device: str, memory: float) -> dict:
    """The task's metrics and facts through ``benchharness.evaluate("st:<model>", <the folder>)``."""
    import benchharness
    from benchharness.tasks.files.declarations import register_file_task

    register_file_task(task, folder, kind="retrieval")
    (result,) = benchharness.evaluate(
        f"st:{model}",
        task,
        data_dir=root,
        device=device,
        batch_size=BATCH_SIZE,
        intervals=False,
        embedding_memory_mib=memory,
    )
    return dict(result.metrics)


@dataclass(frozen=True)
class Versus:
    """One benchmark of this kind, declared by what sets it apart: the kind of model and how to make
    it, the evaluator and how to run it, what benchharness reports of the model, the corpus sizes.
    ``main`` does the rest, the same for every model kind."""

    #: the results file's name (``results/benchmarks/<name>.txt``)
    name: str
    #: the name the BEIR folder is registered under as a retrieval task
    task: str
    #: the model, for the output
    model: str
    #: ``make_model(folder)``: the model saved under ``folder``; its path
    make_model: Callable[[Path], Path]
    #: the evaluator's class name, for the output
    evaluator: str
    #: ``run_evaluator(model, folder, device)``: the evaluator's metrics (and figures), x100
    run_evaluator: Callable[[Path, Path, str], dict]
    #: ``facts(metrics)``: what benchharness reported of the model beside the metrics, one line
    facts: Callable[[dict], str]
    #: the corpus's size, and in smoke mode
    corpus: int
    smoke_corpus: int
    distractors: Sequence[str] = DISTRACTORS
    #: what both tools report of the model beside the metrics, shown but not compared
    figures: Sequence[str] = ()


def main(versus: Versus, doc: str, script: str) -> int:
    """The benchmark ``versus`` declares, run from ``script`` (whose docstring is ``doc``): as a
    worker when started as one; otherwise the folder and the model written to a temporary folder, both
    tools run ``--repeats`` rounds, the comparison and the times reported. The exit status says whether
    the metrics agree within 0.01 (x100)."""
    from machine import SMOKE, data_root, header, report
    from versus_st import metric_lines, timing_lines

    from benchharness.core.settings import apply_environment, load_config

    args = _parse_args(doc, versus.corpus, versus.smoke_corpus)
    if args.worker:
        _work(args, versus)
        return 0
    apply_environment(load_config())  # this script owns its process: the offline hub cache a model may come from
    head = header()  # the load before this script's own work
    with tempfile.TemporaryDirectory(prefix=f"{versus.name}-") as scratch:
        model = versus.make_model(Path(scratch) / "model")
        folder = Path(scratch) / "beir"
        counts = write_folder(folder, data_root(), args.corpus, versus.distractors, pairs=100 if SMOKE else None)
        st, bh = _fastest_runs(script, model, folder, args)
    compared, worst = metric_lines(bh["metrics"], st["metrics"], METRICS, versus.figures)
    lines = [
        head,
        f"model: {versus.model}, device {args.device}, cpu threads: {os.cpu_count()}",
        (
            f"data: STS-B test as BEIR ({counts['judged_queries']} scored queries) + {counts['distractors']:,} "
            f"distractor sentences of {', '.join(versus.distractors)}: {counts['corpus']:,} documents"
        ),
        *compared,
        versus.facts(bh["metrics"]),
        *timing_lines(
            {
                f"sentence-transformers {versus.evaluator}:": st,
                f"benchharness evaluate (memory bound {args.memory:g} MiB):": bh,
            },
            "model load + data + encode + search + metrics",
            args.repeats,
        ),
        f"metrics agree within 0.01 (x100 scale): {worst < 0.01} (largest difference {worst:.5f})",
    ]
    report(versus.name, lines)
    return 0 if worst < 0.01 else 1


def _parse_args(doc: str, corpus: int, smoke_corpus: int) -> argparse.Namespace:
    """The command line, with the hidden flags the workers are started with."""
    from machine import SMOKE

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--corpus", type=int, default=corpus, help="documents in the corpus (STS-B's and distractors)")
    parser.add_argument("--memory", type=float, default=1024.0, help="benchharness's memory bound (MiB)")
    parser.add_argument("--device", default="cpu", help="where both tools encode and score (default cpu)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs per tool; the best is kept")
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(corpus=smoke_corpus)
    return parser.parse_args()


def _work(args: argparse.Namespace, versus: Versus) -> None:
    """Be the worker ``args.worker`` names, in this fresh process: benchharness on the folder as the
    retrieval task, or the evaluator."""
    from machine import data_root
    from versus_st import measure

    if args.worker == "benchharness":
        root = data_root().root
        measure(
            lambda: run_benchharness(args.model, args.folder, versus.task, root, args.device, args.memory), args.device
        )
    else:
        measure(lambda: versus.run_evaluator(args.model, args.folder, args.device), args.device)


def _fastest_runs(script: str, model: Path, folder: Path, args: argparse.Namespace) -> tuple[dict, dict]:
    """Both tools on ``model`` and ``folder``, ``args.repeats`` rounds, each run a fresh process of
    ``script``; the fastest run of each: (sentence-transformers', benchharness's)."""
    from versus_st import spawn

    common = ["--model", str(model), "--folder", str(folder), "--device", args.device, "--memory", str(args.memory)]
    runs: dict[str, list[dict]] = {tool: [] for tool in TOOLS}
    for _ in range(args.repeats):
        for tool, results in runs.items():
            results.append(spawn(script, ["--worker", tool, *common]))
    st, bh = (min(runs[tool], key=lambda x: x["seconds"]) for tool in TOOLS)
    return st, bh
