"""Attacks on Poplar1 heavy hitters (:mod:`protocol.core.poplar1`,
:mod:`protocol.studies.runners.poplar1`).

Theory of operation
-------------------
Each attack runs the honest prefix search on a small population (4-bit strings:
``1011`` x 6, ``0110`` x 4, ``1100`` x 3, threshold 3) with one malicious client
(a report for ``1011`` built with a deviation) or with a malicious aggregator (the
search's ``tamper`` hook rewrites what it sends). Poplar1's sketch (Boneh et al. 2021,
section 4.2, correlated randomness of appendix C.4) is the defence against clients: it accepts a report at a
level exactly when the report's values at the level's candidates are one-hot with
weight 1 and authenticated, except with probability at most ``2 / p`` (Schwartz-Zippel;
Field64: ``p ~ 2^64``).

* :func:`two_votes` -- the client flips the control-bit correction of the sibling at
  level 2, so its report holds a nonzero value on two prefixes of that level: rejected
  at level 2 by both aggregators; every count stays the honest clients' count.
* :func:`wrong_weight` -- the client programs weight 2 (authenticated as ``2 k``) on
  level 1: rejected at level 1; counts unchanged.
* :func:`inconsistent_public_share` -- the client sends aggregator 1 a public share
  whose level-3 payload correction differs from aggregator 0's: rejected at level 3.
* :func:`aggregator_shifts_sketch` -- aggregator 1 adds 1 to its first-round sketch
  share of one honest report at every level: that report is rejected, no count is
  wrong (a denial of service on one report, not a change of the result).
* :func:`aggregator_shifts_aggregate` -- aggregator 1 adds 5 to its aggregate share of
  one candidate: **measured**. Poplar1 verifies clients, not aggregators: the honest
  aggregator's count of that candidate is off by exactly 5 and nothing detects it (the
  draft's robustness holds only when both aggregators are honest).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from protocol.studies.attacks import Outcome, attack

__all__ = ["WORDS", "THRESHOLD"]

WORDS = ("1011",) * 6 + ("0110",) * 4 + ("1100",) * 3
THRESHOLD = 3
BITS = 4


def _meas() -> np.ndarray:
    return np.array([[c == "1" for c in w] for w in WORDS + ("1011",)], dtype=bool)


def _truth(level: int, cands: list[str]) -> list[int]:
    return [sum(1 for w in WORDS if w[:level + 1] == c) for c in cands]


def _run(seed: int, *, weights: np.ndarray | None = None,
         edit_public: Callable[[Any, Any], tuple[Any, Any]] | None = None,
         tamper: Any = None) -> dict[str, Any]:
    """Shard every client (the last one is the attacker), send the reports as bytes,
    run the search; returns the search's output."""
    from protocol.core.poplar1 import Poplar1
    from protocol.core.poplar1.idpf import encode_public_share
    from protocol.core.randomness import insecure_deterministic_randomness
    from protocol.studies.runners.poplar1 import CTX, search

    vdaf = Poplar1(BITS, CTX)
    meas = _meas()
    n = meas.shape[0]
    rnd = insecure_deterministic_randomness(seed, "poplar1 attack")
    raw = np.frombuffer(rnd.token_bytes(n * (16 + vdaf.RAND_SIZE)), dtype=np.uint8
                        ).reshape(n, 16 + vdaf.RAND_SIZE)
    rep = vdaf.shard_batch(meas, raw[:, :16], raw[:, 16:], weights=weights)
    pubs = [vdaf.decode_public_shares([encode_public_share(rep.public, r) for r in range(n)])
            for _ in (0, 1)]
    if edit_public is not None:
        pubs = list(edit_public(pubs[0], pubs[1]))
    shares = tuple(vdaf.decode_input_shares([vdaf.encode_input_share(rep.shares[j], r)
                                             for r in range(n)]) for j in (0, 1))
    key = rnd.token_bytes(vdaf.VERIFY_KEY_SIZE)
    return search(vdaf, rep.nonces, (pubs[0], pubs[1]), shares, THRESHOLD, verify_key=key,
                  tamper=tamper)


