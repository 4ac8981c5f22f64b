"""The two XOFs of draft-irtf-cfrg-vdaf (section "Extendable Output Functions").

* **XofTurboShake128**: the stream of TurboSHAKE128 (RFC 9861, domain byte 1) over
  ``le16(len(dst)) || dst || le8(len(seed)) || seed || binder`` (pycryptodome's
  ``Crypto.Hash.TurboSHAKE128``).
* **XofFixedKeyAes128**: a fixed AES-128 key ``TurboSHAKE128(le16(len(dst)) || dst ||
  binder, domain 2, 16 bytes)``; block ``i`` of the stream of a 16-byte seed is
  ``hash(seed XOR le128(i))`` with ``hash(x) = AES(k, sigma(x)) XOR sigma(x)``, ``sigma(lo
  || hi) = hi || (hi XOR lo)`` (the circular correlation-robust hash of Guo, Katz, Wang,
  Weng, Yu, "Better concrete security for half-gates garbling", 2020). The IDPF uses it
  on its inner levels; :func:`hash_blocks` runs it on many blocks under one key with one
  AES call, which is what makes the IDPF vectorise.

Field elements are drawn by rejection (``next_vec``): ``ENCODED_SIZE`` little-endian
bytes, masked to the bit length of the modulus, kept when below it.
"""
from __future__ import annotations

import threading

import numpy as np
from Crypto.Hash import TurboSHAKE128
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from protocol.core.poplar1.field import ENC64, ENC255, P64, P255
from protocol.core.poplar1.keccak import SpongeBatch, turboshake128_many
from secagg._libcrypto import libcrypto, new_context

__all__ = ["VERSION", "format_dst", "XofTurboShake128", "fixed_key", "aes_ecb", "hash_blocks",
           "XofFixedKeyAes128", "next_vec_from_stream", "MIN_BATCH", "turboshake_many",
           "turboshake_streams", "fixed_keys", "RowKeyedAes", "AES_BACKENDS", "aes_backend",
           "set_aes_backend"]

#: from this many messages on, the XOF calls whose inputs are independent per report
#: run as one numpy sponge over all of them (:mod:`protocol.core.poplar1.keccak`);
#: below it, one pycryptodome call per message. Both give the same bytes.
MIN_BATCH = 16

#: the draft's VERSION constant (draft-irtf-cfrg-vdaf-20 keeps it at 18)
VERSION = 18


def format_dst(algo_class: int, algo: int, usage: int) -> bytes:
    """``VERSION || algo_class || be32(algo) || be16(usage)``."""
    return (VERSION.to_bytes(1, "big") + algo_class.to_bytes(1, "big")
            + algo.to_bytes(4, "big") + usage.to_bytes(2, "big"))


class XofTurboShake128:
    """The TurboSHAKE128 XOF of the draft (seed of any length below 256 bytes)."""

    SEED_SIZE = 32

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        if len(dst) >= 1 << 16 or len(seed) >= 256:
            raise ValueError("XofTurboShake128: dst or seed too long")
        # one update call: pycryptodome's per-call overhead dominates these short inputs
        self._h = TurboSHAKE128.new(domain=1, data=b"".join(
            (len(dst).to_bytes(2, "little"), dst, len(seed).to_bytes(1, "little"), seed,
             binder)))

    def next(self, length: int) -> bytes:
        """The next ``length`` bytes of the stream."""
        return self._h.read(length)

    def next_vec64(self, length: int) -> np.ndarray:
        """The next ``length`` Field64 elements (``uint64``), by rejection."""
        return next_vec_from_stream(self.next, P64, ENC64, length)

    def next_vec255(self, length: int) -> list[int]:
        """The next ``length`` Field255 elements, by rejection."""
        return next_vec_from_stream(self.next, P255, ENC255, length)

    def next_vec_mod(self, modulus: int, size: int, length: int) -> list[int]:
        """The next ``length`` elements of the field of ``modulus`` (``size`` bytes
        each), by rejection: the generic form (the XOF test vectors use Field128)."""
        return _generic_vec(self.next, modulus, size, length)

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(cls.SEED_SIZE)


