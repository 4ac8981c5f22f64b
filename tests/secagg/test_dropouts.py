"""Dropout matrix: for every round, dropping nobody, one client, down to exactly the
threshold, and below it, on the complete graph (SecAgg) and a Harary graph (SecAgg+),
in both variants. Either the result is the exact sum over U3 or the parties abort with
the specific reason."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import (
    Dropout, SecAggRun, SecAggSimulation, make_config, run_secagg,
)
from secagg.state import AbortReason as R, ClientState, SessionConfig

DIM = 6


def _run(cfg: SessionConfig, schedule: dict[int, Any], seed: int = 0) -> tuple[SecAggRun, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, cfg.modulus, (cfg.n, cfg.dim), dtype=np.uint64)
    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(seed),
                     dropout=Dropout(schedule))
    return run, x


def _seed_with(cfg: SessionConfig, drop: set[int], want: Any, victim: int = 0) -> int:
    """The first seed whose round 0 (``drop`` gone) yields a graph with ``want(N(victim))``."""
    for seed in range(2000):
        sim = SecAggSimulation(cfg, np.zeros((cfg.n, cfg.dim), dtype=np.uint64),
                               rand=insecure_deterministic_randomness(seed),
                               dropout=Dropout({0: drop}))
        sim.start()
        sim.step()
        if want(sorted(sim.server.neighbours[victim])):
            return seed
    raise AssertionError("no seed found")


def _exact(run: SecAggRun, x: np.ndarray, expected_u3: set[int]) -> None:
    assert run.completed, (run.server_abort_reason, run.client_abort_reasons)
    assert set(run.survivors) == expected_u3
    want = [sum(int(v) for v in x[sorted(expected_u3), j]) % run.config.modulus
            for j in range(x.shape[1])]
    assert [int(v) for v in run.result] == want


def _effective(round_no: int, malicious: bool) -> int:
    """Without the consistency check there is no round 3: those clients drop before 4."""
    return 4 if round_no == 3 and not malicious else round_no


SERVER_REASON = {0: R.TOO_FEW_ADVERTISED, 1: R.TOO_FEW_SHARE_SENDERS,
                 2: R.TOO_FEW_MASKED_INPUTS, 3: R.TOO_FEW_CONSISTENCY_SIGNATURES,
                 4: R.TOO_FEW_UNMASK_RESPONSES}


def _complete(malicious: bool) -> SessionConfig:
    # n = 7, k = 6; t = 3 (honest-but-curious) or 4 (> k/2, malicious variant)
    return make_config(7, DIM, graph="complete", threshold=4 if malicious else 3,
                       malicious=malicious, modulus=1 << 16)


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("round_no", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("case", ["none", "one", "exact", "too_many"])
def test_complete_graph_matrix(malicious: bool, round_no: int, case: str) -> None:
    cfg = _complete(malicious)
    n, t = cfg.n, cfg.threshold
    drop = {"none": set(), "one": {0}, "exact": set(range(n - (t + 1))),
            "too_many": set(range(n - t))}[case]
    run, x = _run(cfg, {round_no: drop})
    round_no = _effective(round_no, malicious)
    everyone = set(range(n))
    if case != "too_many":
        # a client dropping before round 4 already has its masked input in the sum
        _exact(run, x, everyone if round_no >= 3 else everyone - drop)
        if case == "exact":
            # every secret had exactly t responding holders
            assert len(run.sets["U5"]) == t + 1
        return
    assert not run.completed
    assert run.server_abort_reason is SERVER_REASON[round_no]
    assert run.result is None
    for c in everyone - drop:
        if round_no == 4:  # the survivors already answered; the server cannot finish
            assert run.client_states[c] is ClientState.COMPLETED
        else:
            assert run.client_abort_reasons[c] is R.SERVER_ABORTED


def _harary(malicious: bool) -> SessionConfig:
    # n = 10, k = 4, t = 2 (honest-but-curious) or 3 (malicious variant)
    return make_config(10, DIM, graph="harary", degree=4, threshold=3 if malicious else 2,
                       malicious=malicious, modulus=(1 << 61) - 1)


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("round_no", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("case", ["none", "one", "exact", "too_many"])
def test_harary_graph_matrix(malicious: bool, round_no: int, case: str) -> None:
    cfg = _harary(malicious)
    k, t = cfg.degree, cfg.threshold
    victim = 0

    def pick(nb: list[int]) -> set[int]:
        # "exact": the victim keeps exactly t live neighbours; "too_many": none at all
        return {"none": set(), "one": {nb[0]}, "exact": set(nb[:k - t]),
                "too_many": set(nb)}[case]

    if round_no == 0:
        # The graph is seeded by the round-0 transcript, so it cannot name who drops
        # before round 0: fix the drop set and search the clients' randomness for an
        # attempt whose graph puts it where the case needs it.
        drop = pick(list(range(1, k + 1)))
        seed = _seed_with(cfg, drop, lambda nb: pick(nb) == drop)
        run, x = _run(cfg, {0: drop}, seed)
        nb = sorted(run.server.neighbours[victim])
    else:
        run, x = _run(cfg, {round_no: lambda g: pick(sorted(g[victim]))})
        nb = sorted(run.server.neighbours[victim])
        drop = pick(nb)
    assert len(nb) == k and pick(nb) == drop
    round_no = _effective(round_no, malicious)
    everyone = set(range(cfg.n))
    if case != "too_many":
        _exact(run, x, everyone if round_no >= 3 else everyone - drop)
        return
    # the victim is cut off from every neighbour (with t = 3 of k = 4 the ring
    # neighbours two steps further lose too many as well, and stop for the same reason)
    if round_no in (0, 1):
        # the victim sees too few keys (round 0) or shares (round 1) and stops
        expected = R.TOO_FEW_KEYS if round_no == 0 else R.TOO_FEW_SHARES
        assert run.client_abort_reasons[victim] is expected
        if run.completed:
            assert victim not in run.survivors
            _exact(run, x, set(run.survivors))
        else:
            assert run.server_abort_reason in (R.TOO_FEW_SHARE_SENDERS,
                                              R.TOO_FEW_MASKED_INPUTS)
        if not malicious:  # t = 2: only the victim is cut off, the rest finish
            _exact(run, x, everyone - drop - {victim})
    else:
        # the victim's self mask (in the sum) can no longer be rebuilt
        assert not run.completed and run.result is None
        assert run.server_abort_reason is SERVER_REASON[round_no]
        if round_no < 4:
            assert run.client_abort_reasons[victim] is R.SERVER_ABORTED


@pytest.mark.parametrize("graph", ["complete", "harary"])
def test_dropouts_spread_over_rounds(graph: str) -> None:
    cfg = make_config(12, DIM, graph=graph, degree=None if graph == "complete" else 8,
                      threshold=3)
    run, x = _run(cfg, {0: {1}, 1: {4}, 2: {7}, 4: {10}}, seed=3)
    _exact(run, x, set(range(12)) - {1, 4, 7})
    # a client that dropped at round 2 had its mask key rebuilt, never its self mask
    assert not run.transcript.server_could_unmask(7)
    assert len(run.transcript.s_share_holders(7)) >= cfg.threshold
    assert not run.transcript.b_share_holders(7)


@pytest.mark.slow
@pytest.mark.parametrize("graph", ["complete", "harary"])
@pytest.mark.parametrize("round_no", [0, 1, 2, 4])
def test_larger_sessions_with_random_dropouts(graph: str, round_no: int) -> None:
    from secagg.params import find_params

    n = 60
    params = find_params(n, graph=graph, dropout_rate=0.1, malicious=False)
    cfg = SessionConfig(params, tuple(range(n)), b"slow", 500, 1 << 32,
                        server_nonce=bytes(32))
    rng = np.random.default_rng(round_no)
    drop = set(int(c) for c in rng.choice(n, 5, replace=False))
    run, x = _run(cfg, {round_no: drop}, seed=round_no)
    _exact(run, x, set(range(n)) - (drop if round_no < 3 else set()))
