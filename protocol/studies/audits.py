"""Privacy audits of the mechanisms: empirical lower bounds on epsilon.

Theory of operation
-------------------
:mod:`protocol.studies.audit` turns samples of a mechanism on two neighbouring inputs into a
Clopper-Pearson lower bound on epsilon (Jagielski et al. 2020; Nasr et al. 2023). This
module supplies the mechanisms and the *output encodings*: the audit chooses its
event among output ids, so an encoding must keep the outputs that carry the privacy
loss apart.

Local oracles (Wang et al., USENIX Security 2017), neighbouring inputs ``a = 0`` and
``b = 1`` (one user's value changes), each report run through the oracle's own
``randomize``:

* **GRR**: the reported item itself. ``P[a | a] / P[a | b] = p/q = e^eps``.
* **OUE**: the two bits of items ``a`` and ``b``, id ``2 bit_a + bit_b``. The bit of
  ``a`` alone gives only ``(1/2)/q = (e^eps + 1)/2``; the pair ``(1, 0)`` has
  probability ``(1/2)(1 - q)`` under ``a`` and ``q/2`` under ``b``: ratio ``e^eps``.
* **OLH**: "the report supports ``a``" and "supports ``b``" (``H(a) = y``), id
  ``2 s_a + s_b``. ``(1, 0)`` has ratio close to ``e^eps`` (hash collisions, of
  probability ``1/g``, mix the events a little).
* **AoN**: the report flag and the two support bits (``reported and h(v) = 0``), id
  ``4 r + 2 s_a + s_b``.

TrieHH (Zhu et al., AISTATS 2020, Theorem 1) at one level: neighbouring populations
``D`` (``n`` users, ``c`` of whom hold word ``w``, the target among them) and
``D' = D`` minus the target. The server samples ``m = floor(gamma sqrt(n))`` users
(``m'`` for ``n - 1``); ``w`` is released iff at least ``theta`` sampled users hold it,
so the number of votes is hypergeometric and the output ("released" or not) has the
exact law ``P_D = P[Hypergeom(n, c, m) >= theta]``. :func:`audit_triehh` computes

* the exact tight epsilon with the claimed ``delta`` (:func:`protocol.studies.audit.exact_epsilon`)
  maximised over ``c``, and
* a sampled Clopper-Pearson bound at the worst ``c`` whose release probability is
  in [0.02, 0.98] (rarer events cannot be certified from samples; samples drawn from the same
  hypergeometric laws, which are exactly what one round of the mechanism outputs;
  the attack ``triehh.targeted_sampling`` checks them against the real mechanism).

Every bound must stay below the claimed epsilon: a bound above it is a bug in the
mechanism (or the claim).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
from scipy.stats import hypergeom

from mechanisms import hashing
from mechanisms.fo import make_oracle
from mechanisms.triehh_privacy import batch_size, theorem1, theorem1_delta
from protocol.studies.audit import AuditResult, audit_epsilon, exact_epsilon

__all__ = ["ORACLE_AUDITS", "oracle_sampler", "audit_oracle", "TrieHHAudit", "audit_triehh",
           "AUDITABLE"]

AUDITABLE = ("grr", "oue", "olh", "aon", "triehh")
ORACLE_AUDITS = ("grr", "oue", "olh", "aon")


def oracle_sampler(name: str, epsilon: float, value: int, domain_size: int = 2,
                   **params: Any) -> Callable[[int, np.random.Generator], np.ndarray]:
    """Sampler of output ids of oracle ``name`` on input ``value`` (encodings above).

    Raises:
        mechanisms.fo.OracleInputError: unknown oracle or bad parameters.
    """
    oracle = make_oracle(name, epsilon, domain_size, **params)
    kind = name.lower()

    def supports(keys: np.ndarray, target: np.ndarray, item: int, g: int) -> np.ndarray:
        return hashing.hash_to_range(keys, np.full(keys.shape[0], item, dtype=np.int64),
                                     g) == target

    def sample(count: int, rng: np.random.Generator) -> np.ndarray:
        rep = oracle.randomize(np.full(count, value, dtype=np.int64), rng)
        if kind == "grr":
            return np.asarray(rep.values, dtype=np.int64)
        if kind == "oue":
            bits = rep.unpacked()
            return 2 * bits[:, 0].astype(np.int64) + bits[:, 1]
        if kind == "olh":
            y = np.asarray(rep.y, dtype=np.int64)
            return (2 * supports(rep.keys, y, 0, oracle.g).astype(np.int64)
                    + supports(rep.keys, y, 1, oracle.g))
        zero = np.zeros(count, dtype=np.int64)
        r = rep.reported
        sa = r & supports(rep.keys, zero, 0, oracle.B)
        sb = r & supports(rep.keys, zero, 1, oracle.B)
        return 4 * r.astype(np.int64) + 2 * sa.astype(np.int64) + sb
    return sample


def audit_oracle(name: str, epsilon: float = 1.0, samples: int = 1_000_000, seed: int = 0,
                 domain_size: int = 2, confidence: float = 0.95, **params: Any) -> AuditResult:
    """Clopper-Pearson lower bound on the epsilon of one oracle (inputs 0 and 1).

    Raises:
        ValueError: fewer than 4 samples, a confidence outside (0, 1), or bad oracle
            parameters.
    """
    rng = np.random.default_rng(seed)
    return audit_epsilon(oracle_sampler(name, epsilon, 0, domain_size, **params),
                         oracle_sampler(name, epsilon, 1, domain_size, **params),
                         claimed_epsilon=epsilon, samples=samples, rng=rng,
                         confidence=confidence)


@dataclass(frozen=True)
class TrieHHAudit:
    """Result of :func:`audit_triehh`.

    Attributes:
        claimed_epsilon, delta: Theorem 1 for one level.
        exact_epsilon: tight epsilon of the one-level output at the worst ``c``.
        worst_holders: that ``c``.
        sampled: the Clopper-Pearson audit at ``sampled_holders``, the worst ``c``
            whose release probability lies in [0.02, 0.98] (exact value there:
            ``sampled_exact_epsilon``).
        scan: (c, exact epsilon) for every ``c`` scanned.
    """

    n: int
    theta: int
    gamma: float
    m: int
    claimed_epsilon: float
    delta: float
    exact_epsilon: float
    worst_holders: int
    sampled: AuditResult
    sampled_holders: int
    sampled_exact_epsilon: float
    scan: list[tuple[int, float]]

    def as_dict(self) -> dict:
        d = asdict(self)
        d["sampled"] = self.sampled.as_dict()
        d["consistent"] = (self.exact_epsilon <= self.claimed_epsilon + 1e-12
                           and self.sampled.consistent)
        return d


def _release_law(n: int, holders: int, m: int, theta: int) -> float:
    return float(hypergeom.sf(theta - 1, n, holders, m))


def audit_triehh(n: int = 10_000, theta: int = 10, gamma: float = 2.0, samples: int = 1_000_000,
                 seed: int = 0, confidence: float = 0.95,
                 holders: range | None = None) -> TrieHHAudit:
    """Exact and sampled lower bounds on TrieHH's per-level epsilon (Theorem 1's delta).

    Raises:
        mechanisms.triehh_privacy.TrieHHPrivacyError: parameters outside Theorem 1.
        ValueError: bad sample count or confidence.
    """
    claim = theorem1(theta, gamma, n, 1)
    delta = theorem1_delta(theta)
    m, m_wo = batch_size(gamma, n), batch_size(gamma, n - 1)
    scan = []
    for c in (holders if holders is not None else range(theta, min(n, 40 * n // m), 5)):
        pa, pb = _release_law(n, c, m, theta), _release_law(n - 1, c - 1, m_wo, theta)
        scan.append((c, exact_epsilon(np.array([pa, 1 - pa]), np.array([pb, 1 - pb]), delta)))
    worst_c, worst = max(scan, key=lambda r: r[1])
    # sampling can only certify events of non-negligible probability: audit the worst c
    # whose release probability is in [0.02, 0.98]
    usable = [r for r in scan if 0.02 <= _release_law(n, r[0], m, theta) <= 0.98] or scan
    sample_c, sample_exact = max(usable, key=lambda r: r[1])

    def sampler(pop: int, hold: int, size: int) -> Callable[[int, np.random.Generator],
                                                            np.ndarray]:
        def draw(count: int, rng: np.random.Generator) -> np.ndarray:
            votes = rng.hypergeometric(hold, pop - hold, size, count)
            return (votes >= theta).astype(np.int64)
        return draw

    sampled = audit_epsilon(sampler(n, sample_c, m), sampler(n - 1, sample_c - 1, m_wo),
                            claimed_epsilon=claim.epsilon, samples=samples,
                            rng=np.random.default_rng(seed), delta=delta,
                            confidence=confidence)
    return TrieHHAudit(n, theta, gamma, m, claim.epsilon, delta, worst, worst_c, sampled,
                       sample_c, sample_exact, scan)
