"""The public names of ``benchharness`` are listed three times, for three readers: ``_EXPORTS`` for
the lazy ``__getattr__``, the ``TYPE_CHECKING`` imports for type checkers and editors, ``__all__``
for ``import *`` and static tools. These tests keep the three lists the same."""

import ast
import inspect

import benchharness


def _type_checking_imports() -> dict[str, str]:
    """public name -> ``module:attribute`` as the ``if TYPE_CHECKING:`` block imports it."""
    tree = ast.parse(inspect.getsource(benchharness))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            found[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return found


def test_all_lists_every_export_and_the_version():
    assert sorted(benchharness.__all__) == sorted(["__version__", *benchharness._EXPORTS])
    assert len(set(benchharness.__all__)) == len(benchharness.__all__)


def test_type_checkers_see_the_objects_that_are_loaded_at_run_time():
    expected = {
        name: f"{module}:{benchharness._RENAMED.get(name, name)}" for name, module in benchharness._EXPORTS.items()
    }
    assert _type_checking_imports() == expected
    for name in benchharness._EXPORTS:
        module, attribute = expected[name].split(":")
        assert getattr(benchharness, name) is getattr(__import__(module, fromlist=[attribute]), attribute)
