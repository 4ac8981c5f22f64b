"""Attacks by corrupted clients on the committee's validated input (the default of the
``threshold`` transport), and by a member on the honest clients' reports.

Theory of operation
-------------------
Each attack runs one vote round of the default transport (``--transport threshold``,
``--threat malicious``, validated reports: :mod:`protocol.core.committee.reports`,
:mod:`~protocol.core.committee.intake`, :mod:`~protocol.core.committee.validity`) on
the votes ``[10, 2, 1, 0, 5]`` at ``theta = 3``, with counts revealed (a TrieHH++
round, so any count the attack changed would be opened).

* **A corrupted client** (:mod:`protocol.core.corruption`, one per strategy of
  :data:`~protocol.core.corruption.STRATEGIES`) enters ``theta`` at a candidate, ``2``,
  ``-theta``, ``p - 1``, two candidates, a vote of the wrong length, a report replayed
  from another round, job or device, parts that differ between the two holders of a
  component, a part encrypted to the wrong helper, no signature or another key's.
  Expected: its report is dropped with the strategy's reason, which every member
  records, and the release equals that of the honest clients' votes alone.
* **A member against honest reports**: the server drops chosen valid reports (they
  are ``missing`` in every member's view: visible, the same power as dropping a
  device), injects a report of a device outside the sample (``not_in_sample``),
  alters or swaps a part it relays (``committee_report_set_mismatch``); a helper
  accuses a valid report of a private fault (dropped, the accuser named in every
  view), lies about a public check (``committee_verdict_mismatch``) or errs in the
  validity check's multiplications (``committee_verification_failed``).
* **Measured**: clients that each cast one *valid* vote for the same candidate count
  once each (sybils are still votes).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from protocol.core.committee.intake import ReportBatch
from protocol.core.committee.reports import ReportContext, Verdict, candidates_digest
from protocol.core.committee.validity import ValidityParty
from protocol.core.committee.verified import CommitteeMessage
from protocol.core.committee import field as F
from protocol.core.contract import AggregationAborted, Kind, RoundSpec, Votes
from protocol.core.corruption import STRATEGIES, CorruptClients, honest_release
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.transports.threshold import Deviation, ThresholdTransport
from protocol.studies.attacks import Outcome, attack

__all__ = ["VOTES", "THETA", "EXPECTED_REASON"]

VOTES = (10, 2, 1, 0, 5)
THETA = 3
CANDS = ("c0", "c1", "c2", "c3", "c4")
#: the candidate the corrupted clients aim at: nobody holds it
TARGET = "c3"

#: strategy -> the reason its report is dropped with (``None``: counted, a valid vote)
EXPECTED_REASON = {
    "theta-at-target": "invalid_vote", "theta-everywhere": "invalid_vote",
    "below-theta-pair": "invalid_vote", "two": "invalid_vote", "negative": "invalid_vote",
    "minus-one": "invalid_vote",
    "max": "invalid_vote", "two-candidates": "invalid_vote", "one-vote": None,
    "abstain": None,
    "wrong-length": "malformed_part", "replay-round": "replayed_report",
    "replay-job": "replayed_report", "replay-device": "missing",
    "inconsistent": "inconsistent_part", "wrong-helper": "undecryptable_part",
    "unsigned": "bad_signature", "re-signed": "bad_signature",
    "duplicate": "duplicate_report",
}


def _spec() -> RoundSpec:
    return RoundSpec("client-attack", 1, Kind.VOTE, candidates=CANDS, theta=THETA,
                     reveal_counts=True)


def _choice() -> np.ndarray:
    return np.repeat(np.arange(len(VOTES)), VOTES).astype(np.int64)


def _views_agree(views: dict[str, Any], user: int, reason: str) -> bool:
    """Every member's view records ``user``'s report as dropped for ``reason``."""
    return all(any(u == user and r == reason for u, r, _ in views[m]["intake"]["dropped"])
               for m in ("server", "helper1", "helper2"))


def _client_attack(strategy: str) -> Callable[[int], Outcome]:
    reason = EXPECTED_REASON[strategy]
    name = f"client.{strategy}"

    def run(seed: int) -> Outcome:
        corrupt = CorruptClients(strategy, per_round=1, target=TARGET, seed=seed)
        spec, choice = _spec(), _choice()
        tr = ThresholdTransport(simulate=True, corrupt=corrupt)
        try:
            res = tr.run_round(spec, Votes(choice), np.random.default_rng(seed))
        except AggregationAborted as exc:
            return Outcome(name, _expected(strategy), f"aborted {exc.reason}", False)
        rec = res.views["corrupted"]
        bad = rec["users"][0]
        # a duplicate's first copy is its own valid vote, which counts
        honest = honest_release(spec, choice, np.zeros(0, dtype=np.int64)
                                if strategy == "duplicate" else np.array([bad]))
        if reason is None:
            counts = dict(res.release.counts or {})
            ok = not rec["dropped_corrupted"] and rec["counted"] == 1
            return Outcome(name, _expected(strategy),
                           f"counted as one vote; released {counts}", ok,
                           {"dropped": rec["dropped"]}, {"counted": rec["counted"]})
        ok = rec["dropped_corrupted"] == {reason: 1} and res.release.same_as(honest)
        if reason != "missing":
            ok = ok and _views_agree(res.views, bad, reason)
        return Outcome(name, _expected(strategy),
                       f"dropped {rec['dropped_corrupted']}; released "
                       f"{dict(res.release.counts or {})} (honest alone: "
                       f"{dict(honest.counts or {})})", ok,
                       {m: res.views[m]["intake"]["accusations"]
                        for m in ("server", "helper1", "helper2")},
                       {"matches_honest": rec["matches_honest"]})

    run.__doc__ = f"A corrupted client: {STRATEGIES[strategy]}."
    return run


def _expected(strategy: str) -> str:
    reason = EXPECTED_REASON[strategy]
    if reason is None:
        return "a valid vote: counted once, like any client's"
    if strategy == "duplicate":
        return ("its first (valid) report counts once; the copy is dropped as "
                "duplicate_report in every member's view")
    if reason == "missing":
        return ("the copy is refused as the other device's duplicate; the corrupted "
                "device's own slot is missing; the release is the honest clients' alone")
    return (f"its report dropped as {reason} in every member's view; the release is the "
            "honest clients' alone")


for _s in STRATEGIES:
    if _s == "abstain":
        continue  # the reference, not an attack
    attack(f"client.{_s}", system="threshold",
           target="validated reports: " + STRATEGIES[_s],
           expected=_expected(_s),
           kind="measured" if EXPECTED_REASON[_s] is None else "detected")(_client_attack(_s))


# ------------------------------------------------------------------ members

def _run(dev: Deviation, seed: int) -> Any:
    return ThresholdTransport(simulate=True, deviation=dev).run_round(
        _spec(), Votes(_choice()), np.random.default_rng(seed))


@attack("client.server_drops_valid_reports", system="threshold",
        target="intake: the server takes the devices' frames",
        expected="visible: the dropped devices are 'missing' in every member's view and "
                 "the release counts the others (as if they had dropped out); below the "
                 "round's minimum the round aborts too_few_valid_reports")
def server_drops(seed: int) -> Outcome:
    """The server drops two chosen valid reports (the first two frames)."""
    name = "client.server_drops_valid_reports"
    dev = Deviation(intake_reports=lambda batch, frames: frames[2:])
    res = _run(dev, seed)
    missing = [{u for u, r, _ in res.views[m]["intake"]["dropped"] if r == "missing"}
               for m in ("server", "helper1", "helper2")]
    expected = honest_release(_spec(), _choice(), np.array([0, 1]))
    ok = missing == [{0, 1}] * 3 and res.release.same_as(expected)
    # and dropping more than half the sample aborts
    try:
        _run(Deviation(intake_reports=lambda batch, frames: frames[:5]), seed)
        too_few = False
    except AggregationAborted as exc:
        too_few = exc.reason == "too_few_valid_reports"
    return Outcome(name, _expected_of(name),
                   f"missing in the three views: {[sorted(s) for s in missing]}; released "
                   f"{dict(res.release.counts or {})}; 5 of 18 kept: "
                   f"{'too_few_valid_reports' if too_few else 'no abort'}", ok and too_few,
                   {"missing": sorted(missing[0])})


@attack("client.server_injects_report", system="threshold",
        target="intake: every member checks that a report's device is in the sample",
        expected="the injected report is dropped as not_in_sample in every member's view; "
                 "the release is the honest one")
def server_injects(seed: int) -> Outcome:
    """The server injects a signed, valid-looking report of a device outside the sample
    (a roster device it controls)."""
    name = "client.server_injects_report"
    from protocol.core import codec
    from protocol.core.committee.reports import make_reports

    tr = ThresholdTransport(simulate=True)
    outsider = 10_000
    keys = tr.report_keys()
    keys.device(outsider)

    spec = _spec()
    ctx = ReportContext(spec.task, tr.job_id(spec.task), spec.round,
                        candidates_digest(CANDS), len(CANDS))

    def inject(batch: int, frames: list[bytes]) -> list[bytes]:
        vote = np.zeros((1, len(CANDS)), dtype=np.uint64)
        vote[0, 3] = 1
        forged = make_reports(ctx, [outsider], vote, [keys.device(outsider)[0]],
                              keys.helper_public,
                              insecure_deterministic_randomness(seed, "forger"))[0]
        return frames + [codec.encode(forged)]

    tr.deviation = Deviation(intake_reports=inject)
    res = tr.run_round(_spec(), Votes(_choice()), np.random.default_rng(seed))
    ok = _views_agree(res.views, outsider, "not_in_sample") and \
        res.release.same_as(honest_release(_spec(), _choice(), np.zeros(0, dtype=np.int64)))
    return Outcome(name, _expected_of(name),
                   f"dropped {res.views['clients']['dropped']}; released "
                   f"{dict(res.release.counts or {})}", ok)


def _aborts(name: str, deviation: Deviation, reason: str, seed: int) -> Outcome:
    """Run the round with a deviating member; passed when it aborts with ``reason``
    (nothing is released then)."""
    try:
        res = _run(deviation, seed)
    except AggregationAborted as exc:
        return Outcome(name, _expected_of(name), f"aborted {exc.reason}",
                       exc.reason == reason, {"members": exc.reason})
    return Outcome(name, _expected_of(name),
                   f"released {dict(res.release.counts or {})}", False)


def _relay_attack(name: str, alter: Callable[[int, ReportBatch], ReportBatch],
                  reason: str, seed: int) -> Outcome:
    return _aborts(name, Deviation(intake_relay=alter), reason, seed)


@attack("client.server_alters_relayed_part", system="threshold",
        target="relay: each helper's ciphertext is signed by the device; the members "
               "agree on every report's digest",
        expected="aborted committee_report_set_mismatch before any check, nothing released")
def server_alters(seed: int) -> Outcome:
    """The server flips one byte of helper 1's ciphertext of one report."""
    def alter(helper: int, batch: ReportBatch) -> ReportBatch:
        if helper != 1 or not batch.reports:
            return batch
        r = batch.reports[0]
        ct = bytearray(r.own_ct)
        ct[-1] ^= 1
        reps = (dataclasses.replace(r, own_ct=bytes(ct)),) + batch.reports[1:]
        return dataclasses.replace(batch, reports=reps)
    return _relay_attack("client.server_alters_relayed_part", alter,
                         "committee_report_set_mismatch", seed)