def _xof_messages(seeds: np.ndarray, dst: bytes, binders: np.ndarray | bytes) -> np.ndarray:
    """``le16(len(dst)) || dst || le8(len(seed)) || seed || binder`` for every row of
    ``seeds`` (``(N, S)`` uint8) and of ``binders`` (``(N, B)`` uint8, or one binder for
    all)."""
    seeds = np.asarray(seeds, dtype=np.uint8)
    n, size = seeds.shape
    if len(dst) >= 1 << 16 or size >= 256:
        raise ValueError("XofTurboShake128: dst or seed too long")
    head = np.frombuffer(len(dst).to_bytes(2, "little") + dst + bytes([size]), dtype=np.uint8)
    if isinstance(binders, (bytes, bytearray)):
        tail = np.broadcast_to(np.frombuffer(bytes(binders), dtype=np.uint8),
                               (n, len(binders)))
    else:
        tail = np.asarray(binders, dtype=np.uint8)
        if tail.ndim != 2 or tail.shape[0] != n:
            raise ValueError("one binder per seed")
    out = np.empty((n, head.size + size + tail.shape[1]), dtype=np.uint8)
    out[:, :head.size] = head
    out[:, head.size:head.size + size] = seeds
    out[:, head.size + size:] = tail
    return out


def turboshake_many(seeds: np.ndarray, dst: bytes, binders: np.ndarray | bytes,
                    length: int) -> np.ndarray:
    """The first ``length`` bytes of XofTurboShake128(``seeds[i]``, ``dst``,
    ``binders[i]``) for every row: ``(N, length)`` uint8. One numpy sponge over all rows
    from :data:`MIN_BATCH` rows on, pycryptodome below."""
    seeds = np.asarray(seeds, dtype=np.uint8)
    if seeds.shape[0] >= MIN_BATCH:
        return turboshake128_many(_xof_messages(seeds, dst, binders), 1, length)
    msgs = _xof_messages(seeds, dst, binders)
    out = np.empty((seeds.shape[0], length), dtype=np.uint8)
    for i, m in enumerate(msgs):
        out[i] = np.frombuffer(TurboSHAKE128.new(domain=1, data=m.tobytes()).read(length),
                               dtype=np.uint8)
    return out


class _OneByOne:
    """``N`` pycryptodome streams read in lockstep (the small-batch form of
    :class:`~protocol.core.poplar1.keccak.SpongeBatch`)."""

    def __init__(self, msgs: np.ndarray) -> None:
        self._h = [TurboSHAKE128.new(domain=1, data=m.tobytes()) for m in msgs]

    def __len__(self) -> int:
        return len(self._h)

    def read(self, length: int) -> np.ndarray:
        return np.frombuffer(b"".join(h.read(length) for h in self._h),
                             dtype=np.uint8).reshape(len(self._h), length)


def turboshake_streams(seeds: np.ndarray, dst: bytes, binders: np.ndarray | bytes):  # noqa: ANN201
    """``N`` XofTurboShake128 streams read in lockstep (``read(length)`` gives ``(N,
    length)`` uint8)."""
    msgs = _xof_messages(seeds, dst, binders)
    if msgs.shape[0] >= MIN_BATCH:
        return SpongeBatch(msgs, 1)
    return _OneByOne(msgs)


def _generic_vec(read, modulus: int, size: int, length: int) -> list[int]:  # noqa: ANN001
    mask = (1 << (modulus - 1).bit_length()) - 1
    out: list[int] = []
    while len(out) < length:
        x = int.from_bytes(read(size), "little") & mask
        if x < modulus:
            out.append(x)
    return out


def next_vec_from_stream(read, modulus: int, size: int, length: int):  # noqa: ANN001, ANN201
    """``length`` field elements from the byte source ``read(n)`` as the draft's
    ``next_vec``: a uint64 array for Field64, a list of ints for Field255. Reads
    ``length`` elements' bytes at once and falls back to one element at a time only
    when one was rejected (probability about ``length * 2^-32`` for Field64)."""
    if modulus == P64:
        raw = np.frombuffer(read(ENC64 * length), dtype="<u8").astype(np.uint64)
        keep = raw[raw < np.uint64(P64)]
        if keep.size == length:
            return keep
        rest = _generic_vec(read, P64, ENC64, length - keep.size)
        return np.concatenate([keep, np.array(rest, dtype=np.uint64)])
    if modulus == P255:
        data = read(ENC255 * length)
        mask = (1 << 255) - 1
        vals = [int.from_bytes(data[i:i + ENC255], "little") & mask
                for i in range(0, len(data), ENC255)]
        keep = [v for v in vals if v < P255]
        if len(keep) < length:
            keep += _generic_vec(read, P255, ENC255, length - len(keep))
        return keep
    return _generic_vec(read, modulus, size, length)


