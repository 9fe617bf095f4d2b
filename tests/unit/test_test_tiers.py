"""The fast tier follows from what a test uses (``tests.helpers.slow_because``), never from a mark
written by hand: each rule checked on code written here, and on tests of the suite."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tests import helpers

ROOT = Path(__file__).resolve().parents[2]


def checkpoint() -> str:
    """The model family's name, assembled at run time: this module's code and globals must name no
    checkpoint, or its own tests would be slow."""
    return "".join(["Mini", "LM"])


def compiled(source: str, **scope: object) -> object:
    """The function ``f`` defined by ``source`` in a fresh module namespace holding ``scope``."""
    namespace: dict[str, object] = {"__name__": "sample_module", **scope}
    exec(compile(source, "<sample>", "exec"), namespace)
    return namespace["f"]


def test_each_rule_names_what_makes_a_test_slow():
    by_text, by_name = f"a {checkpoint()} checkpoint", f"{checkpoint().upper()}_L3"
    hub_id = f"sentence-transformers/paraphrase-{checkpoint()}-L3-v2"
    assert helpers.uses_slow_helper(compiled(f"def f():\n    return {hub_id!r}\n")) == by_text
    assert helpers.uses_slow_helper(compiled(f"def f():\n    return {by_name}\n", **{by_name: hub_id})) is not None
    assert helpers.uses_slow_helper(compiled("def f():\n    import subprocess\n    subprocess.run(['true'])\n")) == (
        "a subprocess"
    )
    assert helpers.uses_slow_helper(compiled("def f(p):\n    cli_process(p)\n", cli_process=helpers.cli_process)) == (
        "cli_process"
    )
    assert helpers.uses_slow_helper(compiled("def f(p):\n    cli(p)\n", cli=helpers.cli)) is None  # in process
    # reached through a function of the same module, as a test reaches its module's helpers
    inner = compiled("def f():\n    return 'hf:x/' + SPEC\n", SPEC=f"{checkpoint().lower()}-l3")
    outer = compiled("def f():\n    return g()\n", g=inner)
    outer.__module__ = inner.__module__ = "sample_module"  # type: ignore[attr-defined]
    assert helpers.uses_slow_helper(outer) == by_text
    assert helpers.uses_slow_helper(compiled("def f(x):\n    return sorted(x)\n")) is None


def test_tests_of_the_suite_fall_in_the_tier_their_code_implies():
    first_token = importlib.import_module("tests.unit.encoders.test_first_token")
    stats = importlib.import_module("tests.unit.scoring.test_stats")
    assert helpers.uses_slow_helper(
        getattr(first_token, f"test_{checkpoint().lower()}_l3_cls_vectors_on_sts_sentences")
    )
    assert helpers.uses_slow_helper(first_token.test_the_first_position_equals_the_whole_models) is None
    assert helpers.uses_slow_helper(stats.test_spearman_rows_matches_scipy_per_row_with_ties) is None


def test_no_test_writes_slow_by_hand_or_imports_a_helper_under_a_second_name():
    hand_marked, second_names = [], []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text()
        if re.search(r"mark\.slow\b", text) and path.name not in ("helpers.py", "conftest.py"):
            hand_marked.append(path.name)
        if re.search(r"^\s*(from|import) (conftest|fakes|vector_fakes|embedding_server|shared_steps)\b", text, re.M):
            second_names.append(path.name)
    assert hand_marked == [] and second_names == []


@pytest.mark.xdist_group("tiers")
def test_an_xdist_group_reaches_the_scheduler(request):
    """``--dist loadgroup`` puts a group's tests on one worker by a suffix of their node ids; with a
    pytest whose node ids ignore it (9.2 and pytest-xdist 3.8) every group was silently spread over
    both workers, and the Ray cluster and torchrun's fixtures started twice."""
    if not getattr(request.config.option, "loadgroup", False):  # what pytest-xdist sets on its workers
        pytest.skip("checks pytest -n N --dist loadgroup, as CI runs the suite")
    assert request.node.nodeid.endswith("@tiers"), request.node.nodeid
    # the group conftest.py gives the Ray tests reaches it too (its hook must run before xdist's)
    ray = [item.nodeid for item in request.session.items if "ray_cluster" in getattr(item, "fixturenames", ())]
    assert all(nodeid.endswith("@ray") for nodeid in ray), ray  # where the run collected them
