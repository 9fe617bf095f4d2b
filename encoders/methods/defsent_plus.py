"""DefSent+ (Liu, 2024): classify each dictionary definition into its entry, against a frozen
matrix of entry embeddings built from the encoder's own embeddings of the definitions, rebuilt
round after round (progressive separate training, PST).

One round (paper eqs. 3-5, 6-8, 9-12; official ``TrainEncoder.py``):

* entry matrix ``E`` (entries x hidden): AC or AMP (``entry_space.py``) of every entry's
  definitions under the previous round's encoder (round 1: the base checkpoint); optionally the
  ICA candidate space of that matrix (``--ica-rounds``);
* the encoder being trained is always the *original* checkpoint (PST's "separate": continuing from
  the previous round would amount to more than one epoch, which the paper finds harmful);
* a definition is pooled with the model's pooler, over [CLS] (``--training-pooling cls``: BERT's
  pooler output) or over the masked mean of the last layer (``mean``: the official code feeds the
  mean through the same pooler); logits = ``E @ h`` (a bias-free linear head whose weight is the
  frozen ``E``); cross-entropy against the entry's index;
* exactly one epoch over all (definition, entry) pairs in random order, the last partial batch
  kept (the official ``RandomSampler`` loader); AdamW (lr per round, eps 1e-6, no weight decay:
  the ``transformers.AdamW`` defaults the official script uses), linear decay with no warmup,
  gradient norm clipped at 1.0; the final weights are the encoder (no dev selection).

The pooler: BERT keeps its pretrained pooler (dense + tanh). RoBERTa's pooler is initialised from
the MLM head's dense layer with GELU, as the paper does (the pooler never saw a pre-training
objective). A checkpoint without pooler weights (paraphrase-MiniLM-L3-v2 ships none) gets the
freshly initialised BERT pooler of ``AutoModel`` (seeded), trained with the model; the manifest
says which case applied. The pooler only serves training: at inference the harness pools with
``cls_before_pooler`` ([CLS] without pooler), ``avg`` or ``prompt`` (the paper's three).

Each round is registered as its own encoder: ``--out runs/defsent-plus-l3`` writes
``runs/defsent-plus-l3-r1``, ``-r2``... (names ``<name>-r<k>``), each with ``entry_space.png``, the
2-d SVD and whitened-PCA views of the entry space that round trained against (paper Figures 1-3);
the last round also plots the space its own encoder builds (``entry_space_after.png``). Rerunning
skips finished rounds and resumes an interrupted one.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchharness.data import DataRoot
from benchharness.devices import check_precision, pick_device
from encoders import hub
from encoders.methods.dictionary import Dictionary, format_statistics, merge, read_source, statistics, subsample
from encoders.methods.entry_space import ENTRY_TYPES, entry_embeddings, ica_transform, plot_entry_space
from encoders.methods.training import (LossOutput, TrainConfig, TrainingMethod, add_training_arguments,
                                       config_from_options, load_base, resolve_options, seed_everything, train)
from encoders.pooling import masked_mean

HELP = "DefSent+: definitions classified into frozen entry embeddings, progressive separate training"

TRAINING_POOLINGS = ("cls", "mean")

#: the paper's BERT-base learning rates for the 1st, 2nd, 3rd round (Appendix A, Table 5)
PAPER_LRS = (5e-5, 4e-5, 3e-5)

#: shared flags that contradict the protocol (one epoch, no warmup, final weights)
FIXED_BY_PROTOCOL = ("epochs", "max_steps", "warmup_ratio", "eval_every", "patience", "limit")

DEFAULTS: dict[str, Any] = {
    "batch_size": 32,  # the paper's batch for its WordNet+Oxford dictionary (16 for smaller ones)
    "max_length": 150,  # the official max_seq_length (no definition is longer: Table 1 max 138)
    "weight_decay": 0.0,
    "adam_eps": 1e-6,
    "epochs": 1,
    "warmup_ratio": 0.0,
    "grad_clip": 1.0,
    "drop_last": False,
    "eval_every": None,
    "eval_at_start": False,
    "seed": 42,
}


def checkpoint_keys(folder: Path) -> set[str]:
    """Tensor names stored in a checkpoint folder (without loading the tensors)."""
    keys: set[str] = set()
    for f in hub.WEIGHT_FILES:
        path = Path(folder) / f
        if not path.exists():
            continue
        if f.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(str(path), "pt") as fh:
                keys.update(fh.keys())
        else:
            keys.update(torch.load(path, map_location="cpu", weights_only=True, mmap=True).keys())
    return keys


def _checkpoint_tensor(folder: Path, name: str) -> torch.Tensor:
    for f in hub.WEIGHT_FILES:
        path = Path(folder) / f
        if path.exists() and f.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(str(path), "pt") as fh:
                if name in fh.keys():
                    return fh.get_tensor(name)
        elif path.exists():
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            if name in state:
                return state[name].clone()
    raise KeyError(name)


def prepare_pooler(encoder: nn.Module, folder: Path) -> tuple[nn.Module | None, str]:
    """Set up the training-time pooler; return a new module when the model has none, and a note.

    ``folder`` is the base checkpoint, read to tell a pretrained pooler from a newly initialised
    one and, for RoBERTa, to fetch the MLM head's dense layer.
    """
    keys = checkpoint_keys(folder)
    pooler = getattr(encoder, "pooler", None)
    model_type = getattr(encoder.config, "model_type", "")
    if pooler is None:
        hidden = encoder.config.hidden_size
        head = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
        nn.init.normal_(head[0].weight, std=getattr(encoder.config, "initializer_range", 0.02))
        nn.init.zeros_(head[0].bias)
        return head, f"{model_type} has no pooler module: a fresh dense+tanh pooler (training only, not saved)"
    if "roberta" in model_type:
        weight = next((k for k in keys if k.endswith("lm_head.dense.weight")), None)
        if weight is None:
            return None, ("RoBERTa checkpoint without an MLM head: its pooler is kept as loaded (dense+tanh); "
                          "the paper initialises it from the MLM head's dense layer with GELU")
        with torch.no_grad():
            pooler.dense.weight.copy_(_checkpoint_tensor(folder, weight))
            pooler.dense.bias.copy_(_checkpoint_tensor(folder, weight.replace(".weight", ".bias")))
        pooler.activation = nn.GELU()
        return None, "RoBERTa pooler initialised from the MLM head's dense layer, activation GELU (paper)"
    if any(k.endswith("pooler.dense.weight") for k in keys):
        return None, "the checkpoint's pretrained pooler (dense+tanh)"
    return None, ("the checkpoint has no pooler weights: the freshly initialised (seeded) BERT pooler "
                  "(dense+tanh), trained with the model")


class DefSentPlus(TrainingMethod):
    """The encoder + its pooler, classifying definitions into the frozen entry matrix."""

    method_name = "defsent-plus"

    def __init__(self, encoder: nn.Module, tokenizer, entry_matrix: torch.Tensor, training_pooling: str = "cls",
                 max_length: int = 150, eval_pooling: str = "avg", extra_pooler: nn.Module | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(encoder, tokenizer)
        if training_pooling not in TRAINING_POOLINGS:
            raise ValueError(f"unknown training pooling {training_pooling!r}; choose one of {', '.join(TRAINING_POOLINGS)}")
        if entry_matrix.shape[1] != encoder.config.hidden_size:
            raise ValueError(f"entry matrix has {entry_matrix.shape[1]} columns, the encoder {encoder.config.hidden_size}")
        # a buffer, not a parameter: the optimizer never sees it and no gradient flows into it
        self.register_buffer("entry_matrix", torch.as_tensor(entry_matrix, dtype=torch.float32).clone())
        self.training_pooling = training_pooling
        self.max_length = int(max_length)
        self.eval_pooling = eval_pooling
        self.extra_pooler = extra_pooler
        self.details = dict(details or {})

    def collate(self, examples: list[tuple[str, int]]) -> dict[str, Any]:
        texts = [t for t, _ in examples]
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        return {"inputs": dict(enc), "labels": torch.tensor([e for _, e in examples], dtype=torch.long)}

    def pooled(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training representation h(s): pooler(dense+activation) over [CLS] or the mean."""
        last = self.encoder(**inputs).last_hidden_state
        x = last[:, 0] if self.training_pooling == "cls" else masked_mean(last, inputs["attention_mask"]).to(last.dtype)
        if self.extra_pooler is not None:
            return self.extra_pooler(x)
        return self.encoder.pooler.activation(self.encoder.pooler.dense(x))

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.pooled(inputs).float() @ self.entry_matrix.T

    def forward(self, batch: dict[str, Any]) -> LossOutput:
        logits = self.logits(batch["inputs"])
        loss = F.cross_entropy(logits, batch["labels"])
        accuracy = (logits.detach().argmax(-1) == batch["labels"]).float().mean().item()
        return LossOutput(loss, {"accuracy": accuracy})

    def hyperparameters(self) -> dict[str, Any]:
        return {"training_pooling": self.training_pooling, "n_entries": int(self.entry_matrix.shape[0]),
                "head": "bias-free linear, weight = frozen entry matrix", "loss": "cross-entropy over entries",
                **self.details}


