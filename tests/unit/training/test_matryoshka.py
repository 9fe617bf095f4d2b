"""The Matryoshka loss on a tiny random BERT: the sum over sizes against the formula by hand, one
encoder pass per step, the full size equal to the method's own loss, and its settings in the
options, the recipe's command and the manifest."""

from __future__ import annotations

import json

import pytest
import torch

from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import descending_sizes
from benchharness.training.authoring import load_base, run_loop
from benchharness.training.matryoshka import Matryoshka
from benchharness.training.method import LossOutput, TrainingMethod
from benchharness.training.methods.simcse.model import SimCSE
from benchharness.training.options import TrainingOptions
from tests.helpers import training
from tests.unit.training import ddp_worker

SENTENCES = ["a man plays a guitar .", "the cat sat on the mat", "stocks fell on monday", "kids ride bikes"]
HIDDEN = 32  # the tiny BERT's width


def hand_simcse_loss(cls: torch.Tensor, dense: torch.nn.Linear, size: int, temperature: float) -> torch.Tensor:
    """SimCSE's loss when only the first ``size`` dimensions of [CLS] exist: the MLP reads them
    through the first ``size`` columns of its weight; cross-entropy over cos(z1_i, z2_j) / t."""
    n = cls.shape[0] // 2
    z = torch.tanh(cls[:, :size] @ dense.weight[:, :size].T + dense.bias)
    a, b = z[:n] / z[:n].norm(dim=1, keepdim=True), z[n:] / z[n:].norm(dim=1, keepdim=True)
    logits = a @ b.T / temperature
    return -torch.log_softmax(logits, dim=1).diagonal().mean()


def simcse(tiny_bert) -> SimCSE:
    encoder, tokenizer, _ = load_base(str(tiny_bert))
    torch.manual_seed(0)
    method = SimCSE(encoder, tokenizer)
    method.train()
    return method


def test_the_sum_over_sizes_matches_the_formula_with_one_encoder_pass(tiny_bert):
    method = simcse(tiny_bert)
    batch = method.collate(SENTENCES)
    dims, weights = (32, 16, 4), (1.0, 0.5, 2.0)
    passes, outputs = [], []
    method.encoder.encoder.register_forward_hook(lambda module, args, output: passes.append(1))
    method.encoder.register_forward_hook(lambda module, args, output: outputs.append(output.last_hidden_state))
    with torch.random.fork_rng():
        torch.manual_seed(7)
        output = Matryoshka(method, dims, weights)(batch)
    assert len(passes) == 1  # every size reads the same pass, the same dropout masks
    cls = outputs[0][:, 0]
    expected = sum(w * hand_simcse_loss(cls, method.mlp[0], d, method.temperature) for d, w in zip(dims, weights))
    torch.testing.assert_close(output.loss, expected, rtol=1e-5, atol=1e-6)
    for d in dims:
        by_hand = hand_simcse_loss(cls, method.mlp[0], d, method.temperature)
        assert output.logs[f"loss@{d}"] == pytest.approx(float(by_hand.detach()), rel=1e-5)
    # the gradient flows into the encoder once, through every size's term
    grads = torch.autograd.grad(output.loss, [method.mlp[0].weight])
    hand = torch.autograd.grad(expected, [method.mlp[0].weight])
    torch.testing.assert_close(grads[0], hand[0], rtol=1e-4, atol=1e-6)
    assert float(grads[0][:, 20:].abs().sum()) > 0  # the full size still trains the later columns


def test_at_the_full_size_alone_the_loss_is_the_methods_own(tiny_bert):
    method = simcse(tiny_bert)
    batch = method.collate(SENTENCES)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        plain = method(batch).loss
    with torch.random.fork_rng():
        torch.manual_seed(3)
        sized = Matryoshka(method, (HIDDEN,))(batch).loss
    assert float(plain.detach()) == float(sized.detach())
    assert method.matryoshka_size is None  # the method is left as it was


