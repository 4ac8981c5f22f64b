"""Peak resident memory of this process.

Linux keeps ``getrusage(...).ru_maxrss`` across ``execve``: a process started by a
large parent (``subprocess`` from a test run of 700 MB, say) reports the parent's peak
until it exceeds it. The high-water mark of the process's own address space,
``VmHWM`` in ``/proc/self/status``, starts afresh at ``execve``; it is used where it
exists, ``ru_maxrss`` elsewhere.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import resource
import sys

__all__ = ["peak_rss_bytes", "peak_rss_mb", "fixed_mmap_threshold", "release_freed_memory"]

#: glibc's ``mallopt`` parameter for the size from which an allocation is its own
#: ``mmap`` (``M_MMAP_THRESHOLD`` in ``malloc.h``)
_M_MMAP_THRESHOLD = -3
#: the threshold this process fixes: glibc's own initial value
MMAP_THRESHOLD_BYTES = 128 * 1024
_libc: object | None = None


def _glibc() -> object | None:
    """The C library when it is glibc (it has ``mallopt`` and ``malloc_trim``), else
    ``None``."""
    global _libc
    if _libc is None:
        if not sys.platform.startswith("linux"):
            _libc = False
        else:
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _libc = lib if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim") \
                    else False
            except OSError:
                _libc = False
    return _libc or None


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


def fixed_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's ``mmap`` threshold at ``nbytes`` for this process; ``True`` if it was
    set (glibc only).

    glibc serves an allocation of at least the threshold with its own ``mmap`` and
    returns it to the system on ``free``; but after freeing such a block it raises the
    threshold to that block's size (up to 32 MiB), so that later blocks of that size
    come from the heap, whose freed pages it keeps. A driver that packs and frees a
    shard's messages of some MiB at a time then holds them long after: at 8,000 clients
    and 2,000 entries the driver's resident peak was 450 to 476 MiB with the moving
    threshold and 360 to 403 MiB with a fixed one (docs/scaling.md, "The driver's
    allocator"). Setting it explicitly stops the adjustment."""
    lib = _glibc()
    return bool(lib is not None and lib.mallopt(_M_MMAP_THRESHOLD, int(nbytes)) == 1)


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere). Cheap next to a session: it walks the free lists once."""
    lib = _glibc()
    if lib is not None:
        lib.malloc_trim(0)
