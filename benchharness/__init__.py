"""benchharness: evaluate and train sentence encoders on the classic suite of the field.

The package is the core: CLI, registry, runner, data root and file readers, results store,
leaderboard, the shared metric code, the two contracts (``encoder``, ``task``), the orchestration
of tuning (``tuning``), and one module each for seeding, provenance, atomic file writes and
resource measurement. Encoder families, post-processors and training methods live in the
top-level ``encoders`` package and tasks in ``tasks``; the core knows neither models nor datasets
in detail. The arrows point inwards: ``encoders`` and ``tasks`` import the core (never each other,
nor the runner); the core reaches them only through plugin discovery (the registry) and in its
composition roots (the CLI and the tuners), which name the task registry.
"""

__version__ = "0.1.0"
