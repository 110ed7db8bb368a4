"""numpy, imported without OpenBLAS's pool of threads: gc's walk by arrays sorts and searches, never multiplies
matrices, and the pool cost ~30 ms of CPU at import (a thread started and spinning per core) for nothing."""

from __future__ import annotations

import os
import sys

_THREADS = "OPENBLAS_NUM_THREADS"
_quiet = "numpy" not in sys.modules and _THREADS not in os.environ  # (a caller's own choice stands)
if _quiet:
    os.environ[_THREADS] = "1"  # (read once, when OpenBLAS is loaded)
try:
    import numpy as np
finally:
    if _quiet:
        del os.environ[_THREADS]  # (a process this one starts sizes its own pool, as before)

__all__ = ["np"]
