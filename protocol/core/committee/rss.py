"""Three-party replicated secret sharing over ``Z_{2^k}`` and a vectorised threshold
comparison: the committee that turns additive shares of a count vector into the
pass/fail bit of every count against a public ``theta``, and nothing else.

Theory of operation
-------------------
Parties ``P0, P1, P2`` (by default the server and two helpers) start with an *additive*
sharing ``x = v0 + v1 + v2 (mod 2^k)`` of a vector of ``m`` counts (``P_j`` holds
``v_j``). The protocol is the honest-majority, semi-honest replicated-sharing protocol of
Araki, Furukawa, Lindell, Nof and Ohara, "High-Throughput Semi-Honest Secure Three-Party
Computation with an Honest Majority" (CCS 2016), with the share conversion and the
most-significant-bit extraction of Mohassel and Rindal, "ABY3: A Mixed Protocol Framework
for Machine Learning" (CCS 2018). Every operation acts on all ``m`` candidates at once;
``k <= 64`` bit words are numpy ``uint64`` and one boolean AND gate is a bitwise AND of
whole words, so the ``k`` bit positions of all ``m`` counts are processed together.

1. **Keys.** ``P_i`` samples a 32-byte key ``K_i`` from its :class:`RandomSource` and
   sends it to ``P_{i+1}``; so ``P_i`` holds ``K_i`` and ``K_{i-1}``, and the third party
   never sees ``K_i``. ``F_K`` is the ChaCha20 keystream under ``K`` (one counter per
   gate), so ``alpha_i = F_{K_i} xor F_{K_{i-1}}`` (or ``F_{K_i} - F_{K_{i-1}}``) are
   three shares of zero, each unpredictable to the party that receives it masked.
2. **Replicated sharing.** Component ``c_j`` is held by ``P_j`` and ``P_{j-1}``; ``P_i``
   holds the pair ``(c_i, c_{i+1})``, and any single pair is uniformly distributed
   whatever ``x`` is. ``P_j`` sets ``c_j = v_j + alpha_j`` and sends it to ``P_{j-1}``
   (fresh re-randomisation, so nothing depends on how the additive shares were made).
3. **Comparison.** Let ``y = x - theta (mod 2^k)``. With ``k`` chosen so that
   ``0 <= x, theta < 2^(k-1)`` (:func:`ring_bits`), ``x >= theta`` exactly when the most
   significant bit of ``y`` is 0. Each arithmetic component ``c_j`` of ``y`` is known to
   two parties, so it is a boolean replicated sharing for free (``c_j`` in component
   ``j``, zeros elsewhere). A carry-save adder (one AND layer) reduces the three
   summands to two; a Kogge-Stone parallel-prefix carry computation (``ceil(log2(k-1))``
   AND layers, two ANDs each) gives the carry into bit ``k-1``; the MSB is one XOR away.
   An AND of boolean sharings is local plus one message per party:
   ``z_i = a_i b_i ^ a_i b_{i+1} ^ a_{i+1} b_i ^ alpha_i`` sent to ``P_{i-1}``.
4. **Opening.** The pass bits are opened to every party: the component a party lacks is
   held by *both* other parties, and it takes it from both and aborts
   (``open_mismatch``) if the copies differ -- so one party that opens a wrong value is
   caught. When the round reveals counts, the counts are opened the same way *only at
   the passing positions*, which are public once the bits are.

Guarantees (semi-honest, at most one corrupted party, Araki et al. 2016): each party's
view -- its input, the keys it received, every received message, the opened values --
is simulatable from its input and the opened output; every received protocol message is
masked by a keystream the receiver does not know. The view therefore does not depend on
any count below ``theta`` beyond the fact that it fails. Two colluding parties hold all
three components and learn every count; a party that *computes* wrongly (rather than
opening wrongly) can flip results undetected -- the model is semi-honest
(``docs/threshold.md``).

Failures: a message of the wrong type, shape, dtype or range, a missing message, or
mismatching copies at opening raise :class:`CommitteeAborted` with a named ``reason``;
a party's state is never updated from an unvalidated message.

Randomness is injected: every party takes a ``RandomSource`` (``token_bytes``); the
default is :class:`protocol.core.randomness.OsRandom`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from protocol.core.randomness import OsRandom

__all__ = ["COMMITTEE", "CommitteeAborted", "CommitteeOutcome", "CommitteeParty", "Hook",
           "ring_bits", "run_committee"]

#: number of committee members
COMMITTEE = 3

#: hook(step, sender, recipient, payload) -> payload (or None: the message is lost)
Hook = Callable[[str, int, int, Any], Any]


class CommitteeAborted(RuntimeError):
    """The committee stopped without an output. ``reason`` names the check that failed;
    ``party`` is the member that detected it (or the one that failed)."""

    def __init__(self, reason: str, party: int, detail: str = "") -> None:
        super().__init__(f"{reason} (party {party})" + (f": {detail}" if detail else ""))
        self.reason = reason
        self.party = party
        self.detail = detail


def ring_bits(max_value: int, theta: int | None = None) -> int:
    """The ring ``Z_{2^k}`` for counts up to ``max_value`` compared with ``theta``:
    the smallest ``k >= 8`` with ``max(max_value, theta) < 2^(k-1)``.

    Raises:
        ValueError: a negative bound, or ``k`` would exceed 64.
    """
    bound = max(int(max_value), int(theta or 0))
    if bound < 0:
        raise ValueError("counts and theta are non-negative")
    k = max(8, bound.bit_length() + 1)
    if k > 64:
        raise ValueError("counts above 2**63 do not fit the committee's ring")
    return k


def charged(party: Any, fn: Callable[[], Any]) -> Any:
    """``fn()``, its CPU time added to ``party.seconds`` (a simulation's per-member
    accounting; this thread's CPU, so that work another thread does meanwhile -- the
    devices of the next batch -- is not charged to the member)."""
    t0 = time.thread_time()
    try:
        return fn()
    finally:
        party.seconds += time.thread_time() - t0


def _mask(k: int) -> np.uint64:
    return np.uint64((1 << k) - 1)


class RingMember:
    """A committee member's place in the ring: member ``index`` sends to ``next``
    (``index + 1``) and ``prev`` (``index - 1``), and names itself in its aborts."""

    index: int

    @property
    def next(self) -> int:
        return (self.index + 1) % COMMITTEE

    @property
    def prev(self) -> int:
        return (self.index - 1) % COMMITTEE

    def _abort(self, reason: str, detail: str = "") -> CommitteeAborted:
        return CommitteeAborted(reason, self.index, detail)


class _Stream:
    """ChaCha20 keystream as ``uint64`` words; one stream per key, consumed in order."""

    def __init__(self, key: bytes) -> None:
        self._enc = Cipher(algorithms.ChaCha20(key, b"\x00" * 16), mode=None).encryptor()

    def words(self, m: int) -> np.ndarray:
        return np.frombuffer(self._enc.update(b"\x00" * (8 * m)), dtype=np.uint64).copy()


@dataclass
class CommitteeParty:
    """One committee member: its own state only, driven message by message.

    Args:
        index: 0, 1 or 2.
        k: ring bits (``Z_{2^k}``).
        rand: the party's randomness (``token_bytes``); OS randomness by default.

    Raises:
        ValueError: bad index or ring size.
    """

    index: int
    k: int
    rand: Any = None
    view: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.index not in (0, 1, 2):
            raise ValueError("committee parties are 0, 1 and 2")
        if not 1 <= self.k <= 64:
            raise ValueError("ring bits must be in [1, 64]")
        self.rand = self.rand if self.rand is not None else OsRandom()
        self.mask = _mask(self.k)
        self._own_key = bytes(self.rand.token_bytes(32))
        if len(self._own_key) != 32:
            raise ValueError("the randomness source returned a short key")
        self._own: _Stream | None = None
        self._prev: _Stream | None = None
        self.view = {"own_key": self._own_key, "keys_received": [], "received": [],
                     "input_share": None, "components": None, "opened_bits": None,
                     "opened_counts": None}

    # -------------------------------------------------------------- validation

    def _check_words(self, step: str, sender: int, payload: Any, m: int) -> np.ndarray:
        if (not isinstance(payload, np.ndarray) or payload.dtype != np.uint64
                or payload.shape != (m,)):
            raise CommitteeAborted("malformed_message", self.index,
                                   f"{step} from party {sender}")
        if self.k < 64 and payload.size and int(payload.max()) > int(self.mask):
            raise CommitteeAborted("malformed_message", self.index,
                                   f"{step} from party {sender}: word outside the ring")
        return payload.copy()

    def _record(self, step: str, sender: int, value: np.ndarray) -> None:
        self.view["received"].append((step, sender, value.copy()))

    # ------------------------------------------------------------------- keys

    def key_message(self) -> bytes:
        """The key ``K_i`` for party ``i+1``."""
        return self._own_key

    def receive_key(self, sender: int, key: Any) -> None:
        """Take ``K_{i-1}`` from party ``i-1``.

        Raises:
            CommitteeAborted: wrong sender or a key that is not 32 bytes.
        """
        if sender != (self.index - 1) % 3 or not isinstance(key, bytes) or len(key) != 32:
            raise CommitteeAborted("malformed_message", self.index, "key setup")
        self._own, self._prev = _Stream(self._own_key), _Stream(key)
        self.view["keys_received"].append((sender, key))

    def _zero_share(self, m: int, arithmetic: bool) -> np.ndarray:
        if self._own is None or self._prev is None:
            raise CommitteeAborted("no_keys", self.index, "keys were not set up")
        a, b = self._own.words(m), self._prev.words(m)
        return ((a - b) if arithmetic else (a ^ b)) & self.mask

    # ----------------------------------------------------------- input sharing

    def share_input(self, value: np.ndarray) -> np.ndarray:
        """Re-randomise this party's additive share into component ``c_i`` (kept) and
        return it for party ``i-1``.

        Raises:
            CommitteeAborted: a share that is not a 1-d ``uint64`` vector in the ring.
        """
        v = self._check_words("input", self.index, value, np.asarray(value).shape[0]
                              if isinstance(value, np.ndarray) and value.ndim == 1 else -1)
        self.view["input_share"] = v.copy()
        self._c_own = (v + self._zero_share(v.size, True)) & self.mask
        self._m = v.size
        return self._c_own.copy()

    def receive_component(self, sender: int, comp: Any) -> None:
        """Take ``c_{i+1}`` from party ``i+1``.

        Raises:
            CommitteeAborted: wrong sender or a malformed vector.
        """
        if sender != (self.index + 1) % 3:
            raise CommitteeAborted("malformed_message", self.index, "component sender")
        c = self._check_words("input", sender, comp, self._m)
        self._record("input", sender, c)
        self._x = (self._c_own, c)
        self.view["components"] = (self._c_own.copy(), c.copy())

    # -------------------------------------------------------------- comparison

    def _and_local(self, a: tuple[np.ndarray, np.ndarray],
                   b: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        z = (a[0] & b[0]) ^ (a[0] & b[1]) ^ (a[1] & b[0])
        return z ^ self._zero_share(z.size, False)

    def begin_compare(self, theta: int) -> None:
        """Boolean summands of ``y = x - theta`` and the inputs of the carry-save AND.

        ``theta`` is subtracted from component ``c_0``, which ``P0`` holds first and
        ``P2`` second.
        """
        m, mask = self._m, self.mask
        first, second = self._x
        if self.index == 0:
            y = ((first - np.uint64(theta)) & mask, second)
        elif self.index == 2:
            y = (first, (second - np.uint64(theta)) & mask)
        else:
            y = (first, second)
        zero = np.zeros(m, dtype=np.uint64)
        # boolean summand j: component j = c_j of y, others 0; P_i holds (j==i, j==i+1)
        i = self.index
        summands = []
        for j in range(3):
            summands.append((y[0] if j == i else zero,
                             y[1] if j == (i + 1) % 3 else zero))
        a, b, c = summands
        self._s = (a[0] ^ b[0] ^ c[0], a[1] ^ b[1] ^ c[1])
        self._pending_c = c
        # carry = maj(a, b, c) = ((a ^ c) & (b ^ c)) ^ c
        self._gate_in = ((a[0] ^ c[0], a[1] ^ c[1]), (b[0] ^ c[0], b[1] ^ c[1]))

    def start_layers(self) -> None:
        self._layer = "csa"

    def finish_layer(self, own: np.ndarray, sender: int, incoming: Any) -> bool:
        """Complete the current AND layer with the share from party ``i+1``; returns
        whether more layers follow.

        Raises:
            CommitteeAborted: wrong sender or a malformed message.
        """
        if sender != (self.index + 1) % 3:
            raise CommitteeAborted("malformed_message", self.index, "AND sender")
        m, mask = self._m, self.mask
        if self._layer == "csa":
            z = self._check_words("and-csa", sender, incoming, m)
            self._record("and-csa", sender, z)
            c = self._pending_c
            carry = (own ^ c[0], z ^ c[1])
            carry = ((carry[0] << np.uint64(1)) & mask, (carry[1] << np.uint64(1)) & mask)
            s = self._s
            self._p_top = (s[0] ^ carry[0], s[1] ^ carry[1])
            self._gen_in = (s, carry)
            self._layer = "gen"
            return True
        if self._layer == "gen":
            z = self._check_words("and-gen", sender, incoming, m)
            self._record("and-gen", sender, z)
            self._pg = (self._p_top, (own, z))
            self._d = 1
            self._layer = "prefix" if self.k > 2 else "done"
            return self._layer != "done"
        z = self._check_words(f"and-prefix-{self._d}", sender, incoming, 2 * m)
        self._record(f"and-prefix-{self._d}", sender, z)
        p, g = self._pg
        pg_, pp_ = (own[:m], z[:m]), (own[m:], z[m:])
        g = (g[0] ^ pg_[0], g[1] ^ pg_[1])
        p = (pp_[0], pp_[1])
        self._pg = (p, g)
        self._d *= 2
        if self._d >= self.k - 1:
            self._layer = "done"
            return False
        return True

    def layer_message(self) -> np.ndarray:
        """The masked AND share of the current layer, for party ``i-1``."""
        if self._layer == "csa":
            return self._and_local(*self._gate_in)
        if self._layer == "gen":
            return self._and_local(*self._gen_in)
        p, g = self._pg
        d = np.uint64(self._d)
        gd = ((g[0] << d) & self.mask, (g[1] << d) & self.mask)
        pd = ((p[0] << d) & self.mask, (p[1] << d) & self.mask)
        return np.concatenate([self._and_local(p, gd), self._and_local(p, pd)])

    def result_bits(self) -> tuple[np.ndarray, np.ndarray]:
        """This party's boolean components of the pass bit (bit 0 of each word)."""
        k = self.k
        top = np.uint64(k - 1)
        p_top = self._p_top
        g = self._pg[1]
        one = np.uint64(1)
        if k >= 2:
            below = np.uint64(k - 2)
            msb = (((p_top[0] >> top) ^ (g[0] >> below)) & one,
                   ((p_top[1] >> top) ^ (g[1] >> below)) & one)
        else:
            msb = ((p_top[0] >> top) & one, (p_top[1] >> top) & one)
        # pass = NOT msb: flip component 0 (held by P0 as its first, by P2 as its second)
        b0 = msb[0] ^ one if self.index == 0 else msb[0]
        b1 = msb[1] ^ one if self.index == 2 else msb[1]
        self._bits = (b0, b1)
        return self._bits

    # ----------------------------------------------------------------- opening

    def open_message(self, which: str, positions: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """What this party sends to open a value: ``(first, second)`` components, i.e.
        ``c_i`` (for party ``i+1``, which lacks it) and ``c_{i+1}`` (for party ``i-1``,
        which lacks it)."""
        pair = self._bits if which == "bits" else self._x
        if positions is None:
            return pair[0].copy(), pair[1].copy()
        return pair[0][positions].copy(), pair[1][positions].copy()

    def finish_open(self, which: str, from_prev: Any, from_next: Any,
                    positions: np.ndarray | None = None) -> np.ndarray:
        """Reconstruct the opened value: the missing component ``c_{i+2}`` arrives from
        party ``i-1`` (its first) and party ``i+1`` (its second), and must agree.

        Raises:
            CommitteeAborted: a malformed copy (``malformed_message``) or two copies
                that differ (``open_mismatch``).
        """
        mine = self._bits if which == "bits" else self._x
        if positions is not None:
            mine = (mine[0][positions], mine[1][positions])
        size = mine[0].size
        a = self._check_words(f"open-{which}", (self.index - 1) % 3, from_prev, size)
        b = self._check_words(f"open-{which}", (self.index + 1) % 3, from_next, size)
        self._record(f"open-{which}", (self.index - 1) % 3, a)
        self._record(f"open-{which}", (self.index + 1) % 3, b)
        if not np.array_equal(a, b):
            raise CommitteeAborted("open_mismatch", self.index,
                                   f"the two copies of the {which} differ")
        if which == "bits":
            if a.size and int(a.max()) > 1:
                raise CommitteeAborted("malformed_message", self.index, "bit above 1")
            out = mine[0] ^ mine[1] ^ a
            self.view["opened_bits"] = out.copy()
        else:
            out = (mine[0] + mine[1] + a) & self.mask
            self.view["opened_counts"] = out.copy()
        return out


@dataclass
class CommitteeOutcome:
    """What the committee opened, and what each member saw.

    Attributes:
        passed: boolean vector, ``x >= theta`` for every candidate.
        counts: ``x`` at the passing positions (``None`` when counts stay hidden).
        views: per party: its own key and the key received, its input share, its
            replicated components ``(c_i, c_{i+1})`` (a function of the former),
            every received message ``(step, sender, words)``, the opened bits and
            counts.
        seconds: CPU seconds per party.
        bytes_sent: bytes each party sent.
        comparisons: ``m``.
    """

    passed: np.ndarray
    counts: np.ndarray | None
    views: list[dict[str, Any]]
    seconds: list[float]
    bytes_sent: list[int]
    comparisons: int


def run_committee(shares: Sequence[np.ndarray], k: int, theta: int | None, *,
                  reveal_counts: bool, rands: Sequence[Any] | None = None,
                  hook: Hook | None = None) -> CommitteeOutcome:
    """Run the three members in this process, routing every message between them.

    Args:
        shares: ``v0, v1, v2``, each a ``(m,)`` ``uint64`` vector in ``[0, 2^k)``, with
            ``x = v0 + v1 + v2 mod 2^k``; party ``j`` is given only ``v_j``.
        k: ring bits; every ``x`` and ``theta`` must be below ``2^(k-1)``.
        theta: the public threshold; ``None`` opens every count (no comparison).
        reveal_counts: open the counts of the passing candidates.
        rands: one randomness source per party (default OS randomness).
        hook: ``hook(step, sender, recipient, payload) -> payload`` sees every message
            (tests model a faulty or dishonest member with it); returning ``None``
            loses the message.

    Returns:
        A :class:`CommitteeOutcome`.

    Raises:
        CommitteeAborted: a lost, malformed or inconsistent message; bad arguments.
    """
    if len(shares) != COMMITTEE:
        raise CommitteeAborted("bad_arguments", 0, "three shares are needed")
    if theta is not None and not 0 <= int(theta) < 1 << (k - 1):
        raise CommitteeAborted("bad_arguments", 0, "theta outside the ring's half")
    rands = list(rands) if rands is not None else [None, None, None]
    parties = [CommitteeParty(i, k, rands[i]) for i in range(COMMITTEE)]
    sent = [0, 0, 0]

    def call(i: int, fn: Callable[[], Any]) -> Any:
        return charged(parties[i], fn)

    def route(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if isinstance(payload, np.ndarray):
            sent[sender] += payload.nbytes
        elif isinstance(payload, bytes):
            sent[sender] += len(payload)
        if hook is not None:
            payload = hook(step, sender, recipient, payload)
        if payload is None:
            raise CommitteeAborted("missing_message", recipient,
                                   f"{step} from party {sender}")
        return payload

    # keys
    keys = [call(i, parties[i].key_message) for i in range(3)]
    for i in range(3):
        key = route("key", i, (i + 1) % 3, keys[i])
        call((i + 1) % 3, lambda i=i, key=key: parties[(i + 1) % 3].receive_key(i, key))
    # input sharing: c_j to party j-1
    comps = [call(j, lambda j=j: parties[j].share_input(shares[j])) for j in range(3)]
    for j in range(3):
        c = route("input", j, (j - 1) % 3, comps[j])
        call((j - 1) % 3, lambda j=j, c=c: parties[(j - 1) % 3].receive_component(j, c))
    m = parties[0]._m
    if theta is None:
        passed = np.ones(m, dtype=bool)
    else:
        for i in range(3):
            call(i, lambda i=i: parties[i].begin_compare(int(theta)))
            parties[i].start_layers()
        more = True
        while more:
            msgs = [call(i, parties[i].layer_message) for i in range(3)]
            step = parties[0]._layer
            outcomes = []
            for i in range(3):
                z = route(f"and-{step}", (i + 1) % 3, i, msgs[(i + 1) % 3])
                outcomes.append(call(i, lambda i=i, z=z: parties[i].finish_layer(
                    msgs[i], (i + 1) % 3, z)))
            more = outcomes[0]
        for i in range(3):
            call(i, parties[i].result_bits)
        passed = _open(parties, "bits", None, route, call).astype(bool)
    counts = None
    if reveal_counts:
        positions = np.flatnonzero(passed)
        counts = _open(parties, "counts", positions, route, call)
    return CommitteeOutcome(passed=passed, counts=counts, views=[p.view for p in parties],
                            seconds=[p.seconds for p in parties], bytes_sent=sent,
                            comparisons=0 if theta is None else m)


def _open(parties: list[CommitteeParty], which: str, positions: np.ndarray | None,
          route: Callable[[str, int, int, Any], Any],
          call: Callable[[int, Callable[[], Any]], Any]) -> np.ndarray:
    msgs = [call(i, lambda i=i: parties[i].open_message(which, positions)) for i in range(3)]
    results = []
    for i in range(3):
        prev, nxt = (i - 1) % 3, (i + 1) % 3
        a = route(f"open-{which}", prev, i, msgs[prev][0])   # c_{i-1} = c_{i+2}
        b = route(f"open-{which}", nxt, i, msgs[nxt][1])     # c_{i+2}
        results.append(call(i, lambda i=i, a=a, b=b: parties[i].finish_open(
            which, a, b, positions)))
    if not all(np.array_equal(results[0], r) for r in results[1:]):
        raise CommitteeAborted("open_mismatch", 0, "members reconstructed different values")
    return results[0]
