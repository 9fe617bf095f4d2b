"""Task instructions through the mteb bridge: the text the tokenizer receives equals what mteb's own
wrappers send for the same model, task and side, and the result records the prompt of each side.

The references are mteb's ``SentenceTransformerEncoderWrapper`` (a model with query and document
prompts) and ``InstructSentenceTransformerModel`` (an instruction model, instructions on the query
side only), both on the same tiny local sentence-transformers folder. The tasks are mteb's own
metadata (SciFact's query instruction, Banking77's task instruction, STSBenchmark without one),
read offline; their data are never loaded.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
mteb = pytest.importorskip("mteb")
pytestmark = pytest.mark.filterwarnings("ignore:Prompt type .document. not found in task metadata:UserWarning")

from datasets import Dataset  # noqa: E402
from mteb.models.instruct_wrapper import InstructSentenceTransformerModel  # noqa: E402
from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper  # noqa: E402
from mteb.types import PromptType  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from benchharness.encoders.sentence_transformers_format import save_as_sentence_transformer  # noqa: E402
from benchharness.evaluation.resolver import Resolver  # noqa: E402
from benchharness.mteb_bridge.as_model import MtebEncoder  # noqa: E402
from tests.helpers import tokenizer_inputs  # noqa: E402

TEXTS = ["a cat sleeps", "rain is expected"]
TEMPLATE = "Instruct: {instruction}\nQuery: "
SIDES = [("SciFact", PromptType.query), ("SciFact", PromptType.document), ("Banking77Classification", None)]
SIDES += [("STSBenchmark", None)]


@pytest.fixture(scope="module")
def prompted(tiny_bert, tmp_path_factory):
    """A tiny sentence-transformers model whose config names a query and a document prompt."""
    folder = tmp_path_factory.mktemp("mteb-prompted") / "model"
    shutil.copytree(tiny_bert, folder)
    save_as_sentence_transformer(folder, {"pooling": "avg"})
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    settings.update(prompts={"query": "query: ", "document": "passage: "}, default_prompt_name=None)
    config.write_text(json.dumps(settings))
    return folder


@pytest.fixture(scope="module")
def plain(prompted, tmp_path_factory):
    """The same model with no prompts configured (as mteb's instruction models ship: their document
    side gets no prompt)."""
    folder = tmp_path_factory.mktemp("mteb-plain") / "model"
    shutil.copytree(prompted, folder)
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "prompts": {}}))
    return folder


def sent(wrapper, model_tokenizer, task: str, prompt_type) -> list[str]:
    """The texts the tokenizer got when ``wrapper`` encoded TEXTS for ``task``'s ``prompt_type`` side."""
    loader = DataLoader(
        Dataset.from_dict({"text": TEXTS}), batch_size=8, collate_fn=lambda rows: {"text": [r["text"] for r in rows]}
    )
    with tokenizer_inputs(model_tokenizer) as seen:
        wrapper.encode(
            loader,
            task_metadata=mteb.get_task(task).metadata,
            hf_split="test",
            hf_subset="default",
            prompt_type=prompt_type,
        )
    return sorted(text for text in seen if any(text.endswith(t) for t in TEXTS))  # batching orders differ


@pytest.mark.parametrize(("task", "prompt_type"), SIDES)
def test_a_prompted_model_gets_what_mteb_sentence_transformers_wrapper_sends(prompted, task, prompt_type):
    ours = MtebEncoder(Resolver().get(f"st:{prompted}"))
    theirs = SentenceTransformerEncoderWrapper(str(prompted), device="cpu")
    tokenizer = ours.model.model[0].tokenizer
    assert sent(ours, tokenizer, task, prompt_type) == sent(theirs, theirs.model[0].tokenizer, task, prompt_type)


@pytest.mark.parametrize(("task", "prompt_type"), SIDES)
def test_an_instruction_model_gets_what_mteb_instruction_wrapper_sends(plain, task, prompt_type):
    template = TEMPLATE.replace(" ", "%20").replace("\n", "%0A")
    ours = MtebEncoder(Resolver().get(f"st:{plain}?instruction_template={template}"))
    theirs = InstructSentenceTransformerModel(
        str(plain), revision=None, instruction_template=TEMPLATE, apply_instruction_to_passages=False, device="cpu"
    )
    ours_sent = sent(ours, ours.model.model[0].tokenizer, task, prompt_type)
    assert ours_sent == sent(theirs, theirs.model[0].tokenizer, task, prompt_type)
    if task == "SciFact" and prompt_type == PromptType.query:  # the task's own instruction, in the template
        instruction = "Given a scientific claim, retrieve documents that support or refute the claim"
        assert ours_sent[0] == f"Instruct: {instruction}\nQuery: a cat sleeps"
    assert set(ours.applied) == {"default" if prompt_type is None else prompt_type.value}  # the side's prompt


def test_a_model_without_prompts_gets_no_instruction(plain):
    ours = MtebEncoder(Resolver().get(f"st:{plain}"))
    assert sent(ours, ours.model.model[0].tokenizer, "SciFact", PromptType.query) == sorted(TEXTS)
    assert ours.applied == {}


def test_the_result_records_the_prompt_each_side_got(plain, monkeypatch):
    import benchharness
    from benchharness.mteb_bridge import evaluate as bridge_run
    from benchharness.mteb_bridge.as_task import MtebTask
    from benchharness.mteb_bridge.memory import sts_task

    def get_task(name):
        task = sts_task(
            "XInstructed", ["a cat sits", "rain falls", "a man sings"], ["a cat", "snow", "he sings"], [4, 1, 3]
        )
        task.metadata = task.metadata.model_copy(update={"prompt": "Find a sentence that means the same"})
        return task

    monkeypatch.setattr(bridge_run, "get_task", get_task)
    template = TEMPLATE.replace(" ", "%20").replace("\n", "%0A")
    results = benchharness.evaluate(
        f"st:{plain}?instruction_template={template}", [MtebTask("XInstructed")], intervals=False
    )
    (result,) = results.results
    assert result.encoder_metadata["prompts_applied"] == {
        "default": "Instruct: Find a sentence that means the same\nQuery: "  # a symmetric task: every sentence
    }
    without = benchharness.evaluate(f"st:{plain}", [MtebTask("XInstructed")], intervals=False)
    assert "prompts_applied" not in without.results[0].encoder_metadata


def test_the_export_records_each_tasks_prompts(plain, monkeypatch, tmp_path):
    import benchharness
    from benchharness.mteb_bridge import evaluate as bridge_run
    from benchharness.mteb_bridge.as_task import MtebTask
    from benchharness.mteb_bridge.export import PROVENANCE, export_results
    from benchharness.mteb_bridge.memory import sts_task

    task = sts_task("XExported", ["a cat sits", "rain falls", "a sad man"], ["a cat", "snow", "he cries"], [4, 1, 3])
    task.metadata = task.metadata.model_copy(update={"prompt": "Find a paraphrase"})
    monkeypatch.setattr(bridge_run, "get_task", lambda name: task)
    template = TEMPLATE.replace(" ", "%20").replace("\n", "%0A")
    results = benchharness.evaluate(f"st:{plain}?instruction_template={template}", [MtebTask("X")], intervals=False)
    report = export_results(results.results, tmp_path / "export")
    (exported,) = report.exported
    folder = Path(exported["path"]).parent
    meta = json.loads((folder / "model_meta.json").read_text())
    provenance = json.loads((folder / PROVENANCE).read_text())
    assert provenance["prompts_applied"] == {"XExported": {"default": "Instruct: Find a paraphrase\nQuery: "}}
    assert meta["use_instructions"] is True