def _check(out: dict[str, Any], reject_level: int | None, victim: int) -> tuple[bool, str, dict]:
    """Rejected exactly at ``reject_level`` (``None``: every level) and every count the
    honest aggregator learnt equal to the honest clients' count."""
    views = out["parties"][0].view
    rejected = {v["level"]: v["rejected_reports"] for v in views}
    counts_ok = all(v["counts"] == _truth(v["level"], v["candidates"]) for v in views)
    if reject_level is None:
        rej_ok = all(r == [victim] for r in rejected.values())
    else:
        rej_ok = all(r == ([victim] if lv == reject_level else []) for lv, r in rejected.items())
        # at the other levels the attacker's (1011) report counts: the honest truth + 1
        counts_ok = all(
            v["counts"] == [t + (1 if v["level"] != reject_level and "1011".startswith(c)
                                 else 0) for t, c in zip(_truth(v["level"], v["candidates"]),
                                                          v["candidates"])]
            for v in views)
    heavy = sorted("".join("1" if b else "0" for b in s) for s in out["heavy"])
    observed = (f"rejected per level {rejected}; counts as expected: {counts_ok}; "
                f"heavy hitters {heavy}")
    return rej_ok and counts_ok, observed, {"rejected": rejected, "heavy": heavy}


@attack("poplar1.client_two_votes", system="poplar1",
        target="the sketch: a report with nonzero values on two prefixes of a level",
        expected="rejected at that level by both aggregators; no count changes")
def two_votes(seed: int) -> Outcome:
    """A client's report holds a nonzero value on two prefixes of level 2 (its public
    share's control-bit correction for the sibling is flipped)."""
    def edit(p0, p1):  # noqa: ANN001, ANN202
        for p in (p0, p1):
            r = p.ctrl_cw.shape[0] - 1
            keep = int(_meas()[r, 2])
            p.ctrl_cw[r, 2, 1 - keep] ^= True
        return p0, p1

    out = _run(seed, edit_public=edit)
    ok, observed, parties = _check(out, 2, len(WORDS))
    return Outcome("poplar1.client_two_votes", ATTACKS_EXPECTED["two"], observed, ok,
                   parties=parties)


@attack("poplar1.client_wrong_weight", system="poplar1",
        target="the sketch: weight 2, consistently authenticated, on one level",
        expected="rejected at that level by both aggregators; no count changes")
def wrong_weight(seed: int) -> Outcome:
    """A client programs the value 2 (with the authenticator ``2 k``) on level 1."""
    w = np.ones((len(WORDS) + 1, BITS), dtype=np.int64)
    w[-1, 1] = 2
    out = _run(seed, weights=w)
    ok, observed, parties = _check(out, 1, len(WORDS))
    return Outcome("poplar1.client_wrong_weight", ATTACKS_EXPECTED["weight"], observed, ok,
                   parties=parties)


@attack("poplar1.client_inconsistent_public_share", system="poplar1",
        target="the sketch: the two aggregators hold different public shares",
        expected="rejected at the level whose correction word differs; no count changes")
def inconsistent_public_share(seed: int) -> Outcome:
    """The client sends aggregator 1 a public share whose leaf payload correction
    differs from aggregator 0's."""
    def edit(p0, p1):  # noqa: ANN001, ANN202
        p1.w_leaf[-1] = [(p1.w_leaf[-1][0] + 1) % (2 ** 255 - 19), p1.w_leaf[-1][1]]
        return p0, p1

    out = _run(seed, edit_public=edit)
    ok, observed, parties = _check(out, 3, len(WORDS))
    return Outcome("poplar1.client_inconsistent_public_share", ATTACKS_EXPECTED["public"],
                   observed, ok, parties=parties)