def round_lrs(spec: str | None, lr: float | None, rounds: int) -> list[float]:
    """Learning rate of each round: ``--round-lrs`` (the last value repeats), else ``--lr`` for all,
    else the paper's BERT-base schedule 5e-5, 4e-5, 3e-5 (then 3e-5)."""
    if spec:
        values = [float(v) for v in spec.split(",") if v.strip()]
    elif lr is not None:
        values = [lr]
    else:
        values = list(PAPER_LRS)
    return [values[min(i, len(values) - 1)] for i in range(rounds)]


def parse_rounds(spec: str | None, rounds: int) -> set[int]:
    chosen = {int(v) for v in (spec or "").split(",") if v.strip()}
    bad = sorted(r for r in chosen if not 1 <= r <= rounds)
    if bad:
        raise ValueError(f"--ica-rounds {bad} outside 1..{rounds}")
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser)
    g = parser.add_argument_group("DefSent+")
    g.add_argument("--dictionary", default="wordnet,oxford-valid,oxford-test",
                   help="comma list of sources merged into one dictionary: wordnet, oxford-train, oxford-valid, "
                        "oxford-test (the data root's oxford/<split>.txt; train is not shipped here), or a path "
                        "to an 'entry<TAB>definition' file (default: %(default)s)")
    g.add_argument("--max-entries", type=int, help="train on a seeded sample of this many entries")
    g.add_argument("--min-definitions", type=int, default=1, help="keep entries with at least N definitions")
    g.add_argument("--single-word", action="store_true", help="keep single-word entries only")
    g.add_argument("--subset-seed", type=int, default=42, help="seed of the --max-entries sample")
    g.add_argument("--rounds", type=int, default=3, help="PST rounds (default 3, the paper's for raw BERT)")
    g.add_argument("--round-lrs", help="comma list of per-round learning rates (default: --lr for every "
                                       "round, else the paper's BERT-base 5e-5,4e-5,3e-5)")
    g.add_argument("--training-pooling", choices=TRAINING_POOLINGS, default="cls",
                   help="pooler over [CLS] or over the mean during training (default cls)")
    g.add_argument("--entry-type", choices=ENTRY_TYPES, default="amp",
                   help="entry embeddings: ac (average CLS) or amp (average mean pooling; default)")
    g.add_argument("--ica-rounds", help="comma list of rounds that train against the ICA-transformed space")
    g.add_argument("--ica-max-iter", type=int, default=1000)
    g.add_argument("--entry-batch-size", type=int, default=128, help="batch size of the entry-embedding passes")
    g.add_argument("--no-final-space", action="store_true",
                   help="skip building and plotting the last round's own entry space")
    g.add_argument("--dev", action="store_true", help="record STS-B dev Spearman before and after each round")
    g.add_argument("--stats-only", action="store_true", help="print the dictionary statistics and exit")


