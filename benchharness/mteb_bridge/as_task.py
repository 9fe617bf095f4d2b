"""An mteb task as a benchharness task: ``--tasks mteb:STS22`` in ``benchharness run``.

mteb's evaluators decide what to encode (a retrieval corpus, each split and subset), so the task
is an ``EncoderDrivenTask``: the runner hands it the encoder the resolver built, wrapped in
benchharness's embedding cache, and ``evaluate.run_task`` evaluates it with mteb's own code. The
stored result carries mteb's task name, dataset and revision and the mteb version in its protocol
(variant ``mteb-<version>``), the main score x100 under mteb's main metric name and every mteb
score x100 as ``split/subset/metric``.

Loading fetches the dataset (mteb downloads it online into the Hugging Face cache); offline, a
dataset missing from that cache fails this task alone, with the dataset, revision and cache
folders named (``evaluate.DatasetNotCachedError``); the run tells several such tasks in one line.

What the task takes of a model (``takes``, ``operations``) is what mteb 2's evaluation of its task
type uses of a model that is not dense. mteb's retrieval tasks (retrieval, reranking, instruction
retrieval and reranking) are the only ones that take a model other than an encoder of vectors: a
split with candidate lists to rerank (``top_ranked``: a reranking task) scores each query's
candidates as pairs, which a cross-encoder does; a split without searches the whole corpus, which a
sparse or multi-vector model does and a cross-encoder cannot (mteb refuses it too). Every other task
type (STS, pair classification, classification, clustering, bitext mining, summarization...)
computes on one vector per text: mteb refuses a cross-encoder or a multi-vector model there and runs
a sparse model on its vocabulary-sized vectors made dense, which the sparse kind does not give, so
those tasks take vectors and the runner refuses any other kind before anything is encoded.
"""

from __future__ import annotations

import mteb
from mteb.abstasks import AbsTask, AbsTaskRetrieval

from benchharness.core.data_root import DataRoot
from benchharness.core.encoder import Encoder
from benchharness.core.kinds import PAIRS, SEARCH, VECTORS, ViewSettings
from benchharness.core.task import DataRecord, EncoderDrivenTask, Evaluation, TaskMetadata
from benchharness.mteb_bridge import evaluate, selection


def operations(task: AbsTask) -> frozenset[str]:
    """What mteb's evaluation of ``task`` uses of a model that is not dense (see the module's
    docstring): vectors for every task but retrieval's; for a retrieval task, pair scores for each
    split that reranks given candidates and a search for each that does not, read from its data
    once loaded (``evaluate.load_task_data``), and from its type until then (a reranking type has
    candidate lists)."""
    if not isinstance(task, AbsTaskRetrieval):
        return frozenset({VECTORS})
    by_type = frozenset({PAIRS if "Reranking" in task.metadata.type else SEARCH})
    if not task.data_loaded:
        return by_type
    found = frozenset(
        PAIRS if split.get("top_ranked") is not None else SEARCH
        for subset in task.dataset.values()
        for name, split in subset.items()
        if name in task.eval_splits
    )
    return found or by_type


class MtebTask(EncoderDrivenTask):
    def __init__(self, name: str) -> None:
        """``name``: an mteb task, with filters or without (``selection``); the task is named by
        what it evaluates (``selection.canonical``)."""
        super().__init__()
        self.task = selection.task(name)
        meta = self.task.metadata
        canonical = selection.canonical(self.task)
        self.metadata = TaskMetadata(
            name=canonical,
            family="mteb",
            description=" ".join(meta.description.split())[:200],
            split="+".join(self.task.eval_splits),
            main_score=meta.main_score,
            protocol=evaluate.variant(mteb.__version__),
            reference=meta.reference or "",
            protocol_details={
                "mteb_task": meta.name,
                "type": str(meta.type),
                "dataset": meta.dataset["path"],
                "dataset_revision": meta.dataset["revision"],
                "mteb_version": mteb.__version__,
                "splits": sorted(self.task.eval_splits),
                # only when filtered: a whole task's record stays as it always was
                **({"subsets": list(self.task.hf_subsets)} if canonical != evaluate.PREFIX + meta.name else {}),
            },
        )
        self.takes = operations(self.task)

    def _load(self, data: DataRoot) -> None:
        evaluate.load_task_data(self.task)
        self.takes = operations(self.task)

    def data_record(self) -> DataRecord:
        """The data are the Hugging Face dataset at the revision mteb pins (read by the datasets
        library, not as files under the data root, hence no sha256 of ours)."""
        dataset = self.task.metadata.dataset
        return {
            "sha256": "",
            "root": evaluate.cache_folders()["HF_DATASETS_CACHE"],
            "files": [f"hf://datasets/{dataset['path']}@{dataset['revision']}"],
            "verified": False,
        }

    def evaluate_encoder(self, encoder: Encoder, seed: int, settings: ViewSettings | None = None) -> Evaluation:
        """mteb's scores, and the prompt each side got (mteb gives the task's instruction); a model
        of a kind other than dense keeps its outputs in its kind's cache as the run's ``settings`` say."""
        record = evaluate.run_task(encoder, self.task, settings=settings)
        return Evaluation(
            {**record.metrics, self.metadata.main_score: record.main_score}, prompts=record.prompts or None
        )
