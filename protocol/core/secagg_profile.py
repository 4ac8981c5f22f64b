"""Where a secure-aggregation run spends its time, next to what the bare primitives cost.

:func:`profile_primitives` counts the calls and CPU seconds spent inside each primitive
the state machines use (:class:`PrimitiveProfile`; it is re-exported by
:mod:`protocol.core.secagg_engine`). :func:`bare_costs` replays the same
operations (same counts and sizes) directly on the libraries -- one libsodium X25519
scalar multiplication per key agreement, the raw AES-256-CTR keystream for the mask
bytes, ``shamir.split``/``combine`` called directly, ChaCha20-Poly1305, Ed25519 and
HKDF-SHA256 on ``cryptography`` objects -- and :func:`primitive_table` puts the two side
by side, one row per primitive family. The ratio ``seconds / bare_seconds`` is the
overhead of our wrappers over the libraries; the share of a run spent in a family is
``seconds`` over the run's CPU time.

The bare cost is timed on up to ``sample`` operations of each kind and scaled linearly
to the run's count (``sample <= 0`` replays every operation). Everything is CPU seconds
(``time.thread_time``), so the figures do not depend on how busy the machine is.
Used by ``fedhh bench secagg`` (one round) and ``fedhh bench triehh`` (a whole run).

Sampling (``profile_primitives(every=N)``): every call is counted, but only every
``N``-th call of each primitive is timed, and a primitive's seconds are its timed
seconds scaled by ``calls / timed calls``. The clock reads then cost ``1/N`` of what
timing every call costs, so the profiled run can be the measured run (no second run).

Two figures (:func:`device_profile`): a simulation shares pure work between the
parties it plays (:class:`secagg.memo.SessionMemo`), so the calls the profile sees are
fewer than a deployment's. The per-device profile adds the memo's hits back as calls
of the primitives they stand for (a signature check: ``ed25519_verify``; a pair's
keys: two ``x25519_shared`` and two ``hkdf``), at the mean in-run cost per call: what
devices of their own would execute.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from secagg import crypto, prg, shamir

__all__ = ["PrimitiveProfile", "profile_primitives", "category_seconds", "FAMILIES",
           "bare_costs", "primitive_table", "device_profile", "floor_ratios"]


@dataclass
class PrimitiveProfile:
    """Calls and CPU seconds (``time.thread_time``) spent inside each wrapped primitive
    during a run. A primitive called from inside another wrapped one (``x25519_keypair``
    computing its public key with ``x25519_public``) counts as part of the outer call
    only."""

    calls: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: argument shapes needed to replay the same work bare (kept small)
    shapes: dict[str, dict[Any, int]] = field(default_factory=dict)
    #: calls that were timed (all of them unless sampling)
    timed: dict[str, int] = field(default_factory=dict)


_CATEGORY = {
    ("crypto", "x25519_shared"): "key_agreement", ("crypto", "x25519_keypair"): "key_agreement",
    ("crypto", "x25519_public"): "key_agreement", ("prg", "expand_mask"): "prg",
    ("prg", "mask_sum"): "prg",
    ("shamir", "split"): "shamir", ("shamir", "split_encoded"): "shamir",
    ("shamir", "split_encoded_many"): "shamir",
    ("shamir", "combine"): "shamir", ("shamir", "combine_encoded"): "shamir",
    ("shamir", "combine_encoded_many"): "shamir",
    ("crypto", "aead_encrypt"): "aead", ("crypto", "aead_decrypt"): "aead",
    ("crypto", "aead_encrypt_many"): "aead", ("crypto", "aead_decrypt_many"): "aead",
    ("crypto", "ed25519_sign"): "signature", ("crypto", "ed25519_verify"): "signature",
    ("crypto", "hkdf"): "kdf",
}


def _shape(name: str, args: tuple[Any, ...]) -> Any:
    if name == "expand_mask":
        return (args[1], args[2])
    if name == "mask_sum":  # (dim, modulus, masks summed)
        return (args[1], args[2], len(args[0]))
    if name in ("split", "split_encoded"):
        return (len(args[1]), args[2])
    if name == "split_encoded_many":  # (secrets, points, threshold)
        return (len(args[0]), len(args[1]), args[2])
    if name in ("combine", "combine_encoded"):
        return args[1]
    if name == "combine_encoded_many":  # (secrets, threshold)
        return (len(args[0]), args[1])
    if name in ("aead_encrypt", "aead_decrypt"):
        return (len(args[1]), len(args[2]))
    if name in ("aead_encrypt_many", "aead_decrypt_many"):
        # (items, plaintext or ciphertext bytes, associated data bytes) of the first
        return (len(args[1]), len(args[1][0]) if args[1] else 0,
                len(args[2][0]) if args[2] else 0)
    return None


@contextmanager
def profile_primitives(every: int = 1) -> Iterator[PrimitiveProfile]:
    """Wrap the secagg primitives with counters and timers for the duration of the
    block.

    The state machines call the primitives through their modules
    (``crypto.x25519_shared(...)``), so replacing the module attributes is enough.
    Not thread-safe; meant for benchmarks.

    Args:
        every: time every ``every``-th call of each primitive (the first, then each
            ``every``-th; all are counted) and scale the seconds to all calls when the
            block ends; ``1``: time every call.

    Raises:
        ValueError: ``every < 1``.
    """
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ValueError("every must be an int >= 1")
    from secagg.memo import clock_overhead

    prof = PrimitiveProfile()
    clock = time.thread_time
    # a timed call's interval includes about one reading of the clock: taken off, or
    # the cheap primitives (an AEAD call is a few microseconds) would carry it
    overhead = clock_overhead(clock)
    mods = {"crypto": crypto, "prg": prg, "shamir": shamir}
    saved = []
    # only the outermost wrapped call is counted: x25519_keypair calls x25519_public
    # through the module, and counting both would count its time twice
    depth = [0]
    for (mod_name, fn_name), cat in _CATEGORY.items():
        mod = mods[mod_name]
        orig = getattr(mod, fn_name)
        saved.append((mod, fn_name, orig))

        def wrapper(*args: Any, __orig: Callable[..., Any] = orig, __name: str = fn_name,
                    **kw: Any) -> Any:
            if depth[0]:
                return __orig(*args, **kw)
            calls = prof.calls.get(__name, 0)
            prof.calls[__name] = calls + 1
            sh = _shape(__name, args)
            if sh is not None:
                d = prof.shapes.setdefault(__name, {})
                d[sh] = d.get(sh, 0) + 1
            if calls % every:
                depth[0] += 1
                try:
                    return __orig(*args, **kw)
                finally:
                    depth[0] -= 1
            depth[0] += 1
            t0 = clock()
            try:
                return __orig(*args, **kw)
            finally:
                dt = max(0.0, clock() - t0 - overhead)
                depth[0] -= 1
                prof.timed[__name] = prof.timed.get(__name, 0) + 1
                prof.seconds[__name] = prof.seconds.get(__name, 0.0) + dt

        setattr(mod, fn_name, wrapper)
    try:
        yield prof
    finally:
        for mod, fn_name, orig in saved:
            setattr(mod, fn_name, orig)
        if every > 1:   # timed seconds scaled to every call
            for name, timed in prof.timed.items():
                prof.seconds[name] *= prof.calls[name] / timed


def device_profile(prof: PrimitiveProfile, memo_stats: dict[str, Any] | None
                   ) -> PrimitiveProfile:
    """The profile devices of their own would show: ``prof`` with the session
    memo's hits (:meth:`secagg.memo.SessionMemo.stats`, summed over sessions) added as
    calls of the primitives they stand for, each at the mean in-run seconds per call of
    that primitive (see the module docstring). ``prof`` itself is not changed."""
    out = PrimitiveProfile(dict(prof.calls), dict(prof.seconds),
                           {k: dict(v) for k, v in prof.shapes.items()}, dict(prof.timed))
    if not memo_stats:
        return out
    hits = memo_stats.get("hits", {})
    for kind, fns, per_hit in (("ed25519_verify", ("ed25519_verify",), 1),
                               ("pairwise_keys", ("x25519_shared", "hkdf"), 2)):
        extra = per_hit * int(hits.get(kind, 0))
        if not extra:
            continue
        for fn in fns:
            calls = out.calls.get(fn, 0)
            mean = out.seconds.get(fn, 0.0) / calls if calls else 0.0
            out.calls[fn] = calls + extra
            out.seconds[fn] = out.seconds.get(fn, 0.0) + extra * mean
    return out


def category_seconds(prof: PrimitiveProfile) -> dict[str, float]:
    """Seconds per category (key_agreement, prg, shamir, aead, signature, kdf)."""
    out: dict[str, float] = {}
    for (_, fn), cat in _CATEGORY.items():
        out[cat] = out.get(cat, 0.0) + prof.seconds.get(fn, 0.0)
    return out

#: primitive family -> the wrapped functions that belong to it
FAMILIES: dict[str, tuple[str, ...]] = {
    "key_agreement": ("x25519_shared", "x25519_keypair", "x25519_public"),
    "prg": ("expand_mask", "mask_sum"), "shamir": ("split", "split_encoded", "split_encoded_many",
                                                "combine", "combine_encoded",
                                                "combine_encoded_many"),
    "aead": ("aead_encrypt", "aead_decrypt", "aead_encrypt_many", "aead_decrypt_many"), "signature": ("ed25519_sign", "ed25519_verify"),
    "kdf": ("hkdf",),
}


def primitive_table(prof: PrimitiveProfile, sample: int = 2000) -> dict[str, dict[str, Any]]:
    """``{family: {calls, seconds, bare_seconds, overhead_ratio}}`` for every family."""
    cats = category_seconds(prof)
    bare = bare_costs(prof, sample)
    table = {}
    for fam, fns in FAMILIES.items():
        b = bare.get(fam, 0.0)
        s = cats.get(fam, 0.0)
        table[fam] = {
            "calls": sum(prof.calls.get(fn, 0) for fn in fns), "seconds": round(s, 4),
            "bare_seconds": round(b, 4),
            "overhead_ratio": round(s / b, 2) if b > 0 else None,
        }
    return table


def floor_ratios(cpu_seconds: float, table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The round's CPU over the bare cost of its X25519 operations (``floor_ratio``),
    and the ratio the round would have if nothing but the bare primitives cost CPU:
    every family at its bare cost, over the same X25519 cost
    (``primitive_floor_ratio``, a lower bound for ``floor_ratio`` with these
    libraries, whatever the code around them). ``None`` without key agreements."""
    ka = table["key_agreement"]["bare_seconds"]
    if not ka:
        return {"floor_ratio": None, "primitive_floor_ratio": None}
    bare = sum(v["bare_seconds"] for v in table.values())
    return {"floor_ratio": round(cpu_seconds / ka, 2),
            "primitive_floor_ratio": round(bare / ka, 2)}


