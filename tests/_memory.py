"""Memory probes shared by the hardening tests: resident set size and tracemalloc peaks."""

from __future__ import annotations

import contextlib
import gc
import os
import tracemalloc
from collections.abc import Iterator

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss() -> int:
    """The resident set size of this process now, in bytes, from Linux's ``/proc``; 0 elsewhere
    (macOS and Windows wheels are tested too: there the tracemalloc bounds carry the check)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # pragma: no cover - not Linux
        return 0


class Peak:
    """tracemalloc's peak (bytes above the level at entry) for the block it measured."""

    bytes: int = 0


@contextlib.contextmanager
def traced_peak() -> Iterator[Peak]:
    """Measure the peak of Python-heap allocations (PyMem/PyObject, so the compiled decoder's
    PyMem buffers count too) made inside the block, above what was allocated on entry."""
    gc.collect()
    peak = Peak()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        yield peak
    finally:
        _, top = tracemalloc.get_traced_memory()
        peak.bytes = top - base
        if started:
            tracemalloc.stop()
