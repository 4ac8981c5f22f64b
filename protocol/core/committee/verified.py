"""A threshold comparison on replicated shares that is secure against one *malicious*
member: every multiplication is verified before anything is opened, every opening is
checked, and whether the committee aborts does not depend on the secret counts.

Theory of operation
-------------------
Parties ``P0, P1, P2`` (the server and two helpers) hold a *replicated* sharing of a
vector ``x`` of ``m`` counts over ``F_p``, ``p = 2^61 - 1`` (:mod:`.field`):
``x = c0 + c1 + c2`` and ``P_i`` holds ``(c_i, c_{i+1})``, so every component is held by
two parties and any single party's pair is independent of ``x``. The caller gives each
party its own pair, derived by that party from data bound to what the clients sent
(the threshold transport: ``c0 = S`` the blinded sum, ``c1 = -R1``, ``c2 = -R2``), so
the components held by the two honest parties define ``x`` whatever a corrupted party
uses as its own copies.

1. **Set-up** (one message each way round the ring). ``P_i`` sends ``P_{i+1}`` a fresh
   32-byte key ``K_i`` and the digest ``SHA-256(context, i+1, c_{i+1})`` of the component
   they share; ``P_{i+1}`` compares it with its own copy (constant time) and aborts with
   ``input_mismatch`` when they differ -- so an equivocated input is named at once.
   ``F_K`` is ChaCha20 under ``K`` with a nonce per use. Shares of zero for a gate:
   ``alpha_i = F_{K_i} - F_{K_{i-1}}``; a random sharing ``[r]``: ``P_i`` holds
   ``(F_{K_{i-1}}, F_{K_i})``, uniform to any one party.
2. **Comparison.** ``x >= theta`` exactly when ``prod_{j < theta} (x - j) != 0`` (for
   ``0 <= x < p``). The committee computes ``[P] = prod_j [x - j]`` as a balanced tree of
   multiplications (``ceil(log2 theta)`` layers), multiplies by a fresh per-candidate
   random ``[rho]``, and will open ``rho * P``: zero when the count is below ``theta``,
   a uniform non-zero element otherwise -- exactly the pass bit, nothing more. A
   multiplication is the replicated-sharing protocol of Araki, Furukawa, Lindell, Nof
   and Ohara (CCS 2016) over ``F_p``: ``z_i = a_i b_i + a_i b_{i+1} + a_{i+1} b_i +
   alpha_i`` sent to ``P_{i-1}``. Against a malicious party this protocol is secure
   *up to an additive attack*: a cheater can add an error of its choice to any product.
3. **Verification** (Chida, Genkin, Hamada, Ikarashi, Kikuchi, Lindell and Nof, "Fast
   Large-Scale Honest-Majority MPC for Malicious Adversaries", CRYPTO 2018). Everything
   is computed twice: on the values and on the values times a secret random ``[r]``
   (``[r x] = [r][x]``; a gate ``[a][b]`` also computes ``[r a][b]``). When all
   multiplications are done, the parties open random coefficients ``alpha_k`` and ``r``
   (both from key-derived random sharings, opened with the check of step 4), form
   ``[V] = sum_k alpha_k ([r w_k] - r [w_k])`` over every checked wire ``w_k`` (the
   input ``x``, every gate output) and test it for zero without opening it: they
   multiply it by a fresh random ``[beta]`` and open ``beta V`` (Chida et al.'s
   CheckZero), 0 when ``V`` is and uniform non-zero otherwise. Honest runs give
   ``V = 0``. With errors chosen before ``alpha`` and ``r`` are known, each wire's
   defect is ``c_k - r d_k`` with ``(c_k, d_k)`` fixed by the cheater's view; a
   non-zero vector of defects survives the random combination with probability at most
   ``1/p`` and the random ``r`` with at most ``1/p``, and an error in the zero test's
   own product hides a non-zero ``V`` with at most ``1/p``: **a cheater passes
   verification with probability at most ``3/p < 2^-59``** (statistical security 59
   bits). ``V`` itself may depend on the counts once errors were added (an error is
   multiplied into later wires), which is why only ``beta V`` is opened: the opened
   value and the abort depend on the cheater's view and fresh randomness, not on the
   counts. Nothing that depends on ``x`` is opened before ``V = 0`` is established.
4. **Opening.** A party lacks one component, held by both other parties; it takes it
   from both and aborts (``open_mismatch``) when the copies differ, so a single
   cheater cannot change an opened value. The pass bits ``rho * P != 0`` are opened to
   all three; when the round reveals counts, ``x`` is opened only at the passing
   positions, which every honest party determines from the bits it opened itself.

Messages carry the round's 32-byte ``context`` (the caller's binding of session and
round), their step, sender and recipient; a receiver checks all four and the payload's
type, shape and range before it uses anything (``replayed_message``,
``unexpected_message``, ``malformed_message``). Fresh keys per round make a message of
another round useless as well as detectable.

Not protected: two colluding members hold all three components and learn every count;
a member can always make the round abort (security with abort: an abort is never a
partial release). Cost per candidate and member: ``2 theta + 1`` field elements sent in
the multiplication layers (8 bytes each), plus the openings.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core.committee import field as F
from protocol.core.committee.rss import (
    COMMITTEE, CommitteeAborted, CommitteeOutcome, RingMember, charged,
)
from protocol.core.randomness import OsRandom

__all__ = ["CommitteeMessage", "MessageHook", "VerifiedParty", "run_verified_committee",
           "InProcessRouter",
           "STATISTICAL_SECURITY_BITS", "CONTEXT_BYTES"]

#: ``floor(-log2)`` of the probability that a cheating member passes verification
#: (``3/p``)
STATISTICAL_SECURITY_BITS = 59
#: length of a round's context
CONTEXT_BYTES = 32
_COIN_WORDS = 4

#: hook(step, sender, recipient, payload) -> payload, a whole CommitteeMessage (to
#: substitute another, e.g. one replayed from another round), or None (the message is
#: lost); the same shape as the semi-honest committee's hook
MessageHook = Callable[[str, int, int, Any], Any]

Pair = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class CommitteeMessage:
    """One committee message: the round's context, step, sender, recipient, payload."""

    context: bytes
    step: str
    sender: int
    recipient: int
    payload: Any

    @property
    def nbytes(self) -> int:
        """Bytes on a wire: payload plus a 40-byte header (context, step, ends)."""
        body = self.payload.nbytes if isinstance(self.payload, np.ndarray) else len(
            self.payload) if isinstance(self.payload, bytes) else 0
        return body + CONTEXT_BYTES + 8


