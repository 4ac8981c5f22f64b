"""The threshold transport's default input: validated reports (one process).

Theory of operation
-------------------
:meth:`ThresholdTransport.run_round <protocol.core.transports.threshold.
ThresholdTransport.run_round>` of a vote round under the malicious model hands the
round to :func:`run_report_round`, which plays every party in this process and passes
every message through the codec:

1. **Devices** (vectorised per batch): each sampled device makes its report
   (:func:`protocol.core.committee.reports.make_reports`): its vote shared among the
   three members, the helpers' parts encrypted to their keys, the whole bound to the
   round and signed with its roster key. A corrupted device
   (:mod:`protocol.core.corruption`) makes what its strategy says instead; a device
   that drops out (``dropout``) sends nothing.
2. **Intake** (:mod:`protocol.core.committee.intake`): the server relays each batch to
   the helpers, the three agree on it and on their verdicts, and drop by name what
   fails a check.
3. **Validity** (:mod:`protocol.core.committee.validity`): the sketch on verified
   multiplications, with the sketch vector opened after the agreement; the valid
   reports' components are summed by each member.
4. **Comparison** (:func:`protocol.core.committee.verified.run_verified_committee`) of
   the summed counts with ``theta``: only the pass bits (and passing counts) open.

The release is that of the valid reports alone; a round with fewer valid reports than
its minimum aborts (``too_few_valid_reports``). What each member saw, and every dropped
report with its reason and accuser, is in the views.

In one process each signature is checked once for all three members when they hold
the very same bytes (altered bytes are checked afresh), as the secure-aggregation
replica reuses the server's checks; a deployed member pays its own.
"""
from __future__ import annotations

import hashlib
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from protocol.core import codec
from protocol.core.committee import CommitteeAborted
from protocol.core.committee.intake import (
    IntakeMember, ReportBatch, batch_limits, batch_rows, report_limits,
)
from protocol.core.committee.reports import (
    DeviceReport, ReportContext, SharedWork, candidates_digest, make_reports,
)
from protocol.core.committee.rss import charged
from protocol.core.committee.validity import run_validity_check
from protocol.core.committee.verified import run_verified_committee
from protocol.core.contract import (
    AggregationAborted, Cost, RoundResult, RoundSpec, Votes,
)
from protocol.core.corruption import (
    P61, CorruptClients, corrupt_positions, corrupt_vector, forge_reports, record_round,
)
from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
from secagg import crypto

__all__ = ["run_report_round", "ReportKeys", "MIN_VALID_FRACTION", "compare"]

#: by default a round needs valid reports from at least half its sampled devices
MIN_VALID_FRACTION = 0.5
_MEMBERS = ("server", "helper1", "helper2")


class ReportKeys:
    """The long-term keys of a simulated deployment: each helper's X25519 key pair
    and each device's Ed25519 roster key, made on first use (from the OS, or with
    ``simulate`` from a fixed label: reproducible, *not* secret)."""

    def __init__(self, simulate: bool) -> None:
        self.simulate = simulate
        base = insecure_deterministic_randomness(0, "fedhh report keys") if simulate \
            else OsRandom()
        self._rand = base
        self.helpers = [crypto.x25519_keypair(base) for _ in range(2)]
        self._devices: dict[int, tuple[bytes, bytes]] = {}
        self._expanded: dict[int, bytes] = {}
        self._secret = bytes(32) if simulate else OsRandom().token_bytes(32)

    @property
    def helper_public(self) -> tuple[bytes, bytes]:
        return self.helpers[0][1], self.helpers[1][1]

    def device(self, user: int) -> tuple[bytes, bytes]:
        """``(signing seed, verify key)`` of a device."""
        pair = self._devices.get(user)
        if pair is None:
            seed = hashlib.sha256(b"fedhh device key\x00" + self._secret
                                  + int(user).to_bytes(8, "big")).digest()
            expanded = crypto.ed25519_expanded(seed)  # holds the public key too
            pair = (seed, expanded[32:])
            self._devices[user] = pair
            self._expanded[user] = expanded
        return pair

    def signing_key(self, user: int) -> bytes:
        """A device's expanded Ed25519 signing key (64 bytes, made once)."""
        key = self._expanded.get(user)
        if key is None:
            key = crypto.ed25519_expanded(self.device(user)[0])
            self._expanded[user] = key
        return key

    def roster(self) -> "_Roster":
        return _Roster(self)

    def forget(self) -> None:
        """Drop the devices' keys made so far (after a round): they are derived again,
        the same, when a device is sampled once more, so memory holds one round's
        devices, not every device a long run ever sampled."""
        self._devices.clear()
        self._expanded.clear()


