"""The malicious-secure committee (protocol.core.committee.verified) and its field."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from scipy import stats

from protocol.core.committee import CommitteeAborted
from protocol.core.committee import field as F
from protocol.core.committee.verified import (
    CommitteeMessage, VerifiedParty, run_verified_committee,
)
from protocol.core.randomness import insecure_deterministic_randomness

CTX = b"\x07" * 32


def share(x: np.ndarray, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """A replicated sharing of ``x``: party ``i`` gets ``(c_i, c_{i+1})``."""
    c0 = rng.integers(0, F.P, x.size, dtype=np.uint64)
    c1 = rng.integers(0, F.P, x.size, dtype=np.uint64)
    c = [c0, c1, F.sub(F.sub(x.astype(np.uint64), c0), c1)]
    return [(c[i], c[(i + 1) % 3]) for i in range(3)]


def rands(seed: int) -> list[Any]:
    base = insecure_deterministic_randomness(seed, "verified-committee-test")
    return [base.child(f"p{i}") for i in range(3)]


# ------------------------------------------------------------------------- field


def test_field_arithmetic_matches_python_integers() -> None:
    rng = np.random.default_rng(0)
    edge = np.array([0, 1, 2, F.P - 1, F.P - 2, 1 << 60, (1 << 32) - 1, 1 << 32],
                    dtype=np.uint64)
    a = np.concatenate([np.repeat(edge, edge.size), rng.integers(0, F.P, 5000, np.uint64)])
    b = np.concatenate([np.tile(edge, edge.size), rng.integers(0, F.P, 5000, np.uint64)])
    A, B = [int(v) for v in a], [int(v) for v in b]
    assert [int(v) for v in F.mul(a, b)] == [(x * y) % F.P for x, y in zip(A, B)]
    assert [int(v) for v in F.add(a, b)] == [(x + y) % F.P for x, y in zip(A, B)]
    assert [int(v) for v in F.sub(a, b)] == [(x - y) % F.P for x, y in zip(A, B)]
    assert [int(v) for v in F.neg(a)] == [(-x) % F.P for x in A]


def test_uniform_is_in_range_deterministic_and_label_separated() -> None:
    key = os.urandom(32)
    u = F.uniform(key, "a", 100_000)
    assert u.dtype == np.uint64 and int(u.max()) < F.P
    assert np.array_equal(u, F.uniform(key, "a", 100_000))
    assert not np.array_equal(u[:100], F.uniform(key, "b", 100))
    # the top bit pattern is used: mean close to p / 2
    assert abs(float(u.mean()) / F.P - 0.5) < 0.01


def test_from_ints_refuses_out_of_field_values() -> None:
    assert F.from_ints([0, 5]).tolist() == [0, 5]
    for bad in ([-1], [F.P], [1.5]):
        with pytest.raises(ValueError):
            F.from_ints(np.array(bad))


# --------------------------------------------------------------- correctness


@pytest.mark.parametrize("theta", [1, 2, 3, 4, 7, 8, 12, 33])
def test_comparison_is_exact(theta: int) -> None:
    rng = np.random.default_rng(theta)
    x = np.concatenate([np.array([0, theta - 1, theta, theta + 1, 10 * theta, F.P - 1 - 7],
                                 dtype=np.uint64),
                        rng.integers(0, 3 * theta, 60).astype(np.uint64)])
    out = run_verified_committee(share(x, rng), theta, context=CTX, reveal_counts=True,
                                 rands=rands(theta))
    assert np.array_equal(out.passed, x >= theta)
    assert out.counts is not None and np.array_equal(out.counts, x[x >= theta])
    assert out.comparisons == x.size
    # every member saw the same check value 0 and opened the same bits
    assert all(int(v["check_value"][0]) == 0 for v in out.views)


def test_membership_only_opens_no_count_and_no_threshold_opens_all() -> None:
    rng = np.random.default_rng(1)
    x = np.array([10, 2, 1, 0, 5], dtype=np.uint64)
    out = run_verified_committee(share(x, rng), 3, context=CTX, reveal_counts=False)
    assert out.counts is None and out.passed.tolist() == [True, False, False, False, True]
    assert all(v["opened_counts"] is None for v in out.views)
    # no count-dependent value is opened besides the bits: the opened product is
    # never sent to anybody as a count
    out = run_verified_committee(share(x, rng), None, context=CTX, reveal_counts=False)
    assert out.passed.all() and out.counts.tolist() == [10, 2, 1, 0, 5]
    out = run_verified_committee(share(x, rng), 0, context=CTX, reveal_counts=True)
    assert out.passed.all() and out.comparisons == 0


def test_empty_candidate_list() -> None:
    out = run_verified_committee(share(np.zeros(0, np.uint64), np.random.default_rng(0)), 3,
                                 context=CTX, reveal_counts=True)
    assert out.passed.size == 0 and out.counts is not None and out.counts.size == 0


# ------------------------------------------------------------------- deviations


def _tamper(step: str, sender: int, change: Any, recipient: int | None = None):
    """A hook that rewrites the payload of ``step`` messages from ``sender``."""
    def hook(s: str, frm: int, to: int, payload: Any) -> Any:
        if s == step and frm == sender and (recipient is None or to == recipient):
            return change(payload)
        return payload
    return hook


def _add_one_at(pos: int):
    def change(p: np.ndarray) -> np.ndarray:
        q = p.copy()
        q[pos] = F.add(q[pos:pos + 1], np.array([1], np.uint64))[0]
        return q
    return change


VOTES_A = np.array([10, 2, 1, 0, 5], dtype=np.uint64)
VOTES_B = np.array([10, 0, 2, 2, 5], dtype=np.uint64)
THETA = 3
#: one step per layer at theta = 3: [r x], the tree (2 rows of 3 -> 1 pair + carry,
#: then 1 pair), the final product with rho
MULT_STEPS = ["mult-0", "mult-1", "mult-2", "mult-3"]


@pytest.mark.parametrize("step", MULT_STEPS)
@pytest.mark.parametrize("sender", [0, 1, 2])
def test_an_error_in_any_multiplication_layer_aborts_before_the_bits(step: str, sender: int) -> None:
    rng = np.random.default_rng(3)
    with pytest.raises(CommitteeAborted) as info:
        run_verified_committee(share(VOTES_A, rng), THETA, context=CTX, reveal_counts=True,
                               hook=_tamper(step, sender, _add_one_at(1)))
    # the receiver's copy carries the error: either the check value is not 0, or the
    # sender's own copy of it differs from the receiver's when it is opened
    assert info.value.reason in ("verification_failed", "open_mismatch")
    assert info.value.detail != "" and "bits" not in info.value.detail


@pytest.mark.parametrize("step", ["open-coins", "open-check", "open-bits", "open-counts"])
def test_a_wrong_opening_is_caught(step: str) -> None:
    rng = np.random.default_rng(4)
    with pytest.raises(CommitteeAborted) as info:
        run_verified_committee(share(VOTES_A, rng), THETA, context=CTX, reveal_counts=True,
                               hook=_tamper(step, 1, _add_one_at(0), recipient=2))
    assert info.value.reason == "open_mismatch" and info.value.party == 2


@pytest.mark.parametrize("holder, checker", [(0, 1), (1, 2), (2, 0)])
def test_a_component_held_differently_is_named_at_set_up(holder: int, checker: int) -> None:
    """``P_i`` sends the digest of ``c_{i+1}`` to ``P_{i+1}``: two copies that differ
    abort with ``input_mismatch`` before any computation."""
    rng = np.random.default_rng(5)
    comps = share(VOTES_A, rng)
    first, second = comps[holder]
    shifted = second.copy()
    shifted[1] = F.add(shifted[1:2], np.array([THETA], np.uint64))[0]
    comps[holder] = (first, shifted)
    with pytest.raises(CommitteeAborted) as info:
        run_verified_committee(comps, THETA, context=CTX, reveal_counts=True)
    assert info.value.reason == "input_mismatch" and info.value.party == checker


class _SkipsInputCheck(VerifiedParty):
    """A member that ignores the digest it receives (a corrupted checker)."""

    def receive_setup(self, key: Any, digest: Any) -> None:
        self._prev_key = self._take(key, "key", self.prev, nbytes=32)


def test_a_member_computing_with_a_shifted_copy_fails_verification() -> None:
    """The server shifts its own copy of ``S`` (as a cheater would, ignoring the check
    of it): its messages carry the error, and verification catches it."""
    rng = np.random.default_rng(6)
    comps = share(VOTES_A, rng)
    c0 = comps[0][0].copy()
    c0[1] = F.add(c0[1:2], np.array([THETA], np.uint64))[0]
    comps[0] = (c0, comps[0][1])
    with pytest.raises(CommitteeAborted) as info:
        run_verified_committee(comps, THETA, context=CTX, reveal_counts=True,
                               party_classes=[_SkipsInputCheck, VerifiedParty, VerifiedParty])
    assert info.value.reason in ("verification_failed", "open_mismatch")


def test_replayed_lost_and_misrouted_messages() -> None:
    rng = np.random.default_rng(7)
    old_context = b"\x01" * 32
    old: dict[str, CommitteeMessage] = {}

    def record(step: str, sender: int, recipient: int, payload: Any) -> Any:
        old.setdefault(f"{step}/{sender}/{recipient}",
                       CommitteeMessage(old_context, step, sender, recipient, payload))
        return payload

    run_verified_committee(share(VOTES_A, rng), THETA, context=old_context,
                           reveal_counts=True, hook=record)

    def replay(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if step == "mult-1" and sender == 2:
            return old[f"{step}/{sender}/{recipient}"]
        return payload

    def relabel(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if step == "mult-0":
            return CommitteeMessage(CTX, "mult-9", sender, recipient, payload)
        return payload

    def change(at: str, fn: Any) -> Any:
        return lambda step, s, r, payload: fn(payload) if step == at else payload

    cases = [(replay, "replayed_message"),
             (change("open-check", lambda p: None), "missing_message"),
             (relabel, "unexpected_message"),
             (change("mult-2", lambda p: p[:-1]), "malformed_message"),
             (change("open-bits", lambda p: np.full(p.shape, F.P, np.uint64)),
              "malformed_message"),
             (change("key", lambda p: "garbage"), "malformed_message")]
    for hook, reason in cases:
        with pytest.raises(CommitteeAborted) as info:
            run_verified_committee(share(VOTES_A, rng), THETA, context=CTX,
                                   reveal_counts=True, hook=hook)
        assert info.value.reason == reason


def test_bad_arguments_are_refused() -> None:
    rng = np.random.default_rng(8)
    with pytest.raises(CommitteeAborted):
        run_verified_committee(share(VOTES_A, rng)[:2], THETA, context=CTX,
                               reveal_counts=True)
    with pytest.raises(CommitteeAborted):
        run_verified_committee(share(VOTES_A, rng), THETA, context=b"short",
                               reveal_counts=True)
    comps = share(VOTES_A, rng)
    comps[1] = (comps[1][0], np.full(5, F.P, np.uint64))
    with pytest.raises(CommitteeAborted):
        run_verified_committee(comps, THETA, context=CTX, reveal_counts=True)


# ----------------------------------------------------------- selective failure


def abort_rates(hook_of: Any, runs: int, seed: int) -> tuple[int, int]:
    """Aborts out of ``runs`` for the two vote vectors under the same deviation."""
    rng = np.random.default_rng(seed)
    aborts = []
    for votes in (VOTES_A, VOTES_B):
        count = 0
        for _ in range(runs):
            try:
                run_verified_committee(share(votes, rng), THETA, context=os.urandom(32),
                                       reveal_counts=True, hook=hook_of())
            except CommitteeAborted:
                count += 1
        aborts.append(count)
    return aborts[0], aborts[1]


#: deviations that act on sub-threshold positions (1, 2, 3) only
DEVIATIONS = {
    "rx layer, position 1": lambda: _tamper("mult-0", 0, _add_one_at(1)),
    "tree layer, position 2": lambda: _tamper("mult-1", 1, _add_one_at(2)),
    "final layer, position 3": lambda: _tamper("mult-3", 2, _add_one_at(3)),
    "random position, random layer": lambda: _random_error(),
}


def _random_error() -> Any:
    rng = np.random.default_rng()
    step, pos = MULT_STEPS[int(rng.integers(4))], int(rng.integers(1, 4))
    return _tamper(step, int(rng.integers(3)), _add_one_at(pos))


def _fisher_p(a: int, b: int, runs: int) -> float:
    return float(stats.fisher_exact([[a, runs - a], [b, runs - b]])[1])


@pytest.mark.parametrize("name", list(DEVIATIONS))
def test_abort_rate_does_not_depend_on_sub_threshold_counts(name: str) -> None:
    """100 runs per vector here; ``-m slow`` runs 1,000 (below)."""
    a, b = abort_rates(DEVIATIONS[name], 100, 11)
    assert a == b == 100
    assert _fisher_p(a, b, 100) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DEVIATIONS))
def test_abort_rate_does_not_depend_on_sub_threshold_counts_1000_runs(name: str) -> None:
    a, b = abort_rates(DEVIATIONS[name], 1000, 12)
    assert a == b == 1000
    assert _fisher_p(a, b, 1000) == 1.0


def test_views_do_not_depend_on_sub_threshold_counts() -> None:
    """Every received field element is uniform whatever the sub-threshold counts are:
    a chi-square test of equal distributions (the low 4 bits of each element, per
    step and party) does not separate the two vectors over 300 honest runs each. The
    members' randomness is seeded (a fixed sample: the test cannot fail by chance from
    one run of the suite to the next; with OS randomness it would at its 1e-3 level)."""
    rng = np.random.default_rng(13)
    samples: dict[tuple[int, str], list[list[int]]] = {}
    for which, votes in enumerate((VOTES_A, VOTES_B)):
        for run in range(300):
            base = insecure_deterministic_randomness(f"views-{which}-{run}", "test")
            out = run_verified_committee(share(votes, rng), THETA, context=rng.bytes(32),
                                         reveal_counts=False,
                                         rands=[base.child(f"member-{i}") for i in range(3)])
            for i, view in enumerate(out.views):
                for step, _sender, payload in view["received"]:
                    if isinstance(payload, np.ndarray) and step.startswith("mult"):
                        key = (i, step)
                        samples.setdefault(key, [[], []])[which].extend(
                            (payload & np.uint64(15)).astype(int).tolist())
            assert out.passed.tolist() == [True, False, False, False, True]
    pvalues = []
    for a, b in samples.values():
        table = np.array([np.bincount(a, minlength=16), np.bincount(b, minlength=16)])
        pvalues.append(stats.chi2_contingency(table)[1])
    assert min(pvalues) > 1e-3 / len(pvalues)


def test_bench_committee_compares_both_committees_on_the_same_counts() -> None:
    from protocol.studies.runners.benchmarks import bench_committee

    out = bench_committee(60, 3, 2, seed=1, clients=100)
    assert out["correct"] is True and out["statistical_security_bits"] >= 40
    for name in ("verified", "semi_honest"):
        assert out[name]["bytes_per_candidate_and_member"] > 0
    assert out["verified_over_semi_honest"]["cpu"] > 0
    proc = subprocess.run([sys.executable, "-m", "protocol.cli", "bench", "committee",
                           "--candidates", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_a_failed_check_opens_nothing_that_depends_on_the_counts() -> None:
    """An error in the checked branch of a tree layer is multiplied into later wires, so
    the check value ``V`` itself depends on the counts; only ``beta V`` is opened, and
    its distribution is the same for both vote vectors (chi-square on the low 4 bits,
    200 runs each), and it is never 0 (every run aborts)."""
    rng = np.random.default_rng(21)
    pairs_per_layer = 1   # theta = 3: the first tree layer pairs rows (0, 1)
    offset = pairs_per_layer * VOTES_A.size + 1   # checked half, candidate 1

    def run(votes: np.ndarray) -> int:
        firsts: dict[int, int] = {}

        def hook(step: str, sender: int, recipient: int, payload: Any) -> Any:
            if step == "mult-1" and sender == 1:
                out = payload.copy()
                out[offset] = F.add(out[offset:offset + 1], np.array([1], np.uint64))[0]
                return out
            if step == "open-check" and recipient == (sender + 1) % 3:
                firsts[sender] = int(payload[0])      # c_sender, the first component
            return payload

        with pytest.raises(CommitteeAborted):
            run_verified_committee(share(votes, rng), THETA, context=os.urandom(32),
                                   reveal_counts=False, hook=hook)
        assert len(firsts) == 3
        return sum(firsts.values()) % F.P

    opened = {name: [run(v) for _ in range(200)] for name, v in (("a", VOTES_A),
                                                                ("b", VOTES_B))}
    assert all(v != 0 for vals in opened.values() for v in vals)
    table = np.array([np.bincount(np.array(vals) & 15, minlength=16)
                      for vals in opened.values()])
    assert stats.chi2_contingency(table)[1] > 1e-3