# ------------------------------------------------------------------ fixed-key AES-128
def fixed_key(dst: bytes, binder: bytes) -> bytes:
    """The AES-128 key of XofFixedKeyAes128 for ``dst`` and ``binder``."""
    return TurboSHAKE128.new(domain=2, data=len(dst).to_bytes(2, "little") + dst + binder).read(16)


def fixed_keys(dst: bytes, binders: np.ndarray) -> np.ndarray:
    """:func:`fixed_key` for every row of ``binders`` (``(N, B)`` uint8): ``(N, 16)``."""
    binders = np.asarray(binders, dtype=np.uint8)
    n = binders.shape[0]
    head = np.frombuffer(len(dst).to_bytes(2, "little") + dst, dtype=np.uint8)
    msgs = np.empty((n, head.size + binders.shape[1]), dtype=np.uint8)
    msgs[:, :head.size] = head
    msgs[:, head.size:] = binders
    if n >= MIN_BATCH:
        return turboshake128_many(msgs, 2, 16)
    return np.frombuffer(b"".join(TurboSHAKE128.new(domain=2, data=m.tobytes()).read(16)
                                  for m in msgs), dtype=np.uint8).reshape(n, 16)


class aes_ecb:  # noqa: N801 - used like a function
    """AES-128 in ECB mode under one (public) key: the fixed-key permutation.

    ``cryptography``'s AES (AES-NI through OpenSSL) costs about a microsecond per call
    here, a tenth of pycryptodome's; the key is not secret (it is derived from the
    context and the report's nonce), so ECB on independent blocks is what the draft asks.
    """

    __slots__ = ("_enc",)

    def __init__(self, key: bytes) -> None:
        self._enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()

    def encrypt(self, data: bytes) -> bytes:
        return self._enc.update(data)

    def encrypt_into(self, data, out) -> None:  # noqa: ANN001
        self._enc.update_into(data, out)


# ------------------------------------------- AES under one key per report, keys kept
#: ``openssl``: one OpenSSL ``EVP_CIPHER_CTX`` per thread, keyed again for every report
#: (the AES-128 key schedule, tens of nanoseconds with AES-NI) through ``cffi``, so a
#: report keeps only its 16-byte keys; ``contexts``: one ``cryptography`` context per
#: report and key, derived on first use and kept (the memory that the first backend
#: saves); ``numpy``: AES-128 in numpy across all reports and blocks at once (the
#: round-key tables of FIPS 197's key expansion, run over all keys, and 32-bit
#: T-tables), measured and not the default (docs/poplar1.md). All give the same bytes
#: (tests/protocol/test_poplar1_aes.py).
AES_BACKENDS = ("openssl", "contexts", "numpy")

_openssl_lib: object = None          # None: not tried yet; False: not available
_local = threading.local()
_backend: list[str] = []


def _load_openssl():  # noqa: ANN202
    """``(ffi, lib)`` for the process's libcrypto (:mod:`secagg._libcrypto`), or ``None``
    when it cannot be loaded or fails the FIPS-197 known-answer test (then the
    ``contexts`` backend is used)."""
    global _openssl_lib
    if _openssl_lib is None:
        _openssl_lib = False
        try:
            loaded = libcrypto()
            if loaded is not None:
                _openssl_lib = loaded
                global _jit_rows
                from protocol.core.poplar1 import jit
                _jit_rows = jit.aes_rows_into if jit.aes_rows_available() else None
                # FIPS 197, appendix C.1 (AES-128), twice under two keys in one call
                key = np.frombuffer(bytes(range(16)) + bytes(16), dtype=np.uint8).reshape(2, 16)
                pt = bytes.fromhex("00112233445566778899aabbccddeeff")
                got = _openssl_rows(key, np.frombuffer(pt * 2, dtype=np.uint8).reshape(2, 16))
                want = [bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a"),
                        aes_ecb(bytes(16)).encrypt(pt)]
                if [got[0].tobytes(), got[1].tobytes()] != want:
                    _openssl_lib = False
        except (ImportError, OSError, AttributeError, RuntimeError):
            _openssl_lib = False
    return _openssl_lib or None


