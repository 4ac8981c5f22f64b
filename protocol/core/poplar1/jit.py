"""Compiled kernels for Poplar1's hot loops, through numba when it is installed.

The numpy code of :mod:`keccak` and :mod:`field` runs each step over all reports at once,
and at Poplar1's sizes its cost is memory traffic: every step of every Keccak round
reads and writes whole arrays. The kernels here compute the same functions report by
report in compiled code, with the state in registers. They give the same bytes as the
numpy code (``tests/protocol/test_poplar1_jit.py`` checks both on random inputs and
known answers) and are used when numba imports and ``FEDHH_JIT`` is not ``0``; without
numba the numpy code runs unchanged. Compiled code is cached on disk by numba
(``cache=True``), so a process pays the compilation once per installation.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["available", "kernels", "keccak_p1600_12_columns", "aes_rows_available",
           "aes_rows_into", "sketch_inner", "idpf_inner_step", "leaf_values", "sketch_leaf"]

try:  # pragma: no cover - depends on the installation
    if os.environ.get("FEDHH_JIT", "1") == "0":
        raise ImportError("disabled by FEDHH_JIT=0")
    import numba as _nb
except Exception:  # noqa: BLE001 - a broken numba install falls back to numpy  # pragma: no cover
    _nb = None


def available() -> bool:
    """Whether the compiled kernels are in use."""
    return _nb is not None


def kernels() -> str:
    """What runs Poplar1's hot loops, for benchmark outputs: ``"numba X.Y.Z"`` or
    ``"numpy"`` (no numba, or ``FEDHH_JIT=0``)."""
    return f"numba {_nb.__version__}" if _nb is not None else "numpy"


def _rc12() -> np.ndarray:
    from protocol.core.poplar1.keccak import _RC
    return np.array([int(c) for c in _RC], dtype=np.uint64)


def _keccak_source() -> str:
    """The source of the per-column kernel, unrolled: the 25 lanes are local variables
    (so registers), every index and rotation a constant."""
    from protocol.core.poplar1.keccak import _RHO_PI
    lines = ["def _keccak_columns(state, rcs):",
             "    n = state.shape[1]",
             "    for j in range(n):"]
    ind = "        "
    lines += [f"{ind}a{i} = state[{i}, j]" for i in range(25)]
    lines.append(f"{ind}for r in range(rcs.shape[0]):")
    ind2 = ind + "    "
    for x in range(5):
        lines.append(f"{ind2}c{x} = a{x} ^ a{x + 5} ^ a{x + 10} ^ a{x + 15} ^ a{x + 20}")
    for x in range(5):
        v, w = f"c{(x + 1) % 5}", f"c{(x + 4) % 5}"
        lines.append(f"{ind2}d{x} = (({v} << U1) | ({v} >> U63)) ^ {w}")
    for i in range(25):
        lines.append(f"{ind2}a{i} ^= d{i % 5}")
    for s_, d_, r in _RHO_PI:
        if r == 0:
            lines.append(f"{ind2}b{d_} = a{s_}")
        else:
            lines.append(f"{ind2}b{d_} = (a{s_} << np.uint64({r})) | (a{s_} >> np.uint64({64 - r}))")
    for y in range(0, 25, 5):
        for x in range(5):
            lines.append(f"{ind2}a{y + x} = b{y + x} ^ (~b{y + (x + 1) % 5} & b{y + (x + 2) % 5})")
    lines.append(f"{ind2}a0 ^= rcs[r]")
    lines += [f"{ind}state[{i}, j] = a{i}" for i in range(25)]
    return "\n".join(lines) + "\n"


if _nb is not None:
    from protocol.core.poplar1._keccak_kernel import keccak_columns as _kc
    _keccak_columns = _nb.njit(nogil=True, cache=True)(_kc)


_RC12: np.ndarray | None = None


#: sponges a padded block of :func:`keccak_p1600_12_columns` holds
_PAD_BLOCK = 2048


def keccak_p1600_12_columns(state: np.ndarray) -> None:
    """Keccak-p[1600, 12] in place on every column of a ``(25, N)`` uint64 array.

    The kernel reads a sponge's 25 lanes from 25 rows. When the rows lie a multiple of
    1 KB apart (the sponge code's batches are powers of two, and its chunks views of
    longer batches), those 25 cache lines fall into at most four of the L1 cache's sets
    and evict each other before the next sponge of the same lines is read: such a state
    goes through a buffer whose rows are 8 lanes longer than a block, copied in and out
    (at 8,192 sponges about 170 against 270 ns a permutation on this machine)."""
    global _RC12
    if _RC12 is None:
        _RC12 = _rc12()
    n = state.shape[1]
    if n < 64 or state.strides[0] % 1024:
        _keccak_columns(state, _RC12)
        return
    width = min(n, _PAD_BLOCK)
    buf = np.empty((25, width + 8), dtype=np.uint64)
    for lo in range(0, n, width):
        hi = min(n, lo + width)
        block = buf[:, :hi - lo]
        block[...] = state[:, lo:hi]
        _keccak_columns(block, _RC12)
        state[:, lo:hi] = block


# ------------------------------------------- AES-128-ECB, one key a row, via OpenSSL
def _openssl_functions():  # noqa: ANN202
    """libcrypto's EVP functions as ctypes objects (numba calls them from compiled code),
    or None."""
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library("crypto")
    if not name:
        return None
    try:
        lib = ctypes.CDLL(name)
        vp, ci = ctypes.c_void_p, ctypes.c_int
        fns = {}
        for fname, res, args in (("EVP_CIPHER_CTX_new", vp, []),
                                 ("EVP_CIPHER_CTX_free", None, [vp]),
                                 ("EVP_aes_128_ecb", vp, []),
                                 ("EVP_CIPHER_CTX_set_padding", ci, [vp, ci]),
                                 ("EVP_EncryptInit_ex", ci, [vp, vp, vp, vp, vp]),
                                 ("EVP_EncryptUpdate", ci, [vp, vp, vp, vp, ci])):
            f = getattr(lib, fname)
            f.restype, f.argtypes = res, args
            fns[fname] = f
    except (OSError, AttributeError):
        return None
    return fns


_aes_kernel = None
_aes_local = None


def _build_aes():  # noqa: ANN202
    global _aes_kernel, _aes_local
    if _aes_kernel is not None or _nb is None:
        return _aes_kernel or None
    fns = _openssl_functions()
    if fns is None:
        _aes_kernel = False
        return None
    init, update = fns["EVP_EncryptInit_ex"], fns["EVP_EncryptUpdate"]

    @_nb.njit(nogil=True)
    def rows(ctx, keys, data, out, outl):  # noqa: ANN001, ANN202
        n, w = data.shape
        kp, dp, op, lp = keys.ctypes.data, data.ctypes.data, out.ctypes.data, outl.ctypes.data
        ok = 1
        for r in range(n):
            ok &= init(ctx, 0, 0, kp + 16 * r, 0)
            ok &= update(ctx, op + r * w, lp, dp + r * w, w)
            ok &= outl[0] == w
        return ok

    p64 = np.uint64((1 << 64) - (1 << 32) + 1)
    eps = np.uint64((1 << 32) - 1)
    one = np.uint64(1)
    keep = ~np.uint64(1)

    @_nb.njit(nogil=True)
    def step(ctx, seeds, ctrl, par, qi, bi, kext, kconv, cw, ccw, winner, agg1,  # noqa: ANN001, ANN202, PLR0913
             out_seeds, out_ctrl, out_y, bad, buf, enc, outl):
        # one inner level of the IDPF for every report (see idpf_inner_step)
        n = seeds.shape[0]
        nq, nm = par.shape[0], qi.shape[0]
        kp, cp = kext.ctypes.data, kconv.ctypes.data
        bp, ep, lp = buf.ctypes.data, enc.ctypes.data, outl.ctypes.data
        ok = 1
        for r in range(n):
            # extend: sigma(seed XOR i) for both children of every kept parent
            for q in range(nq):
                lo, hi = seeds[r, par[q], 0], seeds[r, par[q], 1]
                for i in range(2):
                    b = 4 * q + 2 * i
                    buf[b] = hi
                    buf[b + 1] = hi ^ lo ^ np.uint64(i)
            w = 32 * nq
            ok &= init(ctx, 0, 0, kp + 16 * r, 0)
            ok &= update(ctx, ep, lp, bp, w)
            ok &= outl[0] == w
            for b in range(4 * nq):
                enc[b] ^= buf[b]
            # control bits, then the correction words where the parent's bit is set
            for m in range(nm):
                q, i = qi[m], bi[m]
                b = 4 * q + 2 * i
                lo, hi = enc[b], enc[b + 1]
                t = (lo & one) != 0
                lo &= keep
                if ctrl[r, par[q]]:
                    lo ^= cw[r, 0]
                    hi ^= cw[r, 1]
                    t ^= ccw[r, i]
                out_ctrl[r, m] = t
                # convert: sigma(child XOR i), i = 0 (next seed) and 1 (the value)
                buf[4 * m] = hi
                buf[4 * m + 1] = hi ^ lo
                buf[4 * m + 2] = hi
                buf[4 * m + 3] = hi ^ lo ^ one
            w = 32 * nm
            ok &= init(ctx, 0, 0, cp + 16 * r, 0)
            ok &= update(ctx, ep, lp, bp, w)
            ok &= outl[0] == w
            for m in range(nm):
                out_seeds[r, m, 0] = enc[4 * m] ^ buf[4 * m]
                out_seeds[r, m, 1] = enc[4 * m + 1] ^ buf[4 * m + 1]
                for k in range(2):
                    v = enc[4 * m + 2 + k] ^ buf[4 * m + 2 + k]
                    if v >= p64:
                        bad[r, m] = True
                    if out_ctrl[r, m]:
                        c = winner[r, k]
                        s = v + c
                        if s < v:
                            s += eps
                        if s >= p64:
                            s -= p64
                        v = s
                    if agg1 and v != 0:
                        v = p64 - v
                    out_y[r, m, k] = v
        return ok

    import threading
    _aes_local = (threading.local(), fns, step)
    _aes_kernel = rows
    return rows


def _aes_context() -> int:
    local, fns, _ = _aes_local
    ctx = getattr(local, "ctx", None)
    if ctx is None:
        raw = fns["EVP_CIPHER_CTX_new"]()
        if not raw or fns["EVP_EncryptInit_ex"](raw, fns["EVP_aes_128_ecb"](), None, None,
                                                None) != 1 \
                or fns["EVP_CIPHER_CTX_set_padding"](raw, 0) != 1:
            raise RuntimeError("OpenSSL refused an AES-128-ECB context")
        ctx = local.ctx = _Context(raw, fns["EVP_CIPHER_CTX_free"])
    return ctx.raw


class _Context:
    """An EVP context freed with its thread's storage."""

    __slots__ = ("raw", "_free")

    def __init__(self, raw: int, free) -> None:  # noqa: ANN001
        self.raw, self._free = raw, free

    def __del__(self) -> None:
        self._free(self.raw)


