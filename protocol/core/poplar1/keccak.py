"""TurboSHAKE128 over many messages at once: Keccak-p[1600, 12] vectorised across them.

TurboSHAKE128 (RFC 9861, "KangarooTwelve and TurboSHAKE", 2025) is a sponge of rate
168 bytes over the permutation Keccak-p[1600, 12] (FIPS 202, section 3.3: the last 12
rounds of Keccak-f[1600]). pycryptodome computes it one message per call, and for the
short inputs of Poplar1 (a seed, a domain-separation tag and a nonce, under 168 bytes)
the cost of a call -- allocating the state, crossing into C and back -- is most of the
time. Every report's XOF input is independent of every other's, so here the state of
``N`` sponges is one ``(25, N)`` uint64 array (lane ``x + 5 y`` of every sponge in one
row) and each step of each round (theta, rho and pi, chi, iota) is a handful of numpy
operations over all ``N`` lanes at once: the cost per message falls with ``N``.

:func:`turboshake128_many` hashes ``N`` messages of one length; :class:`SpongeBatch`
keeps ``N`` sponges squeezing in lockstep (Poplar1's correlated-randomness streams,
read a few bytes a level). Both give the same bytes as pycryptodome's
``Crypto.Hash.TurboSHAKE128`` (``tests/protocol/test_poplar1_keccak.py``), which stays
the path for a single message.
"""
from __future__ import annotations

import numpy as np

__all__ = ["RATE", "CHUNK", "keccak_p1600_12", "turboshake128_many", "SpongeBatch"]

#: TurboSHAKE128's rate in bytes (capacity 256 bits)
RATE = 168
_LANES = RATE // 8


def _round_constants() -> list[int]:
    """The 24 round constants of Keccak-f[1600] from the LFSR ``rc(t)`` of FIPS 202,
    algorithm 5."""
    def rc(t: int) -> int:
        if t % 255 == 0:
            return 1
        r = 1
        for _ in range(t % 255):
            r <<= 1
            if r & 0x100:
                r ^= 0x171
        return r & 1

    out = []
    for i in range(24):
        c = 0
        for j in range(7):
            c |= rc(j + 7 * i) << ((1 << j) - 1)
        out.append(c)
    return out