def _dictionary(args: argparse.Namespace, tokenizer, data_root: Path) -> tuple[Dictionary, dict[str, Any]]:
    """Load, merge and subset the dictionary; print and return Table-1-like statistics."""
    specs = [s.strip() for s in args.dictionary.split(",") if s.strip()]
    parts = [read_source(spec, data_root) for spec in specs]
    full = merge(*parts) if len(parts) > 1 else parts[0]

    def count(texts: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

    rows = {part.sources[0]: statistics(part, count) for part in parts} if len(parts) > 1 else {}
    rows["+".join(full.sources)] = statistics(full, count)
    chosen = subsample(full, args.max_entries, args.min_definitions, args.single_word, args.subset_seed)
    if chosen is not full:
        rows[chosen.sources[-1]] = statistics(chosen, count)
    print(format_statistics(rows))
    info = {"name": "dictionary", "kind": "(definition, entry) pairs", "sources": full.sources,
            "statistics": rows, "subset": chosen.sources[-1] if chosen is not full else None,
            "n_examples": chosen.n_definitions, "n_entries": len(chosen), "data_root": str(data_root)}
    return chosen, info


def _update_manifest(folder: Path, extra: dict[str, Any]) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(extra)
    path.write_text(json.dumps(manifest, indent=2) + "\n")


def main(args: argparse.Namespace) -> int:
    given = [k for k in FIXED_BY_PROTOCOL if getattr(args, k, None) is not None]
    if given:
        raise ValueError(f"DefSent+ trains exactly one epoch, no warmup, and keeps the final weights; "
                         f"--{', --'.join(k.replace('_', '-') for k in given)} cannot be used with it")
    if getattr(args, "data", None) is not None:
        raise ValueError("DefSent+ trains on a dictionary: use --dictionary, not --data")
    if args.rounds < 1:
        raise ValueError("--rounds must be >= 1")
    opts = resolve_options(args, None, DEFAULTS)
    opts["eval_at_start"] = bool(args.dev)
    if args.dev and (opts.get("eval_pooling") or "avg") == "prompt":
        raise ValueError("--dev cannot evaluate pooling 'prompt'; drop --dev or choose another --eval-pooling")
    lrs = round_lrs(args.round_lrs, args.lr, args.rounds)
    ica_rounds = parse_rounds(args.ica_rounds, args.rounds)
    base_config = config_from_options(opts)
    if base_config.threads:
        torch.set_num_threads(base_config.threads)
    device = pick_device(base_config.device)
    precision = check_precision(base_config.precision, device)
    data_root = DataRoot(getattr(args, "data_dir", None)).root

    seed_everything(base_config.seed)
    encoder, tokenizer, source = load_base(base_config.base)
    dictionary, data = _dictionary(args, tokenizer, data_root)
    if args.stats_only:
        return 0
    texts, labels = dictionary.pairs()
    examples = list(zip(texts, labels))
    name = base_config.name or base_config.out.resolve().name
    previous: Path | None = None
    started = time.perf_counter()
    for r in range(1, args.rounds + 1):
        out = base_config.out.with_name(f"{base_config.out.name}-r{r}")
        if (out / "manifest.json").exists() and not base_config.overwrite:
            print(f"round {r}: {out} is finished; reusing it (pass --overwrite to retrain every round)")
            previous = out / "model"
            continue
        t_round = time.perf_counter()
        if encoder is None:  # every round trains the original checkpoint again
            seed_everything(base_config.seed)
            encoder, tokenizer, source = load_base(base_config.base)
        builder = encoder if previous is None else load_base(str(previous))[0]
        builder.to(device)
        print(f"round {r}: entry embeddings ({args.entry_type.upper()}) with {previous or base_config.base}")
        matrix = entry_embeddings(builder, tokenizer, dictionary, args.entry_type, base_config.max_length,
                                  args.entry_batch_size, device, precision, base_config.progress)
        entry_seconds = time.perf_counter() - t_round
        space = args.entry_type.upper()
        if r in ica_rounds:
            matrix = torch.from_numpy(ica_transform(matrix, args.ica_max_iter, 42))
            space = f"ICA({space}) x100"
        del builder
        extra_pooler, pooler_note = prepare_pooler(encoder, source.path)
        method = DefSentPlus(encoder, tokenizer, matrix, args.training_pooling, base_config.max_length,
                             opts.get("eval_pooling") or "avg", extra_pooler,
                             {"round": r, "rounds": args.rounds, "entry_type": args.entry_type, "entry_space": space,
                              "entry_space_built_by": str(previous) if previous else f"base {base_config.base}",
                              "ica": {"max_iter": args.ica_max_iter, "whiten": "unit-variance", "fun": "logcosh",
                                      "random_state": 42, "scale": 100} if r in ica_rounds else None,
                              "pooler": pooler_note,
                              "restart": "original checkpoint (progressive separate training)"})
        overrides = {"out": out, "name": f"{name}-r{r}", "lr": lrs[r - 1]}
        config = TrainConfig(**{**base_config.to_dict(), **overrides})
        result = train(method, examples, config, data=data, base_source=source)
        if not result.completed:
            return 0  # paused by --stop-after; rerunning resumes this round
        plot_entry_space(matrix, out / "entry_space.png", f"{name} round {r}: {space} entry space")
        _update_manifest(out, {"entry_space_plot": "entry_space.png",
                               "round_seconds": {"entry_embeddings": round(entry_seconds, 1),
                                                 "total": round(time.perf_counter() - t_round, 1)}})
        print(f"round {r}: registered {name}-r{r} ({out}); {time.perf_counter() - t_round:.0f} s")
        previous = out / "model"
        encoder = None
    if previous is not None and not args.no_final_space:
        final = load_base(str(previous))[0].to(device)
        matrix = entry_embeddings(final, tokenizer, dictionary, args.entry_type, base_config.max_length,
                                  args.entry_batch_size, device, precision, base_config.progress)
        plot_entry_space(matrix, previous.parent / "entry_space_after.png",
                         f"{name} after round {args.rounds}: {args.entry_type.upper()} entry space")
        _update_manifest(previous.parent, {"entry_space_after_plot": "entry_space_after.png"})
    print(f"DefSent+ done in {time.perf_counter() - started:.0f} s: "
          + ", ".join(f"{name}-r{r}" for r in range(1, args.rounds + 1))
          + f" (benchharness run --encoders {','.join(f'{name}-r{r}' for r in range(1, args.rounds + 1))} --tasks sts)")
    return 0