def _digest(context: bytes, index: int, component: np.ndarray) -> bytes:
    return hashlib.sha256(b"fedhh committee input\x00" + context + bytes([index])
                          + component.tobytes()).digest()


class VerifiedParty(RingMember):
    """One member of the verified committee; its own state only.

    Args:
        index: 0, 1 or 2.
        context: 32 bytes binding the session and round (every message carries it).
        first, second: this party's components ``(c_i, c_{i+1})``, ``(m,)`` ``uint64``
            vectors in ``[0, p)``.
        rand: the party's randomness (``token_bytes``); OS randomness by default.

    Raises:
        ValueError: bad index, context or components.
    """

    def __init__(self, index: int, context: bytes, first: np.ndarray, second: np.ndarray,
                 rand: Any = None) -> None:
        if index not in (0, 1, 2):
            raise ValueError("committee parties are 0, 1 and 2")
        if not isinstance(context, bytes) or len(context) != CONTEXT_BYTES:
            raise ValueError(f"the context is {CONTEXT_BYTES} bytes")
        if not isinstance(first, np.ndarray) or first.ndim != 1:
            raise ValueError("components are 1-d uint64 vectors")
        m = first.shape[0]
        if not (F.check(first, (m,)) and F.check(second, (m,))):
            raise ValueError("components are uint64 vectors of one length, entries below p")
        self.index, self.context, self.m = index, context, m
        self.rand = rand if rand is not None else OsRandom()
        self._x: Pair = (first.copy(), second.copy())
        self._own_key = bytes(self.rand.token_bytes(32))
        if len(self._own_key) != 32:
            raise ValueError("the randomness source returned a short key")
        self._prev_key: bytes | None = None
        self.seconds = 0.0
        self.view: dict[str, Any] = {
            "context": context, "own_key": self._own_key, "keys_received": [], "received": [],
            "components": (first.copy(), second.copy()), "opened_coins": None,
            "check_value": None, "opened_bits": None, "opened_counts": None}
        self._checked: list[Pair] = []       # (u, w) pairs flattened later
        self._r: Pair | None = None
        self._out: Pair | None = None
        self._theta: int | None = None

    # ------------------------------------------------------------------ helpers


    def _msg(self, step: str, recipient: int, payload: Any) -> CommitteeMessage:
        return CommitteeMessage(self.context, step, self.index, recipient, payload)

    def _take(self, msg: Any, step: str, sender: int, shape: tuple[int, ...] | None = None,
              nbytes: int | None = None) -> Any:
        """Validate a received message completely before anything uses it."""
        if not isinstance(msg, CommitteeMessage):
            raise self._abort("malformed_message", f"{step}: not a committee message")
        if not isinstance(msg.context, bytes) or not hmac.compare_digest(msg.context,
                                                                         self.context):
            raise self._abort("replayed_message", f"{step} from party {msg.sender}: "
                              "another round's context")
        if msg.step != step or msg.sender != sender or msg.recipient != self.index:
            raise self._abort("unexpected_message",
                              f"expected {step} from party {sender}, got {msg.step!r} from "
                              f"{msg.sender!r} to {msg.recipient!r}")
        p = msg.payload
        if nbytes is not None:
            if not isinstance(p, bytes) or len(p) != nbytes:
                raise self._abort("malformed_message", f"{step} from party {sender}")
            self.view["received"].append((step, sender, p))
            return p
        assert shape is not None
        if not F.check(p, shape):
            raise self._abort("malformed_message",
                              f"{step} from party {sender}: not {shape} field elements")
        p = p.copy()
        self.view["received"].append((step, sender, p))
        return p

    def _keys(self) -> tuple[bytes, bytes]:
        if self._prev_key is None:
            raise self._abort("no_keys", "keys were not set up")
        return self._own_key, self._prev_key

    def _zero(self, label: str, count: int) -> np.ndarray:
        own, prev = self._keys()
        return F.sub(F.uniform(own, "zero/" + label, count),
                     F.uniform(prev, "zero/" + label, count))

    def _random(self, label: str, count: int) -> Pair:
        own, prev = self._keys()
        return F.uniform(prev, "rand/" + label, count), F.uniform(own, "rand/" + label, count)

    def _add_const(self, a: Pair, c: np.ndarray | int) -> Pair:
        """``[a] + c`` for a public ``c`` (added to component 0)."""
        c = np.asarray(int(c) % F.P if np.ndim(c) == 0 else c, dtype=np.uint64)
        if self.index == 0:
            return F.add(a[0], np.broadcast_to(c, a[0].shape)), a[1]
        if self.index == 2:
            return a[0], F.add(a[1], np.broadcast_to(c, a[1].shape))
        return a

    def _mul_local(self, a: Pair, b: Pair, label: str) -> np.ndarray:
        z = F.add(F.add(F.mul(a[0], b[0]), F.mul(a[0], b[1])), F.mul(a[1], b[0]))
        return F.add(z, self._zero(label, z.size))

    # ------------------------------------------------------------------ set-up

    def setup_messages(self) -> list[CommitteeMessage]:
        """``K_i`` and the digest of ``c_{i+1}``, both for party ``i+1``."""
        return [self._msg("key", self.next, self._own_key),
                self._msg("input-check", self.next,
                          _digest(self.context, self.next, self._x[1]))]

    def receive_setup(self, key: Any, digest: Any) -> None:
        """Take ``K_{i-1}`` and check the digest of ``c_i`` from party ``i-1``.

        Raises:
            CommitteeAborted: a malformed or misrouted message, or ``input_mismatch``.
        """
        k = self._take(key, "key", self.prev, nbytes=32)
        d = self._take(digest, "input-check", self.prev, nbytes=32)
        if not hmac.compare_digest(d, _digest(self.context, self.index, self._x[0])):
            raise self._abort("input_mismatch",
                              f"party {self.prev} holds a different component {self.index}")
        self._prev_key = k
        self.view["keys_received"].append((self.prev, k))

    # -------------------------------------------------------------- comparison

    def begin(self, theta: int) -> None:
        """Plan the comparison with ``theta >= 1``: the layer ``[r x]``, the product
        tree of ``[x - j]``, and the final product with ``[rho]``."""
        if theta < 1:
            raise self._abort("bad_arguments", "theta below 1 needs no comparison")
        self._theta = int(theta)
        m = self.m
        self._r = self._random("r", 1)
        r_full = (np.broadcast_to(self._r[0], (m,)).copy(),
                  np.broadcast_to(self._r[1], (m,)).copy())
        self._layer = 0
        self._pending: list[tuple[Pair, Pair, str]] = [(r_full, self._x, "rx")]

    def layer_message(self) -> CommitteeMessage:
        """This layer's masked products (main and checked), for party ``i-1``."""
        zs = [self._mul_local(a, b, f"{self._layer}/{tag}/{j}")
              for j, (a, b, tag) in enumerate(self._pending)]
        self._own_z = zs
        return self._msg(f"mult-{self._layer}", self.prev, np.concatenate(zs))

    def receive_layer(self, msg: Any) -> bool:
        """Complete the layer with party ``i+1``'s products; returns whether more
        multiplication layers follow.

        Raises:
            CommitteeAborted: a malformed or misrouted message.
        """
        sizes = [z.size for z in self._own_z]
        incoming = self._take(msg, f"mult-{self._layer}", self.next, (sum(sizes),))
        parts = np.split(incoming, np.cumsum(sizes)[:-1]) if len(sizes) > 1 else [incoming]
        results = [(own, theirs) for own, theirs in zip(self._own_z, parts)]
        del self._own_z
        tags = [tag for _, _, tag in self._pending]
        self._layer += 1
        m = self.m
        if tags == ["rx"]:
            rx = results[0]
            self._checked.append((rx, self._x))
            theta = self._theta or 1
            js = np.arange(theta, dtype=np.uint64)
            rows = theta
            # factors [x - j] and their checked companions [r x] - j [r]
            x0 = np.broadcast_to(self._x[0], (rows, m))
            x1 = np.broadcast_to(self._x[1], (rows, m))
            fx = self._add_const((x0.reshape(-1), x1.reshape(-1)),
                                 np.repeat(F.neg(js), m))
            rj0 = F.mul(np.repeat(js, m), np.broadcast_to(self._r[0], (rows * m,)))
            rj1 = F.mul(np.repeat(js, m), np.broadcast_to(self._r[1], (rows * m,)))
            frx = (F.sub(np.tile(rx[0], rows), rj0), F.sub(np.tile(rx[1], rows), rj1))
            self._rows = rows
            self._vals, self._rvals = fx, frx
            return self._plan_tree()
        if tags[0] == "tree":
            main, checked = results
            self._checked.append((checked, main))
            pairs = self._rows // 2
            carry = self._rows % 2
            m_rows = pairs * m
            if carry:
                lo = 2 * m_rows
                main = (np.concatenate([main[0], self._vals[0][lo:]]),
                        np.concatenate([main[1], self._vals[1][lo:]]))
                checked = (np.concatenate([checked[0], self._rvals[0][lo:]]),
                           np.concatenate([checked[1], self._rvals[1][lo:]]))
            self._rows = pairs + carry
            self._vals, self._rvals = main, checked
            return self._plan_tree()
        # the final layer: rho * P and r * rho * P
        main, checked = results
        self._checked.append((checked, main))
        self._out = main
        self._pending = []
        return False

    def _plan_tree(self) -> bool:
        m = self.m
        if self._rows > 1:
            pairs = self._rows // 2

            def rows(pair: Pair, which: int) -> Pair:
                """Row ``2 q + which`` of each of the ``pairs`` row pairs, flattened."""
                return (pair[0][:2 * pairs * m].reshape(pairs, 2, m)[:, which].reshape(-1),
                        pair[1][:2 * pairs * m].reshape(pairs, 2, m)[:, which].reshape(-1))

            a, b, ra = rows(self._vals, 0), rows(self._vals, 1), rows(self._rvals, 0)
            self._pending = [(a, b, "tree"), (ra, b, "tree")]
            return True
        rho = self._random("rho", m)
        self._pending = [(self._vals, rho, "final"), (self._rvals, rho, "final")]
        return True

    # ------------------------------------------------------------ verification

    def open_messages(self, step: str, pair: Pair) -> list[CommitteeMessage]:
        """Send ``c_i`` to party ``i+1`` and ``c_{i+1}`` to party ``i-1`` (each lacks it)."""
        return [self._msg(step, self.next, pair[0].copy()),
                self._msg(step, self.prev, pair[1].copy())]

    def finish_open(self, step: str, pair: Pair, from_prev: Any, from_next: Any) -> np.ndarray:
        """The opened value; the missing component must arrive identically from both.

        Raises:
            CommitteeAborted: malformed copies or ``open_mismatch``.
        """
        shape = pair[0].shape
        a = self._take(from_prev, step, self.prev, shape)
        b = self._take(from_next, step, self.next, shape)
        if not np.array_equal(a, b):
            raise self._abort("open_mismatch", f"the two copies of {step} differ")
        return F.add(F.add(pair[0], pair[1]), a)

    def coin_pair(self) -> Pair:
        """The sharing opened for the check: ``_COIN_WORDS`` coin words, then ``r``."""
        s = self._random("coins", _COIN_WORDS)
        assert self._r is not None
        return np.concatenate([s[0], self._r[0]]), np.concatenate([s[1], self._r[1]])

    def check_pair(self, coins: np.ndarray) -> Pair:
        """``[V] = sum_k alpha_k ([r w_k] - r [w_k])`` with the opened coins and ``r``."""
        self.view["opened_coins"] = coins.copy()
        seed = hashlib.sha256(b"fedhh committee coefficients\x00" + self.context
                              + coins[:_COIN_WORDS].tobytes()).digest()
        r = coins[_COIN_WORDS]
        u = [np.concatenate([c[0] for c, _ in self._checked]),
             np.concatenate([c[1] for c, _ in self._checked])]
        w = [np.concatenate([v[0] for _, v in self._checked]),
             np.concatenate([v[1] for _, v in self._checked])]
        alpha = F.uniform(seed, "alpha", u[0].size)
        out = []
        for j in range(2):
            d = F.sub(u[j], F.mul(w[j], r))
            out.append(np.array([_dot(alpha, d)], dtype=np.uint64))
        return out[0], out[1]

    def zero_test_message(self, coins: np.ndarray) -> CommitteeMessage:
        """The zero test of ``[V]`` (Chida et al.'s CheckZero): ``[V]`` times a fresh
        random ``[beta]``, for party ``i-1``. Opened, ``beta V`` is 0 when ``V`` is, and
        a uniform non-zero element otherwise -- whatever ``V`` is, so a failed check
        reveals nothing but the failure (``V`` itself can depend on the counts once a
        cheater has added errors)."""
        v = self.check_pair(coins)
        self._zero_own = self._mul_local(v, self._random("zero-test", 1), "zero-test")
        return self._msg("check-zero", self.prev, self._zero_own)

    def receive_zero_test(self, msg: Any) -> Pair:
        """The sharing of ``beta V`` with party ``i+1``'s product.

        Raises:
            CommitteeAborted: a malformed or misrouted message.
        """
        incoming = self._take(msg, "check-zero", self.next, (1,))
        return self._zero_own, incoming

    def accept_check(self, value: np.ndarray) -> None:
        """Raises ``verification_failed`` unless the opened ``beta V`` is 0."""
        self.view["check_value"] = value.copy()
        if int(value[0]) != 0:
            raise self._abort("verification_failed",
                              "a multiplication or input was tampered with")
        self._checked = []

    def result_pair(self) -> Pair:
        """The sharing of ``rho * P`` (opened only after :meth:`accept_check`)."""
        if self._out is None or self._checked:
            raise self._abort("not_verified", "the comparison has not been verified")
        return self._out

    def counts_pair(self, positions: np.ndarray) -> Pair:
        """This party's components of ``x`` at ``positions``."""
        return self._x[0][positions], self._x[1][positions]


