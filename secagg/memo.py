"""Pure cryptographic work done once per simulated session.

Theory of operation
-------------------
A simulation plays every client of a session in one process, and many of them compute
the very same pure function of the very same bytes:

* **Signature checks.** Each of the ``k`` neighbours of ``v`` (and the server) checks
  ``v``'s round-0 key signature, and each of ``u``'s ``t`` signing neighbours' round-3
  signatures is checked by ``u`` and by the server. Whether ``Ed25519.Verify(pk, m,
  sig)`` accepts is a function of ``(pk, m, sig)`` alone.
* **Pairwise keys.** ``u`` computes ``HKDF(X25519(a, B), label, ctx)`` and ``v``
  computes ``HKDF(X25519(b, A), label, ctx)`` with ``A = X25519(a, 9)`` and
  ``B = X25519(b, 9)``; the two are equal (RFC 7748: both are ``ab`` times the base
  point), and the context ``sid || min(u, v) || max(u, v)`` is the pair's. A client
  always knows the public key of its own secret (it computed it), so the derivation is
  a function of the label, the context and the unordered pair ``{A, B}`` of public-key
  byte strings. (X25519 clamps the scalar, so the public key fixes the clamped secret
  and with it every shared value.) A pair derives two such keys, the share-encryption
  key from the ``c`` key pairs and the mask seed from the ``s`` key pairs; one entry
  holds both, keyed by the context and the two unordered pairs.

:class:`SessionMemo` remembers these results within **one** session. A signature check
is keyed by its exact input byte strings (a dict lookup compares them byte for byte); a
pair's keys, which wait in the memo for their second end, by SHA-256 over a
length-prefixed encoding of the exact inputs (32 bytes instead of about 216; collision
resistance makes a hit mean "the same bytes"). So:

* a party decides on exactly the bytes it received: a server that sends one group of
  clients other keys, messages or signatures than another misses the memo for every
  altered byte string, and those are checked (or derived) afresh;
* a failed check is remembered as a failure and raises :class:`CryptoError` again on
  every later call with the same bytes; it is never turned into a success;
* nothing outlives the session: the simulation creates one memo per session and drops
  it with the session's parties (a memo never crosses processes or sessions).

A pairwise key is wanted by exactly its two ends, so an entry is removed when it is
taken (the second end's lookup); a derivation that finds no entry computes the key
itself. Entries waiting for their second end are capped (``max_pending``, pairs): past
the cap new ones are not stored, which only costs the saving, never correctness.

Accounting. With a ``clock`` (CPU seconds, injected: this package reads none), the memo
times the computations it does (the first of each kind, then every
:data:`TIME_EVERY`-th: a CPU clock read is a system call, dearer than a dict lookup)
and charges every hit the mean timed cost of its kind in this session, in
:attr:`charged`, so a simulation can report separately its own CPU and the CPU a real
device would pay (it memoises nothing across devices). :attr:`hits` and
:attr:`misses` count per kind (``"ed25519_verify"``; ``"pairwise_keys"``: one per pair end, two X25519 and
two HKDF each).

This is a simulation device: a deployed client computes everything itself (it has no
peer to share with), and nothing here changes what any party sends or accepts.
"""
from __future__ import annotations

import struct
from hashlib import sha256 as _sha256
from typing import Any, Callable, MutableMapping

from . import crypto
from .errors import CryptoError

__all__ = ["SessionMemo", "VERIFY", "PAIRWISE", "TIME_EVERY"]

#: kinds of memoised work (keys of :attr:`SessionMemo.hits` and ``misses``)
VERIFY = "ed25519_verify"
PAIRWISE = "pairwise_keys"
#: a miss of each kind is timed once in this many (the first always)
TIME_EVERY = 8
_FAILED = b""              # a remembered failure (a genuine entry is never empty)
_PASSED = b"\x01"
_LENGTHS = struct.Struct(">5Q")
_PAIR_TAG = b"fedhh/memo/pairwise\x00"


