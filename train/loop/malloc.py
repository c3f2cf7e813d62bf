"""glibc malloc settings for training on the CPU: keep freed tensor memory for the next step.

A CPU step allocates and frees the same activation and gradient buffers (hundreds of KiB to a
few MiB each) every step. With glibc's defaults those above its mmap threshold are mapped and
unmapped each time, and freed memory at the top of the heap is given back to the kernel (trim)
and taken again, so every step faults its pages in anew: 200 to 850 minor page faults per step
of the tiny-lm bench config, about 1 ms of a 19 ms step (docs/benchmarks.md). glibc raises
both thresholds by itself after freeing a large mapped block, so whether a process gets them
depends on what it happened to free during set-up. Setting them to glibc's own upper values
(mmap threshold 32 MiB, trim threshold twice that) makes every run start in that steady state.
The numbers trained are the same: only where the buffers come from changes.

Not applied when MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ is set (yours win), nor
off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
"""glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the most its dynamic threshold reaches."""
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""What glibc sets with a dynamic mmap threshold: twice it."""
ENV_KNOBS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_memory(environ: Mapping[str, str] | None = None) -> bool:
    """Set the two thresholds (see the module docstring); True when they were set."""
    env = os.environ if environ is None else environ
    if any(name in env for name in ENV_KNOBS):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mapped: int = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    trimmed: int = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    return mapped == 1 and trimmed == 1
