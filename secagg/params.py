"""Choosing the SecAgg+ degree ``k`` and Shamir threshold ``t`` (Bell et al., CCS 2020).

Theory of operation (derivation in ``docs/secagg-primitives.md``)
-----------------------------------------------------------------
Threat model: a server (malicious by default, or semi-honest) colluding with at most
``ceil(gamma n)`` clients chosen *before* the public graph seed is drawn. Genuine
dropouts (at most ``ceil(delta n)``) happen independently of the seed; a malicious server
may additionally declare any honest clients dropped, *after* seeing the graph. Because
the ring order of :mod:`secagg.graph` is a uniform permutation independent of the
corrupt set, each client's ``k`` neighbours are a uniform ``k``-subset of the other
``n - 1`` clients: the number ``C`` of corrupt neighbours of an honest client is
hypergeometric ``HG(N = n - 1, K = ceil(gamma n), k)``, and the number ``D`` of
genuinely dropped neighbours is ``HG(n - 1, ceil(delta n), k)``.

Security, failure probability ``<= 2^-sigma`` (union bounds throughout):

* (S1) the adversary never holds ``t`` shares of *both* secrets of an honest client.
  Honest neighbours reveal at most one kind of share per peer, corrupt ones both.
  Against a semi-honest server this needs ``C < t``; a malicious server can split the
  ``k - C`` honest neighbours into two groups (one asked for self-mask shares, one for
  mask-key shares) and wins iff ``2 (t - C) <= k - C``, so it needs ``C < 2t - k``
  (Bonawitz et al.'s ``t > (n + n_C) / 2`` applied per neighbourhood). Bound:
  ``n P(C >= a)`` with ``a = t`` or ``a = 2t - k``.
* (S2) the honest survivors stay connected through pairwise masks, otherwise the server
  learns the sums of the components. Honest survivors at ring distance ``<= k/2`` are
  adjacent, so the survivors split only if two disjoint runs of ``k/2`` ring positions
  hold no honest survivor.

  - semi-honest server (random removals): with ``B = ceil((gamma + delta) n)`` removed
    clients, ``P <= n^2/2 * (B)_k / (n)_k`` (``(a)_k`` the falling factorial).
  - malicious server (adaptive removals): the server can empty any runs it likes, but
    to learn a component's sum it must unmask every member, so each member needs
    ``t`` neighbours among survivors and corrupt clients. The member at the end of a
    component has at most ``k/2`` such neighbours on its inner side, so the ``k/2``
    positions just outside it hold ``>= t - k/2`` corrupt clients; a component has two
    ends, so two disjoint windows of ``k/2`` positions hold ``>= 2t - k`` corrupt
    clients together: ``P <= n^2/2 * P(HG(n, K, k) >= 2t - k)``.

  Both are zero for the complete graph.

Correctness, failure probability ``<= 2^-eta``: every client (surviving, or dropped and
needing its mask key rebuilt) has at least ``t`` surviving neighbours:
``n * P(D >= k - t + 1) <= 2^-eta`` (genuine dropouts only: a malicious server can always
abort).

Threat models by name (``threat=``): ``"malicious"`` (the default) is the server above
that may also equivocate (split views) and choose which clients drop; ``"semi-honest"``
follows the protocol and its dropouts are random (the bounds with ``a = t`` and random
removals). ``malicious=`` is kept as a boolean alias.

Minimum honest set (Bell et al.'s ``alpha``: the server learns only sums over at least
``alpha n`` honest clients), :attr:`SecAggParams.min_honest`:

* malicious server, any drop schedule, any split view: let ``S`` be a set of honest
  clients whose sum the server learns. Pairwise masks between members of ``S`` and
  honest clients outside ``S`` that the same view lists as alive cannot be removed, and
  every member of ``S`` accepted its view only with ``t`` neighbours that signed the same
  view (honest members of ``S`` or corrupt clients), so every member has ``>= t``
  neighbours in ``S`` or corrupt. A run of ``>= k/2`` ring positions without a member,
  next to a member, therefore holds ``>= t - k/2`` corrupt clients in that member's
  ``k/2``-window; the (S2) event (no two disjoint ``k/2``-windows with ``2t - k`` corrupt
  clients together) leaves at most one such run, and it is shorter than ``k``. Walking
  around the ring and picking the first member more than ``k`` positions after the last
  pick gives ``m`` pairwise disjoint windows of ``k + 1`` positions, each centred on a
  member with ``>= t - C_i`` honest members among its neighbours, for every
  ``m < 2n / (3k)``. Hence ``|S| >= m (t + 1) - ceil(gamma n)``; and per member
  ``|S| >= t + 1 - C >= k - t + 2`` by (S1). For the complete graph (``m = 1``,
  ``C = ceil(gamma n)``) this is ``t + 1 - ceil(gamma n)``: every client requires ``t``
  signers of the survivor set besides itself (Bonawitz et al., 2017, section 6).
* semi-honest server: it learns the sum over ``U3``, whose honest part is at least
  ``n - ceil(gamma n) - ceil(delta n)`` when at most ``ceil(delta n)`` clients drop at
  random; a server that drops more, or chooses whom, is outside this model.

Both hold except with probability ``2^-sigma`` (the security bound above).

:func:`find_params` scans every even ``k`` upwards (feasibility is not monotone in
``k``: ``t`` moves in integer steps); for each ``k`` it takes the *smallest* ``t``
meeting security (which leaves the most room for dropouts) and accepts ``k`` if that
``t`` also meets correctness. Tails are summed exactly in log space (log-factorials from
:func:`math.lgamma`, a suffix log-sum-exp with numpy). For the complete graph
``k = n - 1``, so ``C = ceil(gamma n)`` and ``D = ceil(delta n)`` are certain and the
conditions become the deterministic ``2t > n - 1 + ceil(gamma n)`` (malicious) or
``t > ceil(gamma n)`` (semi-honest), and ``t <= n - 1 - ceil(delta n)``.
"""
from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError

