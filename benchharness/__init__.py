"""benchharness: evaluate and train sentence encoders on the classic suite of the field.

The package is the core: CLI, registry, runner, data root, results store, leaderboard and the
shared metric code. Encoder families live in the top-level ``encoders`` package and tasks in
``tasks``; the core knows neither models nor datasets in detail.
"""

__version__ = "0.1.0"