def aes_rows_available() -> bool:
    """Whether :func:`aes_rows_into` can run (numba and libcrypto)."""
    return _build_aes() is not None


def aes_rows_into(keys: np.ndarray, data: np.ndarray, out: np.ndarray) -> None:
    """AES-128-ECB of row ``r`` of ``data`` into ``out`` under ``keys[r]``: the loop over
    rows in compiled code, one key schedule and one update per row on one OpenSSL
    context. The arrays are the checked, C-contiguous uint8 ones of
    :func:`protocol.core.poplar1.xof._openssl_rows`, which calls this.

    Raises:
        RuntimeError: OpenSSL failed, or the kernel is not available.
    """
    kernel = _build_aes()
    if kernel is None:
        raise RuntimeError("aes_rows_into needs numba and libcrypto")
    if kernel(_aes_context(), keys, data, out, np.zeros(1, dtype=np.int32)) != 1:
        raise RuntimeError("OpenSSL AES-128-ECB failed")


# ------------------------------------------------------------ Field64 (p = 2^64 - 2^32 + 1)
if _nb is not None:
    _P64 = np.uint64((1 << 64) - (1 << 32) + 1)
    _EPS64 = np.uint64((1 << 32) - 1)            # 2^64 mod p
    _M32 = np.uint64(0xFFFFFFFF)
    _S32 = np.uint64(32)
    _ONE = np.uint64(1)
    _ZERO = np.uint64(0)

    @_nb.njit(inline="always", cache=True)
    def _add64(a, b):  # noqa: ANN001, ANN202
        s = a + b
        if s < a:                                # a carry out of 2^64 is worth 2^32 - 1
            s += _EPS64
        if s >= _P64:
            s -= _P64
        return s

    @_nb.njit(inline="always", cache=True)
    def _mul64(a, b):  # noqa: ANN001, ANN202
        a0, a1 = a & _M32, a >> _S32
        b0, b1 = b & _M32, b >> _S32
        ll = a0 * b0
        m1 = a0 * b1
        mid = m1 + a1 * b0
        hi = a1 * b1 + (mid >> _S32)
        if mid < m1:
            hi += _ONE << _S32
        lo = ll + (mid << _S32)
        if lo < ll:
            hi += _ONE
        # hi 2^64 + lo with 2^64 = 2^32 - 1 and 2^96 = -1 (mod p)
        hh, hl = hi >> _S32, hi & _M32
        t0 = lo - hh
        if lo < hh:
            t0 -= _EPS64
        t1 = hl * _EPS64
        t2 = t0 + t1
        if t2 < t0:
            t2 += _EPS64
        if t2 >= _P64:
            t2 -= _P64
        return t2

    @_nb.njit(nogil=True, cache=True)
    def _sketch_inner(data, auth, rand, abc, out):  # noqa: ANN001, ANN202
        n, c = data.shape
        for r in range(n):
            s0, s1, s2 = abc[r, 0], abc[r, 1], abc[r, 2]
            for j in range(c):
                x = rand[r, j]
                d = data[r, j]
                dx = _mul64(d, x)
                s0 = _add64(s0, dx)
                s1 = _add64(s1, _mul64(dx, x))
                s2 = _add64(s2, _mul64(auth[r, j], x))
            out[r, 0], out[r, 1], out[r, 2] = s0, s1, s2