def test_sizes_the_encoder_lacks_and_methods_that_mark_nothing_are_refused(tiny_bert):
    method = simcse(tiny_bert)
    with pytest.raises(InvalidInputError, match=r"matryoshka_dims 64 exceed the embedding size of the base model \(32"):
        Matryoshka(method, (64, 16))

    class Unmarked(TrainingMethod):
        method_name = "unmarked"

        def forward(self, batch):
            return LossOutput(self.encoder(**batch).last_hidden_state[:, 0].sum())

    unmarked = Unmarked(method.encoder, method.tokenizer)
    with pytest.raises(InvalidInputError, match="unmarked does not mark its sentence embedding"):
        Matryoshka(unmarked, (16, 8))(method.collate(SENTENCES))
    assert "forward" not in vars(method.encoder)  # the encoder's own forward is back


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"matryoshka_dims": [16, 32]}, "distinct sizes from the largest down"),
        ({"matryoshka_dims": [32, 32]}, "distinct sizes from the largest down"),
        ({"matryoshka_dims": [32, 0]}, "must be a positive integer, got 0"),
        ({"matryoshka_dims": 32}, "matryoshka_dims must be a list or None"),
        ({"matryoshka_weights": [1.0]}, "set matryoshka_dims too"),
        ({"matryoshka_dims": [32, 16], "matryoshka_weights": [1.0]}, "give one weight per size"),
        ({"matryoshka_dims": [32, 16], "matryoshka_weights": [0, 0]}, "must hold a weight > 0"),
    ],
)
def test_bad_settings_are_refused_in_one_line(given, message):
    with pytest.raises(InvalidInputError, match=message):
        TrainingOptions(**given)


def test_a_run_without_the_loss_records_nothing_of_it():
    assert "matryoshka_dims" not in TrainingOptions().shared()
    options = TrainingOptions(matryoshka_dims=[32, 16], matryoshka_weights=[1, 2])
    assert options.matryoshka_dims == (32, 16) and options.matryoshka_weights == (1.0, 2.0)
    # integer weights are the float weights they declare (so 1 and 1.0 make one recipe); sizes stay integers
    assert [type(w) for w in options.matryoshka_weights] == [float, float]
    assert [type(d) for d in options.matryoshka_dims] == [int, int]
    assert type(TrainingOptions(lr=1).lr) is float
    assert options.shared()["matryoshka_dims"] == (32, 16)


def test_the_recipe_key_and_command_carry_the_sizes():
    from benchharness.training import recipes

    plain = recipes.derive("simcse", {})
    sized = recipes.derive("simcse", {"matryoshka_dims": (384, 128, 64)})
    assert sized.key != plain.key
    assert "--matryoshka-dims 384,128,64" in recipes.command(sized)
    # the command's flag reads back to the same recipe
    assert recipes.derive("simcse", {"matryoshka_dims": descending_sizes("384,128,64")}).key == sized.key


def test_a_trained_run_records_the_loss_and_logs_each_size(tiny_bert, tmp_path):
    encoder, tokenizer, source = load_base(str(tiny_bert))
    method = SimCSE(encoder, tokenizer)
    texts = [f"sentence number {i} about topic {i % 5} ." for i in range(16)]
    config = training(
        str(tiny_bert),
        tmp_path / "run",
        batch_size=8,
        max_steps=2,
        eval_every=None,
        eval_at_start=False,
        log_every=1,
        threads=1,
        matryoshka_dims=[32, 8],
    )
    run_loop(method, texts, *config, data={"name": "synthetic"}, base_source=source)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["hyperparameters"]["matryoshka_dims"] == [32, 8]
    assert "MatryoshkaLoss" in manifest["hyperparameters"]["matryoshka_loss"]
    logs = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = next(line for line in logs if "loss@8" in line)
    assert step["loss"] == pytest.approx(step["loss@32"] + step["loss@8"], rel=1e-5)


@pytest.fixture(scope="module")
def still_bert(tmp_path_factory):
    from tests.helpers import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("bert-no-dropout"), dropout=0.0)


@pytest.mark.parametrize("case", ddp_worker.CASES)
def test_every_method_marks_its_embedding(case, still_bert):
    """Each method's loss at the full size alone is its own, and a smaller size changes it, with the
    encoder run as often as one plain step runs it (no dropout: the same pass gives the same loss)."""
    method, examples = ddp_worker.build(case, still_bert)
    method.train()
    batch = method.collate(examples)
    passes = []
    method.encoder.encoder.register_forward_hook(lambda module, args, output: passes.append(1))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        plain = float(method(batch).loss.detach())
    once = len(passes)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        full = Matryoshka(method, (HIDDEN,))(batch)
        torch.manual_seed(0)
        both = Matryoshka(method, (HIDDEN, 4))(batch)
    assert float(full.loss.detach()) == pytest.approx(plain, rel=1e-6)
    assert len(passes) == 3 * once  # plain, full, and both sizes: one set of passes each
    assert both.logs[f"loss@{HIDDEN}"] == pytest.approx(plain, rel=1e-6)
    assert both.logs["loss@4"] != plain  # the cut reached the loss
