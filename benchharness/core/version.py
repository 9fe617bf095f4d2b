"""The harness version every result records (pyproject reads it from here)."""

__version__ = "0.1.0"
