"""secagg.graph (Harary graphs of SecAgg+) and secagg.params (choice of k and t)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from secagg.errors import ParameterError
from secagg.graph import complete_graph, harary_graph, neighbours_of, ring_order
from secagg.params import (SecAggParams, _evaluate, find_params, log2_disconnect_probability,
                           log2_hypergeom_sf)

# ------------------------------------------------------------------ graphs


def _check_regular_symmetric(g: list[tuple[int, ...]], k: int) -> None:
    n = len(g)
    for i, nb in enumerate(g):
        assert len(nb) == k and list(nb) == sorted(set(nb)), (i, nb)
        assert i not in nb and all(0 <= j < n for j in nb)
        assert all(i in g[j] for j in nb)


@pytest.mark.parametrize("n,k", [(3, 2), (5, 2), (10, 4), (11, 6), (50, 8), (1000, 40)])
def test_harary_is_k_regular_symmetric_and_ring_structured(n: int, k: int) -> None:
    g = harary_graph(n, k, b"seed")
    _check_regular_symmetric(g, min(k, n - 1))
    ring = ring_order(n, b"seed").tolist()
    assert sorted(ring) == list(range(n))
    for p, node in enumerate(ring):
        expected = {ring[(p + d) % n] for d in range(-(k // 2), k // 2 + 1) if d}
        assert set(g[node]) == expected


def _connected(nodes: set[int], g: list[tuple[int, ...]]) -> bool:
    if not nodes:
        return True
    start = next(iter(nodes))
    seen, stack = {start}, [start]
    while stack:
        for j in g[stack.pop()]:
            if j in nodes and j not in seen:
                seen.add(j)
                stack.append(j)
    return seen == nodes


@pytest.mark.parametrize("n,k", [(9, 4), (10, 4), (12, 6)])
def test_harary_is_k_connected(n: int, k: int) -> None:
    # H_{k,n} is k-connected: removing any k - 1 nodes leaves it connected, and removing
    # some k nodes (2 runs of k/2 ring neighbours) disconnects it
    g = harary_graph(n, k, b"conn")
    for removed in itertools.combinations(range(n), k - 1):
        assert _connected(set(range(n)) - set(removed), g)
    ring = ring_order(n, b"conn").tolist()
    cut = set(ring[: k // 2] + ring[n // 2: n // 2 + k // 2])
    assert not _connected(set(range(n)) - cut, g)


def test_graph_is_a_pure_function_of_its_inputs() -> None:
    a = harary_graph(200, 10, b"public seed")
    assert a == harary_graph(200, 10, b"public seed")
    assert a != harary_graph(200, 10, b"public seeD")
    assert ring_order(200, b"x").tolist() != ring_order(201, b"x").tolist()[:200]


def test_neighbours_of_matches_the_full_graph() -> None:
    for n, k in ((7, 2), (30, 6), (257, 16), (12, 11), (12, 20)):
        alone = [neighbours_of(i, n, k, b"nb") for i in range(n)]  # no graph built yet
        g = harary_graph(n, k, b"nb")
        assert alone == g


def test_clients_share_the_neighbourhoods_of_a_graph_in_memory() -> None:
    """While a graph of the same arguments is alive (the server's, in a simulation),
    neighbours_of returns its tuples instead of copies; the graph is read-only (a
    party cannot change the others' neighbourhoods through it), survives pickling,
    and nothing keeps it alive once its holder drops it."""
    import copy
    import gc
    import pickle

    import secagg.graph as graph_mod

    g = harary_graph(60, 6, b"shared")
    assert all(neighbours_of(i, 60, 6, b"shared") is g[i] for i in range(60))
    assert neighbours_of(3, 60, 6, b"other") is not g[3]     # other arguments: computed
    assert neighbours_of(3, 60, 8, b"shared") != g[3]
    c = complete_graph(9)
    assert graph_mod.complete_neighbours(4, 9) is c[4]
    for name, args in (("__setitem__", (0, ())), ("append", ((),)), ("sort", ()),
                       ("pop", ()), ("__delitem__", (0,)), ("extend", ([()],))):
        with pytest.raises(TypeError, match="read-only"):
            getattr(g, name)(*args)
    assert pickle.loads(pickle.dumps(g)) == g and copy.deepcopy(g) == g
    del g, c
    gc.collect()
    assert graph_mod._last is not None and graph_mod._last[1]() is None
    assert neighbours_of(3, 60, 6, b"shared") == harary_graph(60, 6, b"shared")[3]


def test_complete_graph_and_degree_at_least_n_minus_1() -> None:
    assert complete_graph(4) == [(1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2)]
    assert harary_graph(4, 3, b"s") == complete_graph(4)
    assert harary_graph(5, 4, b"s") == complete_graph(5)  # even k = n - 1
    assert harary_graph(4, 100, b"s") == complete_graph(4)
    assert harary_graph(1, 0, b"s") == [()]
    assert harary_graph(6, 0, b"s") == [()] * 6


@pytest.mark.parametrize("args", [(10, 3, b"s"), (0, 2, b"s"), (10, -2, b"s"), (10, 2, "s"),
                                  (10.0, 2, b"s"), (True, 2, b"s")])
def test_graph_rejects_bad_arguments(args: tuple) -> None:
    with pytest.raises(ParameterError):
        harary_graph(*args)


@pytest.mark.parametrize("i", [-1, 10, 1.0])
def test_neighbours_of_rejects_bad_index(i: object) -> None:
    with pytest.raises(ParameterError):
        neighbours_of(i, 10, 4, b"s")  # type: ignore[arg-type]


def test_neighbourhood_is_uniform_over_seeds() -> None:
    # each of the n - 1 other nodes is a neighbour of node 0 with probability k / (n - 1);
    # chi-square over 3000 fixed seeds; a correct permutation fails with prob. 1e-6
    n, k, trials = 10, 4, 3000
    counts = np.zeros(n, np.int64)
    for s in range(trials):
        counts[list(neighbours_of(0, n, k, s.to_bytes(4, "big")))] += 1
    assert counts[0] == 0 and counts.sum() == k * trials
    assert stats.chisquare(counts[1:]).pvalue > 1e-6


# ------------------------------------------------------------------ the lemma behind (S2)

def _two_long_runs(bad_positions: set[int], n: int, h: int) -> bool:
    """Whether the ring has two disjoint windows of h consecutive bad positions."""
    starts = [s for s in range(n) if all((s + d) % n in bad_positions for d in range(h))]
    for a, b in itertools.combinations(starts, 2):
        wa = {(a + d) % n for d in range(h)}
        if wa.isdisjoint({(b + d) % n for d in range(h)}):
            return True
    return False


def test_disconnection_needs_two_runs_of_k_over_2_removed_nodes() -> None:
    # the combinatorial fact used by log2_disconnect_probability, checked on random cases
    rng = np.random.default_rng(5)
    disconnected = 0
    for trial in range(400):
        n = int(rng.integers(8, 40))
        k = 2 * int(rng.integers(1, 4))
        if k >= n - 1:
            continue
        g = harary_graph(n, k, trial.to_bytes(2, "big"))
        ring = ring_order(n, trial.to_bytes(2, "big")).tolist()
        bad = set(rng.choice(n, size=int(rng.integers(1, n)), replace=False).tolist())
        if not _connected(set(range(n)) - bad, g):
            disconnected += 1
            pos = {ring.index(v) for v in bad}
            assert _two_long_runs(pos, n, k // 2)
    assert disconnected > 20  # the check above was exercised


def _components(nodes: set[int], g: list[tuple[int, ...]]) -> list[set[int]]:
    left, comps = set(nodes), []
    while left:
        start = left.pop()
        comp, stack = {start}, [start]
        while stack:
            for j in g[stack.pop()]:
                if j in left:
                    left.discard(j)
                    comp.add(j)
                    stack.append(j)
        comps.append(comp)
    return comps


def _two_windows_with_corrupt(corrupt_pos: set[int], n: int, h: int, m: int) -> bool:
    """Two disjoint windows of h consecutive ring positions, each with >= m corrupt."""
    heavy = [s for s in range(n) if sum((s + d) % n in corrupt_pos for d in range(h)) >= m]
    for a, b in itertools.combinations(heavy, 2):
        if {(a + d) % n for d in range(h)}.isdisjoint({(b + d) % n for d in range(h)}):
            return True
    return False


def test_adaptive_disconnection_needs_two_windows_of_corrupt_nodes() -> None:
    # the lemma behind the malicious-server bound (S2'): if a malicious server drops any
    # honest clients it likes and some component S of the honest survivors is split from
    # the rest while every member of S keeps >= t neighbours among survivors and corrupt
    # clients (so the server can unmask all of S), then the ring has two disjoint windows
    # of k/2 positions holding >= t - k/2 corrupt clients each
    rng = np.random.default_rng(11)
    exercised = 0
    for trial in range(1500):
        n = int(rng.integers(10, 36))
        k = 2 * int(rng.integers(1, 4))
        if k >= n - 1:
            continue
        t = int(rng.integers(k // 2 + 1, k + 1))
        seed = trial.to_bytes(2, "big")
        g = harary_graph(n, k, seed)
        ring = ring_order(n, seed).tolist()
        perm = rng.permutation(n)
        corrupt = set(perm[: int(rng.integers(0, n // 2))].tolist())
        honest = [v for v in range(n) if v not in corrupt]
        dropped = {v for v in honest if rng.random() < 0.4}
        survivors = set(honest) - dropped
        comps = _components(survivors, g)
        if len(comps) < 2:
            continue
        alive = survivors | corrupt
        for comp in comps:
            if all(sum(j in alive for j in g[i]) >= t for i in comp):
                exercised += 1
                corrupt_pos = {ring.index(v) for v in corrupt}
                assert _two_windows_with_corrupt(corrupt_pos, n, k // 2, t - k // 2)
    assert exercised > 30


# ------------------------------------------------------------------ tails

@pytest.mark.parametrize("a,N,K,k", [(0, 99, 5, 10), (1, 99, 5, 10), (3, 99, 5, 10),
                                     (6, 99, 5, 10), (20, 999, 50, 52), (37, 9999, 1000, 62),
                                     (5, 20, 20, 10), (11, 20, 20, 10), (2, 20, 0, 10)])
def test_hypergeometric_tail_matches_scipy(a: int, N: int, K: int, k: int) -> None:
    ours = log2_hypergeom_sf(a, N, K, k)
    ref = stats.hypergeom(N, K, k).sf(a - 1)
    if ref == 0:
        assert ours == -math.inf or ours < -1000
    else:
        assert ours == pytest.approx(math.log2(ref), abs=1e-9, rel=1e-9)


def test_disconnect_bound_formula() -> None:
    n, k, bad = 1000, 20, 100
    direct = n * n / 2 * math.prod((bad - i) / (n - i) for i in range(k))
    assert log2_disconnect_probability(n, k, bad) == pytest.approx(math.log2(direct))
    assert log2_disconnect_probability(n, k, k - 1) == -math.inf
    assert log2_disconnect_probability(n, n - 1, n) == -math.inf


# ------------------------------------------------------------------ find_params

TABLE = {  # n: (degree, threshold) at the defaults (gamma = delta = 0.05, sigma 40, eta 20)
    100: (16, 11), 1000: (54, 39), 10000: (68, 49), 100000: (78, 56)}
SEMI_HONEST_TABLE = {100: (12, 6), 1000: (30, 17), 10000: (34, 20), 100000: (36, 21)}


@pytest.mark.parametrize("n", sorted(TABLE))
def test_default_parameter_table(n: int) -> None:
    p = find_params(n)
    assert (p.degree, p.threshold) == TABLE[n]
    assert p.graph == "harary" and p.malicious
    assert p.log2_security_failure <= -40 and p.log2_correctness_failure <= -20
    # minimal: the next smaller even degree admits no threshold
    assert _evaluate(n, p.degree - 2, 0.05, 0.05, 40, 20, True) is None
    semi = find_params(n, malicious=False)
    assert (semi.degree, semi.threshold) == SEMI_HONEST_TABLE[n]
    assert _evaluate(n, semi.degree - 2, 0.05, 0.05, 40, 20, False) is None


def _malicious_security(n: int, k: int, t: int, corrupt: int) -> float:
    """n P(HG(n-1, K, k) >= 2t - k) + n^2/2 P(HG(n, K, k) >= 2t - k), with scipy."""
    a = 2 * t - k
    return (n * stats.hypergeom(n - 1, corrupt, k).sf(a - 1)
            + n * n / 2 * stats.hypergeom(n, corrupt, k).sf(a - 1))


def test_malicious_bounds_recomputed_with_scipy() -> None:
    for n in (1000, 10000):
        (k, t), c = TABLE[n], math.ceil(0.05 * n)
        assert _malicious_security(n, k, t, c) <= 2**-40
        assert n * stats.hypergeom(n - 1, c, k).sf(k - t) <= 2**-20   # P(D >= k - t + 1)
        assert _malicious_security(n, k, t - 1, c) > 2**-40          # t - 1 is not secure


def test_semi_honest_bounds_recomputed_with_scipy() -> None:
    n, (k, t) = 1000, SEMI_HONEST_TABLE[1000]
    corrupt = stats.hypergeom(n - 1, 50, k).sf(t - 1)           # P(C >= t)
    dropped = stats.hypergeom(n - 1, 50, k).sf(k - t)           # P(D >= k - t + 1)
    gap = n * n / 2 * math.prod((100 - i) / (n - i) for i in range(k))
    assert n * corrupt + gap <= 2**-40
    assert n * dropped <= 2**-20


def test_complete_graph_thresholds() -> None:
    for n in (10, 100, 1000):
        p = find_params(n, graph="complete")
        c = math.ceil(0.05 * n)
        assert p.degree == n - 1 and p.graph == "complete"
        assert p.threshold == (n - 1 + c) // 2 + 1  # smallest t with 2t > n - 1 + c
        semi = find_params(n, graph="complete", malicious=False)
        assert semi.threshold == c + 1


def test_semi_honest_needs_less_than_malicious() -> None:
    mal, semi = find_params(1000), find_params(1000, malicious=False)
    assert semi.degree <= mal.degree
    assert semi.log2_security_failure <= -40


def test_more_adversary_needs_more_degree() -> None:
    ks = [find_params(2000, corrupt_fraction=g).degree for g in (0.01, 0.05, 0.1, 0.2)]
    assert ks == sorted(ks) and ks[0] < ks[-1]


def test_infeasible_parameters_raise_with_the_condition() -> None:
    with pytest.raises(ParameterError, match="infeasible even with the complete graph"):
        find_params(100, corrupt_fraction=0.4, dropout_rate=0.4)
    with pytest.raises(ParameterError, match="n must be"):
        find_params(1)
    for kw in (dict(corrupt_fraction=1.0), dict(dropout_rate=-0.1), dict(sigma=-1),
               dict(graph="ring"), dict(eta=1.5), dict(corrupt_fraction=float("nan"))):
        with pytest.raises(ParameterError):
            find_params(100, **kw)


def test_degree_is_minimal_over_every_smaller_even_degree() -> None:
    p = find_params(1000)
    assert all(_evaluate(1000, k, 0.05, 0.05, 40, 20, True) is None
               for k in range(2, p.degree, 2))


def test_feasibility_is_not_monotone_so_the_scan_is_exhaustive() -> None:
    # with t moving in integer steps, a feasible k can be followed by infeasible ones;
    # this is why find_params scans every even k instead of bisecting
    n, g, d = 2000, 0.2, 0.2
    flags = [_evaluate(n, k, g, d, 40, 20, True) is not None for k in range(2, 420, 2)]
    first = flags.index(True)
    assert False in flags[first:]  # k = 396 fails between feasible 394 and 398
    assert find_params(n, corrupt_fraction=g, dropout_rate=d).degree == 2 + 2 * first == 394


@pytest.mark.slow
def test_heavy_adversary_large_n() -> None:
    n = 200_000
    p = find_params(n, corrupt_fraction=0.3, dropout_rate=0.3)
    assert (p.degree, p.threshold) == (11110, 7455)
    assert p.log2_security_failure <= -40 and p.log2_correctness_failure <= -20


def test_params_validation_and_encoding() -> None:
    p = SecAggParams(n=5, degree=4, threshold=3, graph="complete")
    assert p.encode() == (b"fedhh/secagg/params/v1\x00" + (5).to_bytes(8, "big")
                          + (4).to_bytes(8, "big") + (3).to_bytes(8, "big") + b"\x00\x01")
    assert p.encode() != SecAggParams(n=5, degree=4, threshold=2, graph="complete").encode()
    for kw in (dict(n=1, degree=1, threshold=1, graph="complete"),
               dict(n=5, degree=2, threshold=3, graph="harary"),
               dict(n=5, degree=3, threshold=2, graph="harary"),
               dict(n=5, degree=2, threshold=2, graph="complete"),
               dict(n=5, degree=4, threshold=0, graph="complete"),
               dict(n=5, degree=4, threshold=3, graph="star"),
               dict(n=5, degree=4, threshold=3, graph="complete", dropout_rate=1.5)):
        with pytest.raises(ParameterError):
            SecAggParams(**kw)


def test_grinding_bits_hold_each_seed_to_a_stricter_bound() -> None:
    """A server that may choose among 2^g seeds gets parameters whose per-seed bound is
    2^-(sigma + g): the same degree and threshold as sigma + g without grinding, and a
    reported bound (grinding included, union bound) still at most 2^-sigma."""
    from secagg.params import find_params

    for n, g in ((1_000, 10), (10_000, 20)):
        plain = find_params(n)
        ground = find_params(n, grinding_bits=g)
        stricter = find_params(n, sigma=40 + g)
        assert (ground.degree, ground.threshold) == (stricter.degree, stricter.threshold)
        assert ground.degree >= plain.degree and ground.grinding_bits == g
        assert ground.log2_security_failure == pytest.approx(
            stricter.log2_security_failure + g)
        assert ground.log2_security_failure <= -40
    # the complete graph has no seed: grinding changes nothing
    c0, c1 = find_params(200, graph="complete"), find_params(200, graph="complete",
                                                               grinding_bits=30)
    assert (c0.degree, c0.threshold, c0.log2_security_failure) == \
        (c1.degree, c1.threshold, c1.log2_security_failure)
    with pytest.raises(ParameterError):
        find_params(100, grinding_bits=-1)
    # it does not enter the session encoding: only the protocol's own fields do
    assert find_params(1_000, grinding_bits=10).encode() == find_params(1_000, sigma=50).encode()


# --------------------------------------------------------------- grinding by subset choice

@pytest.mark.parametrize("n,delta", [(2, 0.0), (10, 0.3), (30, 0.1), (100, 0.05), (1000, 0.1),
                                     (777, 0.13)])
def test_subset_grinding_bits_counts_the_subsets(n: int, delta: float) -> None:
    import math

    from secagg.params import subset_grinding_bits

    m = math.floor(delta * n)
    exact = math.log2(sum(math.comb(n, i) for i in range(m + 1)))
    assert subset_grinding_bits(n, delta) == pytest.approx(exact, abs=1e-9)


def test_seed_grinding_bits_is_capped_by_the_work_bound() -> None:
    from secagg.params import GRINDING_WORK_BITS, seed_grinding_bits

    # no corrupt client: the server grinds only by choosing U1 (and by attempts)
    assert seed_grinding_bits(10, 0.3, corrupt_fraction=0.0) == 8         # ceil(7.46)
    assert seed_grinding_bits(10, 0.3, corrupt_fraction=0.0, attempts=16) == 12
    assert seed_grinding_bits(10, 0.3, corrupt_fraction=0.0, attempts=3) == 10  # 7.46+1.58
    assert seed_grinding_bits(1000, 0.1, corrupt_fraction=0.0) == GRINDING_WORK_BITS
    assert seed_grinding_bits(1000, 0.1, corrupt_fraction=0.0, work_bits=80) == 80
    assert seed_grinding_bits(100, 0.0, corrupt_fraction=0.0) == 0   # no drop, no choice
    # one corrupt client picks its nonce after seeing the honest ones: only work bounds it
    assert seed_grinding_bits(10, 0.0, corrupt_fraction=0.1) == GRINDING_WORK_BITS
    assert seed_grinding_bits(10, 0.3) == GRINDING_WORK_BITS          # default gamma 0.05
    assert seed_grinding_bits(10, 0.3, work_bits=20) == 20
    for bad in ({"work_bits": -1}, {"attempts": 0}, {"attempts": 1.5},
                {"corrupt_fraction": 1.0}):
        with pytest.raises(ParameterError):
            seed_grinding_bits(100, 0.1, **bad)
    with pytest.raises(ParameterError):
        seed_grinding_bits(1, 0.1)
    # accounted for in the search: a larger degree for the Harary graph
    g = seed_grinding_bits(1000, 0.1)
    assert find_params(1000, dropout_rate=0.1, grinding_bits=g).degree > find_params(
        1000, dropout_rate=0.1).degree


def test_default_grinding_bits_only_for_a_malicious_server_on_harary() -> None:
    from secagg.params import default_grinding_bits, seed_grinding_bits

    assert default_grinding_bits(1000, 0.1, graph="harary", malicious=True) == (
        seed_grinding_bits(1000, 0.1))
    assert default_grinding_bits(1000, 0.1, graph="harary", malicious=False) == 0
    assert default_grinding_bits(1000, 0.1, graph="complete", malicious=True) == 0
    # small n: the subset count alone would allow 5 bits, a corrupt client's nonce more
    assert default_grinding_bits(20, 0.05, graph="harary", malicious=True) == 40
    assert default_grinding_bits(20, 0.05, graph="harary", malicious=True,
                                 corrupt_fraction=0.0) == 5
    with pytest.raises(ParameterError):
        default_grinding_bits(1000, 0.1, graph="ring", malicious=True)


@pytest.mark.parametrize("n,delta,most", [(100, 0.07, 7), (60, 0.1, 6), (61, 0.1, 7),
                                          (10, 0.0, 0), (3, 0.01, 1)])
def test_max_dropouts_is_the_budget_the_parameters_count(n: int, delta: float,
                                                         most: int) -> None:
    """``ceil(delta n)``, as the parameter search counts it: free of float noise
    (0.07 * 100 is 7.000000000000001) and at least one client for any positive rate."""
    p = SecAggParams(n=n, degree=n - 1, threshold=1, graph="complete", dropout_rate=delta)
    assert p.max_dropouts == most
