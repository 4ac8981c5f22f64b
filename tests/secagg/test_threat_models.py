"""Threat models by name in secagg.params: defaults, the minimum honest set (alpha n),
and the parameter table of docs/secagg.md generated from the code."""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from secagg.errors import ParameterError
from secagg.graph import harary_graph, ring_order
from secagg.params import (
    DEFAULT_THREAT, THREATS, default_grinding_bits, find_params, min_honest_clients,
    parameter_table, threat_of,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "secagg.md"


def test_malicious_is_the_default_and_n100_is_no_longer_k12_t6() -> None:
    assert DEFAULT_THREAT == "malicious" and THREATS[0] == "malicious"
    p = find_params(100)
    assert (p.threat, p.malicious, p.degree, p.threshold) == ("malicious", True, 16, 11)
    assert (p.min_honest, p.alpha) == (43, 0.43)
    semi = find_params(100, threat="semi-honest")
    assert (semi.degree, semi.threshold, semi.threat) == (12, 6, "semi-honest")
    # the boolean alias still works and means the same
    assert find_params(100, malicious=False) == semi
    assert find_params(100, malicious=True) == p


@pytest.mark.parametrize("threat, malicious", [("semi-honest", True), ("malicious", False)])
def test_contradicting_threat_and_alias_is_an_error(threat: str, malicious: bool) -> None:
    with pytest.raises(ParameterError, match="contradicts"):
        find_params(50, threat=threat, malicious=malicious)
    with pytest.raises(ParameterError, match="threat must be one of"):
        threat_of("honest-but-curious")


@pytest.mark.parametrize("n", [10, 40, 100, 1000, 4321])
def test_complete_graph_malicious_bound_of_bonawitz_et_al(n: int) -> None:
    p = find_params(n, graph="complete")
    kc, kd = math.ceil(0.05 * n), math.ceil(0.05 * n)
    # t > (n + gamma n)/2 over the n - 1 neighbours, and room for the dropout budget
    assert 2 * p.threshold > (n - 1) + kc
    assert p.threshold <= n - 1 - kd
    # every client needs t co-signers of U3 besides itself: honest in any sum >= t + 1 - K
    assert p.min_honest == p.threshold + 1 - kc
    semi = find_params(n, graph="complete", threat="semi-honest")
    assert semi.threshold == kc + 1 and semi.min_honest == n - kc - kd


def _min_closed_honest(neigh: list[tuple[int, ...]], corrupt: set[int], t: int) -> int:
    """Exhaustively: the smallest nonempty set S of honest clients in which every member
    has >= t neighbours in S or corrupt (what the server needs to learn S's sum)."""
    n = len(neigh)
    honest = [u for u in range(n) if u not in corrupt]
    h = len(honest)
    idx = {u: i for i, u in enumerate(honest)}
    masks = np.arange(1, 1 << h, dtype=np.int64)
    bits = ((masks[:, None] >> np.arange(h)) & 1).astype(bool)     # (2^h - 1, h)
    ok = np.ones(masks.size, dtype=bool)
    for u in honest:
        inside = np.zeros(masks.size, dtype=np.int64)
        for w in neigh[u]:
            inside += 1 if w in corrupt else bits[:, idx[w]]
        ok &= ~bits[:, idx[u]] | (inside >= t)
    return int(bits[ok].sum(axis=1).min())


def _event_holds(ring: list[int], corrupt: set[int], k: int, t: int) -> bool:
    """No two disjoint k/2-windows of the ring hold 2t - k corrupt clients together."""
    n, half = len(ring), k // 2
    count = [sum(ring[(s + d) % n] in corrupt for d in range(half)) for s in range(n)]
    for a, b in itertools.combinations(range(n), 2):
        if (b - a) % n >= half and (a - b) % n >= half and count[a] + count[b] >= 2 * t - k:
            return False
    return True


@pytest.mark.parametrize("n, k, t, corrupt_count, seed", [
    (14, 6, 4, 0, b"a"), (14, 6, 4, 1, b"b"), (18, 6, 4, 0, b"c"), (18, 6, 4, 1, b"d"),
    (18, 8, 5, 0, b"e"), (18, 8, 6, 2, b"f"), (16, 4, 3, 1, b"g"),
])
def test_min_honest_is_a_lower_bound_by_exhaustive_search(n, k, t, corrupt_count, seed):
    neigh = harary_graph(n, k, seed)
    ring = ring_order(n, seed).tolist()
    corrupt = set(ring[1:1 + 3 * corrupt_count:3])        # spread out along the ring
    assert _event_holds(ring, corrupt, k, t)
    gamma = corrupt_count / n
    bound = min_honest_clients(n, k, t, corrupt_fraction=gamma, dropout_rate=0.0)
    smallest = _min_closed_honest(neigh, corrupt, t)
    assert bound <= smallest, (bound, smallest)
    assert bound >= 2          # and the bound says something


def test_a_threshold_of_half_the_degree_allows_a_window_of_t_plus_one() -> None:
    # the semi-honest parameters at n = 100 (k = 12, t = 6): t + 1 consecutive ring
    # positions form a closed set, which is why the semi-honest model must assume that
    # the server does not choose who drops
    n, k, t = 100, 12, 6
    neigh = harary_graph(n, k, b"s")
    ring = ring_order(n, b"s").tolist()
    arc = set(ring[:t + 1])
    assert all(len(set(neigh[u]) & arc) >= t for u in arc)
    with pytest.raises(AssertionError):
        assert all(len(set(neigh[u]) & set(ring[:t + 1])) >= t + 1 for u in arc)


def test_required_alpha_raises_the_degree_or_is_refused() -> None:
    base = find_params(1000)
    more = find_params(1000, alpha=0.45)
    assert more.min_honest >= 450 and more.degree > base.degree
    with pytest.raises(ParameterError, match="alpha n"):
        find_params(100, graph="complete", alpha=0.6)


def test_parameter_table_in_docs_is_the_generated_one() -> None:
    text = DOCS.read_text()
    m = re.search(r"<!-- parameter-table: begin.*?-->\n(.*?)<!-- parameter-table: end -->",
                  text, re.S)
    assert m, "docs/secagg.md lacks the generated parameter table markers"
    assert m.group(1) == parameter_table(), (
        "docs/secagg.md's parameter table differs from secagg.params.parameter_table(); "
        "regenerate it with: python -c 'from secagg.params import parameter_table; "
        "print(parameter_table(), end=\"\")'")


def test_parameter_table_rows_agree_with_find_params() -> None:
    table = parameter_table(((1000, "harary", 0.1),))
    rows = [r.split("|")[1:-1] for r in table.splitlines()[2:]]
    assert [r[3].strip() for r in rows] == list(THREATS)
    for r in rows:
        threat = r[3].strip()
        g = default_grinding_bits(1000, 0.1, graph="harary", malicious=threat == "malicious")
        p = find_params(1000, dropout_rate=0.1, threat=threat, grinding_bits=g)
        assert (int(r[4]), int(r[5]), int(r[6]), int(r[7].replace(",", ""))) == \
            (g, p.degree, p.threshold, p.min_honest)
