"""Coverage-guided fuzzing of the decoders with atheris (optional; not run by pytest).

    pip install atheris        # a prebuilt wheel exists for CPython 3.11 on x86-64 Linux
    python tests/fuzz/fuzz_decoders.py -runs=1000000            # all targets in turn
    FUZZ_TARGET=codec python tests/fuzz/fuzz_decoders.py corpus_dir/ -max_total_time=600

Targets (``FUZZ_TARGET``; default: every target, chosen by the input's first byte):
``codec`` (protocol.core.codec.decode, every registered tag), ``codec_session`` (the
same with the seed session's limits), ``shuffler_submit``,
``shuffler_parsers``, ``share``, ``unpack_uints``. A target may raise only the
library's own exception types (the same contract as tests/protocol/test_fuzz_decoders.py);
anything else is reported by libFuzzer as a crash with the input saved.
"""
from __future__ import annotations

import os
import pathlib
import sys

import atheris

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "protocol"))

with atheris.instrument_imports():
    import msgpack  # noqa: F401
    from protocol.core import codec  # noqa: F401
    import shuffler.messages  # noqa: F401
    import secagg.messages  # noqa: F401
    import secagg.prg  # noqa: F401
    import secagg.shamir  # noqa: F401

import test_fuzz_decoders as harness  # noqa: E402

TARGETS = harness.BYTE_TARGETS
NAMES = sorted(TARGETS)
CHOSEN = os.environ.get("FUZZ_TARGET")


def one_input(data: bytes) -> None:
    if CHOSEN:
        TARGETS[CHOSEN](data)
    elif data:
        TARGETS[NAMES[data[0] % len(NAMES)]](data[1:])


if __name__ == "__main__":
    if CHOSEN and CHOSEN not in TARGETS:
        sys.exit(f"unknown FUZZ_TARGET {CHOSEN!r}; choose from {NAMES}")
    harness.corpus()          # build the seed messages before fuzzing starts
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