class _Roster:
    """``user -> verify key`` for the members (a device never seen has no key)."""

    def __init__(self, keys: ReportKeys) -> None:
        self._keys = keys

    def __getitem__(self, user: int) -> bytes:
        pair = self._keys._devices.get(user)
        if pair is None:
            raise KeyError(user)
        return pair[1]


@dataclass
class _Clients:
    """The devices of one round: who they are, what they vote, who is corrupted."""

    ctx: ReportContext
    users: np.ndarray
    choice: np.ndarray
    corrupted: np.ndarray
    dropped: np.ndarray
    corrupt: CorruptClients | None
    keys: ReportKeys
    rand: Any
    spec: RoundSpec
    #: a vector strategy's input (field elements), for every corrupted device
    corrupt_vec: np.ndarray | None = None

    def batch(self, number: int, lo: int, hi: int) -> tuple[list[bytes], SharedWork, float]:
        """The frames the devices at positions ``lo..hi`` send the server, the batch's
        shared work (their seed expansions, which the members reuse) and the CPU
        seconds the devices spent (this thread's: batches are made in device threads,
        beside the members' work on the one before). Each batch has its own
        randomness (a child stream per batch with ``simulate``), so the frames do not
        depend on how many threads make them."""
        t0 = time.thread_time()
        shared = SharedWork()
        rand = self.rand.child(f"batch-{number}") if hasattr(self.rand, "child") \
            else self.rand
        frames = self.frames(lo, hi, rand, shared)
        return frames, shared, time.thread_time() - t0

    def frames(self, lo: int, hi: int, rand: Any, shared: SharedWork | None = None
               ) -> list[bytes]:
        """The frames the devices at positions ``lo..hi`` send the server."""
        ctx, d = self.ctx, self.ctx.d
        pos = np.arange(lo, hi)
        pos = pos[~self.dropped[lo:hi]]
        if pos.size == 0:
            return []
        is_bad = np.isin(pos, self.corrupted)
        forging = self.corrupt is not None and self.corrupt.on_reports
        votes = np.zeros((pos.size, d), dtype=np.uint64)
        c = self.choice[pos]
        rows = np.flatnonzero(c >= 0)
        votes[rows, c[rows]] = 1
        if self.corrupt_vec is not None and is_bad.any():
            votes[is_bad] = self.corrupt_vec
        users = self.users[pos]
        sks = [self.keys.signing_key(int(u)) for u in users]
        reports = make_reports(ctx, users, votes, sks, self.keys.helper_public, rand,
                               shared)
        frames: list[bytes] = []
        for j, r in enumerate(reports):
            if forging and is_bad[j]:
                frames.extend(self._attack(r, votes[j], reports, rand))
            else:
                frames.append(codec.encode(r))
        return frames

    def _attack(self, honest: DeviceReport, vote: np.ndarray,
                batch: Sequence[DeviceReport], rand: Any) -> list[bytes]:
        """A corrupted device's frames under its report strategy
        (:func:`protocol.core.corruption.forge_reports`)."""
        assert self.corrupt is not None
        sk = self.keys.device(honest.user)[0]
        return [codec.encode(r) for r in forge_reports(
            self.corrupt.strategy, self.ctx, honest, vote, sk, self.keys.helper_public,
            rand, batch)]