def _dot(alpha: np.ndarray, d: np.ndarray) -> int:
    """``sum alpha_k d_k mod p`` in chunks (each product below ``p``)."""
    prods = F.mul(alpha, d)
    total = 0
    for lo in range(0, prods.size, 1 << 20):
        chunk = prods[lo:lo + (1 << 20)]
        # 2^20 values below 2^61 sum below 2^81: sum in two halves of 32 bits
        total += int((chunk >> np.uint64(32)).sum(dtype=np.uint64)) << 32
        total += int((chunk & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))
    return total % F.P


class InProcessRouter:
    """Routes the messages of three members in one process, as a network would: each
    member's calls are charged to it (:func:`~protocol.core.committee.rss.charged`), a
    ``hook`` may rewrite or lose any message, and an opening takes each member's
    missing component from both others (the comparison and the validity check share
    it)."""

    def __init__(self, parties: Sequence[Any], hook: MessageHook | None = None) -> None:
        self.parties, self.hook = list(parties), hook
        self.sent = [0] * COMMITTEE

    def call(self, i: int, fn: Callable[[], Any]) -> Any:
        return charged(self.parties[i], fn)

    def post(self, msgs: list[CommitteeMessage]) -> dict[tuple[int, int, str], Any]:
        """Route one step's messages: ``(sender, recipient, step) -> delivered``.

        Raises:
            CommitteeAborted: ``missing_message`` (the hook lost one).
        """
        box: dict[tuple[int, int, str], Any] = {}
        for msg in msgs:
            self.sent[msg.sender] += msg.nbytes
            out: Any = msg
            if self.hook is not None:
                res = self.hook(msg.step, msg.sender, msg.recipient, msg.payload)
                out = res if res is None or isinstance(res, CommitteeMessage) else \
                    CommitteeMessage(msg.context, msg.step, msg.sender, msg.recipient, res)
            if out is None:
                raise CommitteeAborted("missing_message", msg.recipient,
                                       f"{msg.step} from party {msg.sender}")
            box[(msg.sender, msg.recipient, msg.step)] = out
        return box

    def multiply_and_check(self) -> None:
        """Every member's multiplication layers (planned by its ``begin``), then Chida et
        al.'s check over every wire: open the coins, the zero test of ``[V]``, open it,
        and every member's :meth:`VerifiedParty.accept_check`.

        Raises:
            CommitteeAborted: ``verification_failed``, or any refusal on the way.
        """
        ps, call, post = self.parties, self.call, self.post
        more = True
        while more:
            step = f"mult-{ps[0]._layer}"
            box = post([call(i, ps[i].layer_message) for i in range(COMMITTEE)])
            more = any([call(i, lambda i=i: ps[i].receive_layer(box[(ps[i].next, i, step)]))
                        for i in range(COMMITTEE)])
        coins = self.open_all("open-coins", [call(i, ps[i].coin_pair)
                                             for i in range(COMMITTEE)])
        box = post([call(i, lambda i=i: ps[i].zero_test_message(coins))
                    for i in range(COMMITTEE)])
        check = self.open_all("open-check", [call(i, lambda i=i: ps[i].receive_zero_test(
            box[(ps[i].next, i, "check-zero")])) for i in range(COMMITTEE)])
        for i in range(COMMITTEE):
            call(i, lambda i=i: ps[i].accept_check(check))

    def open_all(self, step: str, pairs: list[Pair]) -> np.ndarray:
        """Open a sharing: every member's value, which must agree.

        Raises:
            CommitteeAborted: ``open_mismatch`` or a member's own refusal.
        """
        ps, call = self.parties, self.call
        box = self.post([m for i in range(COMMITTEE)
                         for m in call(i, lambda i=i: ps[i].open_messages(step, pairs[i]))])
        vals = [call(i, lambda i=i: ps[i].finish_open(
            step, pairs[i], box[(ps[i].prev, i, step)], box[(ps[i].next, i, step)]))
            for i in range(COMMITTEE)]
        if not all(np.array_equal(vals[0], v) for v in vals[1:]):
            raise CommitteeAborted("open_mismatch", 0, "members opened different values")
        return vals[0]


