"""One committee member's intake of a round's validated reports.

Theory of operation
-------------------
The committee (server ``P0``, helpers ``P1``, ``P2``) takes a vote round's reports
(:mod:`protocol.core.committee.reports`) in batches. For each batch:

1. **Relay.** The server decodes what each device sent (a frame the codec refuses is
   dropped by the server alone: ``malformed_report``, attributed to it) and forwards
   each helper a :class:`ReportBatch`: per report everything the device signed, that
   helper's own ciphertext, and the digests of the parts it does not receive.
2. **Agreement.** Each member computes the digest of the batch as it holds it (each
   report's signed content, in order, and the server's refusals) and its verdict on
   every report: the public checks, identical at every honest member, then the
   private checks of its own parts (:func:`~protocol.core.committee.reports.open_part`).
   It sends both (step ``verdicts``) to the two others. A member whose batch digest
   differs from its own aborts (``report_set_mismatch``: the server showed the helpers
   different reports, or altered one in the relay); one whose public verdicts differ
   aborts (``verdict_mismatch``: a member lied about a check everyone can make). Then
   each echoes a digest of the three verdict vectors it holds (step
   ``verdicts-echo``); an echo that differs aborts (``verdict_equivocation``: a member
   told the two others different verdicts). A report that fails a public check, or
   that any member accuses, is dropped, with the reason and the accuser in every
   member's view.
3. **Validity** (:mod:`protocol.core.committee.validity`) of the reports kept, with a
   sketch vector opened only now; each member adds the components of the valid
   reports to its two running sums.

At the end of the round each member holds ``(sum_j, sum_{j+1})``: the replicated
sharing of the count vector over the valid reports, which the verified comparison
thresholds. Sampled devices with no report are ``missing``; with fewer than the
round's minimum of valid reports the round aborts (``too_few_valid_reports``): a server
cannot count a round over a handful of devices by dropping the others.

Everything here is sans-I/O: the caller routes :class:`ReportBatch` and
:class:`~protocol.core.committee.verified.CommitteeMessage` values (through the codec
or a network link) and drives the steps.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from protocol.core import codec
from protocol.core.codec import Array, Bin, CodecError, Int, Record, SessionLimits
from protocol.core.committee import field as F
from protocol.core.committee.reports import (
    PART_BYTES, VERDICT_NAMES, DeviceReport, RelayedReport,
    ReportContext, ReportParts, Verdict, component_matrix, ct_digests, open_part,
    public_verdicts, relay_for,
)
from protocol.core.committee.rss import COMMITTEE, RingMember
from protocol.core.committee.validity import sketch_shares
from protocol.core.committee.verified import CommitteeMessage

__all__ = ["ReportBatch", "IntakeMember", "report_limits", "batch_limits", "batch_rows",
           "BATCH_ENTRIES", "MAX_CANDIDATES"]

#: reports x candidates per batch: bounds a member's memory (a (rows, d) component
#: matrix is 8 bytes an entry)
BATCH_ENTRIES = 1 << 22
#: the most candidates a validated round takes
MAX_CANDIDATES = 1 << 20
#: reports per batch at the most: small rounds are cut into batches too, so that a
#: round's progress is seen batch by batch and the devices of the next batch are made
#: while the members check this one
MAX_BATCH_ROWS = 1 << 12
#: what a helper accepts in one batch (the codec's bound, which other callers may use
#: with batches up to this size)
_MAX_ROWS = 1 << 16


def batch_rows(d: int, n: int) -> int:
    """Reports per batch for ``d`` candidates and ``n`` reports."""
    return max(1, min(int(n), MAX_BATCH_ROWS, BATCH_ENTRIES // max(1, int(d))))


@dataclass(frozen=True, slots=True)
class ReportBatch:
    """What the server forwards a helper of one batch (tag 212).

    Attributes:
        context: the round's context digest.
        batch: the batch's number in the round (from 0).
        refused: ``(user, code)`` of what the server could not decode (its own word).
        reports: the relayed reports.
    """

    TAG: ClassVar[int] = 212
    context: bytes
    batch: int
    refused: tuple[tuple[int, int], ...]
    reports: tuple[RelayedReport, ...]

    def __post_init__(self) -> None:
        if type(self.context) is not bytes or len(self.context) != 32:
            raise ValueError("context is 32 bytes")
        if type(self.batch) is not int or not 0 <= self.batch < 1 << 32:
            raise ValueError("batch must be an int in [0, 2^32)")
        for r in self.refused:
            if (len(r) != 2 or type(r[0]) is not int or not 0 <= r[0] < 1 << 63
                    or r[1] != Verdict.MALFORMED_REPORT):
                raise ValueError("a refusal is (user, malformed_report)")
        if not all(isinstance(r, RelayedReport) for r in self.reports):
            raise ValueError("reports are RelayedReport values")

    def to_wire(self) -> list[Any]:
        return [self.context, self.batch, [list(r) for r in self.refused],
                [r.to_wire() for r in self.reports]]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ReportBatch":
        if len(fields) != 4:
            raise ValueError("ReportBatch has 4 fields")
        context, batch, refused, reports = fields
        return cls(context, batch, tuple(tuple(r) for r in refused),
                   tuple(RelayedReport.from_wire(r) for r in reports))


def _relayed_shape(ct0_bytes: int) -> Record:
    return Record((Int(0, (1 << 63) - 1), Bin(32, 32), Bin(32, 32), Bin(96, 96),
                   Bin(0, _PART_CT), Bin(0, ct0_bytes), Bin(96, 96), Bin(64, 64)))


def _device_shape(ct0_bytes: int) -> Record:
    return Record((Int(0, (1 << 63) - 1), Bin(32, 32), Bin(32, 32), Bin(96, 96),
                   Bin(0, PART_BYTES), Bin(0, ct0_bytes), Bin(0, _PART_CT), Bin(0, _PART_CT),
                   Bin(64, 64)))


def _batch_shape(rows: int, ct0_bytes: int) -> Record:
    return Record((Bin(32, 32), Int(0, (1 << 32) - 1),
                   Array(Record((Int(0, (1 << 63) - 1), Int(0, 255))), rows),
                   Array(_relayed_shape(ct0_bytes), rows)))


#: a ciphertext carries the plaintext, a 12-byte nonce and a 16-byte tag
_CT_OVERHEAD = 28
#: a helper's part, encrypted
_PART_CT = PART_BYTES + _CT_OVERHEAD
_GLOBAL_CT = 8 * MAX_CANDIDATES + _CT_OVERHEAD


def _ct0_bytes(d: int) -> int:
    return 8 * d + _CT_OVERHEAD


codec.register(DeviceReport, _device_shape(_GLOBAL_CT))
codec.register(RelayedReport, _relayed_shape(_GLOBAL_CT))
codec.register(ReportBatch, _batch_shape(_MAX_ROWS, _GLOBAL_CT))


def report_limits(d: int) -> SessionLimits:
    """What the server accepts from a device in a round of ``d`` candidates: a report
    whose parts are at most the round's sizes (a shorter one is decoded and accused by
    the member whose part it is)."""
    return SessionLimits({DeviceReport.TAG: _device_shape(_ct0_bytes(d))})


def batch_limits(d: int, rows: int) -> SessionLimits:
    """What a helper accepts from the server: one batch of at most ``rows`` reports of a
    round of ``d`` candidates."""
    return SessionLimits({ReportBatch.TAG: _batch_shape(rows, _ct0_bytes(d))})


def _signed_digest(r: DeviceReport | RelayedReport, digests: bytes) -> bytes:
    """The digest of a report's signed content, as every member computes it (from its
    :func:`~protocol.core.committee.reports.ct_digests`)."""
    return hashlib.sha256(r.context + r.user.to_bytes(8, "big") + r.ephemeral
                          + r.commitments + digests + r.signature).digest()


def _batch_digest(context: bytes, batch: int, digests: Sequence[bytes],
                  refused: Sequence[tuple[int, int]]) -> bytes:
    h = hashlib.sha256(b"fedhh intake batch\x00" + context + batch.to_bytes(4, "big"))
    h.update(len(digests).to_bytes(4, "big") + b"".join(digests))
    for user, code in refused:
        h.update(user.to_bytes(8, "big") + bytes([code]))
    return h.digest()


@dataclass
class _Batch:
    number: int
    users: list[int]
    digest: bytes
    codes: np.ndarray
    parts: list[ReportParts | None]
    refused: tuple[tuple[int, int], ...]
    kept: np.ndarray | None = None
    components: tuple[np.ndarray, np.ndarray] | None = None
    all_codes: list[np.ndarray] | None = None
    echo: bytes = b""


class IntakeMember(RingMember):
    """Member ``index`` (0 the server, 1 and 2 the helpers) of one round's intake.

    Args:
        index: 0, 1 or 2.
        ctx: the round's :class:`~protocol.core.committee.reports.ReportContext`.
        sample: the round's devices (population indices).
        roster: ``user -> Ed25519 public key`` of every device.
        secret_key: a helper's X25519 secret key (``None`` for the server).
        verified: a simulation's shared cache of signature checks (see
            :func:`~protocol.core.committee.reports.public_verdicts`).
        shared: a simulation's :class:`~protocol.core.committee.reports.SharedWork`
            (identical work of two members in one process done once, and charged to
            :attr:`charged_seconds`).

    Raises:
        ValueError: bad arguments.
    """

    def __init__(self, index: int, ctx: ReportContext, sample: Sequence[int],
                 roster: Mapping[int, bytes] | Any, secret_key: bytes | None = None,
                 verified: dict[bytes, bool] | None = None, shared: Any = None) -> None:
        if index not in range(COMMITTEE):
            raise ValueError("members are 0, 1 and 2")
        if index and (type(secret_key) is not bytes or len(secret_key) != 32):
            raise ValueError("a helper needs its 32-byte X25519 secret key")
        self.index, self.ctx = index, ctx
        self.context = ctx.digest
        self.sample = frozenset(int(u) for u in sample)
        self.roster, self.secret_key, self._verified = roster, secret_key, verified
        self.shared = shared
        #: CPU seconds of work done once in this process for two members and charged
        #: to this one (a deployed member does it itself)
        self.charged_seconds = 0.0
        self._seen: set[int] = set()
        self._received: set[int] = set()
        #: the server's digests of the reports it just relayed (the very list it hands
        #: :meth:`take_batch`), so that it hashes each ciphertext once
        self._relayed: tuple[list[DeviceReport], list[bytes]] | None = None
        self._batches = 0
        self._batch: _Batch | None = None
        d = ctx.d
        self._sums = [np.zeros(d, dtype=np.uint64), np.zeros(d, dtype=np.uint64)]
        self.valid_count = 0
        self.seconds = 0.0
        #: per dropped report: ``(user, reason, accuser)``; ``accuser`` names the member
        #: whose own check it was (``"all"`` for a public check or the validity check)
        self.dropped: list[tuple[int, str, str]] = []
        self.view: dict[str, Any] = {
            "context": self.context, "batches": [], "reports": 0, "valid": 0,
            "dropped": self.dropped, "accusations": {0: 0, 1: 0, 2: 0},
            "sums": None}


    # ------------------------------------------------------------ the server

    def relay(self, raw: Sequence[bytes], limits: SessionLimits | None = None
              ) -> tuple[list[DeviceReport], ReportBatch, ReportBatch]:
        """The server's step 1 for one batch: decode what the devices sent, and the
        batch for each helper.

        Returns:
            ``(reports, for helper 1, for helper 2)``; hand ``reports`` (and the
            refusals inside either batch) to :meth:`take_batch`.
        """
        if self.index != 0:
            raise self._abort("bad_arguments", "only the server relays")
        limits = limits or report_limits(self.ctx.d)
        reports: list[DeviceReport] = []
        refused: list[tuple[int, int]] = []
        for data in raw:
            try:
                reports.append(codec.decode(data, DeviceReport, limits))
            except CodecError:
                refused.append((_claimed_user(data), Verdict.MALFORMED_REPORT))
        number = self._batches
        digests = [ct_digests(r, 0) for r in reports]
        self._relayed = (reports, digests)
        out = [ReportBatch(self.context, number, tuple(refused),
                           tuple(relay_for(r, h, dg) for r, dg in zip(reports, digests)))
               for h in (1, 2)]
        return reports, out[0], out[1]

    # ------------------------------------------------------------ every member

    def take_batch(self, reports: Sequence[DeviceReport | RelayedReport] | ReportBatch,
                   refused: Sequence[tuple[int, int]] = (),
                   lie: Callable[[np.ndarray], np.ndarray] | None = None
                   ) -> list[CommitteeMessage]:
        """Step 2 for one batch: this member's digest and verdicts, for both others.

        A helper passes the :class:`ReportBatch` the server sent it; the server its
        decoded reports and its refusals. ``lie`` (the attack catalogue's deviating
        member) rewrites this member's own verdicts before it uses and sends them.

        Raises:
            CommitteeAborted: a batch of another round or out of order
                (``replayed_message``), or bad arguments.
        """
        if self._batch is not None:
            raise self._abort("unexpected_message", "the previous batch is not finished")
        if isinstance(reports, ReportBatch):
            if self.index == 0:
                raise self._abort("bad_arguments", "the server takes its own reports")
            if not hmac.compare_digest(reports.context, self.context) \
                    or reports.batch != self._batches:
                raise self._abort("replayed_message",
                                  f"a batch of another round or out of order "
                                  f"({reports.batch}, expected {self._batches})")
            refused, reports = reports.refused, reports.reports
        elif self.index != 0:
            raise self._abort("bad_arguments", "a helper takes the server's ReportBatch")
        relayed, self._relayed = self._relayed, None
        digests = relayed[1] if relayed is not None and relayed[0] is reports else None
        reports = list(reports)
        refused = tuple((int(u), int(c)) for u, c in refused)
        want = DeviceReport if self.index == 0 else RelayedReport
        if not all(type(r) is want for r in reports):
            raise self._abort("bad_arguments", f"member {self.index} takes {want.__name__}")
        if digests is None:
            digests = [ct_digests(r, self.index) for r in reports]
        codes = public_verdicts(reports, self.index, self.context, self.sample, self.roster,
                                self._seen, self._verified, digests)
        parts: list[ReportParts | None] = [None] * len(reports)
        for i, r in enumerate(reports):
            if codes[i] == Verdict.OK:
                code, parts[i] = open_part(r, self.index, self.ctx.d, self.secret_key)
                codes[i] = code
        if lie is not None:
            codes = np.asarray(lie(codes.copy()), dtype=np.uint8)
        digest = _batch_digest(self.context, self._batches,
                               [_signed_digest(r, dg) for r, dg in zip(reports, digests)],
                               refused)
        self._batch = _Batch(self._batches, [r.user for r in reports], digest, codes,
                             parts, refused)
        payload = digest + codes.tobytes()
        return [CommitteeMessage(self.context, "verdicts", self.index, peer, payload)
                for peer in (self.next, self.prev)]

    def _take_verdicts(self, msg: Any, sender: int, b: _Batch) -> np.ndarray:
        """A verdict message's codes, once it is checked: this batch's digest (else
        ``report_set_mismatch``), one known code per report."""
        if msg is None:
            raise self._abort("missing_message", f"verdicts from party {sender}")
        if not isinstance(msg, CommitteeMessage) or type(msg.payload) is not bytes:
            raise self._abort("malformed_message", f"verdicts from party {sender}")
        if not hmac.compare_digest(msg.context, self.context):
            raise self._abort("replayed_message", f"verdicts from party {sender}: "
                              "another round's context")
        if msg.step != "verdicts" or msg.sender != sender or msg.recipient != self.index:
            raise self._abort("unexpected_message",
                              f"expected verdicts from party {sender}, got {msg.step!r} "
                              f"from {msg.sender!r}")
        rows = len(b.users)
        # the batch's digest first: a member that holds other reports (another count
        # of them included) is named as such, not as a malformed message
        if len(msg.payload) < 32:
            raise self._abort("malformed_message", f"verdicts from party {sender}: "
                              f"{len(msg.payload)} bytes for {rows} reports")
        if not hmac.compare_digest(msg.payload[:32], b.digest):
            raise self._abort("report_set_mismatch",
                              f"party {sender} holds other reports in batch {b.number}")
        if len(msg.payload) != 32 + rows:
            raise self._abort("malformed_message", f"verdicts from party {sender}: "
                              f"{len(msg.payload)} bytes for {rows} reports")
        codes = np.frombuffer(msg.payload, dtype=np.uint8, offset=32)
        known = np.isin(codes, list(VERDICT_NAMES))
        if not known.all() or (codes == Verdict.INVALID_VOTE).any() \
                or (codes >= Verdict.MALFORMED_REPORT).any():
            raise self._abort("malformed_message", f"verdicts from party {sender}: "
                              "a code that is no verdict")
        return codes.copy()

    def agree(self, from_prev: Any, from_next: Any) -> list[CommitteeMessage]:
        """Step 2 continued: check both others' digests and public verdicts against
        this member's, then echo a digest of the three verdict vectors to both (so a
        member that told the two others different verdicts is caught).

        Raises:
            CommitteeAborted: ``report_set_mismatch``, ``verdict_mismatch``, or a
                malformed, misrouted or replayed verdict message.
        """
        b = self._batch
        if b is None or b.kept is not None or b.all_codes is not None:
            raise self._abort("unexpected_message", "no batch awaits verdicts")
        got = {self.prev: self._take_verdicts(from_prev, self.prev, b),
               self.next: self._take_verdicts(from_next, self.next, b)}
        codes = {self.index: b.codes, **got}
        public = [np.where(codes[j] < Verdict.PUBLIC_LIMIT, codes[j], 0) for j in range(3)]
        for j in range(3):
            if not np.array_equal(public[j], public[self.index]):
                raise self._abort("verdict_mismatch",
                                  f"party {j}'s public checks differ from party "
                                  f"{self.index}'s in batch {b.number}")
        b.all_codes = [codes[j] for j in range(3)]
        echo = hashlib.sha256(b"fedhh intake echo\x00" + b.digest
                              + b"".join(c.tobytes() for c in b.all_codes)).digest()
        b.echo = echo
        return [CommitteeMessage(self.context, "verdicts-echo", self.index, peer, echo)
                for peer in (self.next, self.prev)]

    def confirm(self, from_prev: Any, from_next: Any) -> int:
        """Step 2's end: both others hold the same three verdict vectors; drop what any
        member refused or accused. Returns the number of reports kept for the validity
        check.

        Raises:
            CommitteeAborted: ``verdict_equivocation`` (a member sent the two others
                different verdicts), or a malformed, misrouted or replayed message.
        """
        b = self._batch
        if b is None or b.all_codes is None or b.kept is not None:
            raise self._abort("unexpected_message", "no batch awaits the echo")
        for sender, msg in ((self.prev, from_prev), (self.next, from_next)):
            echo = self._take_echo(msg, sender)
            if not hmac.compare_digest(echo, b.echo):
                raise self._abort("verdict_equivocation",
                                  f"party {sender} holds other verdicts of batch {b.number}")
        codes = b.all_codes
        rows = len(b.users)
        public = np.where(codes[self.index] < Verdict.PUBLIC_LIMIT, codes[self.index], 0)
        for user, code in b.refused:
            self.dropped.append((user, VERDICT_NAMES[code], "server"))
            self._received.add(user)
        for u in b.users:
            self._received.add(u)
        keep = np.ones(rows, dtype=bool)
        for i, u in enumerate(b.users):
            if public[i]:
                keep[i] = False
                self.dropped.append((u, VERDICT_NAMES[int(public[i])], "all"))
                continue
            for j in range(3):
                if codes[j][i] >= Verdict.PUBLIC_LIMIT:
                    keep[i] = False
                    self.view["accusations"][j] += 1
                    self.dropped.append((u, VERDICT_NAMES[int(codes[j][i])],
                                         ("server", "helper1", "helper2")[j]))
                    break
        b.kept = np.flatnonzero(keep)
        self.view["reports"] += rows + len(b.refused)
        self.view["batches"].append({"number": b.number, "digest": b.digest.hex(),
                                     "reports": rows, "refused": len(b.refused),
                                     "kept": int(b.kept.size)})
        return int(b.kept.size)

    def _take_echo(self, msg: Any, sender: int) -> bytes:
        if msg is None:
            raise self._abort("missing_message", f"verdicts-echo from party {sender}")
        if not isinstance(msg, CommitteeMessage) or type(msg.payload) is not bytes \
                or len(msg.payload) != 32:
            raise self._abort("malformed_message", f"verdicts-echo from party {sender}")
        if not hmac.compare_digest(msg.context, self.context):
            raise self._abort("replayed_message", f"verdicts-echo from party {sender}: "
                              "another round's context")
        if msg.step != "verdicts-echo" or msg.sender != sender or msg.recipient != self.index:
            raise self._abort("unexpected_message",
                              f"expected verdicts-echo from party {sender}, got "
                              f"{msg.step!r} from {msg.sender!r}")
        return msg.payload

    @property
    def batch_digest(self) -> bytes:
        """The open batch's digest (binds the validity check's context)."""
        if self._batch is None:
            raise self._abort("unexpected_message", "no batch is open")
        return self._batch.digest

    def _charge(self, fn: Callable[[], Any]) -> Any:
        shared = self.shared
        if shared is None:
            return fn()
        before = shared.charged
        try:
            return fn()
        finally:
            self.charged_seconds += shared.charged - before
            shared.charged = before

    def components_of_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """This member's two components of the kept reports, ``(rows, d)`` each (made
        once per batch)."""
        b = self._batch
        if b is None or b.kept is None:
            raise self._abort("unexpected_message", "the batch is not agreed")
        if b.components is None:
            d = self.ctx.d
            parts = [b.parts[i] for i in b.kept]
            assert all(p is not None for p in parts)
            shared = self.shared

            def expand(seeds: list[bytes]) -> np.ndarray:
                return self._charge(lambda: component_matrix(seeds, d, shared))

            if self.index == 0:      # (c0, c1)
                first = _rows([p.c0 for p in parts], d)            # type: ignore[union-attr]
                second = expand([p.s1 for p in parts])              # type: ignore[union-attr]
            elif self.index == 1:    # (c1, c2)
                first = expand([p.s1 for p in parts])               # type: ignore[union-attr]
                second = expand([p.s2 for p in parts])              # type: ignore[union-attr]
            else:                    # (c2, c0)
                first = expand([p.s2 for p in parts])               # type: ignore[union-attr]
                second = _rows([p.c0 for p in parts], d)            # type: ignore[union-attr]
            b.components = (first, second)
        return b.components

    def shares_of(self, rr: np.ndarray) -> Any:
        """This member's sketch shares of the kept reports
        (:func:`~protocol.core.committee.validity.sketch_shares`)."""
        comps = self.components_of_batch()
        shared = self.shared
        if shared is None:
            return sketch_shares(comps, rr)
        digest = hashlib.sha256(rr.tobytes()).digest()
        right = shared.products.get(("right", digest))
        if right is None:
            t0 = time.thread_time()
            right = (F.Right(rr), time.thread_time() - t0)
            shared.products[("right", digest)] = right
        else:
            self.charged_seconds += right[1]
        out = []
        for k, comp in enumerate(comps):
            key = ((self.index + k) % COMMITTEE, digest)
            hit = shared.products.get(key)
            if hit is not None and (hit[0] is comp or (
                    hit[0].shape == comp.shape and np.array_equal(hit[0], comp))):
                out.append(hit[1])
                self.charged_seconds += hit[2]
                continue
            t0 = time.thread_time()
            prod = F.matmul(comp, right[0], threads=1)
            shared.products[key] = (comp, prod, time.thread_time() - t0)
            out.append(prod)
        a, b = out
        return (a[:, 0].copy(), b[:, 0].copy()), (a[:, 1].copy(), b[:, 1].copy())

    def accept_valid(self, valid: np.ndarray | None) -> None:
        """Step 3's end: add the valid reports' components to the running sums and
        record the invalid ones (``valid`` is ``None`` when no report was kept)."""
        b = self._batch
        if b is None or b.kept is None:
            raise self._abort("unexpected_message", "the batch is not agreed")
        if valid is not None:
            valid = np.asarray(valid, dtype=bool)
            if valid.shape != b.kept.shape:
                raise self._abort("bad_arguments", "one validity bit per kept report")
            first, second = self.components_of_batch()
            invalid = np.flatnonzero(~valid)
            for k, comp in enumerate((first, second)):
                total = _colsum(comp)
                if invalid.size:
                    total = F.sub(total, _colsum(comp[invalid]))
                self._sums[k] = F.add(self._sums[k], total)
            for i in b.kept[~valid]:
                self.dropped.append((b.users[i], "invalid_vote", "all"))
            self.valid_count += int(valid.sum())
            self.view["valid"] = self.valid_count
        self._batch = None
        self._batches += 1

    def finish(self, min_valid: int) -> tuple[np.ndarray, np.ndarray]:
        """The round's end: record the missing devices and return this member's
        components of the count vector.

        Raises:
            CommitteeAborted: ``too_few_valid_reports`` (fewer than ``min_valid``), or
                a batch still open.
        """
        if self._batch is not None:
            raise self._abort("unexpected_message", "a batch is not finished")
        for u in sorted(self.sample - self._received):
            self.dropped.append((u, "missing", "all"))
        if self.valid_count < min_valid:
            raise self._abort("too_few_valid_reports",
                              f"{self.valid_count} valid reports, {min_valid} required")
        self.view["sums"] = (self._sums[0].copy(), self._sums[1].copy())
        return self._sums[0].copy(), self._sums[1].copy()

    def drop_summary(self, users: set[int] | None = None) -> dict[str, int]:
        """Dropped reports by reason (of ``users`` only, when given)."""
        out: dict[str, int] = {}
        for u, reason, _ in self.dropped:
            if users is None or u in users:
                out[reason] = out.get(reason, 0) + 1
        return out


def _colsum(m: np.ndarray) -> np.ndarray:
    """Column sums mod ``p`` of a ``(rows, d)`` field matrix (rows below ``2^31``):
    the high and low 32 bits summed apart, each sum below ``2^63``."""
    if m.shape[0] == 0:
        return np.zeros(m.shape[1], dtype=np.uint64)
    # both 32-bit halves of every entry, summed in one pass (little-endian: low first)
    halves = np.ascontiguousarray(m).view("<u4").reshape(m.shape[0], m.shape[1], 2)
    sums = halves.sum(axis=0, dtype=np.uint64)
    lo, hi = sums[:, 0], sums[:, 1]
    # hi * 2^32 mod p: hi < 2^60, so split hi = h1 2^29 + h0 (2^61 = 1)
    h1, h0 = hi >> np.uint64(29), hi & np.uint64((1 << 29) - 1)
    t = F._fold(h1) + F._fold(h0 << np.uint64(32))
    return F.add(F._fold(t), F._fold(lo))


def _rows(vectors: list[Any], d: int) -> np.ndarray:
    """The explicit component's rows as one matrix (from the parts' wire bytes)."""
    if not vectors:
        return np.zeros((0, d), dtype=np.uint64)
    if isinstance(vectors[0], bytes):
        return np.frombuffer(b"".join(vectors), dtype="<u8").reshape(len(vectors), d)
    return np.stack(vectors)


def _claimed_user(data: Any) -> int:
    """The device a refused frame claims to be from, as far as it can be read (for the
    record only; ``2^63 - 1`` when it cannot)."""
    try:
        import msgpack

        fields = msgpack.unpackb(bytes(data), raw=False, strict_map_key=True,
                                 max_bin_len=1 << 24, max_array_len=16, max_map_len=0,
                                 max_str_len=0, max_ext_len=0)
        user = fields[2]
        if type(user) is int and 0 <= user < 1 << 63:
            return user
    except Exception:  # anything: the record says "unknown"
        pass
    return (1 << 63) - 1
