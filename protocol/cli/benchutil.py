"""Helpers shared by the ``fedhh bench`` commands and long-running commands.

A benchmark prints one JSON object containing at least ``seconds`` and
``peak_rss_mb`` (the process's peak resident set size, from ``getrusage``).
"""
from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Timer:
    """Accumulates wall time per named phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


def median_seconds(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Median wall time of ``repeats`` calls of ``fn`` (machines here are noisy)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def print_json(obj: dict[str, Any]) -> None:
    """Print one JSON object with the peak memory added."""
    out = dict(obj)
    out.setdefault("peak_rss_mb", round(peak_rss_mb(), 1))
    print(json.dumps(out, indent=2, sort_keys=False, default=_default))


def _default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "",
             enabled: bool = True) -> Iterable[T]:
    """A tqdm progress bar on stderr, shown only when stderr is a terminal and enabled."""
    if not enabled or not sys.stderr.isatty():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False)