@attack("client.server_swaps_relayed_parts", system="threshold",
        target="relay: each part is bound to its device",
        expected="aborted committee_report_set_mismatch, nothing released")
def server_swaps(seed: int) -> Outcome:
    """The server swaps helper 2's parts of two devices."""
    def alter(helper: int, batch: ReportBatch) -> ReportBatch:
        if helper != 2 or len(batch.reports) < 2:
            return batch
        a, b = batch.reports[0], batch.reports[1]
        reps = (dataclasses.replace(a, own_ct=b.own_ct),
                dataclasses.replace(b, own_ct=a.own_ct)) + batch.reports[2:]
        return dataclasses.replace(batch, reports=reps)
    return _relay_attack("client.server_swaps_relayed_parts", alter,
                         "committee_report_set_mismatch", seed)


def _accuse(member: int, code: int, row: int = 0) -> Callable[[int, np.ndarray], np.ndarray]:
    def lie(sender: int, codes: np.ndarray) -> np.ndarray:
        if sender == member and codes.size > row:
            codes[row] = code
        return codes
    return lie


@attack("client.helper_accuses_valid_report", system="threshold",
        target="agreement: a member's accusation about its own parts cannot be checked "
               "by the others",
        expected="visible: the accused report is dropped with helper 1 named as the accuser "
                 "in every member's view (a drop, never a change of the vote)",
        kind="measured")