def _openssl_ctx():  # noqa: ANN202
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = _local.ctx = new_context("aes_128_ecb")
    return ctx


#: the compiled loop of :mod:`jit` (numba) over the same OpenSSL calls, or None
_jit_rows = None


def _openssl_rows(keys: np.ndarray, data: np.ndarray) -> np.ndarray:
    """AES-128-ECB of row ``r`` of ``data`` (``(N, W)`` uint8, ``W`` a multiple of 16)
    under ``keys[r]``: one key schedule and one update call per row on one context."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    data = np.ascontiguousarray(data, dtype=np.uint8)
    n, width = data.shape
    out = np.empty((n, width), dtype=np.uint8)
    if n == 0 or width == 0:
        return out
    if keys.shape != (n, 16) or width % 16:
        raise ValueError("one 16-byte key and whole blocks per row")
    if _jit_rows is not None:
        _jit_rows(keys, data, out)
        return out
    ffi, lib = _openssl_lib
    ctx = _openssl_ctx()
    kp = ffi.from_buffer("unsigned char[]", keys)
    sp = ffi.from_buffer("unsigned char[]", data)
    op = ffi.from_buffer("unsigned char[]", out, require_writable=True)
    outl = ffi.new("int *")
    init, update, null = lib.EVP_EncryptInit_ex, lib.EVP_EncryptUpdate, ffi.NULL
    ok = 1
    for r in range(n):
        ok &= init(ctx, null, null, kp + 16 * r, null)
        ok &= update(ctx, op + r * width, outl, sp + r * width, width) & (outl[0] == width)
    if ok != 1:
        raise RuntimeError("OpenSSL AES-128-ECB failed")
    return out


# --------------------------------------------------- AES-128 in numpy (FIPS 197)
def _xtime(x: np.ndarray) -> np.ndarray:
    return (((x << 1) ^ np.where(x & 0x80, 0x1B, 0)) & 0xFF).astype(np.uint32)


def _aes_tables() -> tuple[np.ndarray, np.ndarray]:
    """The S-box (FIPS 197, 5.1.1: the inverse in GF(2^8) then the affine map) and the
    four 32-bit round tables ``T_j[x]``: the MixColumns column of ``S[x]`` rotated
    ``j`` bytes (words big-endian, byte 0 of a column most significant)."""
    # the multiplicative inverse by exponentiation: x^254 in GF(2^8) mod x^8+x^4+x^3+x+1
    def mul(a: int, b: int) -> int:
        r = 0
        while b:
            if b & 1:
                r ^= a
            a = ((a << 1) ^ (0x1B if a & 0x80 else 0)) & 0xFF
            b >>= 1
        return r
    sbox = np.zeros(256, dtype=np.uint32)
    for x in range(256):
        inv, e, base = 1, 254, x
        while e:
            if e & 1:
                inv = mul(inv, base)
            base = mul(base, base)
            e >>= 1
        inv = inv if x else 0
        y = inv
        for k in range(1, 5):
            y ^= ((inv << k) | (inv >> (8 - k))) & 0xFF
        sbox[x] = y ^ 0x63
    s2 = _xtime(sbox)
    s3 = s2 ^ sbox
    t0 = (s2 << 24) | (sbox << 16) | (sbox << 8) | s3
    tables = np.stack([t0] + [((t0 >> (8 * j)) | (t0 << (32 - 8 * j))) & 0xFFFFFFFF
                              for j in (1, 2, 3)]).astype(np.uint32)
    return sbox, tables


_NP_AES: list = []


def _numpy_round_keys(keys: np.ndarray, sbox: np.ndarray) -> np.ndarray:
    """FIPS 197's key expansion (5.2) over ``N`` keys at once: ``(N, 44)`` uint32 words."""
    n = keys.shape[0]
    w = np.empty((n, 44), dtype=np.uint32)
    w[:, :4] = keys.reshape(n, 4, 4).astype(np.uint32) @ np.array(
        [1 << 24, 1 << 16, 1 << 8, 1], dtype=np.uint32)
    rcon = 1
    for i in range(4, 44):
        t = w[:, i - 1]
        if i % 4 == 0:
            t = ((t << 8) | (t >> 24)) & 0xFFFFFFFF
            t = ((sbox[t >> 24] << 24) | (sbox[(t >> 16) & 0xFF] << 16)
                 | (sbox[(t >> 8) & 0xFF] << 8) | sbox[t & 0xFF]) ^ (rcon << 24)
            rcon = ((rcon << 1) ^ (0x1B if rcon & 0x80 else 0)) & 0xFF
        w[:, i] = w[:, i - 4] ^ t
    return w


