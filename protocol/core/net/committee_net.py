"""The thresholding committee's comparison between three processes.

:func:`protocol.core.committee.run_committee` routes the three members' messages inside
one process. :func:`run_member` is one member on its own, exchanging the same messages
with the other two over byte streams: the protocol of
:mod:`protocol.core.committee.rss` (Araki, Furukawa, Lindell, Nof, Ohara, CCS 2016;
the bit extraction of Mohassel and Rindal, ABY3, CCS 2018), step by step:

1. **keys**: send ``K_i`` to member ``i+1``, receive ``K_{i-1}`` from member ``i-1``;
2. **input**: send the re-randomised component ``c_i`` to ``i-1``, receive ``c_{i+1}``
   from ``i+1``;
3. **comparison** (when there is a threshold): one AND layer after another, each a
   masked share sent to ``i-1`` and one received from ``i+1``; the number of layers
   follows from the ring, so all three agree on it;
4. **opening** of the pass bits (and, when the round reveals counts, of the counts at
   the passing positions, public once the bits are): the two components the other
   members lack go to ``i+1`` and ``i-1``; the component this member lacks arrives
   from both and must agree (``open_mismatch`` otherwise).

Every message is a :class:`CommitteeMessage` (tag 206) named by its step and read with
limits that fit the round (:func:`committee_limits`: at most ``2 m`` 64-bit words, ``m``
the number of candidates); a message for another step, of the wrong size, outside the
ring, late (``wait_seconds``) or missing ends the member with
:class:`~protocol.core.committee.CommitteeAborted` naming the reason. The member's state
is only ever updated from a validated message (the :class:`CommitteeParty` checks).

:func:`run_verified_member` is one member of the verified comparison
(:mod:`protocol.core.committee.verified`) the same way, and :func:`run_intake_member`
one member of a round whose input is the devices' validated reports
(:mod:`protocol.core.committee.intake`, :mod:`protocol.core.committee.validity`): the
server relays each batch of reports to the helpers, the three agree on the batch and
their verdicts, check every kept report on shares, and compare the summed counts. The
sans-I/O members decide everything; this module only carries their messages, writing a
step's messages before it reads any (:meth:`CommitteeLink.post`), so that large
batches cannot deadlock three members that all write at once.

The streams must be authenticated and private between the two members they join:
whoever reads the link from member 1 to member 2 learns ``K_1`` and, with the keys the
server holds, every count. Securing the links (TLS with pinned identities) is the
caller's; this module only runs the protocol over them.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from protocol.core import codec
from protocol.core.codec import Bin, CodecError, Record, SessionLimits, Str
from protocol.core.committee import COMMITTEE, CommitteeAborted, CommitteeParty
from protocol.core.net.frames import frame, read_message
from protocol.core.net.signals import wait_for

__all__ = ["CommitteeMessage", "committee_limits", "CommitteeLink", "MemberOutcome",
           "ABORT_STEP", "send_abort", "relayed_reason", "pending_abort",
           "run_member", "verified_limits", "run_verified_member", "intake_limits",
           "run_intake_member", "Relay"]

MAX_STEP_BYTES = 32


@dataclass(frozen=True, slots=True)
class CommitteeMessage:
    """One committee message between two members: its step and its payload (a key, or
    little-endian 64-bit words)."""

    TAG: ClassVar[int] = 206
    step: str
    payload: bytes

    def __post_init__(self) -> None:
        if type(self.step) is not str or not 0 < len(self.step.encode()) <= MAX_STEP_BYTES:
            raise ValueError(f"step must be a name of 1..{MAX_STEP_BYTES} bytes")
        if type(self.payload) is not bytes:
            raise ValueError("payload must be bytes")

    def to_wire(self) -> list[Any]:
        return [self.step, self.payload]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "CommitteeMessage":
        if len(fields) != 2:
            raise ValueError("CommitteeMessage has 2 fields")
        return cls(*fields)


def _shape(max_words: int) -> Record:
    return Record((Str(1, MAX_STEP_BYTES), Bin(0, max(32, 8 * max_words))))


codec.register(CommitteeMessage, _shape(1 << 22))


def committee_limits(m: int) -> SessionLimits:
    """What a member accepts in a comparison of ``m`` counts: committee messages of at
    most ``2 m`` words (a prefix layer's two AND shares)."""
    if type(m) is not int or m < 1:
        raise ValueError("m must be a positive int")
    return SessionLimits({CommitteeMessage.TAG: _shape(2 * m)})


def verified_limits(m: int, theta: int | None, relay_bytes: int = 0) -> SessionLimits:
    """What a member accepts in a verified comparison of ``m`` counts at ``theta``: a
    multiplication layer holds at most ``max(theta, 2) m`` words (the first tree layer,
    main and checked products), plus the 32-byte context; with ``relay_bytes``, also
    the forwarded secure-aggregation messages (the session's largest frame)."""
    if type(m) is not int or m < 0:
        raise ValueError("m must be a non-negative int")
    words = max(int(theta or 0), 2) * max(m, 1) + 8
    return SessionLimits({CommitteeMessage.TAG: Record((
        Str(1, MAX_STEP_BYTES), Bin(0, max(64, 8 * words + 32, int(relay_bytes))))),})


def _to_bytes(words: np.ndarray) -> bytes:
    return np.ascontiguousarray(words, dtype="<u8").tobytes()


def _to_words(payload: bytes, member: int, step: str) -> np.ndarray:
    if len(payload) % 8:
        raise CommitteeAborted("malformed_message", member, f"{step}: not whole words")
    return np.frombuffer(payload, dtype="<u8").astype(np.uint64)


#: the step a member sends instead of its next message when it stops, with its reason
ABORT_STEP = "abort"
#: a committee message as small as an abort (merged into the limits of a read that
#: expects another kind of frame)
_ABORT_LIMITS = SessionLimits({CommitteeMessage.TAG: Record((Str(1, MAX_STEP_BYTES),
                                                             Bin(0, 64)))})


def relayed_reason(payload: bytes) -> str:
    """A peer's abort reason as a name (lowercase letters, digits and ``_``, at most 48
    characters); anything else is ``peer_aborted``."""
    text = payload.decode("ascii", "replace")
    ok = 0 < len(text) <= 48 and all(c.islower() or c.isdigit() or c == "_" for c in text)
    return text if ok else "peer_aborted"


#: how long a member whose send failed looks for the abort its peer sent before leaving
PENDING_ABORT_SECONDS = 1.0
#: and how many of the peer's unread messages it looks through for it
PENDING_ABORT_MESSAGES = 16


async def pending_abort(reader: asyncio.StreamReader, limits: SessionLimits,
                        wait_seconds: float = PENDING_ABORT_SECONDS) -> str | None:
    """After a send to a peer failed: the reason of the abort that peer sent before it
    closed the link, if it is among its unread messages (``None`` if not).

    A member that refuses a round relays its reason to the others and closes its links.
    Another member that writes to it a moment later sees a broken link; the peer's
    reason, already received, names the deviation, the broken link only its
    consequence. Never raises."""
    deadline = time.monotonic() + max(0.0, wait_seconds)
    try:
        for _ in range(PENDING_ABORT_MESSAGES):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            msg, _ = await wait_for(read_message(reader, limits), left)
            if getattr(msg, "step", None) == ABORT_STEP:
                return relayed_reason(msg.payload)
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError,
            CodecError, ValueError):
        return None
    return None


