"""What the tests share besides fixtures: where the shared data and checkpoints are, tiny random
BERTs, the training loop's inputs, and the command line run in this process or in a fresh one.

Imported as ``tests.helpers`` everywhere (never ``conftest``): one module object, one name.

The names in ``SLOW_HELPERS`` make a test slow wherever a test (or a function or fixture of its
module) refers to them: ``conftest.py`` marks such a test ``slow`` at collection, so the fast tier
(``pytest -m "not slow"``) follows from what a test uses, not from a mark written by hand.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

import pytest

from tests.embedding_server import EmbeddingServer

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("BENCHHARNESS_SHARED", ROOT.parent / "shared"))
DATA = Path(os.environ.get("BENCHHARNESS_DATA", SHARED / "data"))
HF_CACHE = Path(os.environ.get("HF_HUB_CACHE", SHARED / "hf" / "hub"))

MINILM_L6 = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_L3 = "sentence-transformers/paraphrase-MiniLM-L3-v2"


def needs_data(*rels: str) -> pytest.MarkDecorator:
    missing = [r for r in rels if not (DATA / r).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"shared data missing: {missing}")


def needs_extra(module: str, extra: str) -> pytest.MarkDecorator:
    """Skip, saying which extra to install, where the optional ``module`` is absent (``.[test]`` alone)."""
    import importlib.util

    missing = importlib.util.find_spec(module) is None
    return pytest.mark.skipif(missing, reason=f"needs the {extra!r} extra ({module} is not installed)")


#: a toy dictionary (entry, definition) for DefSent+: two senses of two entries, a shared "african"
TOY_DICTIONARY = [
    ("revitalize", "give new life or vigor to"),
    ("revitalize", "imbue something with new life and vitality"),
    ("giraffe", "a long-necked african animal"),
    ("vulture", "a large bird of prey that feeds on dead animals"),
    ("ostrich", "a fast-running african bird that cannot fly"),
    ("lion", "a large wild cat of africa"),
    ("lion", "a brave person"),
    ("car", "a motor vehicle with four wheels"),
]


def make_tiny_bert(folder: Path, seed: int = 0, layers: int = 2, hidden: int = 32, dropout: float = 0.1) -> Path:
    """A randomly initialised BERT with the MiniLM (bert-base-uncased) vocabulary, saved to ``folder``
    (``dropout``: its hidden and attention dropout probabilities, BERT's 0.1 by default)."""
    import torch
    from huggingface_hub import snapshot_download
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(snapshot_download(MINILM_L3, local_files_only=True))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_cross_encoder(
    folder: Path, seed: int = 0, layout: str = "st", labels: int = 1, base: Path | None = None, **settings
) -> Path:
    """A cross-encoder of paraphrase-MiniLM-L3-v2's encoder (or of the BERT in ``base``, such as
    ``make_tiny_bert``'s) with a head seeded by ``seed`` (its pooler and classifier, normal with std
    0.2, so that scores spread and rarely tie), saved to ``folder``:
    ``layout="st"`` as ``CrossEncoder.save`` writes it (modules.json, ``model_type: CrossEncoder``;
    ``settings`` go to ``CrossEncoder``: max_length, activation_fn, prompts...), ``"hub"`` as the
    hub's older cross-encoders are (cross-encoder/ms-marco-MiniLM-L6-v2: a transformers
    ``BertForSequenceClassification`` folder, no modules.json)."""
    import torch
    from huggingface_hub import snapshot_download
    from transformers import AutoTokenizer, BertForSequenceClassification

    from benchharness.encoders.checkpoint import quiet_loading

    snapshot = str(base) if base is not None else snapshot_download(MINILM_L3, local_files_only=True)
    hub = folder if layout == "hub" else folder.with_name(folder.name + "-hub")
    with quiet_loading():  # the head is missing from the checkpoint: that is the point
        model = BertForSequenceClassification.from_pretrained(snapshot, num_labels=labels)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in (model.bert.pooler.dense, model.classifier):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * 0.2)
            layer.bias.zero_()
    with quiet_loading():
        model.save_pretrained(hub)
    AutoTokenizer.from_pretrained(snapshot).save_pretrained(hub)
    if layout == "st":
        from sentence_transformers import CrossEncoder

        with quiet_loading():
            CrossEncoder(str(hub), local_files_only=True, **settings).save(str(folder))
    return folder