def run_report_round(transport: Any, spec: RoundSpec, votes: Votes,
                     rng: np.random.Generator) -> RoundResult:
    """One validated vote round of ``transport`` (a
    :class:`~protocol.core.transports.threshold.ThresholdTransport`), all parties in
    this process.

    Raises:
        AggregationAborted: ``too_few_valid_reports``, or ``committee_<reason>`` when a
            member's check fails (:class:`~protocol.core.committee.CommitteeAborted`).
    """
    dev = transport.deviation
    choice = votes.validate(spec)
    n = int(choice.size)
    users = (np.asarray(votes.sample.users, dtype=np.int64) if votes.sample is not None
             else np.arange(n, dtype=np.int64))
    d = spec.domain_size
    # randomness: one draw of rng, as every committee round takes
    if transport.simulate:
        base = insecure_deterministic_randomness(int(rng.integers(0, 1 << 63)),
                                                 "threshold-reports")
        client_rand, member_rands = base.child("clients"), [
            base.child(f"committee-{i}") for i in range(3)]
        compare_rands = [base.child(f"compare-{i}") for i in range(3)]
    else:
        client_rand, member_rands = OsRandom(), [OsRandom() for _ in range(3)]
        compare_rands = [OsRandom() for _ in range(3)]
    keys = transport.report_keys()
    ctx = ReportContext(spec.task, transport.job_id(spec.task), int(spec.round),
                        candidates_digest(spec.candidates), d)
    corrupt = transport.corrupt
    corrupted = corrupt_positions(corrupt, spec.task, int(spec.round), users)
    dropped = np.zeros(n, dtype=bool)
    if transport.dropout > 0:
        dropped = np.random.default_rng(int(rng.integers(0, 1 << 63))).random(n) \
            < transport.dropout
    cvec = None
    if corrupt is not None and not corrupt.on_reports:
        cvec = (corrupt_vector(corrupt, spec.candidates, spec.theta) % P61).astype(np.uint64)
    keys.forget()
    for u in users:
        keys.device(int(u))
    clients = _Clients(ctx, users, choice, corrupted, dropped, corrupt, keys, client_rand,
                       spec, cvec)
    verified: dict[bytes, bool] = {}
    roster = keys.roster()
    members = [IntakeMember(0, ctx, users, roster, None, verified),
               IntakeMember(1, ctx, users, roster, keys.helpers[0][0], verified),
               IntakeMember(2, ctx, users, roster, keys.helpers[1][0], verified)]
    min_valid = max(int(spec.min_participants),
                    math.ceil(transport.min_valid_fraction * n))
    rows = batch_rows(d, n)
    client_seconds, bytes_devices, bytes_relay, bytes_members = 0.0, 0, 0, 0
    sent_by = [0, 0, 0]  # bytes each member sent the others (the server's relays too)
    validity_views: list[list[dict[str, Any]]] = [[], [], []]
    say = transport.client_progress
    starts = list(range(0, n, rows))
    # the devices make the next batch in a second thread while the members work on
    # this one (the heavy calls -- libsodium, hashing, numpy -- run without the GIL)
    threads = max(1, int(transport.workers or 2) - 1)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="devices") \
        if len(starts) > 1 else None
    ahead: list[Future] = []
    try:
        for number, lo in enumerate(starts):
            hi = min(n, lo + rows)
            if pool is None:
                frames, shared, secs = clients.batch(number, lo, hi)
            else:
                while len(ahead) < threads + 1 and number + len(ahead) < len(starts):
                    k = number + len(ahead)
                    ahead.append(pool.submit(clients.batch, k, starts[k],
                                             min(n, starts[k] + rows)))
                frames, shared, secs = ahead.pop(0).result()
            client_seconds += secs
            for m in members:
                m.shared = shared
            if dev.intake_reports is not None:
                frames = list(dev.intake_reports(number, frames))
            bytes_devices += sum(len(f) for f in frames)
            reports, to1, to2 = charged(members[0], lambda f=frames: members[0].relay(
                f, report_limits(d)))
            del frames
            lies = [(lambda c, j=j: dev.intake_verdicts(j, c))
                    if dev.intake_verdicts is not None else None for j in range(3)]
            out = [charged(members[0], lambda r=reports, t=to1: members[0].take_batch(
                r, t.refused, lie=lies[0]))]
            del reports
            # each helper's batch through the codec, taken, and let go before the next
            for h, batch in ((1, to1), (2, to2)):
                if dev.intake_relay is not None:
                    batch = dev.intake_relay(h, batch)
                wire = codec.encode(batch)
                bytes_relay += len(wire)
                sent_by[0] += len(wire)
                limits = batch_limits(d, max(len(batch.reports), len(batch.refused), 1))
                del batch
                try:
                    got = charged(members[h], lambda w=wire, lim=limits: codec.decode(
                        w, ReportBatch, lim))
                except codec.CodecError as exc:
                    raise CommitteeAborted("malformed_message", h, f"report batch: {exc}"
                                           ) from None
                del wire
                out.append(charged(members[h], lambda g=got, h=h: members[h].take_batch(
                    g, lie=lies[h])))
                del got
            del to1, to2
            box = _route(out, dev.intake_hook)
            echoes = [charged(m, lambda m=m: m.agree(box.get((m.prev, m.index)),
                                                     box.get((m.next, m.index))))
                      for m in members]
            box = _route(echoes, dev.intake_hook)
            kept = [charged(m, lambda m=m: m.confirm(box.get((m.prev, m.index)),
                                                     box.get((m.next, m.index))))
                    for m in members]
            for msgs in out + echoes:
                for msg in msgs:
                    bytes_members += len(msg.payload) + 40
                    sent_by[msg.sender] += len(msg.payload) + 40
            valid = None
            if kept[0] > 0:
                bctx = hashlib.sha256(b"fedhh validity batch\x00" + ctx.digest
                                      + number.to_bytes(4, "big")
                                      + members[0].batch_digest).digest()
                outcome = run_validity_check(
                    [m.shares_of for m in members], kept[0], d, context=bctx,
                    rands=[r.child(f"batch-{number}") if hasattr(r, "child") else r
                           for r in member_rands],
                    hook=dev.validity_hook, party_classes=dev.validity_classes,
                    seconds=[m.seconds for m in members])
                for j, m in enumerate(members):
                    m.seconds = outcome.seconds[j]
                    validity_views[j].append({"opened_valid": outcome.views[j]["opened_valid"],
                                              "check_value": outcome.views[j]["check_value"],
                                              "opened_sketch": outcome.views[j]["opened_sketch"]})
                bytes_members += sum(outcome.bytes_sent)
                for j in range(3):
                    sent_by[j] += int(outcome.bytes_sent[j])
                valid = outcome.valid
            for m in members:
                charged(m, lambda m=m: m.accept_valid(valid))
            shared.clear()
            if say is not None:
                say(0, hi, n)
        comps = [charged(m, lambda m=m: m.finish(min_valid)) for m in members]
    except CommitteeAborted as exc:
        if exc.reason == "too_few_valid_reports":
            raise AggregationAborted("too_few_valid_reports", exc.detail + " ("
                                     + _drop_text(members[0]) + ")") from None
        raise AggregationAborted(f"committee_{exc.reason}", str(exc)) from None
    finally:  # whatever ended the batches (a refusal, a deviation's error), the
        _stop(pool, ahead)  # devices' thread stops with them
    context = hashlib.sha256(b"fedhh threshold committee\x00validated\x00"
                             + ctx.digest).digest()
    out = compare(transport, spec, comps, context, compare_rands)
    contributed = members[0].valid_count
    release = transport._release(spec, contributed, out)
    views: dict[str, dict[str, Any]] = {}
    for j, name in enumerate(_MEMBERS):
        views[name] = {"input": "reports", "intake": members[j].view,
                       "validity": validity_views[j], "committee": out.views[j]}
    drops = members[0].drop_summary()
    views["clients"] = {"dropped": drops, "sampled": n, "valid": contributed}
    cpu = {"clients": client_seconds, "committee": float(sum(out.seconds))}
    for j, name in enumerate(_MEMBERS):
        cpu[name] = members[j].seconds + members[j].charged_seconds + out.seconds[j]
    bytes_members += int(sum(out.bytes_sent))
    for j in range(3):
        sent_by[j] += int(out.bytes_sent[j])
    views["server"]["bytes"] = {"devices_to_server": bytes_devices,
                                "server_to_helpers": bytes_relay,
                                "between_members": bytes_members,
                                "sent_by_member": dict(zip(_MEMBERS, sent_by))}
    cost = Cost(cpu, bytes_up=bytes_devices, bytes_down=0,
                bytes_members=bytes_relay + bytes_members,
                bytes_sent=dict(zip(_MEMBERS, sent_by)))
    if corrupt is not None:
        bad_users = {int(u) for u in users[corrupted]}
        bad_drops = members[0].drop_summary(bad_users)
        counted = len(bad_users) - sum(bad_drops.values())
        rec = record_round(transport, spec, choice, users, corrupted, release,
                           validated=True, dropped=drops, dropped_corrupted=bad_drops,
                           counted=counted)
        views["corrupted"] = rec.as_dict()
    return RoundResult(release, views, cost)