def _shift(stage_wanted: str, victim: int, delta: int, candidate: int = 0):  # noqa: ANN202
    from protocol.core.poplar1.field import P64, P255

    def tamper(stage: str, agg_id: int, level: int, values):  # noqa: ANN001, ANN202
        if agg_id != 1 or stage != stage_wanted:
            return values
        mod = P64 if level < BITS - 1 else P255
        if stage == "sketch1":
            if isinstance(values, np.ndarray):
                v = values.copy()
                v[victim, 0] = np.uint64((int(v[victim, 0]) + delta) % mod)
                return v
            v = [list(row) for row in values]
            v[victim][0] = (v[victim][0] + delta) % mod
            return v
        if stage == "agg_share":
            if isinstance(values, np.ndarray):
                v = values.copy()
                v[candidate] = np.uint64((int(v[candidate]) + delta) % mod)
                return v
            v = list(values)
            v[candidate] = (v[candidate] + delta) % mod
            return v
        return values
    return tamper


@attack("poplar1.aggregator_shifts_sketch", system="poplar1",
        target="the sketch: an aggregator changes its first-round share",
        expected="the honest report is rejected at every level; no count is wrong "
                 "(the honest clients' counts without that report)")
def aggregator_shifts_sketch(seed: int) -> Outcome:
    """Aggregator 1 adds 1 to its first-round sketch share of client 0's report at
    every level."""
    out = _run(seed, tamper=_shift("sketch1", 0, 1))
    views = out["parties"][0].view
    rejected = {v["level"]: v["rejected_reports"] for v in views}
    # client 0 holds 1011; the others (and the honest copy of 1011 the attacker test
    # client sends last) are counted
    honest = list(WORDS[1:]) + ["1011"]
    counts_ok = all(v["counts"] == [sum(1 for w in honest if w[:v["level"] + 1] == c)
                                    for c in v["candidates"]] for v in views)
    ok = all(r == [0] for r in rejected.values()) and counts_ok
    return Outcome("poplar1.aggregator_shifts_sketch",
                   ATTACKS_EXPECTED["sketch"],
                   f"rejected per level {rejected}; counts equal the other clients': {counts_ok}",
                   ok, parties={"rejected": rejected})


@attack("poplar1.aggregator_shifts_aggregate", system="poplar1",
        target="Poplar1's trust model: aggregators are not verified",
        expected="measured: the honest aggregator's count of the shifted candidate is off "
                 "by exactly the shift (5) and nothing detects it",
        kind="measured")
def aggregator_shifts_aggregate(seed: int) -> Outcome:
    """Aggregator 1 adds 5 to its aggregate share of the first candidate at every
    level (outside the draft's robustness, which assumes honest aggregators)."""
    out = _run(seed, tamper=_shift("agg_share", 0, 5))
    views = out["parties"][0].view
    honest = list(WORDS) + ["1011"]
    offsets = [v["counts"][0] - sum(1 for w in honest if w[:v["level"] + 1] == v["candidates"][0])
               for v in views]
    others_ok = all(v["counts"][1:] == [sum(1 for w in honest if w[:v["level"] + 1] == c)
                                        for c in v["candidates"][1:]] for v in views)
    rejected = sum(len(v["rejected_reports"]) for v in views)
    ok = all(o == 5 for o in offsets) and others_ok and rejected == 0
    return Outcome("poplar1.aggregator_shifts_aggregate", ATTACKS_EXPECTED["aggregate"],
                   f"offset of the shifted count per level {offsets}; other counts exact: "
                   f"{others_ok}; reports rejected {rejected}", ok,
                   leakage={"count_offset": offsets})


ATTACKS_EXPECTED = {
    "two": "rejected at that level by both aggregators; no count changes",
    "weight": "rejected at that level by both aggregators; no count changes",
    "public": "rejected at the level whose correction word differs; no count changes",
    "sketch": "the honest report is rejected at every level; no count is wrong "
              "(the honest clients' counts without that report)",
    "aggregate": "measured: the honest aggregator's count of the shifted candidate is off "
                 "by exactly the shift (5) and nothing detects it",
}
