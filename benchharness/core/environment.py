"""A library call leaves ``os.environ`` as it found it, whatever the libraries it imports do.

benchharness itself exports nothing from library code (the command line alone configures its
process: ``benchharness.cli.process``). But the libraries a call imports for the first time may:
importing sentence-transformers imports ``torch._dynamo``, which sets ``TORCHINDUCTOR_CACHE_DIR``,
and importing scikit-learn sets ``KMP_DUPLICATE_LIB_OK`` and ``KMP_INIT_AT_FORK``. Each is read at
the moment it is set (torch recomputes and sets its cache folder again when it needs it; OpenMP
reads the KMP variables when it loads, which has happened by then), so putting the environment back
afterwards changes nothing the call computed, and a notebook's later code sees its own environment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def kept_environment() -> Iterator[None]:
    """Run the block, then restore every variable it added, removed or changed."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in before]:
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
