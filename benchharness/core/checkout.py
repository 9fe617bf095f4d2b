"""The source checkout the package runs from, if any.

An editable install runs the checkout's own files: then the code version is its git commit and the
stored baselines (``results/``) and published tables sit beside it. A wheel install has neither,
and must never take the git state of whatever repository its environment happens to sit in.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
#: the checkout root, or None when the package is installed from a wheel
CHECKOUT: Path | None = (
    _ROOT
    if (_ROOT / "pyproject.toml").is_file() and (_ROOT / "encoders").is_dir() and (_ROOT / "tasks").is_dir()
    else None
)
