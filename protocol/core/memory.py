"""Peak resident memory of this process.

Linux keeps ``getrusage(...).ru_maxrss`` across ``execve``: a process started by a
large parent (``subprocess`` from a test run of 700 MB, say) reports the parent's peak
until it exceeds it. The high-water mark of the process's own address space,
``VmHWM`` in ``/proc/self/status``, starts afresh at ``execve``; it is used where it
exists, ``ru_maxrss`` elsewhere.
"""
from __future__ import annotations

import resource
import sys

__all__ = ["peak_rss_bytes", "peak_rss_mb"]


def peak_rss_bytes() -> int:
    """This process's peak resident set size, in bytes."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024


def peak_rss_mb() -> float:
    """:func:`peak_rss_bytes` in MiB."""
    return peak_rss_bytes() / (1024 * 1024)
