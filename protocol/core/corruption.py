"""Corrupted clients in a simulation: chosen or random clients that enter what an
attacker wants instead of their vote.

Theory of operation
-------------------
A :class:`CorruptClients` value names *who* is corrupted and *what* they do. Every
transport takes one (``transport.corrupt = CorruptClients(...)`` or the ``corrupt=``
argument of :func:`protocol.core.transports.get_transport`) and applies it in its own
client path, so a researcher sees what the same attackers achieve over each:

* **who**: ``users`` (population indices, corrupted whenever sampled), ``per_round``
  (that many of each round's contributors, drawn uniformly), or ``fraction`` (each
  population index independently with that probability). The draw uses its own
  generator (``seed``, the task and the round), never the mechanism's, so the same
  seed gives the same samples with and without corruption.
* **what** (:data:`STRATEGIES`): a *vector* strategy replaces the client's one-hot
  vote by another vector over the round's candidates (``theta`` at a target, ``2``,
  ``-1``, ``p - 1``, two candidates, ...): every transport can carry it. A *report*
  strategy attacks the validated report format itself (a replay, a wrong length,
  parts that do not match, a bad signature, ...): only the committee's validated
  input has that format (:mod:`protocol.core.committee.reports`), and other
  transports refuse it.

How each transport takes a corrupted vector: the plaintext reference (a trusted
aggregator, which sees every vote) counts it only if it is a valid vote (one-hot or
zero) and drops it by name otherwise; secure aggregation and the committee fed by it
add it into the sum modulo their modulus (nothing validates it); the committee's
validated input checks it on shares and drops it by name; the shuffler takes one
envelope per device, so the client can only send one vote.

Every round a transport runs with corrupted clients records a :class:`CorruptionRecord`
in ``transport.corruption_log`` and in the round's views (``views["corrupted"]``):
who was corrupted, what was dropped and why, and whether the release equals the one
the honest clients' votes alone give (the simulation's oracle, computed in the clear).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = ["CorruptClients", "CorruptionRecord", "STRATEGIES", "VECTOR_STRATEGIES",
           "REPORT_STRATEGIES", "corrupt_positions", "corrupt_vector", "is_valid_vote",
           "forge_reports", "target_index",
           "honest_release", "record_round", "P61"]

#: the committee's field modulus, 2^61 - 1 (the "largest value" strategy's p - 1)
P61 = (1 << 61) - 1

#: strategy -> what it does (the CLI's and the docs' table)
VECTOR_STRATEGIES = {
    "theta-at-target": "theta votes for the target candidate (a forged heavy hitter)",
    "theta-everywhere": "theta at every candidate (every count, lifted past theta)",
    "below-theta-pair": "theta - 1 at the target and at one more candidate (probes "
                        "whether one honest device holds each)",
    "two": "2 at the target",
    "negative": "-theta at the target (removes a heavy hitter)",
    "minus-one": "-1 at the target (p - 1 in the field)",
    "max": "p - 1 (the largest field element) at every candidate",
    "two-candidates": "one vote at the target and one at another candidate",
    "one-vote": "one valid vote for the target (what any client may do)",
    "abstain": "the zero vote (the reference: the honest clients' votes alone)",
}
REPORT_STRATEGIES = {
    "wrong-length": "a vote one entry shorter than the round's",
    "replay-round": "its report bound to the previous round",
    "replay-job": "its report bound to another job of the task",
    "replay-device": "another device's report of this round, sent as is",
    "inconsistent": "the server and helper 2 are given different keys to c0 (so "
                    "they would hold different copies)",
    "wrong-helper": "helper 1's part encrypted to helper 2's key",
    "unsigned": "no signature",
    "re-signed": "signed with a key that is not its roster key",
    "duplicate": "its (valid) report sent twice",
}
STRATEGIES = {**VECTOR_STRATEGIES, **REPORT_STRATEGIES}


@dataclass(frozen=True)
class CorruptClients:
    """Which clients are corrupted, and what they do.

    Attributes:
        strategy: a name of :data:`STRATEGIES`.
        users: population indices that are corrupted whenever they take part.
        per_round: corrupt that many of each round's contributors (uniformly drawn).
        fraction: corrupt each population index with this probability.
        target: the candidate string the strategy aims at (a word with its end-of-word
            symbol: the runners append it); each round the candidate that extends it,
            or else the one sharing the longest prefix with it (the first candidate
            when none is given).
        seed: the corruption draw's seed (its own generator).

    Exactly one of ``users``, ``per_round``, ``fraction`` is given.

    Raises:
        ValueError: an unknown strategy or a bad choice of clients.
    """

    strategy: str
    users: tuple[int, ...] | None = None
    per_round: int | None = None
    fraction: float | None = None
    target: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown corrupted-client strategy {self.strategy!r}; one "
                             f"of {', '.join(STRATEGIES)}")
        given = [x is not None for x in (self.users, self.per_round, self.fraction)]
        if sum(given) != 1:
            raise ValueError("name the corrupted clients one way: users, per_round or "
                             "fraction")
        if self.users is not None:
            users = tuple(int(u) for u in self.users)
            if not users or min(users) < 0 or len(set(users)) != len(users):
                raise ValueError("corrupted users are distinct non-negative indices")
            object.__setattr__(self, "users", users)
        if self.per_round is not None and (type(self.per_round) is not int
                                           or self.per_round < 1):
            raise ValueError("per_round must be an int >= 1")
        if self.fraction is not None and not 0.0 < float(self.fraction) <= 1.0:
            raise ValueError("fraction must be in (0, 1]")
        if self.target is not None and (type(self.target) is not str or not self.target):
            raise ValueError("target must be a non-empty string")
        if type(self.seed) is not int or self.seed < 0:
            raise ValueError("seed must be a non-negative int")

    @property
    def on_reports(self) -> bool:
        """Whether the strategy attacks the validated report format."""
        return self.strategy in REPORT_STRATEGIES

    def as_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "users": list(self.users or ()) or None,
                "per_round": self.per_round, "fraction": self.fraction,
                "target": self.target, "seed": self.seed}


def _rng(c: CorruptClients, task: str, round_no: int) -> np.random.Generator:
    digest = hashlib.sha256(f"fedhh corrupt\x00{c.seed}\x00{task}\x00{round_no}".encode()
                            ).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def corrupt_positions(c: CorruptClients | None, task: str, round_no: int,
                      users: np.ndarray) -> np.ndarray:
    """The positions (indices into ``users``, the round's contributors by population
    index) of the corrupted clients this round, ascending."""
    users = np.asarray(users, dtype=np.int64)
    if c is None or users.size == 0:
        return np.zeros(0, dtype=np.int64)
    if c.users is not None:
        return np.flatnonzero(np.isin(users, np.asarray(c.users, dtype=np.int64)))
    if c.per_round is not None:
        k = min(c.per_round, users.size)
        return np.sort(_rng(c, task, round_no).choice(users.size, size=k, replace=False))
    # fraction: a property of the population index, the same in every round
    seed = int.from_bytes(hashlib.sha256(f"fedhh corrupt users\x00{c.seed}".encode()
                                         ).digest()[:8], "big")
    keys = _population_uniforms(seed, users)
    return np.flatnonzero(keys < float(c.fraction))  # type: ignore[arg-type]


def _population_uniforms(seed: int, users: np.ndarray) -> np.ndarray:
    """A uniform in [0, 1) per population index, from a hash (no state to keep)."""
    x = (users.astype(np.uint64) + np.uint64(seed & 0xFFFFFFFFFFFF)) * np.uint64(
        0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def target_index(c: CorruptClients, candidates: Sequence[str]) -> int:
    """The candidate the strategy aims at this round: the first candidate without a
    target; with one, the longest candidate that is a prefix of the target, or the
    target followed by one more unit (its end-of-word node); when no candidate extends
    the target (its prefix was not released), the candidate sharing the longest prefix
    with it (the first such): the attack goes on every round, at the closest
    candidate."""
    if c.target is None:
        return 0
    t = c.target
    best, best_len = -1, -1
    for i, cand in enumerate(candidates):
        fits = t.startswith(cand) or (cand.startswith(t) and len(cand) == len(t) + 1)
        if fits and len(cand) > best_len:
            best, best_len = i, len(cand)
    if best >= 0:
        return best
    for i, cand in enumerate(candidates):
        n = 0
        for a, b in zip(cand, t):
            if a != b:
                break
            n += 1
        if n > best_len:
            best, best_len = i, n
    return best


def corrupt_vector(c: CorruptClients, candidates: Sequence[str], theta: int | None
                   ) -> np.ndarray:
    """A vector strategy's input over the round's candidates, as signed integers
    (``int64``; a transport reduces it modulo its own modulus).

    Raises:
        ValueError: a report strategy (it has no vector form).
    """
    if c.strategy not in VECTOR_STRATEGIES:
        raise ValueError(f"{c.strategy!r} attacks the validated report format; it has no "
                         "vector form")
    d = len(candidates)
    t = int(theta or 1)
    v = np.zeros(d, dtype=np.int64)
    s = c.strategy
    i = max(0, target_index(c, candidates))
    other = (i + 1) % d
    if s == "theta-at-target":
        v[i] = t
    elif s == "theta-everywhere":
        v[:] = t
    elif s == "below-theta-pair":
        v[i] = t - 1
        if d > 1:
            v[other] = t - 1
    elif s == "two":
        v[i] = 2
    elif s == "negative":
        v[i] = -t
    elif s == "minus-one":
        v[i] = -1
    elif s == "max":
        v[:] = P61 - 1
    elif s == "two-candidates":
        v[i] = 1
        if d > 1:
            v[other] = 1
        else:
            v[i] = 2
    elif s == "one-vote":
        v[i] = 1
    return v  # "abstain": the zero vector


def forge_reports(strategy: str, ctx: Any, honest: Any, vote: np.ndarray,
                  signing_key: bytes, helper_keys: tuple[bytes, bytes], rand: Any,
                  seen: Sequence[Any] = ()) -> list[Any]:
    """A corrupted device's reports under a report strategy (:data:`REPORT_STRATEGIES`),
    the same in one process and between processes: a report that does not fit the
    round (``wrong-length``: one entry short), bound to another round or job
    (``replay-round``, ``replay-job``), another device's report of this round
    (``replay-device``: the first of ``seen`` that is not its own), parts that do not
    match (``inconsistent``: helper 2 is given another key to ``c0`` than the
    server, so it would decrypt another copy), helper 1's
    part sealed to helper 2 (``wrong-helper``), no signature or another key's
    (``unsigned``, ``re-signed``), or its valid report twice (``duplicate``).

    Args:
        strategy: the report strategy.
        ctx: the round's :class:`~protocol.core.committee.reports.ReportContext`.
        honest: the report the device would send (:class:`~protocol.core.committee.
            reports.DeviceReport`).
        vote: its vote (``(d,)`` field elements).
        signing_key, helper_keys, rand: the device's key, the helpers' X25519 keys, the
            randomness.
        seen: other reports of this round the device has seen.

    Raises:
        ValueError: not a report strategy.
    """
    import dataclasses

    from protocol.core.committee.reports import SEED_BYTES, assemble_report, share_votes

    if strategy not in REPORT_STRATEGIES:
        raise ValueError(f"{strategy!r} is not a report strategy")
    u, d = honest.user, ctx.d
    secrets = rand.token_bytes(3 * SEED_BYTES)
    s1, s2, key0 = secrets[:32], secrets[32:64], secrets[64:]
    c0 = share_votes(np.asarray(vote, dtype=np.uint64).reshape(1, -1), [s1], [s2])[0]

    def mk(context: Any = ctx, key: bytes = signing_key, body: Any = c0, **kw: Any) -> Any:
        return assemble_report(context, u, body, s1, s2, key0, key, helper_keys, rand, **kw)

    if strategy == "wrong-length":
        short = share_votes(np.asarray(vote, dtype=np.uint64)[:d - 1].reshape(1, -1), [s1],
                            [s2])[0] if d > 1 else np.zeros(2, dtype=np.uint64)
        return [mk(body=short)]
    if strategy == "replay-round":  # what it signed for the round before
        return [mk(dataclasses.replace(ctx, round=ctx.round - 1 if ctx.round > 0 else 1))]
    if strategy == "replay-job":    # what it signed in another job of the task
        other = hashlib.sha256(b"fedhh another job\x00" + ctx.job).digest()[:16]
        return [mk(dataclasses.replace(ctx, job=other))]
    if strategy == "replay-device":
        return [next((x for x in seen if x.user != u), honest)]
    if strategy == "inconsistent":  # helper 2 is given another key to c0 than the server
        other_key = hashlib.sha256(b"fedhh another key\x00" + key0).digest()
        return [mk(parts={2: s2 + other_key})]
    if strategy == "wrong-helper":
        return [mk(encrypt_to=(helper_keys[1], helper_keys[1]))]
    if strategy == "unsigned":
        return [mk(sign=False)]
    if strategy == "re-signed":
        return [mk(key=hashlib.sha256(b"not the roster key" + signing_key).digest())]
    return [honest, honest]  # duplicate


def is_valid_vote(v: np.ndarray) -> bool:
    """One-hot or zero."""
    v = np.asarray(v)
    nz = np.flatnonzero(v)
    return nz.size == 0 or (nz.size == 1 and int(v[nz[0]]) == 1)


def honest_release(spec: Any, choice: np.ndarray, corrupted: np.ndarray) -> Any:
    """The release the honest clients' votes alone give (the simulation's oracle)."""
    from protocol.core.contract import Release, threshold_counts

    keep = np.ones(choice.size, dtype=bool)
    keep[corrupted] = False
    honest = choice[keep]
    counts = np.bincount(honest[honest >= 0], minlength=spec.domain_size)
    return Release(spec, int(honest.size), counts=threshold_counts(spec, counts))


@dataclass
class CorruptionRecord:
    """What the corrupted clients of one round did and achieved.

    Attributes:
        task, round: the round.
        strategy: the strategy's name.
        users: the corrupted clients' population indices.
        dropped: reports dropped, by reason (every client's, the honest ones'
            included: missing devices, for example).
        dropped_corrupted: the corrupted clients' reports dropped, by reason.
        counted: corrupted clients whose input was counted.
        validated: whether the transport checks each client's input.
        release_items, honest_items: what the round released, and what the honest
            clients' votes alone would release.
        matches_honest: the two releases are equal (items, and counts when revealed).
    """

    task: str
    round: int
    strategy: str
    users: list[int]
    dropped: dict[str, int] = field(default_factory=dict)
    dropped_corrupted: dict[str, int] = field(default_factory=dict)
    counted: int = 0
    validated: bool = False
    release_items: list[str] = field(default_factory=list)
    honest_items: list[str] = field(default_factory=list)
    matches_honest: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "round": self.round, "strategy": self.strategy,
                "users": list(self.users), "dropped": dict(self.dropped),
                "dropped_corrupted": dict(self.dropped_corrupted), "counted": self.counted,
                "validated": self.validated, "release_items": list(self.release_items),
                "honest_items": list(self.honest_items),
                "matches_honest": self.matches_honest}


def record_round(transport: Any, spec: Any, choice: np.ndarray, users: np.ndarray,
                 corrupted: np.ndarray, release: Any, *, validated: bool,
                 dropped: dict[str, int] | None = None,
                 dropped_corrupted: dict[str, int] | None = None,
                 counted: int | None = None) -> CorruptionRecord:
    """Build and log one round's :class:`CorruptionRecord` (on
    ``transport.corruption_log``)."""
    c = transport.corrupt
    honest = honest_release(spec, choice, corrupted)
    same = release.items == honest.items and dict(release.counts or {}) == dict(
        honest.counts or {})
    rec = CorruptionRecord(
        spec.task, int(spec.round), c.strategy, [int(u) for u in users[corrupted]],
        dict(dropped or {}), dict(dropped_corrupted or {}),
        int(corrupted.size if counted is None else counted), validated,
        list(release.items or ()), list(honest.items or ()), bool(same))
    log = getattr(transport, "corruption_log", None)
    if log is None:
        log = []
        transport.corruption_log = log
    log.append(rec)
    return rec