def _rho_pi() -> list[tuple[int, int, int]]:
    """``(source lane, destination lane, rotation)`` of rho followed by pi: lane
    ``(x, y)`` rotated by rho's offset moves to ``(y, 2x + 3y)`` (FIPS 202, algorithms
    2 and 3)."""
    offs = {(0, 0): 0}
    x, y = 1, 0
    for t in range(24):
        offs[(x, y)] = ((t + 1) * (t + 2) // 2) % 64
        x, y = y, (2 * x + 3 * y) % 5
    return [(x + 5 * y, y + 5 * ((2 * x + 3 * y) % 5), offs[(x, y)])
            for y in range(5) for x in range(5)]


#: Keccak-p[1600, 12] runs rounds 12 .. 23 of Keccak-f[1600]
_RC = [np.uint64(c) for c in _round_constants()[12:]]
_RHO_PI = _rho_pi()
_SHIFT = [np.uint64(i) for i in range(65)]


def _rotl(v: np.ndarray, n: int, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    if n == 0:
        out[...] = v
        return out
    np.left_shift(v, _SHIFT[n], out=out)
    np.right_shift(v, _SHIFT[64 - n], out=tmp)
    np.bitwise_or(out, tmp, out=out)
    return out


def keccak_p1600_12(state: np.ndarray) -> None:
    """Keccak-p[1600, 12] in place on ``(25, N)`` uint64 (lane ``x + 5 y`` in row
    ``x + 5 y``, each lane's bytes little-endian, as FIPS 202 maps a state string).

    With numba installed, the compiled kernel of :mod:`~protocol.core.poplar1.jit`
    (column by column, the state in registers). Without it, two numpy schedules of the
    same rounds: below :data:`_WIDE` sponges, each step over whole
    planes (few numpy calls, each over many lanes: the per-call cost dominates there);
    from it, lane by lane with preallocated outputs (more calls, less memory traffic)."""
    if state.dtype != np.uint64 or state.ndim != 2 or state.shape[0] != 25:
        raise ValueError("keccak_p1600_12 takes a (25, N) uint64 array")
    n = state.shape[1]
    if _compiled is not None:
        _compiled(state)
    elif n < _WIDE:
        _rounds_planes(state)
    elif n <= CHUNK:
        _rounds_lanes(state)
    else:
        for lo in range(0, n, CHUNK):       # cache-sized blocks of sponges
            _rounds_lanes(state[:, lo:lo + CHUNK])


def _load_compiled():  # noqa: ANN202
    from protocol.core.poplar1 import jit
    return jit.keccak_p1600_12_columns if jit.available() else None


#: the compiled kernel of :mod:`jit` (numba), or None: the numpy rounds below
_compiled = None


#: from this many sponges on, :func:`_rounds_lanes`
_WIDE = 2048
#: sponges one pass of the rounds (and :func:`turboshake128_many`) takes at once: the
#: state and temporaries of 8,192 sponges (about 3 MB) stay in the cache, where the
#: whole batch's would not (1.1 against 3.0 us a message over 220,000 messages,
#: measured on this machine)
CHUNK = 8192
_SRC = np.zeros(25, dtype=np.intp)
_ROT = np.zeros((25, 1), dtype=np.uint64)
for _s, _d, _r in _RHO_PI:
    _SRC[_d], _ROT[_d, 0] = _s, _r
_ROT_R = ((np.uint64(64) - _ROT) % np.uint64(64)).astype(np.uint64)
_NEXT = np.array([1, 2, 3, 4, 0])
_PREV = np.array([4, 0, 1, 2, 3])


def _rounds_planes(state: np.ndarray) -> None:
    n = state.shape[1]
    a3 = state.reshape(5, 5, n)                       # (y, x, sponge)
    c = np.empty((5, n), dtype=np.uint64)
    d = np.empty((5, n), dtype=np.uint64)
    t5 = np.empty((5, n), dtype=np.uint64)
    b = np.empty((25, n), dtype=np.uint64)
    t = np.empty((25, n), dtype=np.uint64)
    b3 = b.reshape(5, 5, n)
    for rc in _RC:
        # theta: column parities, then every lane XOR the two neighbouring columns'
        np.bitwise_xor(a3[0], a3[1], out=c)
        c ^= a3[2]
        c ^= a3[3]
        c ^= a3[4]
        c1 = c[_NEXT]
        np.left_shift(c1, _SHIFT[1], out=d)
        np.right_shift(c1, _SHIFT[63], out=t5)
        d |= t5
        d ^= c[_PREV]
        a3 ^= d[None]
        # rho and pi: gather each destination's source lane, rotate by its offset
        np.take(state, _SRC, axis=0, out=b)
        np.right_shift(b, _ROT_R, out=t)
        b <<= _ROT
        b |= t
        # chi, one column of every plane at a time
        for x in range(5):
            np.bitwise_not(b3[:, (x + 1) % 5], out=t5)
            t5 &= b3[:, (x + 2) % 5]
            np.bitwise_xor(b3[:, x], t5, out=a3[:, x])
        # iota
        state[0] ^= rc


def _rounds_lanes(state: np.ndarray) -> None:
    n = state.shape[1]
    a = [state[i] for i in range(25)]
    c = np.empty((5, n), dtype=np.uint64)
    d = np.empty((5, n), dtype=np.uint64)
    b = np.empty((25, n), dtype=np.uint64)
    tmp = np.empty(n, dtype=np.uint64)
    for rc in _RC:
        # theta
        for x in range(5):
            np.bitwise_xor(a[x], a[x + 5], out=c[x])
            np.bitwise_xor(c[x], a[x + 10], out=c[x])
            np.bitwise_xor(c[x], a[x + 15], out=c[x])
            np.bitwise_xor(c[x], a[x + 20], out=c[x])
        for x in range(5):
            _rotl(c[(x + 1) % 5], 1, d[x], tmp)
            np.bitwise_xor(d[x], c[(x - 1) % 5], out=d[x])
        for i in range(25):
            np.bitwise_xor(a[i], d[i % 5], out=a[i])
        # rho and pi
        for src, dst, rot in _RHO_PI:
            _rotl(a[src], rot, b[dst], tmp)
        # chi
        for y in range(0, 25, 5):
            for x in range(5):
                i = y + x
                np.bitwise_not(b[y + (x + 1) % 5], out=tmp)
                np.bitwise_and(tmp, b[y + (x + 2) % 5], out=tmp)
                np.bitwise_xor(b[i], tmp, out=a[i])
        # iota
        np.bitwise_xor(a[0], rc, out=a[0])


def _absorb(messages: np.ndarray, domain: int) -> np.ndarray:
    """The ``(25, N)`` states after absorbing ``N`` equal-length messages with
    TurboSHAKE's padding (the domain byte, zeros, ``0x80`` on the last byte of the
    block)."""
    if not 0x01 <= domain <= 0x7F:
        raise ValueError("TurboSHAKE's domain byte is in [0x01, 0x7F]")
    msgs = np.asarray(messages, dtype=np.uint8)
    if msgs.ndim != 2:
        raise ValueError("messages must be an (N, L) uint8 array")
    n, length = msgs.shape
    blocks = length // RATE + 1
    padded = np.zeros((n, blocks * RATE), dtype=np.uint8)
    padded[:, :length] = msgs
    padded[:, length] ^= domain
    padded[:, -1] ^= 0x80
    lanes = padded.view("<u8").reshape(n, blocks, _LANES)
    state = np.zeros((25, n), dtype=np.uint64)
    for blk in range(blocks):
        state[:_LANES] ^= lanes[:, blk, :].T.astype(np.uint64)
        keccak_p1600_12(state)
    return state


def _rate_bytes(state: np.ndarray) -> np.ndarray:
    """The rate part of ``(25, N)`` states as ``(N, 168)`` bytes."""
    return np.ascontiguousarray(state[:_LANES].T).astype("<u8").view(np.uint8)


def turboshake128_many(messages: np.ndarray, domain: int, length: int) -> np.ndarray:
    """TurboSHAKE128(``messages[i]``, ``domain``, ``length``) for every row: ``(N, L)``
    uint8 in, ``(N, length)`` uint8 out.

    Raises:
        ValueError: a domain byte outside ``[0x01, 0x7F]`` or a negative length.
    """
    if length < 0:
        raise ValueError("negative output length")
    messages = np.asarray(messages, dtype=np.uint8)
    if messages.ndim == 2 and messages.shape[0] > CHUNK:
        out = np.empty((messages.shape[0], length), dtype=np.uint8)
        for lo in range(0, messages.shape[0], CHUNK):
            out[lo:lo + CHUNK] = turboshake128_many(messages[lo:lo + CHUNK], domain, length)
        return out
    state = _absorb(messages, domain)
    n = state.shape[1]
    out = np.empty((n, -(-length // RATE) * RATE), dtype=np.uint8)
    for blk in range(out.shape[1] // RATE):
        if blk:
            keccak_p1600_12(state)
        out[:, blk * RATE:(blk + 1) * RATE] = _rate_bytes(state)
    return out[:, :length]


class SpongeBatch:
    """``N`` TurboSHAKE128 sponges squeezed in lockstep: every :meth:`read` returns the
    next ``length`` bytes of every stream (``(N, length)`` uint8), as ``N`` calls of
    pycryptodome's ``read(length)`` would. Only the states are kept (200 bytes a
    sponge): the current output block is the rate part of the state, read from its
    lanes as needed."""

    __slots__ = ("_state", "_pos")

    def __init__(self, messages: np.ndarray, domain: int) -> None:
        self._state = _absorb(messages, domain)
        self._pos = 0

    def __len__(self) -> int:
        return self._state.shape[1]

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The sponges' state, the current output block and the read position: what
        :meth:`resume` takes to continue the streams exactly where they are."""
        return self._state, _rate_bytes(self._state), self._pos

    @classmethod
    def resume(cls, state: np.ndarray, buf: np.ndarray | None, pos: int) -> "SpongeBatch":
        """Sponges continued from a :meth:`snapshot` (``buf`` may be left out: it is
        the state's rate part).

        Raises:
            ValueError: arrays of the wrong shape, or an output block that is not the
                state's rate part.
        """
        state = np.ascontiguousarray(state, dtype=np.uint64)
        if state.ndim != 2 or state.shape[0] != 25 or not 0 <= pos <= RATE:
            raise ValueError("not a SpongeBatch snapshot")
        if buf is not None:
            buf = np.ascontiguousarray(buf, dtype=np.uint8)
            if buf.shape != (state.shape[1], RATE) or not np.array_equal(buf, _rate_bytes(state)):
                raise ValueError("not a SpongeBatch snapshot")
        out = cls.__new__(cls)
        out._state, out._pos = state, int(pos)
        return out

    def _block_bytes(self, lo: int, hi: int) -> np.ndarray:
        """Bytes ``lo .. hi`` of the current output block of every sponge, ``(N, hi -
        lo)``, from the lanes that hold them."""
        first, last = lo // 8, -(-hi // 8)
        lanes = np.ascontiguousarray(self._state[first:last].T).astype("<u8").view(np.uint8)
        return lanes[:, lo - 8 * first:hi - 8 * first]

    def read(self, length: int) -> np.ndarray:
        if length < 0:
            raise ValueError("negative output length")
        parts = []
        need = length
        while need:
            if self._pos == RATE:
                keccak_p1600_12(self._state)
                self._pos = 0
            take = min(need, RATE - self._pos)
            parts.append(self._block_bytes(self._pos, self._pos + take))
            self._pos += take
            need -= take
        if not parts:
            return np.empty((len(self), 0), dtype=np.uint8)
        return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0].copy()


_compiled = _load_compiled()
