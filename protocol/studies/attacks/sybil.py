"""The sybil study: what a server that controls many clients learns from secure aggregation.

Theory of operation
-------------------
Secure aggregation (Bonawitz et al., CCS 2017, section 3) reveals only the sum of the
surviving clients' inputs -- but if the server also *is* ``s`` of the ``N`` clients
(sybils), it knows their inputs and subtracts them, leaving the sum of the
``h = N - s`` honest inputs. No protocol-level check can tell a sybil from an honest
client; the defence is outside the protocol (client attestation, a trusted roster,
and DP noise on the aggregate). This module measures the loss exactly.

Model: each honest client holds a one-hot vote over ``K`` candidates, i.i.d. with prior
``p`` (a Zipf law, ``p_j ~ 1/j^s``). The server sees the honest count vector ``C``
(``sum_j C_j = h``) and guesses the victim's vote. By exchangeability the posterior is

    P[victim voted j | C] = p_j * Mult(C - e_j; h-1, p) / Mult(C; h, p) = C_j / h,

so the Bayes-optimal guess is ``argmax_j C_j`` with accuracy ``A(h) = E[max_j C_j] / h``.
Against the prior-only baseline ``A_0 = max_j p_j`` (guess the most likely candidate
without looking), the *fraction of the victim's vote recovered* is the normalised
advantage

    F(h) = (A(h) - A_0) / (1 - A_0)        in [0, 1],

A second measure is the share of the vote's entropy learned, ``I(V; C) / H(V)`` with
``H(V | C) = E[-sum_j (C_j/h) log2(C_j/h)]`` (same posterior). ``F = 1`` iff the server always learns the vote (``h = 1``: 99 sybils of 100 gives
``C = e_victim``, so ``F(1) = 1`` exactly) and ``F -> 0`` as ``h`` grows. ``A(h)`` is
estimated by Monte Carlo over ``C ~ Multinomial(h, p)`` (vectorised) with its standard
error, and computed exactly by enumerating every count vector when there are at most
``EXACT_LIMIT`` of them (``h <= 10`` for 10 candidates); :func:`sybil_attack` also
runs the real protocol with 19 sybils of 20 and recovers the victim's vote exactly
from the released sum.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import gammaln

from protocol.studies.attacks import Outcome, attack
from protocol.core.invariants import check_secagg_transcript
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import make_config, run_secagg

__all__ = ["SybilRow", "zipf_prior", "sybil_row", "sybil_table", "SYBIL_COUNTS"]

SYBIL_COUNTS = (0, 10, 25, 50, 75, 90, 95, 99)


@dataclass(frozen=True)
class SybilRow:
    """One line of the sybil table.

    Attributes:
        sybils: clients the server controls; honest = total - sybils.
        accuracy: Bayes-optimal accuracy of guessing the victim's vote.
        accuracy_se: Monte Carlo standard error (0 when exact).
        baseline: accuracy from the prior alone (``max_j p_j``).
        fraction_recovered: normalised advantage ``F``.
        information_fraction: ``I(V; C) / H(V)``, the share of the vote's entropy the
            server learns (``H(V | C) = E[-sum_j (C_j/h) log(C_j/h)]``).
    """

    sybils: int
    honest: int
    accuracy: float
    accuracy_se: float
    baseline: float
    fraction_recovered: float
    information_fraction: float

    def as_dict(self) -> dict:
        return asdict(self)


def zipf_prior(candidates: int, s: float = 1.1) -> np.ndarray:
    """``p_j proportional to 1/j^s`` over ``candidates`` items.

    Raises:
        ValueError: fewer than 2 candidates or a negative exponent.
    """
    if candidates < 2 or s < 0:
        raise ValueError("need at least 2 candidates and s >= 0")
    w = 1.0 / np.arange(1, candidates + 1, dtype=float) ** s
    return w / w.sum()


EXACT_LIMIT = 200_000
"""Enumerate every count vector when there are at most this many (else Monte Carlo)."""


def compositions(h: int, k: int) -> np.ndarray:
    """Every vector of ``k`` non-negative integers summing to ``h`` (stars and bars)."""
    bars = np.array(list(itertools.combinations(range(h + k - 1), k - 1)), dtype=np.int64)
    bars = bars.reshape(-1, k - 1)
    edges = np.concatenate([np.full((bars.shape[0], 1), -1), bars,
                            np.full((bars.shape[0], 1), h + k - 1)], axis=1)
    return np.diff(edges, axis=1) - 1


def exact_accuracy_entropy(h: int, prior: np.ndarray) -> tuple[float, float]:
    """Exact ``E[max_j C_j]/h`` and ``E[H(C/h)]`` (bits) over ``C ~ Multinomial(h, p)``."""
    c = compositions(h, prior.size)
    logp = (gammaln(h + 1) - gammaln(c + 1).sum(axis=1)
            + (c * np.log(prior)).sum(axis=1))
    w = np.exp(logp)
    q = c / h
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(q > 0, q * np.log2(q), 0.0).sum(axis=1)
    return float((w * c.max(axis=1)).sum() / h), float((w * ent).sum())


def sybil_row(total: int, sybils: int, prior: np.ndarray, samples: int,
              rng: np.random.Generator) -> SybilRow:
    """Bayes-optimal recovery of one victim's vote with ``sybils`` of ``total`` clients.

    Raises:
        ValueError: ``sybils`` outside ``[0, total - 1]``.
    """
    if not 0 <= sybils <= total - 1:
        raise ValueError("sybils must leave at least the victim honest")
    h = total - sybils
    base = float(prior.max())
    h_prior = float(-(prior * np.log2(prior)).sum())
    if h == 1:
        acc, se, h_post = 1.0, 0.0, 0.0
    elif math.comb(h + prior.size - 1, h) <= EXACT_LIMIT:
        acc, h_post = exact_accuracy_entropy(h, prior)
        se = 0.0
    else:
        counts = rng.multinomial(h, prior, size=samples)
        m = counts.max(axis=1) / h
        acc, se = float(m.mean()), float(m.std(ddof=1) / math.sqrt(samples))
        q = counts / h
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.where(q > 0, q * np.log2(q), 0.0).sum(axis=1)
        h_post = float(ent.mean())
    return SybilRow(sybils, h, acc, se, base, (acc - base) / (1 - base),
                    max(0.0, (h_prior - h_post) / h_prior))


def sybil_table(total: int = 100, candidates: int = 10, zipf_s: float = 1.1,
                samples: int = 200_000, seed: int = 0,
                sybil_counts: tuple[int, ...] = SYBIL_COUNTS) -> list[SybilRow]:
    """The table of :class:`SybilRow` for each number of sybils."""
    rng = np.random.default_rng(seed)
    prior = zipf_prior(candidates, zipf_s)
    return [sybil_row(total, s, prior, samples, rng) for s in sybil_counts]


@attack("secagg.sybils", system="secagg", kind="measured",
        target="Bonawitz et al. threat model: the server may control clients (sybils); "
               "the protocol cannot tell them apart",
        expected="documented limit: with 19 sybils of 20 the victim's vote is recovered "
                 "exactly from the sum; in the 100-client table the recovered fraction "
                 "grows with the sybils and is 1.0 at 99")
def sybil_attack(seed: int) -> Outcome:
    """A server that controls many sybil clients (their inputs are known to it)."""
    n, k = 20, 10
    prior = zipf_prior(k)
    rng = np.random.default_rng(seed)
    votes = rng.choice(k, size=n, p=prior)
    x = np.zeros((n, k), dtype=np.uint64)
    x[np.arange(n), votes] = 1
    victim = 0
    cfg = make_config(n, k, graph="harary", degree=8, threshold=5, modulus=1 << 8)
    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(seed))
    check_secagg_transcript(run, x)
    sybil_sum = x[1:].sum(axis=0)
    recovered = (run.result.astype(np.int64) - sybil_sum.astype(np.int64)) % cfg.modulus
    exact = bool(run.completed and int(np.argmax(recovered)) == votes[victim]
                 and recovered.sum() == 1)
    table = sybil_table(samples=20_000, seed=seed)
    frac = [r.fraction_recovered for r in table]
    monotone = all(b >= a - 0.02 for a, b in zip(frac, frac[1:]))
    ok = exact and table[-1].fraction_recovered == 1.0 and monotone and frac[0] < 0.2
    return Outcome("secagg.sybils", "victim's vote recovered at 19/20 sybils; table rises to 1",
                   f"19 sybils of 20: victim vote recovered exactly: {exact}; fraction recovered "
                   f"at {', '.join(f'{r.sybils}:{r.fraction_recovered:.3f}' for r in table)}",
                   ok, {"server": run.server_state.value},
                   {"recovered_exactly_at_19_of_20": exact,
                    "table_100_clients": [r.as_dict() for r in table]})
