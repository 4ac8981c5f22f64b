"""Randomness sources injected into the sans-I/O state machines.

The interface :class:`RandomSource` and the production :class:`OsRandom` (``os.urandom``)
are defined once, in :mod:`secagg.randomness`, and re-exported here. Simulations that must be
reproducible opt in, explicitly and by name, to :func:`insecure_deterministic_randomness`,
a ChaCha20 keystream keyed by SHA-256 of the seed. It must never be used to protect
real data: anyone who knows the seed knows every key.
"""
from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from secagg.randomness import OsRandom, RandomSource

__all__ = ["RandomSource", "OsRandom", "insecure_deterministic_randomness"]


class _DeterministicRandom:
    deterministic = True

    def __init__(self, seed: int | bytes | str, label: str = "") -> None:
        if isinstance(seed, int):
            seed_b = seed.to_bytes((seed.bit_length() + 8) // 8, "big", signed=True)
        elif isinstance(seed, str):
            seed_b = seed.encode()
        else:
            seed_b = bytes(seed)
        key = hashlib.sha256(b"fedhh insecure deterministic randomness\x00" + label.encode()
                             + b"\x00" + seed_b).digest()
        self._enc = Cipher(algorithms.ChaCha20(key, b"\x00" * 16), mode=None).encryptor()

    def token_bytes(self, n: int) -> bytes:
        return self._enc.update(b"\x00" * n)

    def child(self, label: str) -> "_DeterministicRandom":
        """An independent stream derived from this one (for one party)."""
        return _DeterministicRandom(self.token_bytes(32), label)

    def numpy(self) -> np.random.Generator:
        """A numpy Generator seeded from this stream."""
        return np.random.default_rng(int.from_bytes(self.token_bytes(32), "big"))


def insecure_deterministic_randomness(seed: int | bytes | str, label: str = "") -> _DeterministicRandom:
    """A reproducible source for simulations only: every key is derivable from ``seed``."""
    return _DeterministicRandom(seed, label)
