"""The README's "Use from Python" examples run as written (in a scratch folder)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def python_examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Use from Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_python_examples_run(project):
    examples = python_examples()
    assert len(examples) >= 3
    namespace: dict = {}
    for code in examples:
        exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["frame"]["task"].tolist() == ["STSBenchmark", "STSBenchmark-dev"]
    assert (project / "results" / "my-l3" / "STSBenchmark.json").is_file()
    assert [step for step, _ in namespace["trainer"].evaluator.history] == [1]
