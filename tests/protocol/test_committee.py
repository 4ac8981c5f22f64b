"""The three-party threshold-comparison committee (protocol.core.committee)."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from protocol.core.committee import CommitteeAborted, ring_bits, run_committee
from protocol.core.randomness import insecure_deterministic_randomness


def _share(x: np.ndarray, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Additive shares as the transport makes them: (x + R1 + R2, -R1, -R2) mod 2^k."""
    mask = np.uint64((1 << k) - 1) if k < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    r1 = rng.integers(0, 1 << 64, x.size, dtype=np.uint64) & mask
    r2 = rng.integers(0, 1 << 64, x.size, dtype=np.uint64) & mask
    return [(x + r1 + r2) & mask, (np.uint64(0) - r1) & mask, (np.uint64(0) - r2) & mask]


def _rands(seed: int) -> list[Any]:
    base = insecure_deterministic_randomness(seed, "committee-test")
    return [base.child(f"p{i}") for i in range(3)]


def test_ring_bits() -> None:
    assert ring_bits(0) == 8 and ring_bits(127) == 8 and ring_bits(128) == 9
    assert ring_bits(10, 1000) == 11
    assert ring_bits((1 << 63) - 1) == 64
    with pytest.raises(ValueError):
        ring_bits(1 << 63)


@pytest.mark.parametrize("k_bound", [1, 7, 20, 40, 63])
def test_comparison_is_exact_on_random_and_edge_inputs(k_bound: int) -> None:
    rng = np.random.default_rng(k_bound)
    top = (1 << k_bound) - 1
    for trial in range(20):
        theta = int(rng.integers(1, top + 1)) if top > 1 else 1
        k = ring_bits(top, theta)
        edge = [0, top, theta - 1, theta, min(theta + 1, top)]
        x = np.concatenate([np.array(edge, dtype=np.uint64),
                            rng.integers(0, top + 1, 40, dtype=np.uint64)])
        out = run_committee(_share(x, k, rng), k, theta, reveal_counts=True,
                            rands=_rands(trial))
        assert np.array_equal(out.passed, x >= theta)
        assert out.counts is not None and np.array_equal(out.counts, x[x >= theta])
        assert out.comparisons == x.size


def test_membership_only_and_no_threshold() -> None:
    rng = np.random.default_rng(1)
    x = np.array([10, 2, 1, 0, 5], dtype=np.uint64)
    out = run_committee(_share(x, 8, rng), 8, 3, reveal_counts=False, rands=_rands(1))
    assert out.counts is None and out.passed.tolist() == [True, False, False, False, True]
    assert all(v["opened_counts"] is None for v in out.views)
    out = run_committee(_share(x, 8, rng), 8, None, reveal_counts=True, rands=_rands(2))
    assert out.passed.all() and out.counts.tolist() == [10, 2, 1, 0, 5]
    assert out.comparisons == 0


def _flip_open(step: str, sender: int, recipient: int, payload: Any) -> Any:
    if step == "open-bits" and sender == 1 and recipient == 2:
        return payload ^ np.uint64(1)
    return payload


def test_one_member_opening_a_wrong_value_is_caught() -> None:
    rng = np.random.default_rng(2)
    x = np.array([10, 2, 1, 0, 5], dtype=np.uint64)
    with pytest.raises(CommitteeAborted) as info:
        run_committee(_share(x, 8, rng), 8, 3, reveal_counts=True, hook=_flip_open)
    assert info.value.reason == "open_mismatch" and info.value.party == 2


@pytest.mark.parametrize("bad, reason", [
    (lambda p: None, "missing_message"),
    (lambda p: p.astype(np.int64) if isinstance(p, np.ndarray) else p, "malformed_message"),
    (lambda p: p[:-1] if isinstance(p, np.ndarray) else p, "malformed_message"),
    (lambda p: p | np.uint64(1 << 20) if isinstance(p, np.ndarray) else p,
     "malformed_message"),
    (lambda p: b"short" if isinstance(p, bytes) else p, "malformed_message"),
])
def test_a_failing_helper_aborts_with_a_named_reason(bad: Any, reason: str) -> None:
    rng = np.random.default_rng(3)
    x = np.array([10, 2, 1, 0, 5], dtype=np.uint64)

    def hook(step: str, sender: int, recipient: int, payload: Any) -> Any:
        return bad(payload) if sender == 2 else payload

    with pytest.raises(CommitteeAborted) as info:
        run_committee(_share(x, 8, rng), 8, 3, reveal_counts=True, hook=hook)
    assert info.value.reason == reason


def test_a_wrong_input_share_shifts_the_result_undetected() -> None:
    """Semi-honest model, measured: a helper that inputs a wrong share changes the
    outcome and nobody notices (docs/threshold.md)."""
    rng = np.random.default_rng(4)
    x = np.array([10, 2, 1, 0, 5], dtype=np.uint64)
    shares = _share(x, 8, rng)
    shares[1] = (shares[1] + np.array([0, 1, 0, 0, 0], dtype=np.uint64)) & np.uint64(255)
    out = run_committee(shares, 8, 3, reveal_counts=True, rands=_rands(4))
    assert out.passed.tolist() == [True, True, False, False, True]


def test_two_colluding_members_recover_every_count() -> None:
    """Honest majority, measured: any two members hold all three components."""
    rng = np.random.default_rng(5)
    x = np.array([10, 2, 1, 0, 5], dtype=np.uint64)
    out = run_committee(_share(x, 8, rng), 8, 3, reveal_counts=False, rands=_rands(5))
    for i in range(3):
        j = (i + 1) % 3
        ci, cj = out.views[i]["components"], out.views[j]["components"]
        assert np.array_equal((ci[0] + ci[1] + cj[1]) & np.uint64(255), x)


