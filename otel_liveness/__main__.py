"""``python -m otel_liveness``: the command line (same as ``otel-liveness``)."""

import sys

from .cli import main

sys.exit(main())