#: the training settings (``TrainSettings``) that ``training`` takes besides the options and the plan's name
SETTINGS_KEYS = ("device", "threads", "stop_after", "overwrite", "keep_checkpoint", "progress", "dev")


@contextlib.contextmanager
def tokenizer_inputs(tokenizer):
    """Every text ``tokenizer``'s class is called on while the block runs, in call order: what a
    model really received, prompts included."""
    seen: list[str] = []
    original = type(tokenizer).__call__

    def recording(self, text, *args, **kwargs):
        seen.extend([text] if isinstance(text, str) else list(text))
        return original(self, text, *args, **kwargs)

    type(tokenizer).__call__ = recording
    try:
        yield seen
    finally:
        type(tokenizer).__call__ = original


def glove_cosines(first: list[str], second: list[str]):
    """The cosines of the pairs under the test GloVe subset's word-vector average, in float64:
    the reference a test scores an mteb STS task against (numpy, not the evaluation code)."""
    import numpy as np

    from benchharness.encoders.glove import WordVectorAverage

    glove = WordVectorAverage("glove-50d", DATA / "glove/glove.6B.50d.subset.txt.gz")
    a, b = glove.encode(first).astype(np.float64), glove.encode(second).astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def nltk_wordnet(monkeypatch: pytest.MonkeyPatch):
    """NLTK's own WordNet reader over the shared data: the independent reference of the WordNet
    tests. Its Open Multilingual Wordnet map, which no English lookup reads, is not built (about
    half of the reader's start); NLTK opens only what its data path lists, so the path is set for
    the test."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            return None

    monkeypatch.setattr(nltk.data, "path", [str(DATA / "nltk_data"), *nltk.data.path])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "multilingual functions are not available"
        return EnglishWordNet(str(DATA / "nltk_data" / "corpora" / "wordnet"), None)


def training(base, out=None, options_class=None, **settings):
    """``(options, settings, plan)`` of one run of the training loop: ``settings`` split between the
    method's options (``options_class``, default: the shared ones), the training settings (the shared
    data root, the configuration found here) and the plan (from ``base``, into ``out``, named ``name``);
    ``out`` None trains in memory."""
    from benchharness.core.settings import load_config
    from benchharness.training.options import TrainingOptions
    from benchharness.training.plan import Plan
    from benchharness.training.settings import TrainSettings

    name = settings.pop("name", None)
    run = {k: settings.pop(k) for k in SETTINGS_KEYS if k in settings}
    options = (options_class or TrainingOptions)(**settings)
    plan = Plan(base=str(base), out=None if out is None else Path(out), name=name)
    return options, TrainSettings(config=load_config(), data_dir=DATA, **run), plan


@dataclass(frozen=True)
class Ran:
    """What one command printed and returned (the fields of ``subprocess.CompletedProcess`` the tests read)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def outcome(self) -> tuple[int, str]:
        """The exit status and all that was printed (standard output, then standard error)."""
        return self.returncode, self.stdout + self.stderr


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    """``benchharness ARGS`` in ``cwd``, run in this process by ``benchharness.cli.main``: what a
    user's shell would show (exit status, standard output and error, a traceback for a crash)
    without a fresh interpreter's start-up. ``env`` adds variables for the call.

    The process is put back as found (working directory, environment, torch's threads, the
    ``benchharness`` logger). Where the process boundary is the point (a signal, start-up cost,
    what a fresh interpreter imports), use ``cli_process``."""
    from benchharness.cli import main

    saved_cwd, saved_env = os.getcwd(), dict(os.environ)
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    logger = logging.getLogger("benchharness")
    saved_logger = (list(logger.handlers), logger.level, logger.propagate)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(cwd)
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")  # a fresh interpreter's filters: each warning printed once
            warnings.showwarning = _print_warning
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors and --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
            except Exception:  # what an uncaught exception prints in a fresh process
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        if threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        logger.handlers[:], logger.level, logger.propagate = saved_logger
    return Ran(tuple(args), code, out.getvalue(), err.getvalue())


