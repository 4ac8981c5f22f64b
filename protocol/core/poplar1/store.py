"""Where the aggregators keep the clients' uploads between levels.

A Poplar1 heavy-hitters search prepares every report once per level, so the reports
are kept for the whole search. They are kept here once each, after the receiving
aggregator validated them completely (:meth:`Poplar1.decode_input_shares`,
:func:`decode_public_shares`), in compact tables laid out **level-major**: a level's
correction words (seed, control bits, payload) and each aggregator's correlated
randomness of that level are one contiguous slab over all reports, because the search
reads one level at a time. Per report at 256 bits: the nonce (16 B), the public share
(16 seed bytes, one byte of two control bits and 16 payload bytes a level; 64 leaf
bytes) and each aggregator's input share (its 16-byte key, 32-byte seed, 16 bytes a
level, 64 leaf bytes): 16,896 bytes, the upload (16,704) with the control bits one byte
a level.

The tables live either in memory (numpy arrays) or out of core: files in a temporary
directory (removed by :meth:`ReportStore.close`, which the runner calls in a
``finally``), written once through ``np.memmap`` and read with positioned reads of one
level's slab of one batch, so no page of the files stays mapped and the resident
memory of a level is bounded by the batch, not by the population.

:meth:`ReportStore.public` and :meth:`ReportStore.inputs` give one batch's
:class:`~protocol.core.poplar1.idpf.PublicShares` and
:class:`~protocol.core.poplar1.vdaf.InputShares` whose per-level fields are
:class:`LevelColumns`: ``x[:, level]`` reads that level's slab of the batch when asked
(nothing is validated again: the rows were validated on receipt).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable

import numpy as np

from protocol.core.poplar1 import idpf as I
from protocol.core.poplar1.errors import Poplar1UsageError
from protocol.core.poplar1.field import ENC255, Field255Rows

__all__ = ["ReportStore", "Field255Rows", "LevelColumns"]

_LEVEL_MAJOR = {"seed_cw", "ctrl_cw", "w_inner", "corr_inner"}


class LevelColumns:
    """One batch's per-level field: ``x[:, level]`` is that level's ``(N, ...)`` array
    (read from the store when asked); ``shape`` is the field's ``(N, levels, ...)``."""

    __slots__ = ("_read", "shape", "dtype")

    def __init__(self, read: Callable[[int], np.ndarray], shape: tuple[int, ...],
                 dtype: Any) -> None:  # noqa: ANN401
        self._read, self.shape, self.dtype = read, shape, np.dtype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:  # noqa: ANN401
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] == slice(None)
                and isinstance(key[1], (int, np.integer))):
            raise Poplar1UsageError("a stored report field is read one level at a time")
        level = int(key[1])
        if not 0 <= level < self.shape[1]:
            raise Poplar1UsageError("level out of range")
        return self._read(level)


