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
"""

from __future__ import annotations

import mteb

from benchharness.core.data_root import DataRoot
from benchharness.core.encoder import Encoder
from benchharness.core.task import DataRecord, EncoderDrivenTask, Evaluation, TaskMetadata
from benchharness.mteb_bridge import evaluate, selection


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

    def _load(self, data: DataRoot) -> None:
        evaluate.load_task_data(self.task)

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

    def evaluate_encoder(self, encoder: Encoder, seed: int) -> Evaluation:
        """mteb's scores, and the prompt each side got (mteb gives the task's instruction)."""
        record = evaluate.run_task(encoder, self.task)
        return Evaluation(
            {**record.metrics, self.metadata.main_score: record.main_score}, prompts=record.prompts or None
        )
