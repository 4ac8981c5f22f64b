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

The streams must be authenticated and private between the two members they join:
whoever reads the link from member 1 to member 2 learns ``K_1`` and, with the keys the
server holds, every count. Securing the links (TLS with pinned identities) is the
caller's; this module only runs the protocol over them.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from protocol.core import codec
from protocol.core.codec import Bin, CodecError, Record, SessionLimits, Str
from protocol.core.committee import COMMITTEE, CommitteeAborted, CommitteeParty
from protocol.core.net.frames import frame, read_message

__all__ = ["CommitteeMessage", "committee_limits", "CommitteeLink", "MemberOutcome",
           "ABORT_STEP", "send_abort", "relayed_reason", "pending_abort",
           "run_member", "verified_limits", "run_verified_member"]

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
            msg, _ = await asyncio.wait_for(read_message(reader, limits), left)
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
        await asyncio.wait_for(writer.drain(), wait_seconds)
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

    async def send(self, step: str, payload: bytes) -> None:
        if self.hook is not None:
            payload = self.hook(step, payload)
        data = frame(CommitteeMessage(step, payload))
        try:
            self.writer.write(data)
            await asyncio.wait_for(self.writer.drain(), self.wait_seconds)
        except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError) as exc:
            relayed = await pending_abort(self.reader, self.limits)
            if relayed is not None:  # the peer had stopped, and said why
                raise CommitteeAborted(relayed, self.member,
                                       f"member {self.peer} aborted") from None
            raise CommitteeAborted("missing_message", self.member,
                                   f"{step} to member {self.peer}: {type(exc).__name__}"
                                   ) from None
        self.bytes_sent += len(data)

    async def _read(self, what: str) -> Any:
        """The next message from member ``peer`` (``what`` names it in errors)."""
        try:
            msg, _ = await asyncio.wait_for(read_message(self.reader, self.limits),
                                            self.wait_seconds)
        except CodecError as exc:
            raise CommitteeAborted("malformed_message", self.member,
                                   f"{what} from member {self.peer}: {exc}") from None
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                OSError) as exc:
            raise CommitteeAborted("missing_message", self.member,
                                   f"{what} from member {self.peer}: {type(exc).__name__}"
                                   ) from None
        if msg.step == ABORT_STEP:  # the peer stopped and says why (its claim)
            raise CommitteeAborted(relayed_reason(msg.payload), self.member,
                                   f"member {self.peer} aborted")
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

#: steps whose payload is raw bytes (the others carry 64-bit words)
_BYTE_STEPS = frozenset({"key", "input-check"})


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