def run_verified_committee(components: Sequence[Pair], theta: int | None, *,
                           context: bytes, reveal_counts: bool,
                           rands: Sequence[Any] | None = None,
                           hook: MessageHook | None = None,
                           party_classes: Sequence[type] | None = None) -> CommitteeOutcome:
    """Run the three members in this process, routing every message between them.

    Args:
        components: per party ``i`` its pair ``(c_i, c_{i+1})`` of the replicated
            sharing of ``x`` over ``F_p`` (``(m,)`` ``uint64`` each).
        theta: the public threshold; ``None`` or ``0`` passes every candidate (no
            comparison).
        context: 32 bytes binding the round (carried by every message).
        reveal_counts: open the counts of the passing candidates (always, when
            ``theta`` is ``None``).
        rands: one randomness source per party (default OS randomness).
        hook: sees every message (:data:`MessageHook`: ``hook(step, sender, recipient,
            payload)`` returns the payload to deliver, a whole message, or ``None`` to
            lose it); tests and the attack catalogue model a deviating member with it.
        party_classes: per party, a :class:`VerifiedParty` subclass (the attack
            catalogue models a member that skips its own checks); honest by default.

    Returns:
        A :class:`~protocol.core.committee.rss.CommitteeOutcome`.

    Raises:
        CommitteeAborted: a lost, malformed, misrouted, replayed or inconsistent
            message, an input mismatch, or a failed verification; bad arguments.
    """
    if len(components) != COMMITTEE:
        raise CommitteeAborted("bad_arguments", 0, "three parties are needed")
    if theta is not None and not 0 <= int(theta) < F.P:
        raise CommitteeAborted("bad_arguments", 0, "theta outside the field")
    rands = list(rands) if rands is not None else [None] * COMMITTEE
    try:
        classes = list(party_classes) if party_classes is not None else [VerifiedParty] * 3
        parties = [classes[i](i, context, components[i][0], components[i][1], rands[i])
                   for i in range(COMMITTEE)]
    except ValueError as exc:
        raise CommitteeAborted("bad_arguments", 0, str(exc)) from None
    router = InProcessRouter(parties, hook)
    sent, call, post, open_all = router.sent, router.call, router.post, router.open_all

    box = post([m for i in range(COMMITTEE) for m in call(i, parties[i].setup_messages)])
    for i in range(COMMITTEE):
        p = parties[i]
        call(i, lambda p=p: p.receive_setup(box[(p.prev, p.index, "key")],
                                            box[(p.prev, p.index, "input-check")]))
    m = parties[0].m
    compare = theta is not None and int(theta) >= 1
    if not compare:
        passed = np.ones(m, dtype=bool)
    else:
        for i in range(COMMITTEE):
            call(i, lambda i=i: parties[i].begin(int(theta)))  # type: ignore[arg-type]
        router.multiply_and_check()
        opened = open_all("open-bits", [call(i, parties[i].result_pair)
                                        for i in range(COMMITTEE)])
        passed = opened != 0
        for p in parties:
            p.view["opened_bits"] = passed.astype(np.uint8)
    counts = None
    if reveal_counts or theta is None:
        positions = np.flatnonzero(passed)
        counts = open_all("open-counts", [call(i, lambda i=i: parties[i].counts_pair(
            positions)) for i in range(COMMITTEE)])
        for p in parties:
            p.view["opened_counts"] = counts.copy()
    return CommitteeOutcome(passed=passed, counts=counts, views=[p.view for p in parties],
                            seconds=[p.seconds for p in parties], bytes_sent=sent,
                            comparisons=m if compare else 0)