def train_tiny_run(project: Path, base: str | Path, out: str) -> Ran:
    """``benchharness train simcse`` from ``base`` into ``project/out``, in this process: 2 steps of
    batch 2 over four sentences, no periodic dev evaluation, one thread; a run to inspect, not to score."""
    (project / "corpus.txt").write_text(
        "a man is playing a guitar .\nthe red car hit a bus\ntwo dogs run in the field\na child reads a book\n"
    )
    flags = ["--base", str(base), "--out", out, "--data", "corpus.txt", "--batch-size", "2", "--max-steps", "2"]
    return cli(project, "train", "simcse", *flags, "--eval-every", "0", "--threads", "1", "--quiet")


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning to the standard error of the moment, as a fresh interpreter would."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def cli_process(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300, head: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``benchharness ARGS`` in a fresh interpreter (``python -m benchharness.cli``, or ``python
    *head`` such as a wrapper script), in ``cwd``, with this process's environment plus ``env``."""
    return subprocess.run(
        [sys.executable, *(head or ("-m", "benchharness.cli")), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def one_line_error(done: Ran | subprocess.CompletedProcess[str], *needles: str) -> str:
    """The one error line of a command that failed on bad input: exit 2, no traceback, every needle in it."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("benchharness: error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(errors) == 1 and all(n in errors[0] for n in needles), done.stderr
    return errors[0]


def run_example(code: str, filename: str, namespace: dict[str, object]) -> None:
    """Run a documentation example (its lines numbered as in ``filename``) in ``namespace``: the
    examples load MiniLM models, train, and build, so a test that runs them is slow."""
    exec(compile(code, filename, "exec"), namespace)


#: what makes a test slow (a test, or a function or fixture of its module, that names one is
#: marked ``slow``): a MiniLM checkpoint, a fresh interpreter, the embeddings server, the docs' examples
SLOW_HELPERS = {
    "MINILM_L3": MINILM_L3,
    "MINILM_L6": MINILM_L6,
    "make_cross_encoder": make_cross_encoder,
    "cli_process": cli_process,
    "EmbeddingServer": EmbeddingServer,
    "run_example": run_example,
}

#: fixtures that make a test slow wherever it asks for them: a Ray cluster, the full training corpora
SLOW_FIXTURES = frozenset({"ray_cluster", "training_corpora"})


def _names(code: CodeType) -> set[str]:
    """The global names a function's code refers to, nested functions and comprehensions included."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _names(const)
    return found


def _strings(code: CodeType) -> set[str]:
    """The string constants of a function's code, nested functions and comprehensions included."""
    found = {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _strings(const)
    return found


def names_a_checkpoint(value: object) -> bool:
    """A string that names a MiniLM (a hub id, a resolver name such as ``minilm-l3``, a spec)."""
    return isinstance(value, str) and "minilm" in value.lower()


def uses_slow_helper(func: Callable[..., object], seen: set[int] | None = None) -> str | None:
    """The slow helper ``func`` reaches: by name, or through a function of its own module it calls."""
    seen = set() if seen is None else seen
    code = getattr(func, "__code__", None)
    if code is None or id(code) in seen:
        return None
    seen.add(id(code))
    scope = getattr(func, "__globals__", {})
    if any(names_a_checkpoint(text) for text in _strings(code)):
        return "a MiniLM checkpoint"
    names = _names(code)
    for name in names:
        value = scope.get(name)
        if name in SLOW_HELPERS and (value is SLOW_HELPERS[name] or "tests.helpers" in names):
            return name  # imported at the top of the module, or inside the function
        if name == "subprocess" or value is subprocess or value is subprocess.run or value is subprocess.Popen:
            return "a subprocess"  # imported at the top of the module, or inside the function
        if names_a_checkpoint(value):
            return "a MiniLM checkpoint"
        if inspect.isfunction(value) and value.__module__ == func.__module__:
            reached = uses_slow_helper(value, seen)
            if reached:
                return reached
    return None


def slow_because(item: pytest.Item) -> str | None:
    """Why a collected test is slow (what it uses), or None."""
    if not isinstance(item, pytest.Function):
        return None
    asked = SLOW_FIXTURES.intersection(item.fixturenames)
    if asked:
        return f"the {sorted(asked)[0]} fixture"
    seen: set[int] = set()
    funcs = [item.function]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        funcs.extend(d.func for d in defs if getattr(d.func, "__module__", None) == item.function.__module__)
    for func in funcs:
        reached = uses_slow_helper(func, seen)
        if reached:
            return reached
    params = getattr(item, "callspec", None)
    if params is not None and any(names_a_checkpoint(v) for v in params.params.values()):
        return "a MiniLM checkpoint"
    return None