def _numpy_rows(keys: np.ndarray, data: np.ndarray) -> np.ndarray:
    """AES-128-ECB of row ``r`` of ``data`` under ``keys[r]``, all rows and blocks in
    numpy: the state of every block is four big-endian column words, each round 16
    table lookups (FIPS 197's rounds as T-tables; the last round the S-box alone)."""
    if not _NP_AES:
        _NP_AES.extend(_aes_tables())
    sbox, (t0, t1, t2, t3) = _NP_AES
    n, width = data.shape
    out = np.empty((n, width), dtype=np.uint8)
    if n == 0 or width == 0:
        return out
    rk = _numpy_round_keys(np.ascontiguousarray(keys, dtype=np.uint8), sbox)[:, None, :]
    st = np.ascontiguousarray(data, dtype=np.uint8).view(">u4").reshape(n, -1, 4).astype(np.uint32)
    c = [st[..., j] ^ rk[..., j] for j in range(4)]
    m = np.uint32(0xFF)
    for r in range(1, 10):
        c = [t0[c[j] >> 24] ^ t1[(c[(j + 1) % 4] >> 16) & m] ^ t2[(c[(j + 2) % 4] >> 8) & m]
             ^ t3[c[(j + 3) % 4] & m] ^ rk[..., 4 * r + j] for j in range(4)]
    res = np.stack([(sbox[c[j] >> 24] << 24) | (sbox[(c[(j + 1) % 4] >> 16) & m] << 16)
                    | (sbox[(c[(j + 2) % 4] >> 8) & m] << 8) | sbox[c[(j + 3) % 4] & m]
                    for j in range(4)], axis=-1) ^ rk[..., 40:44][:, :, None, :].reshape(n, 1, 4)
    out[:] = res.astype(">u4").view(np.uint8).reshape(n, width)
    return out


def aes_backend() -> str:
    """The backend :class:`RowKeyedAes` uses: ``openssl`` when libcrypto loads and
    passes its known-answer test, else ``contexts`` (or what :func:`set_aes_backend`
    chose)."""
    if not _backend:
        _backend.append("openssl" if _load_openssl() is not None else "contexts")
    return _backend[0]


def set_aes_backend(name: str) -> None:
    """Choose the backend of :class:`RowKeyedAes` (one of :data:`AES_BACKENDS`).

    Raises:
        ValueError: an unknown name, or ``openssl`` when libcrypto cannot be used.
    """
    if name not in AES_BACKENDS:
        raise ValueError(f"AES backend must be one of {', '.join(AES_BACKENDS)}")
    if name == "openssl" and _load_openssl() is None:
        raise ValueError("the openssl AES backend needs libcrypto and cffi")
    _backend[:] = [name]