async def send_abort(writer: asyncio.StreamWriter, reason: str, wait_seconds: float = 5.0
                     ) -> None:
    """Tell a peer this member stopped, and why (best effort: the link may be gone)."""
    try:
        writer.write(frame(CommitteeMessage(ABORT_STEP, reason.encode("ascii", "replace")[:48])))
        await wait_for(writer.drain(), wait_seconds)
    except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError, ValueError):
        pass


class CommitteeLink:
    """One member's stream to another member: framed, bounded, with a deadline.

    ``hook(step, payload) -> payload`` rewrites what this member sends (tests model a
    dishonest member with it).
    """

    def __init__(self, member: int, peer: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, limits: SessionLimits, wait_seconds: float,
                 hook: Callable[[str, bytes], bytes] | None = None) -> None:
        self.member, self.peer = member, peer
        self.reader, self.writer = reader, writer
        self.limits, self.wait_seconds = limits, float(wait_seconds)
        self.hook = hook
        self.bytes_sent = 0
        self._post_failed: tuple[str, BaseException] | None = None

    async def send(self, step: str, payload: bytes) -> None:
        if self.hook is not None:
            payload = self.hook(step, payload)
        data = frame(CommitteeMessage(step, payload))
        try:
            self.writer.write(data)
            await wait_for(self.writer.drain(), self.wait_seconds)
        except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError) as exc:
            await self._failed_send(step, exc)
        self.bytes_sent += len(data)

    async def _failed_send(self, what: str, exc: BaseException) -> None:
        """A send failed: the abort the peer sent before it left, or ``missing_message``.

        Raises:
            CommitteeAborted: always.
        """
        relayed = await pending_abort(self.reader, self.limits)
        if relayed is not None:  # the peer had stopped, and said why
            raise CommitteeAborted(relayed, self.member,
                                   f"member {self.peer} aborted") from None
        raise CommitteeAborted("missing_message", self.member,
                               f"{what} to member {self.peer}: {type(exc).__name__}"
                               ) from None

    def post(self, step: str, payload: bytes) -> None:
        """Write a message without waiting for it to leave (:meth:`flush` waits). A
        member that writes all of a step's messages before it reads any, and flushes
        after, never deadlocks with peers that do the same, however large the messages
        (a blocking send to a peer that is itself blocked sending would)."""
        if self.hook is not None:
            payload = self.hook(step, payload)
        self.post_frame(frame(CommitteeMessage(step, payload)), step)

    def post_frame(self, data: bytes, what: str) -> None:
        """Write one whole frame (of any tag) without waiting; see :meth:`post`."""
        if self._post_failed is not None:
            return
        try:
            self.writer.write(data)
        except (ConnectionError, OSError, RuntimeError) as exc:
            self._post_failed = (what, exc)
            return
        self.bytes_sent += len(data)

    async def flush(self) -> None:
        """Wait until what :meth:`post` wrote has left.

        Raises:
            CommitteeAborted: the link broke (the peer's relayed reason when it sent one
                before it left, else ``missing_message``).
        """
        failed = self._post_failed
        if failed is None:
            try:
                await wait_for(self.writer.drain(), self.wait_seconds)
                return
            except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError) as exc:
                failed = ("a message", exc)
        await self._failed_send(*failed)

    def with_limits(self, limits: SessionLimits) -> "CommitteeLink":
        """The same link (streams, peer, deadline, hook) reading with other limits (the
        next phase of a round); bytes are counted apart."""
        return CommitteeLink(self.member, self.peer, self.reader, self.writer, limits,
                             self.wait_seconds, self.hook)

    async def _read(self, what: str, limits: SessionLimits | None = None) -> Any:
        """The next message from member ``peer`` (``what`` names it in errors), read
        with ``limits`` (the link's by default)."""
        try:
            msg, _ = await wait_for(read_message(self.reader, limits or self.limits),
                                    self.wait_seconds)
        except CodecError as exc:
            raise CommitteeAborted("malformed_message", self.member,
                                   f"{what} from member {self.peer}: {exc}") from None
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                OSError) as exc:
            raise CommitteeAborted("missing_message", self.member,
                                   f"{what} from member {self.peer}: {type(exc).__name__}"
                                   ) from None
        if isinstance(msg, CommitteeMessage) and msg.step == ABORT_STEP:
            # the peer stopped and says why (its claim)
            raise CommitteeAborted(relayed_reason(msg.payload), self.member,
                                   f"member {self.peer} aborted")
        return msg

    async def receive_record(self, cls: type, limits: SessionLimits, what: str) -> Any:
        """The next frame from member ``peer``, which must be a ``cls`` message, read
        with ``limits`` (which must take committee messages too: a peer's abort).

        Raises:
            CommitteeAborted: ``missing_message`` (late, closed), ``malformed_message``
                (refused by the framing, or another message), or the peer's relayed
                reason.
        """
        msg = await self._read(what, _ABORT_LIMITS.merged(limits))
        if not isinstance(msg, cls):
            got = msg.step if isinstance(msg, CommitteeMessage) else type(msg).__name__
            raise CommitteeAborted("malformed_message", self.member,
                                   f"expected {what} from member {self.peer}, got {got}")
        return msg

    async def receive(self, step: str) -> bytes:
        """The payload of member ``peer``'s message for ``step``.

        Raises:
            CommitteeAborted: ``missing_message`` (late, closed), ``malformed_message``
                (refused by the framing, or for another step).
        """
        msg = await self._read(step)
        if msg.step != step:
            raise CommitteeAborted("malformed_message", self.member,
                                   f"expected {step} from member {self.peer}, got {msg.step}")
        return msg.payload

    async def receive_any(self, steps: frozenset[str]) -> tuple[str, bytes]:
        """The next message, whose step must be one of ``steps``: ``(step, payload)``.

        Raises:
            CommitteeAborted: as :meth:`receive`.
        """
        msg = await self._read("a message")
        if msg.step not in steps:
            raise CommitteeAborted("malformed_message", self.member,
                                   f"unexpected {msg.step} from member {self.peer}")
        return msg.step, msg.payload


