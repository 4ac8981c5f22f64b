"""``fedhh bench flower``: the parameter mapping, the error without Flower, and (where
Flower is installed) a whole Flower round that outputs its inputs' sum, and a check
that fails when the round is broken."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from protocol.cli import main
from protocol.studies.errors import StudyError
from protocol.studies.runners import flower_compare as fc


def test_flower_shares_maps_k_and_t() -> None:
    # Flower's neighbourhood includes the client itself: share_num = k + 1
    assert fc.flower_shares(30, 17) == (31, 17)
    assert fc.flower_shares(2, 2) == (3, 2)
    for k, t in ((31, 17), (0, 2), (30, 1), (30, 32)):
        with pytest.raises(StudyError):
            fc.flower_shares(k, t)


def test_inputs_are_on_the_quantisation_grid() -> None:
    floats, total = fc._flower_inputs(5, 64, seed=4)
    step = 2 * fc._CLIPPING_RANGE / fc._QUANTIZATION_RANGE
    q = [np.rint((x + fc._CLIPPING_RANGE) / step).astype(np.int64) for x in floats]
    for x, qi in zip(floats, q):
        # exactly on the grid, so Flower's stochastic rounding has nothing to round
        assert np.array_equal((x + fc._CLIPPING_RANGE) / step, qi.astype(np.float64))
        assert qi.min() >= 0 and qi.max() < fc._QUANTIZATION_RANGE
    assert np.array_equal(total, sum(q) % fc._MODULUS_RANGE)


def test_without_flower_the_command_says_how_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "flwr", None)  # import flwr raises ImportError
    assert main(["bench", "flower", "--clients", "20", "--dim", "10"]) == 2
    err = capsys.readouterr().err
    assert "needs Flower" in err and f"flwr=={fc.FLOWER_VERSION}" in err


@pytest.mark.parametrize("argv", (["--clients", "2"], ["--dim", "0"], ["--repeats", "0"],
                                  ["--bare-sample", "0"]))
def test_bad_sizes_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "flower", *argv]) == 2
    err = capsys.readouterr().err
    assert argv[0] in err and ("must be at least" in err or "must be >=" in err), err


def test_flower_round_outputs_the_sum_and_the_check_can_fail() -> None:
    pytest.importorskip("flwr")
    row = fc.run_flower_round(16, 40, 5, 3, seed=2)
    assert row["correct"] is True
    assert row["key_agreements"] == 2 * 4 * 16 and row["key_pairs"] == 32
    # a server that unmasks with a wrong seed for one client gets a wrong sum
    fl = fc._flower()
    calls = []

    def wrong_first(shares):  # noqa: ANN001, ANN202
        calls.append(1)
        secret = fl["combine_shares"](shares)
        return secret if len(calls) > 1 else bytes(len(secret))

    broken = dict(fl, combine_shares=wrong_first)
    assert fc.run_flower_round(16, 40, 5, 3, seed=2, fl=broken)["correct"] is False


@pytest.mark.slow  # about 6 s on 2 busy cores: Flower's bare round, interleaved
def test_bench_flower_small(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("flwr")
    out = fc.bench_flower(24, 30, repeats=1, bare_sample=5, allow_other_version=True)
    assert out["correct"] is True
    assert out["flower_share_num"] == out["degree"] + 1
    assert len(out["flower_cpu_seconds"]) == len(out["ours_cpu_seconds"]) == 1
    # the speedup is the ratio of the unrounded medians
    assert out["speedup"] == pytest.approx(
        out["flower_cpu_median"] / out["ours_cpu_median"], rel=0.1)
    assert out["flower_key_agreements"] == 2 * out["degree"] * 24
    assert main(["bench", "flower", "--clients", "24", "--dim", "30", "--repeats", "1",
                 "--bare-sample", "5", "--allow-other-version"]) == 0
    assert "speedup" in capsys.readouterr().out


def test_flower_masks_have_32_bits_of_seed() -> None:
    # docs/scaling.md says Flower 1.42.0's masks come from a 32-bit seed: two different
    # 32-byte keys whose 32-bit words XOR to the same value expand to the same mask
    pytest.importorskip("flwr")
    prg = fc._flower()["prg"]
    key = bytes(range(32))
    # flip the same bits in two words: the XOR of all eight words is unchanged
    other = bytearray(key)
    for i in (0, 4):
        other[i] ^= 0x5A
    assert bytes(other) != key
    a = prg(key, fc._MODULUS_RANGE, [(1000,)])[0]
    b = prg(bytes(other), fc._MODULUS_RANGE, [(1000,)])[0]
    assert np.array_equal(a, b)