__all__ = ["SecAggParams", "find_params", "GRAPHS", "THREATS", "DEFAULT_THREAT",
           "DEFAULT_CORRUPT_FRACTION", "DEFAULT_DROPOUT_RATE", "log2_hypergeom_sf",
           "log2_disconnect_probability", "min_honest_clients", "parameter_table",
           "threat_of", "subset_grinding_bits", "seed_grinding_bits",
           "GRINDING_WORK_BITS", "default_grinding_bits"]

GRAPHS = ("complete", "harary")
#: threat models by name; the first one is the default everywhere
THREATS = ("malicious", "semi-honest")
DEFAULT_THREAT = "malicious"
#: ``gamma``: clients colluding with the server (5%, the setting of Bell et al.'s abstract)
DEFAULT_CORRUPT_FRACTION = 0.05
#: ``delta``: the dropout budget (callers raise it to their expected dropout rate)
DEFAULT_DROPOUT_RATE = 0.05
_LN2 = math.log(2.0)


@dataclass(frozen=True)
class SecAggParams:
    """Parameters of one secure-aggregation session.

    Attributes:
        n: number of participants (ids ``0..n-1``), ``>= 2``.
        degree: neighbours per client ``k``; ``n - 1`` for the complete graph.
        threshold: Shamir threshold ``t``, ``1 <= t <= degree``.
        graph: ``"complete"`` or ``"harary"``.
        corrupt_fraction: assumed fraction ``gamma`` of corrupt clients.
        dropout_rate: assumed maximal fraction ``delta`` of dropouts.
        sigma: security parameter (failure ``<= 2^-sigma``).
        eta: correctness parameter (failure ``<= 2^-eta``).
        malicious: whether the server is assumed malicious (else semi-honest).
        grinding_bits: the server may choose among up to ``2^grinding_bits`` Harary
            graph seeds (docs/secagg-primitives.md, "Grinding the graph seed"); the
            bounds then hold after that choice (each seed is held to
            ``2^-(sigma + grinding_bits)``; union bound). No effect on the complete
            graph, which has no seed.
        log2_security_failure: computed ``log2`` bound on the security failure
            probability, grinding included (``-inf`` if it is zero; ``None`` if not
            computed).
        log2_correctness_failure: same for correctness.
        min_honest: the fewest honest clients in any sum the server can learn under
            the threat model (``alpha n``, module docstring); ``None`` if not computed
            (explicit parameters built without :func:`find_params`).

    Raises:
        ParameterError: inconsistent fields.
    """

    n: int
    degree: int
    threshold: int
    graph: str
    corrupt_fraction: float = 0.0
    dropout_rate: float = 0.0
    sigma: int = 0
    eta: int = 0
    malicious: bool = True
    log2_security_failure: float | None = None
    log2_correctness_failure: float | None = None
    grinding_bits: int = 0
    min_honest: int | None = None

    @property
    def threat(self) -> str:
        """``"malicious"`` or ``"semi-honest"``."""
        return "malicious" if self.malicious else "semi-honest"

    @property
    def alpha(self) -> float | None:
        """``min_honest / n`` (Bell et al.'s ``alpha``), ``None`` if not computed."""
        return None if self.min_honest is None else self.min_honest / self.n

    @property
    def max_dropouts(self) -> int:
        """``ceil(delta n)``: the most dropouts the parameters were chosen for;
        correctness is only claimed while no more clients drop."""
        return _count(self.dropout_rate, self.n)

    def __post_init__(self) -> None:
        for name in ("n", "degree", "threshold", "sigma", "eta", "grinding_bits"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ParameterError(f"{name} must be an int, got {type(v).__name__}")
        if self.graph not in GRAPHS:
            raise ParameterError(f"graph must be one of {GRAPHS}, got {self.graph!r}")
        if self.n < 2:
            raise ParameterError(f"n must be >= 2, got {self.n}")
        if self.grinding_bits < 0:
            raise ParameterError(f"grinding_bits must be >= 0, got {self.grinding_bits}")
        if not 1 <= self.degree <= self.n - 1:
            raise ParameterError(f"degree must satisfy 1 <= degree <= n - 1, got {self.degree}")
        if self.graph == "complete" and self.degree != self.n - 1:
            raise ParameterError("the complete graph has degree n - 1")
        if self.graph == "harary" and self.degree < self.n - 1 and self.degree % 2:
            raise ParameterError(f"a Harary degree below n - 1 must be even, got {self.degree}")
        if not 1 <= self.threshold <= self.degree:
            raise ParameterError(f"threshold must satisfy 1 <= threshold <= degree, "
                                 f"got {self.threshold}")
        _check_fraction(self.corrupt_fraction, "corrupt_fraction")
        _check_fraction(self.dropout_rate, "dropout_rate")
        if self.min_honest is not None and (
                not isinstance(self.min_honest, int) or isinstance(self.min_honest, bool)
                or not 0 <= self.min_honest <= self.n):
            raise ParameterError(f"min_honest must be an int in [0, n], got {self.min_honest!r}")

    def encode(self) -> bytes:
        """Canonical bytes of the fields that define the protocol (for the session id).

        ``"fedhh/secagg/params/v1" 0x00 || u64 n || u64 degree || u64 threshold ||
        u8 graph (0 complete, 1 harary) || u8 malicious``.
        """
        return (b"fedhh/secagg/params/v1\x00"
                + struct.pack(">QQQBB", self.n, self.degree, self.threshold,
                              GRAPHS.index(self.graph), int(self.malicious)))


def _check_fraction(value: object, name: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    if not 0.0 <= value < 1.0:
        raise ParameterError(f"{name} must satisfy 0 <= {name} < 1, got {value}")
    return float(value)


def _count(fraction: float, n: int) -> int:
    """Worst-case number of clients for a fraction: ``ceil(fraction n)`` (so any positive
    fraction means at least one client), guarded against float noise like 0.05*100."""
    return math.ceil(round(fraction * n, 9))


@functools.lru_cache(maxsize=8)
def _log_factorials(n: int) -> np.ndarray:
    """``out[i] = ln(i!)`` for ``i = 0..n`` (``math.lgamma``, exact to double precision)."""
    return np.array([math.lgamma(i + 1) for i in range(n + 1)])


def _hypergeom_log_pmf(N: int, K: int, k: int) -> tuple[int, np.ndarray]:
    """``(lo, logpmf)`` with ``logpmf[j - lo] = ln P(X = j)`` for ``X ~ HG(N, K, k)``."""
    lf = _log_factorials(-(-(N + 1) // 4096) * 4096)  # rounded up: n - 1 and n share it
    lo, hi = max(0, k - (N - K)), min(k, K)
    j = np.arange(lo, hi + 1)
    # ln C(K, j) + ln C(N - K, k - j) - ln C(N, k)
    logs = (lf[K] - lf[j] - lf[K - j] + lf[N - K] - lf[k - j] - lf[N - K - k + j]
            - (lf[N] - lf[k] - lf[N - k]))
    return lo, logs


def _log2_tails(N: int, K: int, k: int) -> np.ndarray:
    """``out[a] = log2 P(X >= a)`` for ``a = 0..k+1``, ``X ~ HG(N, K, k)``."""
    lo, logs = _hypergeom_log_pmf(N, K, k)
    out = np.full(k + 2, -math.inf)
    # suffix log-sum-exp without underflow: logaddexp accumulated from the top
    out[lo:lo + logs.size] = np.logaddexp.accumulate(logs[::-1])[::-1] / _LN2
    out[:lo] = 0.0
    return out


def log2_hypergeom_sf(a: int, N: int, K: int, k: int) -> float:
    """``log2 P(X >= a)`` for ``X ~ Hypergeometric(population N, K marked, k draws)``.

    Raises:
        ParameterError: inconsistent arguments.
    """
    if not (0 <= K <= N and 0 <= k <= N):
        raise ParameterError(f"need 0 <= K <= N and 0 <= k <= N, got N={N} K={K} k={k}")
    if a <= 0:
        return 0.0
    tails = _log2_tails(N, K, k)
    return float(tails[a]) if a <= k + 1 else -math.inf


def log2_disconnect_probability(n: int, degree: int, bad: int) -> float:
    """``log2`` of the (S2) bound ``n^2/2 * (bad)_k / (n)_k`` for ``H_{k,n}``.

    Returns ``-inf`` when it is zero (complete graph, or ``bad < k``).
    """
    if degree >= n - 1 or bad < degree:
        return -math.inf
    ln = (math.log(n) * 2 - _LN2 + math.lgamma(bad + 1) - math.lgamma(bad - degree + 1)
          - math.lgamma(n + 1) + math.lgamma(n - degree + 1))
    return min(0.0, ln / _LN2)


def _evaluate(n: int, k: int, gamma: float, delta: float, sigma: int, eta: int,
              malicious: bool) -> tuple[int, float, float] | None:
    """Smallest secure ``t`` for degree ``k`` if it is also correct, with its bounds."""
    N = n - 1
    kc, kd = min(_count(gamma, n), N), min(_count(delta, n), N)
    log2n = math.log2(n)
    if malicious:
        # sec[a] = log2(n P(C >= a) + n^2/2 P(C' >= a)), a = 2t - k: (S1) and (S2-adaptive)
        sec = log2n + _log2_tails(N, kc, k)
        if k < N:
            sec = np.logaddexp2(sec, 2 * log2n - 1 + _log2_tails(n, min(kc, n), k))
    else:
        # sec[a] = log2(n P(C >= a) + P_S2), a = t: (S1) and (S2-random)
        gap = log2_disconnect_probability(n, k, min(_count(gamma + delta, n), n))
        if gap > -sigma:
            return None
        sec = np.logaddexp2(log2n + _log2_tails(N, kc, k), gap)
    if not sec[-1] <= -sigma:  # sec[k + 1] is the a-independent part
        return None
    a = int(np.argmax(sec <= -sigma))  # first a meeting the bound (sec is non-increasing)
    a = max(a, 1)
    t = max((a + k + 1) // 2 if malicious else a, 1)  # malicious: smallest t, 2t - k >= a
    if t > k:
        return None
    cor = log2n + float(_log2_tails(N, kd, k)[k - t + 1])  # n P(D >= k - t + 1)
    if cor > -eta:
        return None
    return t, min(float(sec[2 * t - k if malicious else t]), 0.0), min(cor, 0.0)


def threat_of(threat: str | None = None, malicious: bool | None = None) -> str:
    """The threat model named by ``threat`` or the older boolean ``malicious``.

    ``None`` for both gives :data:`DEFAULT_THREAT`.

    Raises:
        ParameterError: an unknown name, a non-boolean ``malicious``, or the two
            disagree.
    """
    if threat is not None and threat not in THREATS:
        raise ParameterError(f"threat must be one of {THREATS}, got {threat!r}")
    if malicious is not None and not isinstance(malicious, (bool, np.bool_)):
        raise ParameterError(f"malicious must be a bool, got {malicious!r}")
    if malicious is not None:
        named = "malicious" if malicious else "semi-honest"
        if threat is not None and threat != named:
            raise ParameterError(f"threat={threat!r} contradicts malicious={bool(malicious)}")
        return named
    return threat if threat is not None else DEFAULT_THREAT


def min_honest_clients(n: int, degree: int, threshold: int, *, corrupt_fraction: float,
                       dropout_rate: float, threat: str = DEFAULT_THREAT) -> int:
    """The fewest honest clients in any sum the server can learn (``alpha n``).

    Valid on the event that the security bound of :func:`find_params` holds (module
    docstring, "Minimum honest set"): for ``"malicious"`` under any drop schedule and
    split view, ``max(m (t + 1) - K, k - t + 2, t + 1 - K if complete)`` with
    ``K = ceil(gamma n)`` and ``m`` the largest integer below ``2n / (3k)`` (at least 1);
    for ``"semi-honest"`` with at most ``ceil(delta n)`` random dropouts,
    ``n - K - ceil(delta n)``. Never below 1 (a completed session sums at least one
    honest input, unless every participant is corrupt) and never above ``n - K``.

    Raises:
        ParameterError: bad arguments.
    """
    for name, v in (("n", n), ("degree", degree), ("threshold", threshold)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ParameterError(f"{name} must be an int >= 1, got {v!r}")
    gamma = _check_fraction(corrupt_fraction, "corrupt_fraction")
    delta = _check_fraction(dropout_rate, "dropout_rate")
    threat = threat_of(threat)
    kc, kd = min(_count(gamma, n), n), min(_count(delta, n), n)
    if threat == "semi-honest":
        honest = n - kc - kd
    else:
        k, t = min(degree, n - 1), threshold
        m = max(1, -(-2 * n // (3 * k)) - 1)  # largest integer < 2n / 3k, at least 1
        honest = max(m * (t + 1) - kc, k - t + 2)
        if k == n - 1:
            honest = max(honest, t + 1 - kc)
    return int(max(1, min(honest, n - kc)))


def find_params(n: int, *, corrupt_fraction: float = DEFAULT_CORRUPT_FRACTION,
                dropout_rate: float = DEFAULT_DROPOUT_RATE, sigma: int = 40, eta: int = 20,
                graph: str = "harary", malicious: bool | None = None,
                grinding_bits: int = 0, threat: str | None = None,
                alpha: float = 0.0) -> SecAggParams:
    """Smallest degree ``k`` and its threshold ``t`` meeting the stated failure bounds.

    Args:
        n: number of participants, ``>= 2``.
        corrupt_fraction: ``gamma``, fraction of clients colluding with the server.
        dropout_rate: ``delta``, maximal fraction of clients dropping out.
        sigma: security failure probability ``<= 2^-sigma``.
        eta: correctness failure probability ``<= 2^-eta``.
        graph: ``"harary"`` (SecAgg+) or ``"complete"`` (Bonawitz et al.).
        malicious: boolean alias of ``threat`` (``True``: ``"malicious"``).
        grinding_bits: the server may pick the Harary graph's seed among up to
            ``2^grinding_bits`` candidates; every seed is then held to
            ``2^-(sigma + grinding_bits)`` so that the chosen one still fails with
            probability at most ``2^-sigma`` (union bound).
        threat: ``"malicious"`` (default: ``2t > k + C`` per neighbourhood, adaptive
            removals) or ``"semi-honest"`` (``t > C``, random removals).
        alpha: required minimum honest fraction: a degree is accepted only if
            :func:`min_honest_clients` is at least ``alpha n`` (``0``: no requirement;
            the value the parameters give is reported either way).

    Returns:
        The :class:`SecAggParams` with the computed ``log2`` failure bounds and
        ``min_honest``. For ``"harary"`` the degree may come out as ``n - 1`` (the
        complete graph) for small ``n``; the graph field stays ``"harary"`` and
        :func:`secagg.graph.harary_graph` then returns the complete graph.

    Raises:
        ParameterError: bad arguments, or no ``k <= n - 1`` meets both bounds (the
            message states which condition fails).
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ParameterError(f"n must be an int >= 2, got {n!r}")
    gamma = _check_fraction(corrupt_fraction, "corrupt_fraction")
    delta = _check_fraction(dropout_rate, "dropout_rate")
    want = _check_fraction(alpha, "alpha")
    for name, v in (("sigma", sigma), ("eta", eta), ("grinding_bits", grinding_bits)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ParameterError(f"{name} must be an int >= 0, got {v!r}")
    if graph not in GRAPHS:
        raise ParameterError(f"graph must be one of {GRAPHS}, got {graph!r}")
    threat = threat_of(threat, malicious)
    mal = threat == "malicious"

    def honest(k: int, t: int) -> int:
        return min_honest_clients(n, k, t, corrupt_fraction=gamma, dropout_rate=delta,
                                  threat=threat)

    def build(k: int, res: tuple[int, float, float], g: int) -> SecAggParams:
        return SecAggParams(n=n, degree=k, threshold=res[0], graph=graph,
                            corrupt_fraction=gamma, dropout_rate=delta, sigma=sigma, eta=eta,
                            malicious=mal, log2_security_failure=min(res[1] + g, 0.0),
                            log2_correctness_failure=res[2], grinding_bits=grinding_bits,
                            min_honest=honest(k, res[0]))

    full = n - 1
    need_honest = math.ceil(round(want * n, 9))
    # the complete graph has no seed to grind; the bound of any other degree is held
    # to 2^-(sigma + g) per seed
    full_res = _evaluate(n, full, gamma, delta, sigma, eta, mal)
    if full_res is None:
        kc, kd = _count(gamma, n), _count(delta, n)
        need = (f"2t > (n - 1) + ceil(gamma n) = {full + kc}" if mal
                else f"t > ceil(gamma n) = {kc}")
        raise ParameterError(
            f"infeasible even with the complete graph: security needs {need} but "
            f"correctness needs t <= (n - 1) - ceil(delta n) = {full - kd}")
    if honest(full, full_res[0]) < need_honest:
        raise ParameterError(
            f"infeasible even with the complete graph: the server may learn sums over "
            f"{honest(full, full_res[0])} honest clients, fewer than alpha n = {need_honest}")
    if graph == "complete":
        return build(full, full_res, 0)

    # feasibility is not monotone in k (t moves in integer steps), so scan every even k
    for k in range(2, full, 2):
        res = _evaluate(n, k, gamma, delta, sigma + grinding_bits, eta, mal)
        if res is not None and honest(k, res[0]) >= need_honest:
            return build(k, res, grinding_bits)
    return build(full, full_res, 0)


#: the rows of the generated table in docs/secagg.md: (n, graph, dropout rate)
TABLE_ROWS: tuple[tuple[int, str, float], ...] = (
    (100, "complete", 0.05), (100, "harary", 0.05), (1000, "complete", 0.1),
    (1000, "harary", 0.05), (1000, "harary", 0.1), (10_000, "harary", 0.05),
    (100_000, "harary", 0.05),
)


def parameter_table(rows: tuple[tuple[int, str, float], ...] = TABLE_ROWS) -> str:
    """The Markdown table of default parameters in ``docs/secagg.md``, from the code.

    One line per ``(n, graph, delta)`` and threat model, with ``gamma`` =
    :data:`DEFAULT_CORRUPT_FRACTION`, ``sigma = 40``, ``eta = 20`` and the graph-seed
    grinding the transport and ``fedhh bench secagg`` grant by default
    (:func:`default_grinding_bits`). A test compares it with the table in the document.

    Raises:
        ParameterError: a row with no parameters.
    """
    def log2(v: float | None) -> str:
        return "-inf" if v is None or v == -math.inf else f"{v:.1f}"

    lines = ["| n | graph | delta | threat | grinding bits | k | t | min honest (alpha n) "
             "| alpha | min honest if the server deviates | log2 P(security fails) "
             "| log2 P(correctness fails) |",
             "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for n, graph, delta in rows:
        for threat in THREATS:
            g = default_grinding_bits(n, delta, graph=graph, malicious=threat == "malicious")
            p = find_params(n, graph=graph, dropout_rate=delta, threat=threat,
                            grinding_bits=g)
            # a semi-honest session gives no guarantee against a server that deviates:
            # a split view recovers one input (secagg.split_view_no_colluders)
            deviating = p.min_honest if threat == "malicious" else 1
            lines.append(f"| {n:,} | {graph} | {delta:g} | {threat} | {g} | {p.degree} | "
                         f"{p.threshold} | {p.min_honest:,} | {p.alpha:.3f} | {deviating:,} | "
                         f"{log2(p.log2_security_failure)} | "
                         f"{log2(p.log2_correctness_failure)} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ grinding accounting
# (added for fresh sessions / the graph seed; see docs/secagg-primitives.md,
# "Grinding the graph seed". Separate from find_params on purpose.)

#: default work bound of a grinding server: it evaluates at most ``2^40`` candidate
#: graph seeds, summed over every attempt of a round specification that clients join.
#: The seed is fixed only when round 0 closes, so this work must be done online, between
#: the last ``AdvertiseKeys`` and the key lists (one round deadline per attempt); each
#: candidate costs it a Merkle root update, two hashes and a ring order over ``n``
#: clients. ``2^40`` is far above what fits in round deadlines of seconds to minutes.
GRINDING_WORK_BITS = 40


def subset_grinding_bits(n: int, dropout_rate: float) -> float:
    """``log2`` of the number of survivor subsets a server can choose among.

    The graph seed is derived from the round-0 transcript root, which commits to the
    round-0 clients ``U1``. A server that decides whose contribution counts can pick
    ``U1``: any set of at most ``floor(delta n)`` clients may be declared dropped
    without breaking correctness, so it chooses among
    ``sum_{i <= floor(delta n)} C(n, i)`` roots, about ``2^(n H(delta))`` (``H`` the
    binary entropy).

    Raises:
        ParameterError: ``n < 2`` or ``dropout_rate`` outside ``[0, 1)``.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ParameterError(f"n must be an int >= 2, got {n!r}")
    delta = _check_fraction(dropout_rate, "dropout_rate")
    m = int(math.floor(delta * n))
    lf = _log_factorials(n)
    ln_terms = lf[n] - lf[: m + 1] - lf[n - m: n + 1][::-1]   # ln C(n, i), i = 0..m
    return float(np.logaddexp.reduce(ln_terms) / _LN2)


def seed_grinding_bits(n: int, dropout_rate: float, *, corrupt_fraction: float = 0.05,
                       attempts: int = 1, work_bits: int = GRINDING_WORK_BITS) -> int:
    """The ``grinding_bits`` to hand :func:`find_params` for a Harary graph whose seed is
    the round-0 transcript root (``SessionConfig.graph_seed``).

    The server sees the honest clients' fresh nonces before it fixes the root, and it
    can still change the root by (a) choosing ``U1`` among the subsets of
    :func:`subset_grinding_bits` and (b) choosing the nonces (or keys) of the
    ``ceil(corrupt_fraction n)`` clients it controls, which may answer last: ``2^256``
    choices each, so with one corrupt client the count is unbounded in practice. Each
    further attempt the clients join (with fresh nonces) multiplies the count by the
    candidates of that attempt. The bits are therefore
    ``min(log2(attempts) + subset bits, work_bits)`` without corrupt clients and
    ``work_bits`` with any, rounded up.

    Args:
        n: clients.
        dropout_rate: ``delta``.
        corrupt_fraction: ``gamma`` (default: :func:`find_params`'s).
        attempts: attempts of one round specification the clients may join.
        work_bits: ``log2`` of the candidate evaluations the server can do online
            over all those attempts (:data:`GRINDING_WORK_BITS`).

    Raises:
        ParameterError: bad ``n``, ``dropout_rate``, ``corrupt_fraction``,
            ``attempts`` or ``work_bits``.
    """
    if not isinstance(work_bits, int) or isinstance(work_bits, bool) or work_bits < 0:
        raise ParameterError(f"work_bits must be an int >= 0, got {work_bits!r}")
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise ParameterError(f"attempts must be an int >= 1, got {attempts!r}")
    subset = subset_grinding_bits(n, dropout_rate)
    if _count(_check_fraction(corrupt_fraction, "corrupt_fraction"), n) > 0:
        return work_bits
    return min(int(math.ceil(subset + math.log2(attempts) - 1e-9)), work_bits)


def default_grinding_bits(n: int, dropout_rate: float, *, graph: str, malicious: bool,
                          corrupt_fraction: float = 0.05) -> int:
    """The grinding a session's parameters should absorb when the caller states none:
    :func:`seed_grinding_bits` for a Harary graph under a malicious server, 0 otherwise
    (the complete graph has no seed; a semi-honest server follows the protocol and does
    not grind).

    Raises:
        ParameterError: bad ``n``, ``dropout_rate`` or ``corrupt_fraction``, or an
            unknown graph.
    """
    if graph not in GRAPHS:
        raise ParameterError(f"graph must be one of {GRAPHS}, got {graph!r}")
    if graph == "complete" or not malicious:
        _check_fraction(dropout_rate, "dropout_rate")
        _check_fraction(corrupt_fraction, "corrupt_fraction")
        return 0
    return seed_grinding_bits(n, dropout_rate, corrupt_fraction=corrupt_fraction)