class _CpuClock:
    """``clock(fn)`` runs ``fn`` and adds its CPU time to :attr:`seconds` (a member's own
    computation, not its waiting on the links)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, fn: Callable[[], Any]) -> Any:
        t0 = time.process_time()
        try:
            return fn()
        finally:
            self.seconds += time.process_time() - t0


@dataclass
class MemberOutcome:
    """What one member learned: the opened pass bits (and counts at the passing
    positions, when revealed), its view, CPU seconds and bytes sent."""

    passed: np.ndarray
    counts: np.ndarray | None
    view: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    bytes_sent: int = 0


async def run_member(index: int, share: np.ndarray, k: int, theta: int | None, *,
                     reveal_counts: bool, prev: CommitteeLink, next: CommitteeLink,
                     rand: Any = None) -> MemberOutcome:
    """Member ``index`` of the committee, holding the additive share ``share`` (a
    ``(m,)`` ``uint64`` vector in ``[0, 2^k)``), linked to member ``index - 1``
    (``prev``) and ``index + 1`` (``next``).

    Raises:
        CommitteeAborted: a missing, late, malformed or inconsistent message, or bad
            arguments; nothing is opened then.
    """
    if index not in range(COMMITTEE) or prev.peer != (index - 1) % 3 \
            or next.peer != (index + 1) % 3:
        raise CommitteeAborted("bad_arguments", index, "links to members i-1 and i+1")
    if theta is not None and not 0 <= int(theta) < 1 << (k - 1):
        raise CommitteeAborted("bad_arguments", index, "theta outside the ring's half")
    party = CommitteeParty(index, k, rand)
    local = _CpuClock()

    # 1. keys
    await next.send("key", party.key_message())
    key = await prev.receive("key")
    local(lambda: party.receive_key(prev.peer, key))
    # 2. input sharing: c_i to member i-1, c_{i+1} from member i+1
    comp = local(lambda: party.share_input(np.asarray(share)))
    await prev.send("input", _to_bytes(comp))
    theirs = _to_words(await next.receive("input"), index, "input")
    local(lambda: party.receive_component(next.peer, theirs))
    m = comp.size
    # 3. comparison
    if theta is None:
        passed = np.ones(m, dtype=bool)
    else:
        local(lambda: party.begin_compare(int(theta)))
        party.start_layers()
        layer, more = 0, True
        while more:
            mine = local(party.layer_message)
            step = f"and-{layer}"
            await prev.send(step, _to_bytes(mine))
            z = _to_words(await next.receive(step), index, step)
            more = local(lambda: party.finish_layer(mine, next.peer, z))
            layer += 1
        local(party.result_bits)
        passed = (await _open(party, "bits", None, prev, next, local)).astype(bool)
    counts = None
    if reveal_counts:
        counts = await _open(party, "counts", np.flatnonzero(passed), prev, next, local)
    return MemberOutcome(passed, counts, party.view, local.seconds,
                         prev.bytes_sent + next.bytes_sent)


async def _open(party: CommitteeParty, which: str, positions: np.ndarray | None,
                prev: CommitteeLink, next: CommitteeLink,
                local: Callable[[Callable[[], Any]], Any]) -> np.ndarray:
    first, second = local(lambda: party.open_message(which, positions))
    step = f"open-{which}"
    await next.send(step, _to_bytes(first))    # c_i, which member i+1 lacks
    await prev.send(step, _to_bytes(second))   # c_{i+1}, which member i-1 lacks
    a = _to_words(await prev.receive(step), party.index, step)
    b = _to_words(await next.receive(step), party.index, step)
    return local(lambda: party.finish_open(which, a, b, positions))


# ------------------------------------------------------------- the verified committee

#: steps whose payload is raw bytes (the others carry 64-bit words): the verified
#: committee's and the validity check's keys and digests, the intake's verdicts
_BYTE_STEPS = frozenset({"key", "input-check", "verdicts", "verdicts-echo"})


def _encode(message: Any) -> bytes:
    """A :class:`protocol.core.committee.verified.CommitteeMessage`'s payload on the
    wire: its 32-byte context, then the bytes or little-endian words."""
    p = message.payload
    body = p if isinstance(p, bytes) else _to_bytes(p)
    return message.context + body


def _decode(step: str, payload: bytes, sender: int, recipient: int) -> Any:
    """The verified message a member's link delivered (sender and recipient are the
    link's: the channel is authenticated). A payload that is not whole words is handed
    on as bytes, which the party refuses as malformed."""
    from protocol.core.committee.verified import CONTEXT_BYTES
    from protocol.core.committee.verified import CommitteeMessage as Verified

    context, body = payload[:CONTEXT_BYTES], payload[CONTEXT_BYTES:]
    value: Any = body
    if step not in _BYTE_STEPS and len(body) % 8 == 0:
        value = np.frombuffer(body, dtype="<u8").astype(np.uint64)
    return Verified(context, step, sender, recipient, value)


async def run_verified_member(index: int, first: np.ndarray, second: np.ndarray,
                              theta: int | None, *, context: bytes, reveal_counts: bool,
                              prev: CommitteeLink, next: CommitteeLink, rand: Any = None,
                              party_class: type | None = None) -> MemberOutcome:
    """Member ``index`` of the verified committee
    (:mod:`protocol.core.committee.verified`), holding its components ``(c_i,
    c_{i+1})`` of ``x`` over ``F_p``, linked to members ``i - 1`` (``prev``) and
    ``i + 1`` (``next``): the same steps as
    :func:`~protocol.core.committee.verified.run_verified_committee`, one member at a
    time. ``party_class``: a :class:`~protocol.core.committee.verified.VerifiedParty`
    subclass (the launcher's fault switches).

    Raises:
        CommitteeAborted: a missing, late, malformed, replayed or inconsistent message,
            an input mismatch or a failed verification; nothing is opened then.
    """
    from protocol.core.committee.verified import VerifiedParty

    if index not in range(COMMITTEE) or prev.peer != (index - 1) % 3 \
            or next.peer != (index + 1) % 3:
        raise CommitteeAborted("bad_arguments", index, "links to members i-1 and i+1")
    try:
        party = (party_class or VerifiedParty)(index, context, first, second, rand)
    except ValueError as exc:
        raise CommitteeAborted("bad_arguments", index, str(exc)) from None
    local = _CpuClock()

    async def send(link: CommitteeLink, message: Any) -> None:
        await link.send(message.step, _encode(message))

    async def take(link: CommitteeLink, step: str) -> Any:
        return _decode(step, await link.receive(step), link.peer, index)

    async def open_value(step: str, pair: Any) -> np.ndarray:
        to_next, to_prev = local(lambda: party.open_messages(step, pair))
        await send(next, to_next)
        await send(prev, to_prev)
        a, b = await take(prev, step), await take(next, step)
        return local(lambda: party.finish_open(step, pair, a, b))

    key, digest = local(party.setup_messages)
    await send(next, key)
    await send(next, digest)
    got_key, got_digest = await take(prev, "key"), await take(prev, "input-check")
    local(lambda: party.receive_setup(got_key, got_digest))
    m = party.m
    compare = theta is not None and int(theta) >= 1
    if not compare:
        passed = np.ones(m, dtype=bool)
    else:
        local(lambda: party.begin(int(theta)))
        more = True
        while more:
            msg = local(party.layer_message)
            await send(prev, msg)
            incoming = await take(next, msg.step)
            more = local(lambda: party.receive_layer(incoming))
        coins = await open_value("open-coins", local(party.coin_pair))
        zero = local(lambda: party.zero_test_message(coins))
        await send(prev, zero)
        incoming = await take(next, "check-zero")
        check = await open_value("open-check",
                                 local(lambda: party.receive_zero_test(incoming)))
        local(lambda: party.accept_check(check))
        passed = await open_value("open-bits", local(party.result_pair)) != 0
        party.view["opened_bits"] = passed.astype(np.uint8)
    counts = None
    if reveal_counts or theta is None:
        positions = np.flatnonzero(passed)
        counts = await open_value("open-counts", local(lambda: party.counts_pair(positions)))
        party.view["opened_counts"] = counts.copy()
    return MemberOutcome(passed, counts, party.view, local.seconds,
                         prev.bytes_sent + next.bytes_sent)


# ------------------------------------------------------------- validated reports

def intake_limits(rows: int) -> SessionLimits:
    """What a member accepts from another while the committee takes a validated round's
    reports in batches of at most ``rows``: the verdicts (a digest and a code per report)
    and their echo, and the validity check's messages (a multiplication layer holds two
    products per report, its openings at most one word per report), each after the
    32-byte context."""
    if type(rows) is not int or rows < 1:
        raise ValueError("rows must be a positive int")
    body = max(16 * rows, 32 + rows, 64)
    return SessionLimits({CommitteeMessage.TAG: Record((Str(1, MAX_STEP_BYTES),
                                                        Bin(0, 32 + body)))})


async def _exchange(index: int, msgs: Any, prev: CommitteeLink, next: CommitteeLink,
                    step: str) -> tuple[Any, Any]:
    """Post this member's messages of ``step`` (each to its recipient's link), then read
    the step's message from ``prev`` and from ``next``, then flush: ``(from prev, from
    next)``, as verified messages (sender and recipient are the links')."""
    for msg in msgs:
        link = next if msg.recipient == next.peer else prev
        link.post(msg.step, _encode(msg))
    got_prev = _decode(step, await prev.receive(step), prev.peer, index)
    got_next = _decode(step, await next.receive(step), next.peer, index)
    await prev.flush()
    await next.flush()
    return got_prev, got_next


async def _validity_member(index: int, context: bytes, rows: int, d: int, shares_of: Any,
                           prev: CommitteeLink, next: CommitteeLink,
                           local: Callable[[Callable[[], Any]], Any], rand: Any,
                           party_class: type | None) -> tuple[np.ndarray, dict[str, Any]]:
    """Member ``index``'s part of one batch's validity check
    (:class:`~protocol.core.committee.validity.ValidityParty`), the steps of
    :func:`~protocol.core.committee.validity.run_validity_check` one member at a time:
    ``(valid per kept report, its view)``.

    Raises:
        CommitteeAborted: a missing, late, malformed, replayed or inconsistent message,
            or a failed verification; nothing is opened then.
    """
    from protocol.core.committee.validity import ValidityParty

    try:
        party = (party_class or ValidityParty)(index, context, rows, rand)
    except ValueError as exc:
        raise CommitteeAborted("bad_arguments", index, str(exc)) from None

    async def one_way(msg: Any) -> Any:
        """``msg`` to its recipient (``prev`` or ``next``); the same step from the other."""
        out, into = (next, prev) if msg.recipient == next.peer else (prev, next)
        out.post(msg.step, _encode(msg))
        got = _decode(msg.step, await into.receive(msg.step), into.peer, index)
        await out.flush()
        return got

    async def open_value(step: str, pair: Any) -> np.ndarray:
        msgs = local(lambda: party.open_messages(step, pair))
        a, b = await _exchange(index, msgs, prev, next, step)
        return local(lambda: party.finish_open(step, pair, a, b))

    key = await one_way(local(party.key_message))
    local(lambda: party.receive_key(key))
    coins = await open_value("open-sketch", local(party.sketch_pair))

    def inputs() -> None:
        rr = party.set_sketch(coins, d)
        party.set_inputs(*shares_of(rr))
        party.begin()

    local(inputs)
    more = True
    while more:
        incoming = await one_way(local(party.layer_message))
        more = local(lambda: party.receive_layer(incoming))
    check_coins = await open_value("open-coins", local(party.coin_pair))
    incoming = await one_way(local(lambda: party.zero_test_message(check_coins)))
    check = await open_value("open-check", local(lambda: party.receive_zero_test(incoming)))
    local(lambda: party.accept_check(check))
    opened = await open_value("open-valid", local(party.result_pair))
    valid = local(lambda: party.accept_valid(opened))
    return valid, {"opened_valid": party.view["opened_valid"],
                   "check_value": party.view["check_value"],
                   "opened_sketch": party.view["opened_sketch"]}


#: ``relay(batch) -> (frames, refusals)``: the server's input for one batch of a
#: validated round, the bodies of the reports its devices sent (in the sample's order)
#: and ``(user, code)`` of what it refused itself
Relay = Callable[[int], tuple[list[bytes], list[tuple[int, int]]]]


async def run_intake_member(member: Any, theta: int | None, *, reveal_counts: bool,
                            batches: int, rows: int, min_valid: int,
                            prev: CommitteeLink, next: CommitteeLink,
                            relay: Relay | None = None, rand: Any = None,
                            components: Callable[[np.ndarray, np.ndarray],
                                                 tuple[np.ndarray, np.ndarray]] | None = None,
                            party_class: type | None = None,
                            lie: Callable[[np.ndarray], np.ndarray] | None = None
                            ) -> MemberOutcome:
    """One member of a validated round (the server, ``member.index == 0``, or a helper)
    between processes: the steps of
    :func:`protocol.core.transports.threshold_reports.run_report_round`, one member at a
    time, over ``prev`` (member ``i - 1``) and ``next`` (member ``i + 1``).

    For each of the round's ``batches`` batches (at most ``rows`` reports each):

    1. the server decodes its devices' reports (``relay(batch)``) and writes each helper
       its :class:`~protocol.core.committee.intake.ReportBatch` (tag 212) over its
       helper connection; a helper reads its own, bounded by
       :func:`~protocol.core.committee.intake.batch_limits`;
    2. every member's digest and verdicts (step ``verdicts``) to both others, then the
       echo of all three (``verdicts-echo``);
    3. with reports kept, the validity check (:func:`_validity_member`), its context
       bound to the round, the batch's number and its agreed digest; the valid reports'
       components are added to the member's sums.

    Then the member's two components of the count vector
    (:meth:`~protocol.core.committee.intake.IntakeMember.finish`, at least
    ``min_valid`` valid reports) go into the verified comparison
    (:func:`run_verified_member`) with ``theta``, its context bound to the round. Every
    message is read with bounded limits (:func:`intake_limits`, then
    :func:`verified_limits`) and checked by the sans-I/O member before it is used.

    ``member`` is the :class:`~protocol.core.committee.intake.IntakeMember` (it keeps
    the drops, by reason and accuser). ``components``, ``party_class`` and ``lie`` are
    the fault switches of a deviating member (its comparison inputs, its comparison
    party, its own verdicts).

    Raises:
        CommitteeAborted: a missing, late, malformed, replayed or inconsistent message,
            a mismatch between the members, ``too_few_valid_reports``, a failed
            verification; nothing is opened then.
    """
    from protocol.core.committee.intake import ReportBatch, batch_limits, report_limits

    index = member.index
    if index not in range(COMMITTEE) or prev.peer != (index - 1) % 3 \
            or next.peer != (index + 1) % 3:
        raise CommitteeAborted("bad_arguments", index, "links to members i-1 and i+1")
    if (index == 0) != (relay is not None):
        raise CommitteeAborted("bad_arguments", index, "the server, and only it, relays")
    if type(batches) is not int or batches < 1 or type(rows) is not int or rows < 1:
        raise CommitteeAborted("bad_arguments", index, "at least one batch of one row")
    local = _CpuClock()
    ctx = member.ctx
    d = ctx.d
    to_server = {1: prev, 2: next}.get(index)
    framing = batch_limits(d, rows)
    validity: list[dict[str, Any]] = []
    valid_users: Counter = Counter()
    for number in range(batches):
        before = len(member.dropped)
        if relay is not None:
            raw, refused = relay(number)
            if len(raw) + len(refused) > rows:
                raise CommitteeAborted("bad_arguments", 0, f"batch {number} holds more "
                                       f"than {rows} reports")
            reports, to1, to2 = local(lambda: member.relay(raw, report_limits(d)))
            mine = tuple((int(u), int(c)) for u, c in refused) + to1.refused
            to1 = ReportBatch(to1.context, to1.batch, mine, to1.reports)
            to2 = ReportBatch(to2.context, to2.batch, mine, to2.reports)
            next.post_frame(frame(to1), "report batch")   # helper 1
            prev.post_frame(frame(to2), "report batch")   # helper 2
            msgs = local(lambda: member.take_batch(reports, mine, lie=lie))
            users = [r.user for r in reports]
        else:
            assert to_server is not None
            batch = await to_server.receive_record(ReportBatch, framing, "the report batch")
            msgs = local(lambda: member.take_batch(batch, lie=lie))
            users = [r.user for r in batch.reports]
        a, b = await _exchange(index, msgs, prev, next, "verdicts")
        echoes = local(lambda: member.agree(a, b))
        a, b = await _exchange(index, echoes, prev, next, "verdicts-echo")
        kept = local(lambda: member.confirm(a, b))
        valid = None
        if kept > 0:
            bctx = hashlib.sha256(b"fedhh validity batch\x00" + ctx.digest
                                  + number.to_bytes(4, "big") + member.batch_digest).digest()
            valid, seen = await _validity_member(index, bctx, kept, d, member.shares_of,
                                                 prev, next, local, rand, None)
            validity.append(seen)
        local(lambda: member.accept_valid(valid))
        # each relayed report is dropped once (by name) or counted; a refusal is none
        valid_users.update(users)
        valid_users.subtract(u for u, reason, _ in member.dropped[before:]
                             if reason != "malformed_report")
    first, second = local(lambda: member.finish(min_valid))
    if components is not None:
        first, second = components(first, second)
    context = hashlib.sha256(b"fedhh threshold committee\x00validated\x00"
                             + ctx.digest).digest()
    limits = verified_limits(d, theta)
    c_prev, c_next = prev.with_limits(limits), next.with_limits(limits)
    out = await run_verified_member(index, first, second, theta, context=context,
                                    reveal_counts=reveal_counts, prev=c_prev, next=c_next,
                                    rand=rand, party_class=party_class)
    out.view = {"intake": member.view, "validity": validity, "committee": out.view,
                "valid_users": sorted(int(u) for u, k in valid_users.items() if k > 0)}
    out.seconds += local.seconds
    out.bytes_sent += prev.bytes_sent + next.bytes_sent
    return out