def compare(transport: Any, spec: RoundSpec, comps: list[tuple[np.ndarray, np.ndarray]],
            context: bytes, rands: Sequence[Any]) -> Any:
    """The verified comparison of a round's counts on the members' components, for
    both committee inputs: the transport's ``Deviation.components`` (a member that
    shifts its copies) and ``party_classes`` applied, a refusal as
    ``AggregationAborted("committee_<reason>")``.

    Raises:
        AggregationAborted: the comparison refused.
    """
    dev = transport.deviation
    if dev.components is not None:
        comps = [dev.components(i, (c[0].copy(), c[1].copy())) for i, c in enumerate(comps)]
    try:
        return run_verified_committee(comps, spec.theta, context=context,
                                      reveal_counts=spec.reveal_counts, rands=rands,
                                      hook=transport.committee_hook,
                                      party_classes=dev.party_classes)
    except CommitteeAborted as exc:
        raise AggregationAborted(f"committee_{exc.reason}", str(exc)) from None


def _stop(pool: ThreadPoolExecutor | None, ahead: list[Future]) -> None:
    """Stop the devices' thread (batches made ahead and not needed are dropped)."""
    if pool is None:
        return
    for f in ahead:
        f.cancel()
    pool.shutdown(wait=True, cancel_futures=True)
    ahead.clear()


def _route(outgoing: Sequence[Sequence[Any]], hook: Any
           ) -> dict[tuple[int, int], Any]:
    """Deliver one intake step's messages: ``(sender, recipient) -> message``
    (``hook(step, sender, recipient, message) -> message`` may rewrite or lose one)."""
    box: dict[tuple[int, int], Any] = {}
    for msgs in outgoing:
        for msg in msgs:
            if hook is not None:
                msg = hook(msg.step, msg.sender, msg.recipient, msg)
                if msg is None:
                    continue
            box[(msg.sender, msg.recipient)] = msg
    return box


def _drop_text(member: IntakeMember) -> str:
    summary = member.drop_summary()
    if not summary:
        return "no report was dropped"
    return "dropped: " + ", ".join(f"{v} {k}" for k, v in sorted(summary.items()))
