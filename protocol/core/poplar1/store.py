"""Where the aggregators keep the clients' uploads between levels.

A Poplar1 heavy-hitters search prepares every report once per level, so the reports
are kept for the whole search. They are kept here exactly as the clients uploaded
them, once each, after the receiving aggregator validated them completely
(:meth:`Poplar1.decode_input_shares`, :func:`decode_public_shares`): one row of
``public_share_size`` bytes per report for the public share (both aggregators read
the same rows unless a client sent them different ones) and one row of
``input_share_size`` bytes per report and aggregator -- 16,704 bytes per report at
256 bits (with the nonce), the client's upload, and nothing else.

The rows live either in memory (numpy arrays) or out of core: ``np.memmap`` files in a
temporary directory (removed by :meth:`ReportStore.close`, which the runner calls in a
``finally``). Out of core, every read maps only the rows of one batch and copies them,
so the resident memory of a level is bounded by the batch, not by the population.

:meth:`ReportStore.load` turns rows back into the decoded structures of one batch
without validating them again (they were validated on receipt): the control bits
unpacked, the Field64 elements viewed as ``uint64``, the Field255 leaf elements
decoded only when read (:class:`Field255Rows`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Iterator

import numpy as np

from protocol.core.poplar1 import idpf as I
from protocol.core.poplar1.errors import Poplar1UsageError
from protocol.core.poplar1.field import ENC255, ENC64

__all__ = ["ReportStore", "Field255Rows"]


class Field255Rows:
    """``N`` rows of ``k`` little-endian Field255 elements (``(N, 32 k)`` uint8, already
    validated), read as lists of ints one row at a time: what
    :class:`~protocol.core.poplar1.idpf.PublicShares` ``.w_leaf`` and
    :class:`~protocol.core.poplar1.vdaf.InputShares` ``.corr_leaf`` hold, without
    keeping ``N`` lists of Python ints."""

    __slots__ = ("raw",)

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return self.raw.shape[0]

    def __getitem__(self, r: int) -> list[int]:
        row = self.raw[r].tobytes()
        return [int.from_bytes(row[i:i + ENC255], "little") for i in range(0, len(row), ENC255)]

    def __iter__(self) -> Iterator[list[int]]:
        for r in range(len(self)):
            yield self[r]


class ReportStore:
    """The validated uploads of ``n`` reports: nonces, public shares (one table, or
    one per aggregator when ``split_public``) and each aggregator's input shares.

    Args:
        bits: the measurement length.
        n: the number of reports.
        directory: ``None`` keeps the rows in memory; otherwise a parent directory in
            which a fresh temporary directory holds one ``np.memmap`` file per table.
        split_public: keep one public-share table per aggregator.
    """

    def __init__(self, bits: int, n: int, *, directory: str | None = None,
                 split_public: bool = False) -> None:
        if n < 1 or bits < 2:
            raise Poplar1UsageError("a report store needs n >= 1 and bits >= 2")
        self.bits, self.n = bits, n
        self.nctrl = (2 * bits + 7) // 8
        self.pub_size = I.public_share_size(bits)
        self.in_size = 16 + 32 + ENC64 * 2 * (bits - 1) + ENC255 * 2
        self.split_public = split_public
        self.tmpdir: str | None = None
        if directory is not None:
            self.tmpdir = tempfile.mkdtemp(prefix="fedhh-poplar1-", dir=directory)
        names = {"nonces": 16, "in0": self.in_size, "in1": self.in_size}
        if split_public:
            names.update({"pub0": self.pub_size, "pub1": self.pub_size})
        else:
            names["pub"] = self.pub_size
        self.width = names
        self._mem: dict[str, np.ndarray] = {}
        try:
            for name, w in names.items():
                if self.tmpdir is None:
                    self._mem[name] = np.zeros((n, w), dtype=np.uint8)
                else:   # the file at its full size, written later chunk by chunk
                    mm = np.memmap(self._path(name), dtype=np.uint8, mode="w+", shape=(n, w))
                    del mm
        except BaseException:
            self.close()
            raise

    @property
    def out_of_core(self) -> bool:
        return self.tmpdir is not None

    def bytes_per_report(self) -> int:
        return sum(self.width.values())

    def _path(self, name: str) -> str:
        assert self.tmpdir is not None
        return os.path.join(self.tmpdir, name + ".u8")

    def close(self) -> None:
        """Remove the temporary directory (out of core); idempotent."""
        self._mem.clear()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def __enter__(self) -> "ReportStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ rows
    def write(self, name: str, lo: int, rows: np.ndarray) -> None:
        """Rows ``lo .. lo + len(rows)`` of table ``name`` (written once)."""
        rows = np.asarray(rows, dtype=np.uint8)
        hi = lo + rows.shape[0]
        if name not in self.width or rows.ndim != 2 or rows.shape[1] != self.width[name] \
                or not 0 <= lo <= hi <= self.n:
            raise Poplar1UsageError(f"report store: bad rows for {name}")
        if self.tmpdir is None:
            self._mem[name][lo:hi] = rows
            return
        w = self.width[name]
        mm = np.memmap(self._path(name), dtype=np.uint8, mode="r+", offset=lo * w,
                       shape=(hi - lo, w))
        mm[:] = rows
        mm.flush()
        del mm

    def rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo .. hi`` of table ``name``: a view in memory, a copy out of core
        (the mapping is dropped at once, so no page of the file stays resident)."""
        if self.tmpdir is None:
            if name not in self._mem:
                raise Poplar1UsageError("report store closed")
            return self._mem[name][lo:hi]
        w = self.width[name]
        mm = np.memmap(self._path(name), dtype=np.uint8, mode="r", offset=lo * w,
                       shape=(hi - lo, w))
        out = np.array(mm)
        del mm
        return out

    def put(self, lo: int, nonces: np.ndarray, public, inputs) -> None:  # noqa: ANN001
        """Rows from ``lo``: the nonces ``(N, 16)``, the encoded public shares (a list of
        bytes, or a pair of lists when ``split_public``) and the pair of lists of
        encoded input shares -- each already validated by its decoder."""
        self.write("nonces", lo, nonces)
        pubs = public if self.split_public else (public,)
        for name, enc in zip(("pub0", "pub1") if self.split_public else ("pub",), pubs):
            self.write(name, lo, np.frombuffer(b"".join(enc), dtype=np.uint8)
                       .reshape(len(enc), self.pub_size))
        for j in (0, 1):
            self.write(f"in{j}", lo, np.frombuffer(b"".join(inputs[j]), dtype=np.uint8)
                       .reshape(len(inputs[j]), self.in_size))

    # ------------------------------------------------------------------ decoded views
    def nonces(self, lo: int, hi: int) -> np.ndarray:
        return self.rows("nonces", lo, hi)

    def public(self, agg_id: int, lo: int, hi: int) -> I.PublicShares:
        """The public shares of reports ``lo .. hi`` as aggregator ``agg_id`` received
        them."""
        buf = self.rows(f"pub{agg_id}" if self.split_public else "pub", lo, hi)
        b, n, nc = self.bits, hi - lo, self.nctrl
        ctrl = np.unpackbits(buf[:, :nc], axis=1, bitorder="little")[:, :2 * b]
        seed_cw = buf[:, nc:nc + 16 * b].reshape(n, b, 16)
        off = nc + 16 * b
        inner = _u64(buf[:, off:off + 16 * (b - 1)]).reshape(n, b - 1, 2)
        return I.PublicShares(seed_cw, ctrl.reshape(n, b, 2).view(bool), inner,
                              Field255Rows(buf[:, off + 16 * (b - 1):]))

    def inputs(self, agg_id: int, lo: int, hi: int):  # noqa: ANN201
        """Aggregator ``agg_id``'s input shares of reports ``lo .. hi``."""
        from protocol.core.poplar1.vdaf import InputShares

        buf = self.rows(f"in{agg_id}", lo, hi)
        b, n = self.bits, hi - lo
        return InputShares(buf[:, :16], buf[:, 16:48],
                           _u64(buf[:, 48:48 + 16 * (b - 1)]).reshape(n, b - 1, 2),
                           Field255Rows(buf[:, 48 + 16 * (b - 1):]))


def _u64(block: np.ndarray) -> np.ndarray:
    """Little-endian 8-byte words of a ``(N, 8 k)`` uint8 block: a view when the rows
    allow one, else a copy."""
    try:
        return block.view("<u8").astype(np.uint64, copy=False)
    except ValueError:
        return np.ascontiguousarray(block).view("<u8").astype(np.uint64, copy=False)