class RowKeyedAes:
    """AES-128 under one key per report: ``keys`` ``(N, 16)`` uint8, the per-report
    fixed keys of XofFixedKeyAes128 (public: derived from the context and the nonce).
    A report costs 16 bytes here with the ``openssl`` backend; ``contexts`` keeps a
    ``cryptography`` context per report once used."""

    __slots__ = ("keys", "_contexts")

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = np.ascontiguousarray(keys, dtype=np.uint8)
        if self.keys.ndim != 2 or self.keys.shape[1] != 16:
            raise ValueError("AES keys must be (N, 16) bytes")
        self._contexts: list | None = None

    def __len__(self) -> int:
        return self.keys.shape[0]

    def take(self, idx: np.ndarray) -> "RowKeyedAes":
        idx = np.asarray(idx, dtype=np.intp)
        out = RowKeyedAes(self.keys[idx])
        if self._contexts is not None:
            out._contexts = [self._contexts[int(i)] for i in idx]
        return out

    def drop_contexts(self) -> bool:
        """Drop the ``contexts`` backend's contexts (derived again at the next use);
        says whether there were any."""
        had, self._contexts = self._contexts is not None, None
        return had

    def cipher(self, r: int) -> aes_ecb:
        """Report ``r``'s permutation alone (the scalar XOF's rare redraws)."""
        return aes_ecb(self.keys[r].tobytes())

    def encrypt_rows(self, data: np.ndarray) -> np.ndarray:
        """AES-128-ECB of row ``r`` of ``data`` (``(N, W)`` uint8) under ``keys[r]``."""
        if data.shape[0] != self.keys.shape[0] or data.shape[1] % 16:
            raise ValueError("one row of whole blocks per key")
        backend = aes_backend()
        if backend == "openssl":
            self._contexts = None
            return _openssl_rows(self.keys, data)
        if backend == "numpy":
            self._contexts = None
            return _numpy_rows(self.keys, data)
        n, width = data.shape
        if n == 0 or width == 0:
            return np.empty((n, width), dtype=np.uint8)
        if self._contexts is None:
            self._contexts = [aes_ecb(k.tobytes()) for k in self.keys]
        src = memoryview(np.ascontiguousarray(data, dtype=np.uint8)).cast("B")
        out = bytearray(n * width + 16)          # update_into wants block_size - 1 bytes spare
        dst = memoryview(out)
        for r, c in enumerate(self._contexts):
            c.encrypt_into(src[r * width:(r + 1) * width], dst[r * width:(r + 1) * width + 15])
        return np.frombuffer(out, dtype=np.uint8, count=n * width).reshape(n, width)


def sigma(blocks: np.ndarray) -> np.ndarray:
    """``sigma(lo || hi) = hi || (hi XOR lo)`` on ``(..., 16)`` uint8 blocks."""
    lo = blocks[..., :8]
    hi = blocks[..., 8:]
    return np.concatenate([hi, hi ^ lo], axis=-1)


def hash_blocks(cipher, blocks: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """``AES(sigma(x)) XOR sigma(x)`` for every 16-byte block of ``blocks`` (any shape
    ending in 16), one AES call."""
    s = sigma(blocks)
    enc = np.frombuffer(cipher.encrypt(s.tobytes()), dtype=np.uint8).reshape(s.shape)
    return enc ^ s


def counter_blocks(seeds: np.ndarray, count: int) -> np.ndarray:
    """``seed XOR le128(i)`` for ``i < count``: shape ``seeds.shape[:-1] + (count, 16)``."""
    ctr = np.zeros((count, 16), dtype=np.uint8)
    ctr[:, :8] = np.arange(count, dtype="<u8").view(np.uint8).reshape(count, 8)
    return seeds[..., None, :] ^ ctr


class XofFixedKeyAes128:
    """The fixed-key AES XOF on one seed (the scalar form; the IDPF batches
    :func:`hash_blocks` instead)."""

    SEED_SIZE = 16

    def __init__(self, seed: bytes, dst: bytes, binder: bytes, *, cipher=None) -> None:  # noqa: ANN001
        if len(seed) != self.SEED_SIZE:
            raise ValueError("XofFixedKeyAes128: seed must be 16 bytes")
        self._cipher = cipher if cipher is not None else aes_ecb(fixed_key(dst, binder))
        self._seed = np.frombuffer(seed, dtype=np.uint8)
        self._buf = b""
        self._block = 0

    def next(self, length: int) -> bytes:
        """The next ``length`` bytes of the stream."""
        while len(self._buf) < length:
            need = (length - len(self._buf) + 15) // 16
            blocks = counter_blocks(self._seed, self._block + need)[self._block:]
            self._buf += hash_blocks(self._cipher, blocks).tobytes()
            self._block += need
        out, self._buf = self._buf[:length], self._buf[length:]
        return out

    def next_vec64(self, length: int) -> np.ndarray:
        return next_vec_from_stream(self.next, P64, ENC64, length)

    def next_vec_mod(self, modulus: int, size: int, length: int) -> list[int]:
        return _generic_vec(self.next, modulus, size, length)

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(cls.SEED_SIZE)
