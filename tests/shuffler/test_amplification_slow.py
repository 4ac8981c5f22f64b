"""Slow amplification checks: timing at n = 659,380 with delta = 1/n^2, wide grids.

Run with: pytest -m slow tests/shuffler/test_amplification_slow.py -s
"""
from __future__ import annotations

import time

import pytest

from shuffler import amplification as A

from test_amplification import brute_force_clone_delta  # same directory (rootdir import mode)

pytestmark = pytest.mark.slow
N_SENTIMENT = 659_380


@pytest.mark.parametrize("direction, x", [("forward", 4.9614), ("forward", 4.2942),
                                          ("inverse", 1.0), ("inverse", 4.0)])
def test_fmt23_at_sentiment140_scale_is_fast(direction: str, x: float) -> None:
    n = N_SENTIMENT
    delta = 1.0 / n**2
    t0 = time.perf_counter()
    if direction == "forward":
        value = A.central_epsilon(n, x, delta, bound="fmt23_numerical")
        assert 0.0 < value < x
        assert A.clone_delta(n, x, value, "fmt23") <= delta
    else:
        value = A.local_epsilon(n, x, delta, bound="fmt23_numerical")
        assert value > x
        assert A.clone_delta(n, value, x, "fmt23") <= delta
    seconds = time.perf_counter() - t0
    print(f"\nfmt23 {direction} n={n} delta=1/n^2 x={x}: {value:.6f} in {seconds:.3f} s")
    assert seconds < 10.0


@pytest.mark.parametrize("n, eps0, eps", [(3000, 2.0, 0.2), (2000, 4.0, 0.5)])
@pytest.mark.parametrize("variant", ["fmt21", "fmt23"])
def test_clone_delta_matches_brute_force_larger(n: int, eps0: float, eps: float,
                                                variant: str) -> None:
    p, _ = A.clone_probability(eps0, variant)
    want = brute_force_clone_delta(n, eps0, eps, p)
    assert A.clone_delta(n, eps0, eps, variant) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("n", [10**4, 10**5, 10**6, 10**7])
@pytest.mark.parametrize("eps0", [0.25, 0.5, 1.0, 2.0, 4.0, 6.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-10, 1e-15])
def test_numerical_bounds_never_worse_wide_grid(n: int, eps0: float, delta: float) -> None:
    num21 = A.central_epsilon(n, eps0, delta, bound="fmt21_numerical")
    num23 = A.central_epsilon(n, eps0, delta, bound="fmt23_numerical")
    tol = 2e-6
    assert num23 <= num21 + tol
    assert num21 <= A.central_epsilon(n, eps0, delta, bound="bbgn19_hoeffding") + tol
    assert num21 <= A.central_epsilon(n, eps0, delta, bound="bbgn19_triehh") + tol
    try:
        assert num21 <= A.central_epsilon(n, eps0, delta, bound="fmt21_closed_form") + tol
    except A.AmplificationDomainError:
        pass
    if eps0 <= 0.5:
        assert num21 <= A.central_epsilon(n, eps0, delta, bound="efmrtt19") + tol
    # certified with the same Chernoff window budget the search used (1e-12 delta per side)
    assert A.clone_delta(n, eps0, num23, "fmt23", tail_budget=1e-12 * delta) <= delta
