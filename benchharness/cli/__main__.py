"""``python -m benchharness.cli``."""

import sys

from benchharness.cli import main

sys.exit(main())
