"""The driver's allocator settings (protocol.core.memory): with glibc's mmap threshold
fixed, blocks of a MiB that a driver packs and frees go back to the system instead of
staying in the heap behind the blocks still alive."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from protocol.core import memory

_PROGRAM = textwrap.dedent("""
    import json, sys
    from protocol.core import memory

    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024

    big = bytearray(16 << 20)   # its own mmap; freeing it raises glibc's threshold
    del big
    fixed = memory.fixed_mmap_threshold() if "fixed" in sys.argv[1] else None
    base = rss()
    blocks = [bytearray(1 << 20) for _ in range(200)]  # 200 MiB, written
    kept = blocks[::10]                                 # every tenth stays alive
    del blocks
    if "trim" in sys.argv[1]:
        memory.release_freed_memory()
    print(json.dumps({"fixed": fixed, "held": rss() - base, "kept": len(kept)}))
""")


def _held(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROGRAM, mode], capture_output=True,
                         text=True, check=True, timeout=60)
    return json.loads(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or memory._glibc() is None,
                    reason="glibc's mallopt and malloc_trim")
def test_freed_blocks_go_back_with_the_threshold_fixed_or_a_trim():
    moving, fixed, trimmed = _held("moving"), _held("fixed"), _held("moving-trim")
    assert fixed["fixed"] is True and moving["fixed"] is None
    # with the threshold glibc moved up, the freed blocks between the live ones stay
    # resident (200 MiB written, 20 MiB alive)
    assert moving["held"] > 150 << 20, moving
    # fixed: each block was its own mapping, returned when freed; a trim hands back
    # the heap's free pages between live blocks
    assert fixed["held"] < 40 << 20, fixed
    assert trimmed["held"] < 40 << 20, trimmed


def test_release_is_harmless_anywhere():
    memory.release_freed_memory()   # nothing to assert but that it returns
    assert memory.peak_rss_bytes() > 0