def helper_accuses(seed: int) -> Outcome:
    """Helper 1 says a valid report's part does not open its commitment."""
    name = "client.helper_accuses_valid_report"
    res = _run(Deviation(intake_verdicts=_accuse(1, Verdict.INCONSISTENT_PART)), seed)
    named = all(any(u == 0 and r == "inconsistent_part" and who == "helper1"
                    for u, r, who in res.views[m]["intake"]["dropped"])
                for m in ("server", "helper1", "helper2"))
    ok = named and res.release.same_as(honest_release(_spec(), _choice(), np.array([0])))
    return Outcome(name, _expected_of(name),
                   f"accusations per member: {res.views['server']['intake']['accusations']}; "
                   f"released {dict(res.release.counts or {})}", ok,
                   leakage={"accused_by_helper1": res.views["server"]["intake"]
                            ["accusations"][1]})


@attack("client.helper_lies_public_check", system="threshold",
        target="agreement: every member computes the public checks on the same bytes",
        expected="aborted committee_verdict_mismatch, nothing released")
def helper_lies(seed: int) -> Outcome:
    """Helper 1 says a valid report's signature does not verify."""
    return _aborts("client.helper_lies_public_check",
                   Deviation(intake_verdicts=_accuse(1, Verdict.BAD_SIGNATURE)),
                   "committee_verdict_mismatch", seed)


