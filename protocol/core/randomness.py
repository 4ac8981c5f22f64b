"""Randomness sources injected into the sans-I/O state machines.

The interface :class:`RandomSource` and the production :class:`OsRandom` (``os.urandom``)
are defined once, in :mod:`secagg.randomness`, and re-exported here. Simulations that must be
reproducible opt in, explicitly and by name, to :func:`insecure_deterministic_randomness`,
a ChaCha20 keystream keyed by SHA-256 of the seed. It must never be used to protect
real data: anyone who knows the seed knows every key.
"""
from __future__ import annotations

import hashlib
import weakref
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from secagg.randomness import OsRandom, RandomSource

__all__ = ["RandomSource", "OsRandom", "insecure_deterministic_randomness", "seeded_randomness",
           "SEED_BYTES"]

#: length of a secret seed for :func:`seeded_randomness`
SEED_BYTES = 32


#: the one deterministic stream whose ChaCha20 context is open, and that context. A
#: simulation holds a stream per simulated client, and an open context is about
#: 0.8 KiB of OpenSSL's memory: a tenth of what a client of a large session holds at
#: its peak. A client draws its bytes within one step (its keys, its shares'
#: coefficients, its nonces), so one open context at a time costs one set-up (about
#: 4 us) per client and step; a stream that draws after another reopens its context
#: at the byte where it stopped, so its bytes are those of one context kept open.
_OPEN: tuple[Any, Any] = (None, None)


def _closed(ref: Any) -> None:
    """A stream went: its context (which holds its key) goes with it."""
    global _OPEN
    opened = _OPEN
    if opened and opened[0] is ref:
        _OPEN = (None, None)


def _context_at(key: bytes, offset: int) -> Any:
    """A ChaCha20 keystream of ``key`` positioned at byte ``offset``."""
    block, skip = divmod(offset, 64)
    # ChaCha20's 16-byte nonce here: the 32-bit block counter (little-endian), then 12
    enc = Cipher(algorithms.ChaCha20(key, block.to_bytes(4, "little") + bytes(12)),
                 mode=None).encryptor()
    if skip:
        enc.update(bytes(skip))
    return enc


class _DeterministicRandom:
    deterministic = True
    # a stream is its key and how far it has been read (the context: _OPEN)
    __slots__ = ("_key", "_offset", "__weakref__")

    def __init__(self, seed: int | bytes | str, label: str = "") -> None:
        if isinstance(seed, int):
            seed_b = seed.to_bytes((seed.bit_length() + 8) // 8, "big", signed=True)
        elif isinstance(seed, str):
            seed_b = seed.encode()
        else:
            seed_b = bytes(seed)
        key = hashlib.sha256(b"fedhh insecure deterministic randomness\x00" + label.encode()
                             + b"\x00" + seed_b).digest()
        self._key, self._offset = key, 0

    def token_bytes(self, n: int) -> bytes:
        global _OPEN
        ref, enc = _OPEN  # read once: another thread may open its own stream meanwhile
        if ref is None or ref() is not self:
            enc = _context_at(self._key, self._offset)
            _OPEN = (weakref.ref(self, _closed), enc)
        out: bytes = enc.update(b"\x00" * n)
        self._offset += n
        return out

    # a simulation moves a client (and its stream) between processes: the stream is its
    # key and how far it has been read, and resumes at that byte
    def __getstate__(self) -> tuple[bytes, int]:
        return self._key, self._offset

    def __setstate__(self, state: tuple[bytes, int]) -> None:
        key, offset = state
        if type(key) is not bytes or len(key) != 32 or type(offset) is not int \
                or not 0 <= offset < 64 << 32:
            raise ValueError("a deterministic stream's state is a 32-byte key and an offset")
        self._key, self._offset = key, offset

    def child(self, label: str) -> "_DeterministicRandom":
        """An independent stream derived from this one (for one party)."""
        return _DeterministicRandom(self.token_bytes(32), label)

    def numpy(self) -> np.random.Generator:
        """A numpy Generator seeded from this stream."""
        return np.random.default_rng(int.from_bytes(self.token_bytes(32), "big"))


def insecure_deterministic_randomness(seed: int | bytes | str, label: str = "") -> _DeterministicRandom:
    """A reproducible source for simulations only: every key is derivable from ``seed``."""
    return _DeterministicRandom(seed, label)


def seeded_randomness(seed: bytes, label: str) -> _DeterministicRandom:
    """The stream of a party whose every random choice must be re-derivable by an
    auditor: a ChaCha20 keystream keyed by SHA-256 of ``label`` and a 32-byte ``seed``.

    Secure exactly when ``seed`` is 32 uniform secret bytes (drawn from the OS in
    production): anyone who is given the seed can replay the party, which is the point
    (the threshold transport's helpers hand theirs to their auditor).

    Raises:
        ValueError: a seed that is not 32 bytes.
    """
    if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
        raise ValueError(f"an auditable party's seed is {SEED_BYTES} bytes")
    return _DeterministicRandom(seed, label)