def sketch_inner(data: np.ndarray, auth: np.ndarray, rand: np.ndarray,
                 abc: np.ndarray) -> np.ndarray:
    """Poplar1's round-1 sketch share on an inner level, ``(N, 3)`` uint64:
    ``(a + sum_j r_j d_j, b + sum_j r_j^2 d_j, c + sum_j r_j e_j)`` with ``d`` the data
    shares, ``e`` the authenticators, ``r`` the verification randomness (all ``(N, C)``
    Field64) and ``(a, b, c)`` the correlated randomness ``(N, 3)``."""
    data = np.ascontiguousarray(data, dtype=np.uint64)
    out = np.empty((data.shape[0], 3), dtype=np.uint64)
    _sketch_inner(data, np.ascontiguousarray(auth, dtype=np.uint64),
                  np.ascontiguousarray(rand, dtype=np.uint64),
                  np.ascontiguousarray(abc, dtype=np.uint64), out)
    return out


def idpf_inner_step(seeds: np.ndarray, ctrl: np.ndarray, par: np.ndarray, qi: np.ndarray,
                    bi: np.ndarray, ext_keys: np.ndarray, conv_keys: np.ndarray,
                    seed_cw: np.ndarray, ctrl_cw: np.ndarray, w_cw: np.ndarray,
                    agg_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One inner level of the IDPF evaluation for ``N`` reports in compiled code: for the
    kept parents ``par`` of the cached nodes (``seeds`` ``(N, P, 16)`` uint8, ``ctrl``
    ``(N, P)`` bool), ``extend`` under each report's extend key, the control bit and
    the level's correction words (``seed_cw`` ``(N, 16)`` uint8, ``ctrl_cw`` ``(N, 2)``
    bool) applied where the parent's bit is set, child ``bi[m]`` of parent ``qi[m]``
    kept, and ``convert`` under the report's convert key: the children's next seeds
    ``(N, M, 16)``, control bits ``(N, M)``, this aggregator's value shares ``(N, M, 2)``
    (``w_cw`` ``(N, 2)`` added where the bit is set, negated for aggregator 1), and a
    flag ``(N, M)`` where a value's draw was at least ``p`` (the caller draws those again
    exactly). The same operations as :func:`protocol.core.poplar1.idpf.eval_batch`'s
    numpy path, two OpenSSL calls a report.

    Raises:
        RuntimeError: OpenSSL failed, or the kernel is not available.
    """
    if _build_aes() is None:
        raise RuntimeError("idpf_inner_step needs numba and libcrypto")
    step = _aes_local[2]
    n = seeds.shape[0]
    nq, nm = par.shape[0], qi.shape[0]
    s64 = np.ascontiguousarray(seeds, dtype=np.uint8).view(np.uint64)        # (N, P, 2)
    out_seeds = np.empty((n, nm, 2), dtype=np.uint64)
    out_ctrl = np.empty((n, nm), dtype=bool)
    out_y = np.empty((n, nm, 2), dtype=np.uint64)
    bad = np.zeros((n, nm), dtype=bool)
    width = 4 * max(nq, nm)
    buf = np.empty(width, dtype=np.uint64)
    enc = np.empty(width, dtype=np.uint64)
    ok = step(_aes_context(), s64, np.ascontiguousarray(ctrl, dtype=bool),
              np.ascontiguousarray(par, dtype=np.int64), np.ascontiguousarray(qi, dtype=np.int64),
              np.ascontiguousarray(bi, dtype=np.int64),
              np.ascontiguousarray(ext_keys, dtype=np.uint8),
              np.ascontiguousarray(conv_keys, dtype=np.uint8),
              np.ascontiguousarray(seed_cw, dtype=np.uint8).view(np.uint64),
              np.ascontiguousarray(ctrl_cw, dtype=bool),
              np.ascontiguousarray(w_cw, dtype=np.uint64), bool(agg_id == 1),
              out_seeds, out_ctrl, out_y, bad, buf, enc, np.zeros(1, dtype=np.int32))
    if ok != 1:
        raise RuntimeError("OpenSSL AES-128-ECB failed")
    return out_seeds.view(np.uint8).reshape(n, nm, 16), out_ctrl, out_y, bad


# ------------------------------------------------------------- Field255 (p = 2^255 - 19)
# The leaf level in compiled code, on the representation of :mod:`field` (ten 26-bit
# limbs, int64, the limb axis first): each kernel walks the reports and their
# candidates and keeps an element's limbs in small work arrays allocated once per call,
# so the only memory traffic is its inputs and outputs (the numpy code writes every
# intermediate limb array out and reads it back). Same carries, folds (2^260 = 608 mod
# p) and freeze as the numpy code; tests/protocol/test_poplar1_jit.py checks the outputs
# against it and against Python's integers.
if _nb is not None:
    _MK = np.int64((1 << 26) - 1)
    _TOPM = np.int64((1 << 21) - 1)
    _W26 = np.uint64((1 << 26) - 1)
    _TOP63 = np.uint64((1 << 63) - 1)

    @_nb.njit(inline="always", cache=True)
    def _f255_freeze(x, t):  # noqa: ANN001, ANN202
        # ten limbs in [0, 2^26) (value below 2^260) to the canonical residue, in place
        for _ in range(2):
            hi = x[9] >> 21
            x[9] &= _TOPM
            x[0] += 19 * hi
            for k in range(9):
                x[k + 1] += x[k] >> 26
                x[k] &= _MK
        for k in range(10):
            t[k] = x[k]
        t[0] += 19
        for k in range(9):
            t[k + 1] += t[k] >> 26
            t[k] &= _MK
        if (t[9] >> 21) != 0:                    # value + 19 >= 2^255: value >= p
            t[9] &= _TOPM
            for k in range(10):
                x[k] = t[k]

    @_nb.njit(inline="always", cache=True)
    def _f255_reduce(h, ncols, x, t):  # noqa: ANN001, ANN202
        # signed columns h[0 .. ncols) of weights 2^(26 k) (ncols <= 19, each below 2^62
        # in magnitude; h has 20 entries) to canonical limbs x; h is used as scratch
        carry = np.int64(0)
        for k in range(ncols):
            v = h[k] + carry
            h[k] = v & _MK
            carry = v >> 26
        h[ncols] = carry
        for k in range(ncols + 1, 20):
            h[k] = 0
        for j in range(10):
            x[j] = h[j] + 608 * h[j + 10]
        while True:
            carry = np.int64(0)
            for k in range(10):
                v = x[k] + carry
                x[k] = v & _MK
                carry = v >> 26
            if carry == 0:
                break
            x[0] += 608 * carry
        _f255_freeze(x, t)

    @_nb.njit(inline="always", cache=True)
    def _f255_mac(a, b, h):  # noqa: ANN001, ANN202
        # h[i + j] += a[i] b[j]: the schoolbook columns of a b, accumulated
        for i in range(10):
            ai = a[i]
            for j in range(10):
                h[i + j] += ai * b[j]

    @_nb.njit(inline="always", cache=True)
    def _f255_from_words(w, o, x):  # noqa: ANN001, ANN202
        # the four little-endian words w[o .. o + 4) (bit 255 cleared) to limbs x;
        # returns whether the integer is at least p
        w0, w1, w2, w3 = w[o], w[o + 1], w[o + 2], w[o + 3] & _TOP63
        x[0] = np.int64(w0 & _W26)
        x[1] = np.int64((w0 >> np.uint64(26)) & _W26)
        x[2] = np.int64(((w0 >> np.uint64(52)) | (w1 << np.uint64(12))) & _W26)
        x[3] = np.int64((w1 >> np.uint64(14)) & _W26)
        x[4] = np.int64(((w1 >> np.uint64(40)) | (w2 << np.uint64(24))) & _W26)
        x[5] = np.int64((w2 >> np.uint64(2)) & _W26)
        x[6] = np.int64((w2 >> np.uint64(28)) & _W26)
        x[7] = np.int64(((w2 >> np.uint64(54)) | (w3 << np.uint64(10))) & _W26)
        x[8] = np.int64((w3 >> np.uint64(16)) & _W26)
        x[9] = np.int64(w3 >> np.uint64(42))
        # at least p = 2^255 - 19 exactly when limbs 1 to 9 are all ones (bits 26 to
        # 254) and the low limb is at least 2^26 - 19
        ge = x[0] >= _MK - 18 and x[9] == _TOPM
        for k in range(1, 9):
            ge = ge and x[k] == _MK
        return ge

    @_nb.njit(nogil=True, cache=True)
    def _leaf_values(e64, ctrl, cw, agg1, y, bad):  # noqa: ANN001, ANN202
        # e64 (N, M, 10) uint64: the leaf convert's output per node (next seed, then two
        # elements); cw (10, N, 2) the correction words; y (10, N, M, 2) out
        n, m = ctrl.shape
        x = np.empty(10, dtype=np.int64)
        t = np.empty(10, dtype=np.int64)
        h = np.zeros(20, dtype=np.int64)
        for r in range(n):
            for j in range(m):
                for v in range(2):
                    if _f255_from_words(e64[r, j], 2 + 4 * v, x):
                        bad[r, j] = True
                    for k in range(10):
                        s = x[k]
                        if ctrl[r, j]:
                            s += cw[k, r, v]
                        h[k] = -s if agg1 else s
                    _f255_reduce(h, 10, x, t)
                    for k in range(10):
                        y[k, r, j, v] = x[k]

    @_nb.njit(nogil=True, cache=True)
    def _leaf_sketch(y, rand, abc, out):  # noqa: ANN001, ANN202
        # y (10, N, C, 2) the value shares (data, auth), rand (10, N, C), abc (10, N, 3)
        n, c = rand.shape[1], rand.shape[2]
        a = np.empty(10, dtype=np.int64)
        b = np.empty(10, dtype=np.int64)
        d = np.empty(10, dtype=np.int64)
        r2 = np.empty(10, dtype=np.int64)
        x = np.empty(10, dtype=np.int64)
        t = np.empty(10, dtype=np.int64)
        h = np.zeros(20, dtype=np.int64)
        acc = np.zeros((3, 20), dtype=np.int64)
        for r in range(n):
            acc[:, :] = 0
            for j in range(c):
                for k in range(10):
                    a[k] = rand[k, r, j]
                    d[k] = y[k, r, j, 0]
                    b[k] = y[k, r, j, 1]
                h[:] = 0
                _f255_mac(a, a, h)
                _f255_reduce(h, 19, r2, t)
                _f255_mac(d, a, acc[0])
                _f255_mac(d, r2, acc[1])
                _f255_mac(b, a, acc[2])
                if j % 32 == 31:
                    # 32 pairs of 19 columns stay below 2^61: reduce before the next
                    for s in range(3):
                        _f255_reduce(acc[s], 19, x, t)
                        acc[s, :] = 0
                        for k in range(10):
                            acc[s, k] = x[k]
            for s in range(3):
                for k in range(10):
                    acc[s, k] += abc[k, r, s]
                _f255_reduce(acc[s], 19, x, t)
                for k in range(10):
                    out[k, r, s] = x[k]


def leaf_values(converted: np.ndarray, ctrl: np.ndarray, w_cw: np.ndarray,
                agg_id: int) -> tuple[np.ndarray, np.ndarray]:
    """This aggregator's value shares at the leaf from the leaf ``convert``'s output of
    every node (``(N, M, 80)`` uint8: the next seed, then two elements' bytes), the
    nodes' control bits ``(N, M)`` and the reports' correction words (limbs ``(10, N,
    2)``): limbs ``(10, N, M, 2)`` (the element masked to 255 bits, the correction added
    where the bit is set, negated for aggregator 1) and a flag ``(N, M)`` where an element
    was at least ``p`` (the caller draws those again exactly)."""
    n, m = ctrl.shape
    e64 = np.ascontiguousarray(converted, dtype=np.uint8).view("<u8")
    y = np.empty((10, n, m, 2), dtype=np.int64)
    bad = np.zeros((n, m), dtype=bool)
    _leaf_values(e64, np.ascontiguousarray(ctrl, dtype=bool),
                 np.ascontiguousarray(w_cw, dtype=np.int64), bool(agg_id == 1), y, bad)
    return y, bad


def sketch_leaf(values: np.ndarray, rand: np.ndarray, abc: np.ndarray) -> np.ndarray:
    """Poplar1's round-1 sketch share at the leaf, limbs ``(10, N, 3)``: ``(a + sum_j r_j
    d_j, b + sum_j r_j^2 d_j, c + sum_j r_j e_j)`` from the value shares ``(10, N, C, 2)``
    (data ``d``, authenticator ``e``), the verification randomness ``(10, N, C)`` and the
    correlated randomness ``(10, N, 3)``, all canonical limbs."""
    out = np.empty((10, rand.shape[1], 3), dtype=np.int64)
    _leaf_sketch(np.ascontiguousarray(values, dtype=np.int64),
                 np.ascontiguousarray(rand, dtype=np.int64),
                 np.ascontiguousarray(abc, dtype=np.int64), out)
    return out