class _ErringParty(ValidityParty):
    """A member that adds 1 to its product share in the squaring layer."""

    def layer_message(self) -> CommitteeMessage:
        msg = super().layer_message()
        if self._layer == 1:
            p = msg.payload.copy()
            p[0] = F.add(p[:1], np.ones(1, dtype=np.uint64))[0]
            msg = dataclasses.replace(msg, payload=p)
        return msg


@attack("client.helper_equivocates_verdicts", system="threshold",
        target="agreement: every member echoes the three verdict vectors it holds",
        expected="aborted committee_verdict_equivocation, nothing released")
def helper_equivocates(seed: int) -> Outcome:
    """Helper 1 accuses a valid report to the server only (and says nothing of it to
    helper 2), so that the two would check different sets."""
    name = "client.helper_equivocates_verdicts"

    def hook(step: str, sender: int, recipient: int, msg: Any) -> Any:
        if step == "verdicts" and sender == 1 and recipient == 0:
            p = bytearray(msg.payload)
            p[32] = Verdict.INCONSISTENT_PART
            return dataclasses.replace(msg, payload=bytes(p))
        return msg

    return _aborts(name, Deviation(intake_hook=hook), "committee_verdict_equivocation", seed)


@attack("client.helper_errs_in_check", system="threshold",
        target="validity check: every multiplication verified (Chida et al., CRYPTO 2018)",
        expected="aborted committee_verification_failed before any validity bit is opened")
def helper_errs(seed: int) -> Outcome:
    """Helper 2 adds an error to a product of the validity check (to pass an invalid
    report or fail a valid one)."""
    return _aborts("client.helper_errs_in_check",
                   Deviation(validity_classes=[ValidityParty, ValidityParty, _ErringParty]),
                   "committee_verification_failed", seed)


@attack("client.sybils_count_once", system="threshold",
        target="validated reports: a valid vote is a valid vote",
        expected="limit: k corrupted clients that each cast one valid vote for a candidate "
                 "nobody holds add exactly k to its count (theta - 1 of them stay hidden)",
        kind="measured")
def sybils(seed: int) -> Outcome:
    """``theta`` corrupted clients each vote once for a candidate nobody holds."""
    name = "client.sybils_count_once"
    corrupt = CorruptClients("one-vote", per_round=THETA, target=TARGET, seed=seed)
    res = ThresholdTransport(simulate=True, corrupt=corrupt).run_round(
        _spec(), Votes(_choice()), np.random.default_rng(seed))
    counts = dict(res.release.counts or {})
    ok = counts.get(TARGET) == THETA
    return Outcome(name, _expected_of(name),
                   f"{THETA} sybils: {TARGET} released with {counts.get(TARGET)}", ok,
                   leakage={"target_count": counts.get(TARGET, 0)})


def _expected_of(name: str) -> str:
    """The expectation registered for ``name``."""
    from protocol.studies.attacks import ATTACKS

    return ATTACKS[name].expected


@attack("client.on_every_transport", system="threshold",
        target="the same corrupted client over every transport: only the committee's "
               "validated input (and the plaintext reference, which sees every vote) "
               "checks a client's input",
        expected="limit outside the default: one client entering theta at a candidate "
                 "nobody holds gets it released over secure aggregation and over the "
                 "committee fed by secure aggregation; the shuffler, one envelope per "
                 "device, counts it as one vote; plaintext and the validated committee "
                 "drop it (invalid_vote)",
        kind="measured")
def on_every_transport(seed: int) -> Outcome:
    """One corrupted client entering ``theta`` at a candidate nobody holds, over each
    transport."""
    from protocol.core.transports import get_transport

    name = "client.on_every_transport"
    corrupt = CorruptClients("theta-at-target", per_round=1, target=TARGET, seed=seed)
    forged: dict[str, bool] = {}
    for label, tname, opts in (("plain", "plain", {}),
                               ("secagg", "secagg", {"simulate": True}),
                               ("shuffler", "shuffler", {"simulate": True}),
                               ("threshold (secagg input)", "threshold",
                                {"simulate": True, "committee_input": "secagg"}),
                               ("threshold (default)", "threshold", {"simulate": True})):
        res = get_transport(tname, corrupt=corrupt, **opts).run_round(
            _spec(), Votes(_choice()), np.random.default_rng(seed))
        forged[label] = TARGET in (res.release.items or ())
    ok = forged == {"plain": False, "secagg": True, "shuffler": False,
                    "threshold (secagg input)": True, "threshold (default)": False}
    return Outcome(name, _expected_of(name),
                   "forged candidate released: " + ", ".join(
                       f"{k} {'yes' if v else 'no'}" for k, v in forged.items()), ok,
                   leakage={"forged_released": forged})
