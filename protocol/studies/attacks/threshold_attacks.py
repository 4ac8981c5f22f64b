"""Attacks on the thresholding committee (server + two helpers) of the ``threshold``
transport (:mod:`protocol.core.transports.threshold`, :mod:`protocol.core.committee`).

Theory of operation
-------------------
Each attack runs the honest transport on the votes ``[10, 2, 1, 0, 5]`` at
``theta = 3`` (18 clients, a TrieHH++ round that reveals passing counts, so a wrongly
passing position would have its count opened) and plays one or two committee members.
Under the default (malicious) model the transport's :class:`~protocol.core.transports.
threshold.Deviation` switches and the committee hook make the server or a helper
deviate: it shifts its copy of ``S`` or ``-R_h`` at a sub-threshold position (and
skips its own checks, as a cheater would), makes helper 2's replica take an altered
masked input, enters another blinding vector than its seed gives or hands its auditor
another seed, adds an error to a multiplication layer, opens a wrong value, or replays
a committee message of another round, forwards helper 1 an altered copy of helper 2's
exchange, or -- running TrieHH over the transport -- forces a device into a round's
sample, redraws or reuses a sample, or reveals another beacon value than it committed
to (:mod:`protocol.core.sample_beacon`). Every one is expected to end in a named abort
with nothing released (:mod:`protocol.core.committee.verified`,
:mod:`protocol.core.committee.binding`). The semi-honest option's limits stay measured:

* :func:`opens_sub_threshold` -- helper 1 flips the pass bit of a sub-threshold
  candidate in both its opening messages, so that the count of that candidate would be
  opened next. Every member receives the component it lacks from *both* others and
  compares the copies (Araki et al., "High-Throughput Semi-Honest Secure Three-Party
  Computation with an Honest Majority", CCS 2016): detected, the round aborts with
  ``committee_open_mismatch``, nothing is released.
* :func:`wrong_share` -- under ``threat="semi-honest"``, helper 1 enters the committee
  with its share ``-R_1`` plus ``theta`` at a sub-threshold position, consistently (it
  re-randomises and sends the wrong share as if it were right). The semi-honest
  protocol has no input check: the release changes undetected, and since the helper
  knows its offset it learns that candidate's real count from the opened one.
  Measured (outside the semi-honest model; the default catches it).
* :func:`collusion` -- two members pool their views. In replicated sharing each member
  holds two of the three components, so any two hold all three and reconstruct every
  count, sub-threshold ones included. Measured (outside the honest-majority model).

The trust model -- at most one of the three members corrupted -- is stated in
``docs/threshold.md`` and ``docs/security.md``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from protocol.core.committee import CommitteeAborted, ring_bits, run_committee
from protocol.core.committee import field as F
from protocol.core.committee.verified import CommitteeMessage, VerifiedParty
from protocol.core.contract import AggregationAborted, Kind, RoundSpec, Votes
from protocol.core.transports.threshold import Deviation, ThresholdTransport
from secagg.messages import MaskedInput
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


def _honest(seed: int, reveal_counts: bool = True, threat: str = "malicious") -> Any:
    return ThresholdTransport(simulate=True, threat=threat).run_round(
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
        target="the semi-honest option (threat='semi-honest'): no check of a member's "
               "input share",
        expected="limit: a helper that adds theta to its share at a sub-threshold position "
                 "changes the release undetected (the candidate passes) and learns the "
                 "candidate's real count (opened minus theta); nobody aborts",
        kind="measured")
def wrong_share(seed: int) -> Outcome:
    """A helper enters the committee with a wrong (but consistently used) share, under
    the semi-honest option."""
    honest = _honest(seed, threat="semi-honest")
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
        total = F.add(F.add(comps[0], comps[1]), comps[2])
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


# --------------------------------------------- the default (malicious) model


class SkipsChecks(VerifiedParty):
    """A member that computes with whatever copies it likes and ignores the digest of
    its shared component (a cheater does not check itself)."""

    def receive_setup(self, key: Any, digest: Any) -> None:
        self._prev_key = self._take(key, "key", self.prev, nbytes=32)


def _shift_at(member: int, which: int, amount: int = THETA) -> Any:
    """``Deviation.components``: ``member`` adds ``amount`` at ``TARGET`` to its copy
    number ``which`` (0: first, 1: second)."""
    def change(i: int, pair: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if i != member:
            return pair
        out = [pair[0].copy(), pair[1].copy()]
        out[which][TARGET] = F.add(out[which][TARGET:TARGET + 1],
                                   np.array([amount], np.uint64))[0]
        return out[0], out[1]
    return change


def _cheater(member: int) -> list[type]:
    return [SkipsChecks if i == member else VerifiedParty for i in range(3)]


def _detected(name: str, expected: str, reasons: tuple[str, ...], seed: int,
              *, deviation: Deviation | None = None, hook: Any = None,
              bits_may_open: bool = False, committee_input: str = "reports") -> Outcome:
    """Run the deviating round; passed when it aborts with one of ``reasons`` before
    any pass bit is opened (``bits_may_open``: the deviation is in an opening after
    the bits) and nothing is released. ``committee_input="secagg"``: the deviation is
    of the committee fed by secure aggregation (the replica and the audits)."""
    steps: list[str] = []

    def watch(step: str, sender: int, recipient: int, payload: Any) -> Any:
        steps.append(step)
        return hook(step, sender, recipient, payload) if hook is not None else payload

    try:
        res = ThresholdTransport(simulate=True, deviation=deviation,
                                 committee_hook=watch,
                                 committee_input=committee_input).run_round(
            _spec(), _votes(), np.random.default_rng(seed))
    except AggregationAborted as exc:
        bits = "open-bits" in steps
        counts = "open-counts" in steps
        ok = exc.reason in reasons and (bits_may_open or not bits) and not (
            counts and not bits_may_open)
        return Outcome(name, expected,
                       f"aborted {exc.reason}; pass bits opened: {bits}; counts opened: "
                       f"{counts}", ok, {"server": exc.reason, "helper1": exc.reason,
                                         "helper2": exc.reason},
                       {"bits_opened": bits, "counts_opened": counts})
    return Outcome(name, expected, f"released {dict(res.release.counts or {})}", False,
                   {}, {"released": dict(res.release.counts or {})})


_EARLY = ("committee_verification_failed", "committee_open_mismatch")


@attack("threshold.server_shifts_blinded_sum", system="threshold",
        target="verified committee: the server computes with its component + theta at a "
               "sub-threshold position and skips its own input check",
        expected="the copies of the two honest members define the counts: verification "
                 "(or the check value's opening) fails, the round aborts before any bit "
                 "is opened, nothing is released")
def server_shifts_blinded_sum(seed: int) -> Outcome:
    """The server shifts its own committee share (it learned every count before)."""
    return _detected("threshold.server_shifts_blinded_sum",
                     "aborted before the bits; nothing released", _EARLY, seed,
                     deviation=Deviation(components=_shift_at(0, 0),
                                         party_classes=_cheater(0)))


@attack("threshold.helper_shifts_blinding", system="threshold",
        target="verified committee: helper 1 computes with its component + theta at a "
               "sub-threshold position and skips its own input check",
        expected="verification (or the check value's opening) fails; aborted before any "
                 "bit is opened; nothing released")
def helper_shifts_blinding(seed: int) -> Outcome:
    """Helper 1 shifts its blinding share (the semi-honest committee let it through)."""
    return _detected("threshold.helper_shifts_blinding",
                     "aborted before the bits; nothing released", _EARLY, seed,
                     deviation=Deviation(components=_shift_at(1, 0),
                                         party_classes=_cheater(1)))


@attack("threshold.member_holds_other_share", system="threshold",
        target="input digest: a member's copy of a shared component differs from the "
               "other holder's",
        expected="the other holder names it at set-up: committee_input_mismatch, nothing "
                 "computed")
def member_holds_other_share(seed: int) -> Outcome:
    """Helper 2 holds a shifted copy of ``S`` (checked by the server on receipt of its
    digest: the server's check is the honest one here)."""
    return _detected("threshold.member_holds_other_share",
                     "aborted committee_input_mismatch at set-up",
                     ("committee_input_mismatch",), seed,
                     deviation=Deviation(components=_shift_at(2, 1)))


def _forge_input(message: Any) -> Any:
    """A masked input from client 0 with ``theta`` added at ``TARGET``, its signature
    kept (the server cannot sign for the client)."""
    if isinstance(message, MaskedInput) and message.sender == 0:
        vec = message.vector().copy()
        vec[TARGET] = (int(vec[TARGET]) + THETA) % message.modulus
        return MaskedInput.from_vector(0, vec, message.modulus).signed(message.signature)
    return message


@attack("threshold.server_equivocates_blinded_sum", system="threshold",
        target="replica of the server: helper 2 unmasks S from the client messages the "
               "server forwards, each masked input signed by its client (the committee fed by secure aggregation, committee_input='secagg')",
        expected="the altered masked input fails its signature at the replica, which "
                 "cannot unmask: committee_replica_failed, nothing released")
def server_equivocates_blinded_sum(seed: int) -> Outcome:
    """The server forwards helper 2 a client's masked input shifted by ``theta``."""
    return _detected("threshold.server_equivocates_blinded_sum",
                     "aborted committee_replica_failed", ("committee_replica_failed",), seed,
                     deviation=Deviation(replica_feed=_forge_input),
                     committee_input="secagg")


@attack("threshold.helper_enters_other_blinding", system="threshold",
        target="replay audit: each helper's secure-aggregation client is replayed from "
               "its seed by its auditor (the committee fed by secure aggregation, committee_input='secagg')",
        expected="helper 2 enters R2 + theta into the sum: its replayed masked input "
                 "differs, committee_helper_audit_failed, nothing released")
def helper_enters_other_blinding(seed: int) -> Outcome:
    """Helper 2 enters a shifted blinding vector into secure aggregation."""
    def shifted(h: int, blind: np.ndarray) -> np.ndarray:
        if h != 1:
            return blind
        out = blind.copy()
        out[TARGET] = F.add(out[TARGET:TARGET + 1], np.array([THETA], np.uint64))[0]
        return out
    return _detected("threshold.helper_enters_other_blinding",
                     "aborted committee_helper_audit_failed",
                     ("committee_helper_audit_failed",), seed,
                     deviation=Deviation(secagg_input=shifted),
                     committee_input="secagg")


@attack("threshold.helper_hands_other_seed", system="threshold",
        target="replay audit: the seed a helper hands its auditor must reproduce every "
               "message it sent (the committee fed by secure aggregation, committee_input='secagg')",
        expected="helper 1 hands the server another seed: the replay differs, "
                 "committee_helper_audit_failed, nothing released")
def helper_hands_other_seed(seed: int) -> Outcome:
    """Helper 1 hands its auditor (the server) a seed it did not use."""
    return _detected("threshold.helper_hands_other_seed",
                     "aborted committee_helper_audit_failed",
                     ("committee_helper_audit_failed",), seed,
                     deviation=Deviation(seed=lambda h, s: bytes(32) if h == 0 else s),
                     committee_input="secagg")


def _mult_error(sender: int) -> Any:
    def hook(step: str, frm: int, to: int, payload: Any) -> Any:
        if step == "mult-1" and frm == sender and isinstance(payload, np.ndarray):
            out = payload.copy()
            out[TARGET] = F.add(out[TARGET:TARGET + 1], np.array([1], np.uint64))[0]
            return out
        return payload
    return hook


@attack("threshold.server_multiplication_error", system="threshold",
        target="verified multiplications (Chida et al. 2018): the server adds an error "
               "to a product in the comparison",
        expected="aborted before any bit is opened (verification or the check's opening)")
def server_multiplication_error(seed: int) -> Outcome:
    """The server adds 1 to a product of the comparison's tree."""
    return _detected("threshold.server_multiplication_error", "aborted before the bits",
                     _EARLY, seed, hook=_mult_error(0))


@attack("threshold.helper_multiplication_error", system="threshold",
        target="verified multiplications: a helper adds an error to a product",
        expected="aborted before any bit is opened")
def helper_multiplication_error(seed: int) -> Outcome:
    """Helper 2 adds 1 to a product of the comparison's tree."""
    return _detected("threshold.helper_multiplication_error", "aborted before the bits",
                     _EARLY, seed, hook=_mult_error(2))


def _open_error(step: str, sender: int) -> Any:
    def hook(s: str, frm: int, to: int, payload: Any) -> Any:
        if s == step and frm == sender and isinstance(payload, np.ndarray) and payload.size:
            out = payload.copy()
            out[0] = F.add(out[:1], np.array([1], np.uint64))[0]
            return out
        return payload
    return hook


@attack("threshold.server_opens_wrong_value", system="threshold",
        target="checked openings: the check value and the counts arrive from both "
               "other members",
        expected="the server sends a wrong copy of the check value: "
                 "committee_open_mismatch before any bit is opened")
def server_opens_wrong_value(seed: int) -> Outcome:
    """The server sends a wrong component while the check value is opened."""
    return _detected("threshold.server_opens_wrong_value", "aborted before the bits",
                     ("committee_open_mismatch",), seed, hook=_open_error("open-check", 0))


@attack("threshold.helper_opens_wrong_count", system="threshold",
        target="checked openings of the passing counts",
        expected="helper 1 sends a wrong count component: committee_open_mismatch, "
                 "no count released")
def helper_opens_wrong_count(seed: int) -> Outcome:
    """Helper 1 sends a wrong component while the passing counts are opened."""
    return _detected("threshold.helper_opens_wrong_count", "aborted at the counts",
                     ("committee_open_mismatch",), seed, hook=_open_error("open-counts", 1),
                     bits_may_open=True)


@attack("threshold.replayed_committee_message", system="threshold",
        target="every committee message carries its round's context",
        expected="helper 1 replays its multiplication message of an earlier round: "
                 "committee_replayed_message before any bit is opened")
def replayed_committee_message(seed: int) -> Outcome:
    """Helper 1 sends, in this round, the message it sent in an earlier one."""
    earlier: dict[str, Any] = {}

    def record(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if step == "mult-1" and sender == 1:
            earlier[f"{recipient}"] = payload
        return payload

    before = ThresholdTransport(simulate=True, committee_hook=record).run_round(
        RoundSpec("threshold-attack-earlier", 0, Kind.VOTE, candidates=CANDS, theta=THETA,
                  reveal_counts=True), _votes(), np.random.default_rng(seed + 1))
    old_context = before.views["helper1"]["committee"]["context"]

    def replay(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if step == "mult-1" and sender == 1:
            return CommitteeMessage(old_context, step, sender, recipient,
                                    earlier[f"{recipient}"])
        return payload

    return _detected("threshold.replayed_committee_message", "aborted replayed_message",
                     ("committee_replayed_message",), seed, hook=replay)


@attack("threshold.party_with_another_keys", system="threshold",
        target="keys per party: each process checks its key directory holds no other "
               "party's secret (tls.check_own_keys)",
        expected="the server started with helper 1's directory, helper 1 with helper 2's, "
                 "helper 2 with the server's, a client process with the server's: each "
                 "refused before it opens a connection (ForeignKeyError naming the file)")
def party_with_another_keys(seed: int) -> Outcome:
    """Every party is started with another party's key directory."""
    import io
    import tempfile

    from protocol.core.net import tls
    from protocol.core.net.processes import (
        helper_process, threshold_client_process, threshold_serve_process,
    )
    from protocol.core.net.shuffle import ShuffleRound
    from protocol.core.net.threshold_net import ThresholdRound

    n = 6
    rnd = ThresholdRound(ShuffleRound(n, candidates=4, theta=2, round=seed))
    refused: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="fedhh-attack-keys-") as root:
        dirs = {p: str(d) for p, d in tls.make_party_keys(root, n, committee=True).items()}
        out = io.StringIO()
        tries = {
            "server with helper1's": lambda: threshold_serve_process(rnd, dirs["helper1"],
                                                                     out=out),
            "helper1 with helper2's": lambda: helper_process(
                1, rnd, dirs["helper2"], "127.0.0.1", 9, ("127.0.0.1", 9), out=out),
            "helper2 with the server's": lambda: helper_process(
                2, rnd, dirs["server"], "127.0.0.1", 9, ("127.0.0.1", 9), out=out),
            "clients with the server's": lambda: threshold_client_process(
                rnd, dirs["server"], "127.0.0.1", 9, [0], out=out),
        }
        for name, start in tries.items():
            try:
                start()
                refused[name] = "started"
            except tls.ForeignKeyError as exc:
                refused[name] = f"refused: {str(exc).split(';')[0]}"
        started_output = out.getvalue()
    ok = all(v.startswith("refused") for v in refused.values()) and not started_output
    return Outcome("threshold.party_with_another_keys",
                   "every start refused before any connection",
                   "; ".join(f"{k}: {v.split(': ', 1)[0]}" for k, v in refused.items()), ok,
                   {k: v for k, v in refused.items()}, {"started": sum(
                       v == "started" for v in refused.values())})


def _forge_helper_input(outbound: list[Any]) -> list[Any]:
    """Helper 2's masked input in the forwarded copy, shifted by ``theta`` at ``TARGET``
    (its signature kept: the server cannot sign for helper 2)."""
    out = list(outbound)
    for k, m in enumerate(out):
        if isinstance(m, MaskedInput):
            vec = m.vector().copy()
            vec[TARGET] = (int(vec[TARGET]) + THETA) % m.modulus
            out[k] = MaskedInput.from_vector(m.sender, vec, m.modulus).signed(m.signature)
    return out


@attack("threshold.server_alters_helper_exchange", system="threshold",
        target="replay audit: helper 1 audits helper 2 on the copy of helper 2's exchange "
               "with the server that the server forwards (the committee fed by secure aggregation, committee_input='secagg')",
        expected="the server shifts helper 2's masked input in that copy: helper 1's "
                 "replay from helper 2's seed (which the server never sees) differs, "
                 "committee_helper_audit_failed, nothing released")
def server_alters_helper_exchange(seed: int) -> Outcome:
    """The server forwards helper 1 an altered copy of helper 2's exchange."""
    return _detected("threshold.server_alters_helper_exchange",
                     "aborted committee_helper_audit_failed",
                     ("committee_helper_audit_failed",), seed,
                     deviation=Deviation(helper_exchange=lambda i, o: (i, _forge_helper_input(o))),
                     committee_input="secagg")


# ----------------------------------------------------------------- the round's sample

#: a small TrieHH population for the sampling attacks: 400 users, m = 40 per round
_SAMPLE_N, _SAMPLE_GAMMA = 400, 2.0


def _sample_population() -> tuple[Any, Any]:
    from mechanisms.prefix_tree import UnitAlphabet
    from mechanisms.triehh import encode_population

    a = UnitAlphabet("abc", 1)
    vocab = ["ab", "abc", "ba", "c"]
    items = np.repeat(np.arange(len(vocab)), [200, 120, 60, 20])
    data = encode_population(vocab, np.arange(_SAMPLE_N + 1), items,
                             np.ones(_SAMPLE_N, np.int64), a, 4)
    return data, a


def _sampled_run(name: str, expected: str, reasons: tuple[str, ...], seed: int,
                 mechanism: type, deviation: Deviation | None = None,
                 rounds_before: int = 0) -> Outcome:
    """TrieHH (or a deviating subclass) over the default threshold transport; passed
    when round ``rounds_before + 1`` aborts with one of ``reasons`` before any client's
    session starts (``rounds_before`` round records), and the honest sample of round 1
    is the ``plain`` transport's."""
    from mechanisms.triehh import TrieHH, TrieHHConfig
    from protocol.core.transports.plain import PlainTransport

    data, a = _sample_population()
    cfg = TrieHHConfig(4, _SAMPLE_GAMMA, 4)
    mech = mechanism(data, a, cfg, ThresholdTransport(simulate=True, deviation=deviation),
                     np.random.default_rng(seed))
    # the honest draw of round 1 over the committee is the plain transport's
    honest = [TrieHH(data, a, cfg, t, np.random.default_rng(seed))
              for t in (ThresholdTransport(simulate=True), PlainTransport())]
    for h in honest:
        h._level = 1
    same = bool(np.array_equal(honest[0].sample(), honest[1].sample()))
    try:
        records = list(mech.rounds())
    except AggregationAborted as exc:
        ok = exc.reason in reasons and len(mech._records) == rounds_before and same
        return Outcome(name, expected, f"aborted {exc.reason} in round "
                       f"{len(mech._records) + 1} before any vote; "
                       f"the honest committee's sample is plain's: {same}",
                       ok, {"server": exc.reason, "helper1": exc.reason,
                            "helper2": exc.reason, "devices": exc.reason},
                       {"rounds_released": 0, "honest_sample_is_plain": same})
    return Outcome(name, expected, f"ran {len(records)} rounds", False, {},
                   {"rounds_released": len(records)})


def _forcing_class() -> type:
    from mechanisms.triehh import TrieHH

    class ForcingTrieHH(TrieHH):
        target = 0

        def sample(self) -> np.ndarray:
            s = super().sample()
            # device 0, or the first device the beacon left out if it drew device 0
            s[0] = self.target if self.target not in s else np.setdiff1d(
                np.arange(self.n), s)[0]
            return s

    return ForcingTrieHH


def _redrawing_class() -> type:
    from mechanisms.triehh import TrieHH

    class RedrawingTrieHH(TrieHH):
        """Asks the committee for a second beacon in the same round (to keep the draw
        it likes better)."""

        def sample(self) -> np.ndarray:
            first = super().sample()
            super().sample()
            return first

    return RedrawingTrieHH


def _reusing_class() -> type:
    from mechanisms.triehh import TrieHH

    class ReusingTrieHH(TrieHH):
        """Presents round 1's sample (and its beacon) again in round 2."""

        def sample(self) -> np.ndarray:
            users = super().sample()
            if self._level == 1:
                self._first = (self._drawn, users.copy())
                return users
            self._drawn, users = self._first
            return users.copy()

    return ReusingTrieHH


@attack("threshold.server_forces_device_into_sample", system="threshold",
        target="sample beacon: a round's users are the m smallest keystream words under "
               "the seed the three members fixed by commit-then-reveal",
        expected="the server replaces a sampled user by a chosen device: the helpers and "
                 "devices recompute the sample, committee_sample_not_from_seed, round 1 "
                 "aborts before any vote")
def server_forces_device_into_sample(seed: int) -> Outcome:
    """TrieHH's server puts a chosen device into the round's sample."""
    return _sampled_run("threshold.server_forces_device_into_sample",
                        "aborted committee_sample_not_from_seed",
                        ("committee_sample_not_from_seed",), seed, _forcing_class())


@attack("threshold.server_redraws_sample", system="threshold",
        target="sample beacon: the committee runs one beacon per round, rounds in order",
        expected="the server asks for a second beacon in round 1 (to keep the draw it "
                 "likes): committee_sample_redrawn, round 1 aborts before any vote")
def server_redraws_sample(seed: int) -> Outcome:
    """The server re-draws a round's sample to choose between draws."""
    return _sampled_run("threshold.server_redraws_sample",
                        "aborted committee_sample_redrawn",
                        ("committee_sample_redrawn",), seed, _redrawing_class())


@attack("threshold.server_reuses_sample", system="threshold",
        target="sample beacon: a round's sample must come from that round's beacon",
        expected="the server presents round 1's sample and beacon in round 2: "
                 "committee_sample_not_from_beacon, round 2 aborts before any vote")
def server_reuses_sample(seed: int) -> Outcome:
    """The server keeps round 1's sample for round 2."""
    return _sampled_run("threshold.server_reuses_sample",
                        "aborted committee_sample_not_from_beacon",
                        ("committee_sample_not_from_beacon",), seed, _reusing_class(),
                        rounds_before=1)


def _other_value(who: str) -> Any:
    def reveal(member: str, value: bytes) -> bytes:
        return bytes(32) if member == who else value
    return reveal


@attack("threshold.server_reveals_other_beacon_value", system="threshold",
        target="sample beacon: every revealed value must open its member's commitment",
        expected="the server reveals another value than it committed to (to steer the "
                 "seed after seeing the helpers'): committee_sample_commitment_mismatch, "
                 "round 1 aborts before any vote")
def server_reveals_other_beacon_value(seed: int) -> Outcome:
    """The server changes its beacon value after the helpers reveal theirs."""
    from mechanisms.triehh import TrieHH

    return _sampled_run("threshold.server_reveals_other_beacon_value",
                        "aborted committee_sample_commitment_mismatch",
                        ("committee_sample_commitment_mismatch",), seed, TrieHH,
                        Deviation(beacon_reveal=_other_value("server")))


@attack("threshold.helper_reveals_other_beacon_value", system="threshold",
        target="sample beacon: every revealed value must open its member's commitment",
        expected="helper 2 reveals another value than it committed to: "
                 "committee_sample_commitment_mismatch, round 1 aborts before any vote")
def helper_reveals_other_beacon_value(seed: int) -> Outcome:
    """Helper 2 changes its beacon value after the others reveal theirs."""
    from mechanisms.triehh import TrieHH

    return _sampled_run("threshold.helper_reveals_other_beacon_value",
                        "aborted committee_sample_commitment_mismatch",
                        ("committee_sample_commitment_mismatch",), seed, TrieHH,
                        Deviation(beacon_reveal=_other_value("helper2")))


# --------------------------------------------------------------- restarts of the job
#: the restart attack's deployment: n = 200 users, m = 20 per round (gamma = 1.415),
#: up to 20 restarts per campaign, this many campaigns per setting
RESTART_N, RESTART_GAMMA, RESTARTS, RESTART_CAMPAIGNS = 200, 1.415, 20, 500
#: the device the server wants in round 1's sample
RESTART_TARGET = 0


class _Abandon(Exception):
    """The restarting server leaves a job whose round-1 sample misses the target."""


class _Included(Exception):
    """The target is in a round-1 sample the committee accepted."""


def _restart_population() -> tuple[Any, Any]:
    from mechanisms.prefix_tree import UnitAlphabet
    from mechanisms.triehh import encode_population

    a = UnitAlphabet("ab", 1)
    vocab = ["ab", "ba"]
    items = np.repeat(np.arange(len(vocab)), [RESTART_N // 2, RESTART_N - RESTART_N // 2])
    data = encode_population(vocab, np.arange(RESTART_N + 1), items,
                             np.ones(RESTART_N, np.int64), a, 2)
    return data, a


def restart_campaigns(seed: int, keep_ledgers: bool, campaigns: int = RESTART_CAMPAIGNS,
                      restarts: int = RESTARTS) -> dict[str, Any]:
    """``campaigns`` independent deployments (a fresh :class:`ThresholdTransport` each,
    the default malicious committee, simulated keys); in each, a server that runs
    TrieHH and, whenever round 1's beacon leaves :data:`RESTART_TARGET` out, abandons
    the job and starts it again, up to ``restarts`` jobs. ``keep_ledgers`` is the
    defence (the helpers' ledgers outlive the job). Returns the target's inclusion
    rate and what the committee refused."""
    from mechanisms.triehh import TrieHH, TrieHHConfig

    data, a = _restart_population()
    cfg = TrieHHConfig(2, RESTART_GAMMA, 2, task="restart-target")

    class RestartingTrieHH(TrieHH):
        def sample(self) -> np.ndarray:
            users = super().sample()
            if RESTART_TARGET in users:
                raise _Included  # the server keeps this job and runs the round
            raise _Abandon

    included = refused = beacons = 0
    reasons: dict[str, int] = {}
    m = None
    for c in range(campaigns):
        transport = ThresholdTransport(simulate=True, keep_ledgers=keep_ledgers)
        for attempt in range(restarts):
            mech = RestartingTrieHH(data, a, cfg, transport,
                                    np.random.default_rng([seed, c, attempt]))
            m = mech.m
            try:
                next(mech.rounds())
            except _Included:
                beacons += 1
                included += 1
                break
            except _Abandon:
                beacons += 1
                continue
            except AggregationAborted as exc:  # the committee refused the restart
                refused += 1
                reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
                break
    return {"campaigns": campaigns, "restarts": restarts, "n": RESTART_N, "m": m,
            "inclusion_rate": included / campaigns, "included": included,
            "beacons": beacons, "refused_restarts": refused, "refusals": reasons}


def restart_outcome(seed: int, keep_ledgers: bool = True,
                    campaigns: int = RESTART_CAMPAIGNS) -> Outcome:
    """The restart attack measured with the helpers' ledgers kept (``keep_ledgers``,
    the default deployment) and without (helpers that forget: the undefended
    baseline). Passed only when, with ``keep_ledgers``'s setting, the target's
    inclusion rate is at most ``m/n`` plus three standard errors and every restart
    past the budget was refused."""
    name = "threshold.server_restarts_for_target"
    tried = restart_campaigns(seed, keep_ledgers, campaigns)
    base = restart_campaigns(seed, not keep_ledgers, campaigns) if keep_ledgers else tried
    m, n, c = tried["m"], RESTART_N, tried["campaigns"]
    p = m / n
    bound = p + 3 * (p * (1 - p) / c) ** 0.5
    predicted = 1 - (1 - p) ** RESTARTS
    rate = tried["inclusion_rate"]
    every_refused = tried["refused_restarts"] == c - tried["included"] and \
        tried["beacons"] == c
    ok = rate <= bound and every_refused
    expected = (f"with the helpers' ledgers the target's inclusion rate is at most m/n = "
                f"{p:.2f} plus noise (bound {bound:.3f}) and every restart past the budget "
                f"is refused (committee_abandon_budget_spent); without them it is about "
                f"1 - (1 - m/n)^{RESTARTS} = {predicted:.3f}")
    off = base if keep_ledgers else tried
    on = tried if keep_ledgers else None
    observed = (f"{'ledgers kept' if keep_ledgers else 'ledgers forgotten (defence off)'}: "
                f"inclusion {rate:.3f} over {c} campaigns ({tried['included']} included, "
                f"{tried['beacons']} beacons, {tried['refused_restarts']} restarts refused "
                f"{tried['refusals']})")
    if keep_ledgers:
        observed += (f"; defence off: inclusion {off['inclusion_rate']:.3f} "
                     f"({off['beacons']} beacons, predicted {predicted:.3f})")
    return Outcome(name, expected, observed, ok,
                   {"helpers": tried["refusals"] or "no refusal"},
                   {"inclusion_rate_defended": on["inclusion_rate"] if on else None,
                    "inclusion_rate_undefended": off["inclusion_rate"],
                    "bound_defended": bound, "m_over_n": p,
                    "predicted_undefended": predicted, "campaigns": c,
                    "restarts": RESTARTS, "n": n, "m": m,
                    "refused_restarts": tried["refused_restarts"],
                    "beacons_defended": on["beacons"] if on else None,
                    "beacons_undefended": off["beacons"]})


@attack("threshold.server_restarts_for_target", system="threshold",
        target="the helpers' ledgers (protocol.core.job_ledger): a job abandoned after a "
               "beacon is counted per task and the task's further jobs are refused past "
               "the budget (default 0)",
        expected="a server that abandons TrieHH's job whenever round 1's sample misses a "
                 "chosen device and restarts it (n = 200, m = 20, up to 20 jobs) gets the "
                 "device in at most m/n of its campaigns plus noise, every restart past "
                 "the budget refused committee_abandon_budget_spent (without the ledgers: "
                 "about 1 - 0.9^20 = 88%)")
def server_restarts_for_target(seed: int) -> Outcome:
    """The server restarts the job until a chosen device is in round 1's sample."""
    return restart_outcome(seed, keep_ledgers=True)


def restart_table(seed: int = 0, campaigns: int = RESTART_CAMPAIGNS) -> str:
    """The restart attack's measurement as a markdown table (docs/threshold.md)."""
    p = None
    rows = ["| helpers' ledgers | target's inclusion rate | 95% interval | beacons run | "
            "restarts refused | predicted |", "| --- | --- | --- | --- | --- | --- |"]
    for keep in (False, True):
        r = restart_campaigns(seed, keep, campaigns)
        p = r["m"] / r["n"]
        rate, c = r["inclusion_rate"], r["campaigns"]
        half = 1.96 * (rate * (1 - rate) / c) ** 0.5
        predicted = (f"1 - (1 - m/n)^{r['restarts']} = {1 - (1 - p) ** r['restarts']:.3f}"
                     if not keep else f"m/n = {p:.3f}")
        rows.append(f"| {'kept (default)' if keep else 'forgotten (before)'} | {rate:.3f} | "
                    f"{rate - half:.3f} .. {rate + half:.3f} | {r['beacons']} | "
                    f"{r['refused_restarts']} | {predicted} |")
    return "\n".join(rows)
