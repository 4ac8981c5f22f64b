"""Time and memory measurement for runners and benchmarks.

``seconds`` and ``cpu_seconds`` in a runner's output come from :class:`Timer` or
:func:`time.perf_counter`; ``peak_rss_mb`` is the process's peak resident set size
(``getrusage``; Linux reports KiB).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

__all__ = ["Timer", "peak_rss_mb"]


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB
    (:func:`protocol.core.memory.peak_rss_mb`: ``VmHWM`` where Linux gives it)."""
    from protocol.core.memory import peak_rss_mb as peak

    return peak()


class Timer:
    """Accumulates wall time per named phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the wall time of the ``with`` body to phase ``name``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