class ReportStore:
    """The validated uploads of ``n`` reports: nonces, public shares (one table, or
    one per aggregator when ``split_public``) and each aggregator's input shares.

    Args:
        bits: the measurement length.
        n: the number of reports.
        directory: ``None`` keeps the tables in memory; otherwise a parent directory in
            which a fresh temporary directory holds one file per table.
        split_public: keep one public-share table per aggregator.
    """

    def __init__(self, bits: int, n: int, *, directory: str | None = None,
                 split_public: bool = False) -> None:
        if n < 1 or not 1 <= bits < (1 << 16):
            raise Poplar1UsageError("a report store needs n >= 1 and bits in [1, 65535]")
        self.bits, self.n = bits, n
        self.split_public = split_public
        self.tmpdir: str | None = None
        b = bits
        # name -> (shape, dtype); a leading levels axis marks a level-major table
        t: dict[str, tuple[tuple[int, ...], Any]] = {"nonces": ((n, 16), np.uint8)}
        for p in (("0", "1") if split_public else ("",)):
            t[f"seed_cw{p}"] = ((b, n, 16), np.uint8)
            t[f"ctrl_cw{p}"] = ((b, n), np.uint8)
            t[f"w_inner{p}"] = ((b - 1, n, 2), np.uint64)
            t[f"w_leaf{p}"] = ((n, 2 * ENC255), np.uint8)
        for j in (0, 1):
            t[f"key{j}"] = ((n, 16), np.uint8)
            t[f"corr_seed{j}"] = ((n, 32), np.uint8)
            t[f"corr_inner{j}"] = ((b - 1, n, 2), np.uint64)
            t[f"corr_leaf{j}"] = ((n, 2 * ENC255), np.uint8)
        self.tables = t
        self._mem: dict[str, np.ndarray] = {}
        if directory is not None:
            self.tmpdir = tempfile.mkdtemp(prefix="fedhh-poplar1-", dir=directory)
        try:
            for name, (shape, dtype) in t.items():
                # an empty table (the inner levels at BITS = 1) has no file to map
                if self.tmpdir is None or int(np.prod(shape)) == 0:
                    self._mem[name] = np.zeros(shape, dtype=dtype)
                else:   # the file at its full size, filled chunk by chunk
                    np.memmap(self._path(name), dtype=dtype, mode="w+", shape=shape).flush()
        except BaseException:
            self.close()
            raise

    @property
    def out_of_core(self) -> bool:
        return self.tmpdir is not None

    def bytes_per_report(self) -> int:
        return sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in self.tables.values()) \
            // self.n

    def _path(self, name: str) -> str:
        assert self.tmpdir is not None
        return os.path.join(self.tmpdir, name)

    def close(self) -> None:
        """Remove the temporary directory (out of core) or drop the tables; idempotent."""
        self._mem.clear()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        self._closed = True

    def __enter__(self) -> "ReportStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if getattr(self, "_closed", False):
            raise Poplar1UsageError("report store closed")

    # ------------------------------------------------------------------ writing
    def write(self, name: str, lo: int, rows: np.ndarray) -> None:
        """Reports ``lo .. lo + N`` of table ``name``: ``rows`` is ``(N, ...)`` (for a
        level-major table, ``(N, levels, ...)``)."""
        self._check_open()
        if name not in self.tables:
            raise Poplar1UsageError(f"report store: no table {name}")
        shape, dtype = self.tables[name]
        major = name.rstrip("01") in _LEVEL_MAJOR
        rows = np.asarray(rows)
        want = (shape[0],) + shape[2:] if major else shape[1:]
        hi = lo + (rows.shape[0] if rows.ndim else 0)
        if rows.ndim < 1 or rows.shape[1:] != want or not 0 <= lo <= hi <= self.n \
                or rows.dtype != np.dtype(dtype):
            raise Poplar1UsageError(f"report store: bad rows for {name}")
        if major:
            rows = np.swapaxes(rows, 0, 1)
        if name in self._mem:
            if major:
                self._mem[name][:, lo:hi] = rows
            else:
                self._mem[name][lo:hi] = rows
            return
        mm = np.memmap(self._path(name), dtype=dtype, mode="r+", shape=shape)
        if major:
            mm[:, lo:hi] = rows
        else:
            mm[lo:hi] = rows
        mm.flush()
        del mm

    def put(self, lo: int, nonces: np.ndarray, public, inputs) -> None:  # noqa: ANN001
        """Reports from ``lo``: the nonces ``(N, 16)``, the validated decoded public
        shares (or a pair, when ``split_public``) and the pair of validated decoded input
        shares."""
        self.write("nonces", lo, np.asarray(nonces, dtype=np.uint8))
        pubs = public if self.split_public else (public,)
        for p, pub in zip(("0", "1") if self.split_public else ("",), pubs):
            self.write(f"seed_cw{p}", lo, pub.seed_cw)
            c = np.asarray(pub.ctrl_cw, dtype=np.uint8)
            self.write(f"ctrl_cw{p}", lo, c[:, :, 0] | (c[:, :, 1] << 1))
            self.write(f"w_inner{p}", lo, np.asarray(pub.w_inner, dtype=np.uint64))
            self.write(f"w_leaf{p}", lo, _leaf_bytes(pub.w_leaf))
        for j in (0, 1):
            sh = inputs[j]
            self.write(f"key{j}", lo, sh.key)
            self.write(f"corr_seed{j}", lo, sh.corr_seed)
            self.write(f"corr_inner{j}", lo, np.asarray(sh.corr_inner, dtype=np.uint64))
            self.write(f"corr_leaf{j}", lo, _leaf_bytes(sh.corr_leaf))

    # ------------------------------------------------------------------ reading
    def read(self, name: str, lo: int, hi: int, level: int | None = None) -> np.ndarray:
        """Reports ``lo .. hi`` of table ``name`` (at ``level`` for a level-major one):
        a view in memory; out of core, one positioned read into a fresh array."""
        self._check_open()
        shape, dtype = self.tables[name]
        dtype = np.dtype(dtype)
        if name in self._mem:
            t = self._mem[name]
            return t[level, lo:hi] if level is not None else t[lo:hi]
        if level is not None:
            inner = shape[2:]
            row = int(np.prod(inner, dtype=np.int64)) * dtype.itemsize
            offset = (level * shape[1] + lo) * row
            out_shape = (hi - lo,) + inner
        else:
            inner = shape[1:]
            row = int(np.prod(inner, dtype=np.int64)) * dtype.itemsize
            offset = lo * row
            out_shape = (hi - lo,) + inner
        with open(self._path(name), "rb") as fh:
            out = np.fromfile(fh, dtype=dtype, count=int(np.prod(out_shape)), offset=offset)
        return out.reshape(out_shape)

    def nonces(self, lo: int, hi: int) -> np.ndarray:
        return self.read("nonces", lo, hi)

    def _columns(self, name: str, lo: int, hi: int,
                 post: Callable[[np.ndarray], np.ndarray] | None = None) -> LevelColumns:
        shape, dtype = self.tables[name]

        def get(level: int) -> np.ndarray:
            x = self.read(name, lo, hi, level)
            return post(x) if post is not None else x

        tail = (2,) if name.startswith("ctrl_cw") else shape[2:]
        return LevelColumns(get, (hi - lo, shape[0]) + tail,
                            bool if name.startswith("ctrl_cw") else dtype)

    def public(self, agg_id: int, lo: int, hi: int) -> I.PublicShares:
        """The public shares of reports ``lo .. hi`` as aggregator ``agg_id`` received
        them (per-level fields read when a level asks)."""
        p = str(agg_id) if self.split_public else ""
        return I.PublicShares(
            self._columns(f"seed_cw{p}", lo, hi),
            self._columns(f"ctrl_cw{p}", lo, hi, _unpack_ctrl),
            self._columns(f"w_inner{p}", lo, hi),
            Field255Rows(lambda: self.read(f"w_leaf{p}", lo, hi), hi - lo))

    def inputs(self, agg_id: int, lo: int, hi: int):  # noqa: ANN201
        """Aggregator ``agg_id``'s input shares of reports ``lo .. hi``."""
        from protocol.core.poplar1.vdaf import InputShares

        return InputShares(np.array(self.read(f"key{agg_id}", lo, hi)),
                           np.array(self.read(f"corr_seed{agg_id}", lo, hi)),
                           self._columns(f"corr_inner{agg_id}", lo, hi),
                           Field255Rows(lambda: self.read(f"corr_leaf{agg_id}", lo, hi),
                                        hi - lo))


def _unpack_ctrl(c: np.ndarray) -> np.ndarray:
    out = np.empty(c.shape + (2,), dtype=bool)
    out[..., 0] = (c & 1).astype(bool)
    out[..., 1] = (c >> 1).astype(bool)
    return out


def _leaf_bytes(values) -> np.ndarray:  # noqa: ANN001
    """``N`` pairs of Field255 ints as ``(N, 64)`` little-endian bytes."""
    if isinstance(values, Field255Rows):
        return np.asarray(values.raw, dtype=np.uint8)
    n = len(values)
    buf = b"".join(int(x).to_bytes(ENC255, "little") for row in values for x in row)
    return np.frombuffer(buf, dtype=np.uint8).reshape(n, -1)
