"""Attacks on the thresholding committee (server + two helpers) of the ``threshold``
transport (:mod:`protocol.core.transports.threshold`, :mod:`protocol.core.committee`).

Theory of operation
-------------------
Each attack runs the honest transport on the votes ``[10, 2, 1, 0, 5]`` at
``theta = 3`` (18 clients, a TrieHH++ round that reveals passing counts, so a wrongly
passing position would have its count opened) and plays one or two committee members:

* :func:`opens_sub_threshold` -- helper 1 flips the pass bit of a sub-threshold
  candidate in both its opening messages, so that the count of that candidate would be
  opened next. Every member receives the component it lacks from *both* others and
  compares the copies (Araki et al., "High-Throughput Semi-Honest Secure Three-Party
  Computation with an Honest Majority", CCS 2016): detected, the round aborts with
  ``committee_open_mismatch``, nothing is released.
* :func:`wrong_share` -- helper 1 enters the committee with its share ``-R_1`` plus
  ``theta`` at a sub-threshold position, consistently (it re-randomises and sends the
  wrong share as if it were right). The semi-honest protocol has no input check: the
  release changes undetected, and since the helper knows its offset it learns that
  candidate's real count from the opened one. Measured (outside the semi-honest model).
* :func:`collusion` -- two members pool their views. In replicated sharing each member
  holds two of the three components, so any two hold all three and reconstruct every
  count, sub-threshold ones included. Measured (outside the honest-majority model).

The assumption these measure -- a semi-honest committee with an honest majority -- is
stated in ``docs/threshold.md`` and ``docs/security.md``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from protocol.core.committee import CommitteeAborted, ring_bits, run_committee
from protocol.core.contract import AggregationAborted, Kind, RoundSpec, Votes
from protocol.core.transports.threshold import ThresholdTransport
from protocol.studies.attacks import Outcome, attack

__all__ = ["VOTES", "THETA"]

VOTES = (10, 2, 1, 0, 5)
THETA = 3
CANDS = ("c0", "c1", "c2", "c3", "c4")
TARGET = 1  # the sub-threshold candidate the adversary goes after (2 votes)


def _spec(reveal_counts: bool = True) -> RoundSpec:
    return RoundSpec("threshold-attack", 0, Kind.VOTE, candidates=CANDS, theta=THETA,
                     reveal_counts=reveal_counts)


def _votes() -> Votes:
    return Votes(np.repeat(np.arange(len(VOTES)), VOTES))


def _honest(seed: int, reveal_counts: bool = True) -> Any:
    return ThresholdTransport(simulate=True).run_round(
        _spec(reveal_counts), _votes(), np.random.default_rng(seed))


@attack("threshold.helper_opens_sub_threshold", system="threshold",
        target="committee opening: each missing component arrives from both other members",
        expected="a helper that flips a sub-threshold pass bit while opening is caught: "
                 "the round aborts committee_open_mismatch, nothing is released, no count "
                 "below theta is opened")
def opens_sub_threshold(seed: int) -> Outcome:
    """A helper flips the pass bit of a sub-threshold candidate in its opening messages
    (so that its count would be opened next)."""
    seen: list[str] = []

    def hook(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if step == "open-bits" and sender == 1 and isinstance(payload, np.ndarray):
            forged = payload.copy()
            forged[TARGET] ^= np.uint64(1)
            seen.append(f"open-bits to {recipient}")
            return forged
        if step == "open-counts":
            seen.append("open-counts")
        return payload

    name = "threshold.helper_opens_sub_threshold"
    expected = "aborted committee_open_mismatch; no release; no count below theta opened"
    try:
        res = ThresholdTransport(simulate=True, committee_hook=hook).run_round(
            _spec(), _votes(), np.random.default_rng(seed))
    except AggregationAborted as exc:
        ok = exc.reason == "committee_open_mismatch" and "open-counts" not in seen
        return Outcome(name, expected,
                       f"aborted {exc.reason}; forged messages: {len(seen)}; counts opened: "
                       f"{'open-counts' in seen}", ok,
                       {"server": exc.reason, "helper2": exc.reason}, {"counts_opened": 0})
    return Outcome(name, expected, f"released {dict(res.release.counts or {})}", False)


@attack("threshold.helper_wrong_share", system="threshold",
        target="semi-honest model: no check of a member's input share",
        expected="limit: a helper that adds theta to its share at a sub-threshold position "
                 "changes the release undetected (the candidate passes) and learns the "
                 "candidate's real count (opened minus theta); nobody aborts",
        kind="measured")
def wrong_share(seed: int) -> Outcome:
    """A helper enters the committee with a wrong (but consistently used) share."""
    honest = _honest(seed)
    server, h1, h2 = (honest.views["server"], honest.views["helper1"],
                      honest.views["helper2"])
    n = sum(VOTES)
    k = ring_bits(n, THETA)
    mask = np.uint64((1 << k) - 1)
    # the same inputs the honest run gave the committee, helper 1's share shifted
    forged = h1["share"].astype(np.uint64)
    forged[TARGET] = (forged[TARGET] + np.uint64(THETA)) & mask
    aborted = None
    try:
        out = run_committee([server["blinded_sum"], forged, h2["share"]], k, THETA,
                            reveal_counts=True)
    except CommitteeAborted as exc:
        aborted = exc.reason
    name = "threshold.helper_wrong_share"
    expected = ("release changed undetected: c1 passes; helper learns c1's count "
                f"{VOTES[TARGET]}")
    if aborted is not None:
        return Outcome(name, expected, f"aborted {aborted}", False)
    passed = [CANDS[i] for i in np.flatnonzero(out.passed)]
    opened = dict(zip(passed, out.counts.tolist())) if out.counts is not None else {}
    learned = int(opened.get(CANDS[TARGET], -1)) - THETA if CANDS[TARGET] in opened else None
    honest_items = list(honest.release.items or ())
    ok = (CANDS[TARGET] in passed and CANDS[TARGET] not in honest_items
          and learned == VOTES[TARGET])
    return Outcome(name, expected,
                   f"honest release {honest_items}; with the wrong share {passed} "
                   f"(opened {opened}); nobody aborted; helper 1 learns c1 = {learned}", ok,
                   {"server": "completed", "helper2": "completed"},
                   {"release_changed": CANDS[TARGET] in passed,
                    "sub_threshold_count_learned": learned})


@attack("threshold.collusion", system="threshold",
        target="honest-majority assumption of the committee",
        expected="limit: any two committee members pooling their views reconstruct every "
                 "count, sub-threshold ones included; alone, no view holds a count below "
                 "theta", kind="measured")
def collusion(seed: int) -> Outcome:
    """Two committee members (server + helper 1, and helper 1 + helper 2) pool views."""
    res = _honest(seed, reveal_counts=False)
    n = sum(VOTES)
    k = ring_bits(n, THETA)
    mask = np.uint64((1 << k) - 1)
    comm = {"server": res.views["server"]["committee"],
            "helper1": res.views["helper1"]["committee"],
            "helper2": res.views["helper2"]["committee"]}
    order = {"server": 0, "helper1": 1, "helper2": 2}
    learned: dict[str, list[int]] = {}
    for a, b in (("server", "helper1"), ("helper1", "helper2"), ("server", "helper2")):
        comps: dict[int, np.ndarray] = {}
        for who in (a, b):
            i = order[who]
            mine, nxt = comm[who]["components"]
            comps[i], comps[(i + 1) % 3] = mine, nxt
        total = (comps[0] + comps[1] + comps[2]) & mask
        learned[f"{a}+{b}"] = total.tolist()
    # alone: a member's components are uniformly random; the opened values are bits only
    alone_opened = [comm[w]["opened_counts"] for w in comm]
    sub = [v for v in VOTES if v < THETA]
    ok = (all(v == list(VOTES) for v in learned.values())
          and all(o is None for o in alone_opened) and res.release.counts is None)
    return Outcome("threshold.collusion",
                   "every pair reconstructs [10, 2, 1, 0, 5]; no single view opens a count",
                   f"all 3 pairs reconstruct {list(VOTES)} (sub-threshold {sub} included); "
                   f"single members opened bits only", ok,
                   {"server": "completed", "helper1": "completed", "helper2": "completed"},
                   {"pairs": learned})
