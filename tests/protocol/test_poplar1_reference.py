"""Poplar1 against the draft's own reference implementation, run only where it is
given: ``FEDHH_POPLAR1_REFERENCE`` names the ``poc/`` directory of
cfrg/draft-irtf-cfrg-vdaf at tag ``draft-irtf-cfrg-vdaf-20`` (never part of this
repository), under Python >= 3.12 (the reference's own requirement). On random
measurements, nonces, random bytes and verify keys, for lengths 1 to 16 bits (BITS = 1
included: the leaf is then the only level), it checks that the public share, both input
shares, every verifier share of both rounds and the output shares are byte for byte the
reference's, at an inner level and at the leaf (``bench_vs_reference`` raises
otherwise)."""
from __future__ import annotations

import os
import sys

import pytest

REF = os.environ.get("FEDHH_POPLAR1_REFERENCE")

pytestmark = pytest.mark.skipif(
    REF is None or sys.version_info < (3, 12),
    reason="needs FEDHH_POPLAR1_REFERENCE (the draft's poc/ directory) and Python >= 3.12")


@pytest.mark.parametrize("bits", [1, 2, 3, 7, 16])
def test_equal_to_the_reference(bits: int) -> None:
    from protocol.studies.runners.poplar1 import bench_vs_reference

    out = bench_vs_reference(REF, bits=bits, reports=24, ref_reports=4, candidates=6,
                             repeats=1, seed=bits)
    assert out["outputs_checked"] == {"reports": 4, "shares_equal": True, "prep_equal": True}
    assert out["clock"] == "process_time"
    assert set(out["prep"]) >= {f"level {bits - 1} (leaf)"}