def bare_costs(prof: PrimitiveProfile, sample: int = 2000) -> dict[str, float]:
    """CPU seconds the bare library calls take for the operations ``prof`` counted."""
    import nacl.bindings as nacl_b
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    from protocol.core.randomness import OsRandom
    from secagg import prg, shamir
    from secagg.crypto import _SODIUM_AEAD as sodium_aead

    if sodium_aead is not None:
        from nacl._sodium import ffi as sodium_ffi

    def timed(count: int, fn: Callable[[], Any]) -> float:
        if count <= 0:
            return 0.0
        reps = count if sample <= 0 else min(count, sample)
        fn()  # once untimed: a first call's set-up is no operation's cost
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        return (time.thread_time() - t0) * count / reps

    calls = prof.calls
    out: dict[str, float] = {}
    # key agreement: one X25519 scalar multiplication per operation (libsodium)
    sk = os.urandom(32)
    pk = nacl_b.crypto_scalarmult_base(os.urandom(32))
    out["key_agreement"] = timed(
        calls.get("x25519_shared", 0), lambda: nacl_b.crypto_scalarmult(sk, pk)) + timed(
        calls.get("x25519_keypair", 0) + calls.get("x25519_public", 0),
        lambda: nacl_b.crypto_scalarmult_base(sk))
    # PRG: the raw AES-256-CTR keystream for the same number of bytes
    prg_t = 0.0
    masks = dict(prof.shapes.get("expand_mask", {}))
    for (dim, modulus, terms), count in prof.shapes.get("mask_sum", {}).items():
        masks[(dim, modulus)] = masks.get((dim, modulus), 0) + count * terms
    for (dim, modulus), count in masks.items():
        nbytes = dim * prg.mask_bytes_per_entry(modulus)
        zeros = np.zeros(nbytes, np.uint8)
        buf = np.empty(nbytes + 16, np.uint8)
        key = os.urandom(32)
        one = timed(count, lambda: Cipher(algorithms.AES(key), modes.CTR(bytes(16)))
                    .encryptor().update_into(zeros, buf))
        if count and prg._openssl_ctr() is not None and nbytes <= prg._ZEROS.size:
            # the cheaper of the two library paths the PRG takes: libcrypto's one
            # context keyed again per seed, over 64 seeds a call (prg._keystream_rows)
            keys = [os.urandom(32) for _ in range(64)]
            rows = np.empty(64 * nbytes, np.uint8)
            batch = timed(-(-count // 64), lambda: prg._ctr_rows(keys, 0, nbytes, rows))
            one = min(one, batch * count / (64 * -(-count // 64)))
        prg_t += one
    out["prg"] = prg_t
    sh_t = 0.0
    rnd = OsRandom()
    for name in ("split", "split_encoded"):
        fn = getattr(shamir, name)
        for (m, t), count in prof.shapes.get(name, {}).items():
            xs = list(range(1, m + 1))
            sec = os.urandom(32)
            sh_t += timed(count, lambda: fn(sec, xs, t, rnd))
    for (c, m, t), count in prof.shapes.get("split_encoded_many", {}).items():
        xs = list(range(1, m + 1))
        secrets = [os.urandom(32) for _ in range(c)]
        sh_t += timed(count, lambda: shamir.split_encoded_many(secrets, xs, t, rnd))
    for t, count in prof.shapes.get("combine", {}).items():
        shares = shamir.split(os.urandom(32), list(range(1, t + 1)), t, rnd)
        sh_t += timed(count, lambda: shamir.combine(shares, t))
    for t, count in prof.shapes.get("combine_encoded", {}).items():
        blob = b"".join(shamir.split_encoded(os.urandom(32), list(range(1, t + 1)), t, rnd))
        sh_t += timed(count, lambda: shamir.combine_encoded(blob, t))
    for (c, t), count in prof.shapes.get("combine_encoded_many", {}).items():
        # one secret's encodings, c times: the batch does the same work for each row
        blobs = [b"".join(shamir.split_encoded(os.urandom(32), list(range(1, t + 1)), t,
                                               rnd))] * c
        sh_t += timed(count, lambda: shamir.combine_encoded_many(blobs, t))
    out["shamir"] = sh_t
    ae_t = 0.0
    key = os.urandom(32)
    # a batch of c encryptions is c bare encryptions
    aead_shapes = [(name, pl, al, count) for name in ("aead_encrypt", "aead_decrypt")
                   for (pl, al), count in prof.shapes.get(name, {}).items()]
    aead_shapes += [(name[:-5], pl, al, c * count) for name in ("aead_encrypt_many",
                                                                "aead_decrypt_many")
                    for (c, pl, al), count in prof.shapes.get(name, {}).items()]
    for name, pl, al, count in aead_shapes:
        nonce = os.urandom(12)
        # a decrypt call's first argument is the ciphertext: 16-byte tag, 12-byte nonce
        pt = os.urandom(max(pl - (28 if name == "aead_decrypt" else 0), 0))
        ad = os.urandom(al)
        ct = ChaCha20Poly1305(key).encrypt(nonce, pt, ad)
        if sodium_aead is None:  # pragma: no cover - another PyNaCl build
            ae_t += timed(count, (lambda: ChaCha20Poly1305(key).encrypt(nonce, pt, ad))
                          if name == "aead_encrypt" else
                          (lambda: ChaCha20Poly1305(key).decrypt(nonce, ct, ad)))
            continue
        # the libsodium call secagg.crypto makes, into a buffer made once
        out_buf = sodium_ffi.new("unsigned char[]", len(ct))
        out_len = sodium_ffi.new("unsigned long long *")
        null = sodium_ffi.NULL
        if name == "aead_encrypt":
            ae_t += timed(count, lambda: sodium_aead[0](
                out_buf, out_len, pt, len(pt), ad, len(ad), null, nonce, key))
        else:
            ae_t += timed(count, lambda: sodium_aead[1](
                out_buf, out_len, null, ct, len(ct), ad, len(ad), nonce, key))
    out["aead"] = ae_t
    edpk, edsk = nacl_b.crypto_sign_seed_keypair(os.urandom(32))
    msg = os.urandom(100)
    signed = nacl_b.crypto_sign(msg, edsk)
    # the bare calls of the library secagg.crypto uses (libsodium): a signature with
    # the expanded secret key (secagg.crypto expands the 32-byte seed on every call,
    # which is part of its overhead here), a verification
    out["signature"] = timed(calls.get("ed25519_sign", 0),
                             lambda: nacl_b.crypto_sign(msg, edsk)) + timed(
        calls.get("ed25519_verify", 0), lambda: nacl_b.crypto_sign_open(signed, edpk))
    ikm = os.urandom(32)
    out["kdf"] = timed(calls.get("hkdf", 0), lambda: HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"", info=b"x" * 90).derive(ikm))
    return out