def _fields(view: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every view field as a flat integer array, keyed by a stable name."""
    out: dict[str, np.ndarray] = {"own_key": np.frombuffer(view["own_key"], np.uint8),
                                  "input_share": view["input_share"],
                                  "c_own": view["components"][0],
                                  "c_next": view["components"][1],
                                  "opened_bits": view["opened_bits"]}
    for s, key in view["keys_received"]:
        out[f"key_from_{s}"] = np.frombuffer(key, np.uint8)
    seen: dict[str, int] = {}
    for step, sender, words in view["received"]:
        name = f"{step}/{sender}"
        seen[name] = seen.get(name, 0) + 1
        out[f"{name}#{seen[name]}"] = words
    return out


def _same_distribution_p(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of the two-sample chi-square test (homogeneity) over the observed values."""
    from scipy.stats import chi2

    vals, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    if vals.size == 1:
        return 1.0
    ca = np.bincount(inv[:a.size], minlength=vals.size).astype(float)
    cb = np.bincount(inv[a.size:], minlength=vals.size).astype(float)
    tot = ca + cb
    ea, eb = tot * a.size / (a.size + b.size), tot * b.size / (a.size + b.size)
    stat = float((((ca - ea) ** 2 / ea) + ((cb - eb) ** 2 / eb)).sum())
    return float(chi2.sf(stat, vals.size - 1))


def test_views_do_not_depend_on_sub_threshold_counts() -> None:
    """[10, 2, 1, 0, 5] and [10, 0, 2, 2, 5] at theta 3 release the same thing; every
    field of every member's view has the same distribution over 800 runs each (per
    position, and for the sum of the sub-threshold positions: a two-sample chi-square
    test per field), while the same test flags the secret count itself."""
    runs = 800
    xs = [np.array([10, 2, 1, 0, 5], dtype=np.uint64),
          np.array([10, 0, 2, 2, 5], dtype=np.uint64)]
    k, theta = ring_bits(20, 3), 3
    samples: list[list[dict[str, list[np.ndarray]]]] = [[{}, {}, {}], [{}, {}, {}]]
    secrets: list[list[np.ndarray]] = [[], []]
    for which, x in enumerate(xs):
        rng = np.random.default_rng(100 + which)
        for r in range(runs):
            out = run_committee(_share(x, k, rng), k, theta, reveal_counts=True,
                                rands=_rands(10_000 * which + r))
            assert out.passed.tolist() == [True, False, False, False, True]
            assert out.counts.tolist() == [10, 5]
            for p in range(3):
                assert out.views[p]["opened_counts"].tolist() == [10, 5]
                for name, arr in _fields(out.views[p]).items():
                    samples[which][p].setdefault(name, []).append(np.asarray(arr))
            c0, c1 = out.views[0]["components"]
            secrets[which].append((c0 + c1 + out.views[1]["components"][1]) & np.uint64(255))
    pvalues: list[float] = []
    for p in range(3):
        assert samples[0][p].keys() == samples[1][p].keys()
        for name in samples[0][p]:
            a, b = np.stack(samples[0][p][name]), np.stack(samples[1][p][name])
            assert a.shape == b.shape
            columns = [a[:, j] for j in range(a.shape[1])]
            cols_b = [b[:, j] for j in range(b.shape[1])]
            if a.shape[1] == 5:  # a vector over the candidates: also the sub-threshold sum
                columns.append(a[:, 1:4].sum(axis=1) % 256)
                cols_b.append(b[:, 1:4].sum(axis=1) % 256)
            for ca, cb in zip(columns, cols_b):
                pvalues.append(_same_distribution_p(ca, cb))
    assert len(pvalues) > 100
    # Bonferroni at family level 1e-3: no field's distribution differs
    assert min(pvalues) * len(pvalues) > 1e-3, min(pvalues)
    # ... while the same test, same sample size, flags the secret count itself
    control = _same_distribution_p(np.stack(secrets[0])[:, 1], np.stack(secrets[1])[:, 1])
    assert control < 1e-30, control


def _mpyc_compare(values: list[int], theta: int) -> list[int]:
    script = (
        "import json, sys\n"
        "from mpyc.runtime import mpc\n"
        "data = json.loads(sys.stdin.read())\n"
        "async def main():\n"
        "    secint = mpc.SecInt(32)\n"
        "    await mpc.start()\n"
        "    xs = [secint(v) for v in data['values']]\n"
        "    out = await mpc.output([x >= data['theta'] for x in xs])\n"
        "    await mpc.shutdown()\n"
        "    print(json.dumps([int(b) for b in out]))\n"
        "mpc.run(main())\n")
    res = subprocess.run([sys.executable, "-c", script, "-M1", "--no-log"],
                         input=json.dumps({"values": values, "theta": theta}),
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_cross_check_against_mpyc() -> None:
    """The same comparisons computed by MPyC (Shamir sharing, its own comparison
    protocol; one party in a subprocess, no sockets) give the same bits."""
    pytest.importorskip("mpyc")
    rng = np.random.default_rng(6)
    values = [int(v) for v in rng.integers(0, 1 << 31, 300)]
    theta = int(rng.integers(1, 1 << 31))
    values[:3] = [theta - 1, theta, theta + 1]
    expected = _mpyc_compare(values, theta)
    x = np.array(values, dtype=np.uint64)
    k = ring_bits(max(values), theta)
    assert k == 32
    out = run_committee(_share(x, k, rng), k, theta, reveal_counts=False, rands=_rands(6))
    assert out.passed.astype(int).tolist() == expected
    assert 0 < sum(expected) < len(expected)