def clock_overhead(clock: Callable[[], float], samples: int = 31) -> float:
    """The seconds one reading of ``clock`` adds to an interval it times: the median
    gap between consecutive readings (a CPU-time clock is a system call, about 0.3 to
    2 microseconds, comparable to the cheap primitives timed with it)."""
    gaps = []
    for _ in range(samples):
        a = clock()
        gaps.append(clock() - a)
    gaps.sort()
    return max(0.0, gaps[len(gaps) // 2])


class SessionMemo:
    """Results of pure cryptographic work of one session (see the module docstring).

    Args:
        clock: CPU-seconds clock (``time.thread_time``) for the accounting; ``None``:
            no accounting.
        max_pending: most pairs' keys held for their second end at once (the default,
            ``2^20``, is about 200 MB at most: an entry is a 32-byte digest, the pair's
            64 bytes of keys and a dict slot; a session of ``n`` clients of degree
            ``k`` has ``n k / 2`` pairs, about half of them waiting at the end of
            round 1 when the clients are served in roster order).
        entries: the mapping to store entries in (a dict shared with another memo of
            the same session, e.g. a server and its in-process replica); a fresh dict
            by default. Besides the memo's own entries it holds whatever
            :meth:`get`/:meth:`put` store (a server's share reconstructions).
    """

    __slots__ = ("_entries", "_clock", "_overhead", "max_pending", "_pending", "hits", "misses",
                 "seconds", "timed", "charged", "_messages", "__weakref__")

    def __init__(self, *, clock: Callable[[], float] | None = None,
                 max_pending: int = 1 << 20,
                 entries: MutableMapping[Any, Any] | None = None) -> None:
        self._entries: MutableMapping[Any, Any] = {} if entries is None else entries
        self._clock = clock
        #: what a reading of the clock itself costs (a system call): taken off each
        #: timed computation, which would otherwise charge it to every hit
        self._overhead = clock_overhead(clock) if clock is not None else 0.0
        self.max_pending = int(max_pending)
        self._pending = 0
        self.hits = {VERIFY: 0, PAIRWISE: 0}
        self.misses = {VERIFY: 0, PAIRWISE: 0}
        #: CPU seconds of the timed computations (misses), per kind, and how many
        self.seconds = {VERIFY: 0.0, PAIRWISE: 0.0}
        self.timed = {VERIFY: 0, PAIRWISE: 0}
        #: CPU seconds charged to hits (each at the mean cost of its kind so far)
        self.charged = 0.0
        #: one copy of each distinct signed message the verification entries refer to
        #: (many signers sign the same message in the consistency round)
        self._messages: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def _hit(self, kind: str) -> None:
        self.hits[kind] += 1
        done = self.timed[kind]
        if done:
            self.charged += self.seconds[kind] / done

    def _clock_for(self, kind: str) -> Callable[[], float] | None:
        """The clock if this miss is one of the timed ones, else ``None``."""
        return self._clock if self.misses[kind] % TIME_EVERY == 0 else None

    def _timed(self, kind: str, clock: Callable[[], float] | None, t0: float) -> None:
        self.misses[kind] += 1
        if clock is not None:
            self.seconds[kind] += max(0.0, clock() - t0 - self._overhead)
            self.timed[kind] += 1

    # ------------------------------------------------------------------ Ed25519

    def verify(self, public: bytes, message: bytes, signature: bytes) -> None:
        """:func:`secagg.crypto.ed25519_verify`, done once per distinct triple.

        Raises:
            CryptoError: the signature does not verify (now, or when these exact bytes
                were checked before), or an argument is malformed.
        """
        if type(public) is not bytes or type(message) is not bytes or (
                type(signature) is not bytes):
            # not exactly bytes: checked without the memo (the check refuses what it
            # must, and nothing is remembered under a key that could change)
            crypto.ed25519_verify(public, message, signature)
            return
        message = self._messages.setdefault(message, message)
        key = (VERIFY, public, message, signature)
        entries = self._entries
        known = entries.get(key)
        if known is not None:
            self._hit(VERIFY)
            if known != _PASSED:
                raise CryptoError("Ed25519 signature verification failed")
            return
        clock = self._clock_for(VERIFY)
        t0 = clock() if clock is not None else 0.0
        try:
            crypto.ed25519_verify(public, message, signature)
        except CryptoError:
            entries[key] = _FAILED
            raise
        finally:
            self._timed(VERIFY, clock, t0)
        entries[key] = _PASSED

    # ------------------------------------------------------------------ X25519 + HKDF

    def pairwise_keys(self, context: bytes, c_secret: bytes, c_own: bytes, c_peer: bytes,
                      s_secret: bytes, s_own: bytes, s_peer: bytes) -> tuple[bytes, bytes]:
        """The share-encryption key and the mask seed of one pair, computed once for
        both of its ends: ``(HKDF(X25519(c_secret, c_peer), "share-encryption-key",
        context), HKDF(X25519(s_secret, s_peer), "pairwise-mask-seed", context))``.

        ``c_own`` and ``s_own`` must be the public keys of ``c_secret`` and
        ``s_secret``: the caller's own, which it computed itself (the memo is keyed by
        them; a caller passing other keys would be handed the derivation of those
        keys' owner). One entry holds both keys (half the entries of one per key).

        Raises:
            CryptoError: a key of the wrong length, or a low-order peer key (the
                all-zero shared value; remembered, raised again on every call).
            ParameterError: a bad context.
        """
        c_lo, c_hi = (c_own, c_peer) if c_own <= c_peer else (c_peer, c_own)
        s_lo, s_hi = (s_own, s_peer) if s_own <= s_peer else (s_peer, s_own)
        try:
            # SHA-256 of the exact bytes, length-delimited, in one call: a pending pair
            # holds a 32-byte key instead of its 216 bytes of inputs (n k / 4 pairs wait
            # for their second end at the end of round 1)
            key = _sha256(b"".join((_LENGTHS.pack(
                len(context), len(c_lo), len(c_hi), len(s_lo), len(s_hi)),
                _PAIR_TAG, context, c_lo, c_hi, s_lo, s_hi))).digest()
        except TypeError:   # not bytes-like: derived without the memo, which refuses it
            return (crypto.hkdf(crypto.x25519_shared(c_secret, c_peer),
                                label=crypto.LABEL_SHARE_KEY, context=context),
                    crypto.hkdf(crypto.x25519_shared(s_secret, s_peer),
                                label=crypto.LABEL_MASK_SEED, context=context))
        entries = self._entries
        known = entries.pop(key, None)
        if known is not None:
            self._hit(PAIRWISE)
            if known == _FAILED:
                entries[key] = _FAILED    # failures stay, for every later caller
                raise CryptoError("X25519 produced the all-zero value (low-order public key)")
            self._pending -= 1
            return known[:crypto.KEY_BYTES], known[crypto.KEY_BYTES:]
        clock = self._clock_for(PAIRWISE)
        t0 = clock() if clock is not None else 0.0
        try:
            share_key = crypto.hkdf(crypto.x25519_shared(c_secret, c_peer),
                                    label=crypto.LABEL_SHARE_KEY, context=context)
            mask_seed = crypto.hkdf(crypto.x25519_shared(s_secret, s_peer),
                                    label=crypto.LABEL_MASK_SEED, context=context)
        except CryptoError:
            entries[key] = _FAILED
            raise
        finally:
            self._timed(PAIRWISE, clock, t0)
        if self._pending < self.max_pending:
            entries[key] = share_key + mask_seed
            self._pending += 1
        return share_key, mask_seed

    # ------------------------------------------------------------------ other pure work

    def get(self, key: Any) -> Any:
        """An entry stored by :meth:`put` (``None`` if absent)."""
        return self._entries.get(key)

    def put(self, key: Any, value: Any) -> None:
        """Store the result of a pure function under a key that encodes its exact
        inputs (e.g. ``("shamir", t, encodings)``)."""
        self._entries[key] = value

    def stats(self) -> dict[str, Any]:
        """Hits, misses and seconds per kind, and the CPU seconds charged to hits."""
        # the timed misses' seconds, scaled to all misses
        return {"hits": dict(self.hits), "misses": dict(self.misses),
                "seconds": {k: round(v * self.misses[k] / self.timed[k], 4)
                            if self.timed[k] else 0.0 for k, v in self.seconds.items()},
                "charged_seconds": round(self.charged, 4)}
