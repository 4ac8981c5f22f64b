"""Decode bombs: frames built to make the receiver allocate or compute far more than
the frame's size (bounded decoding in :mod:`protocol.core.codec`).

Theory of operation
-------------------
Two bombs, each sent to a party that decodes with its session's
:class:`protocol.core.codec.SessionLimits`:

* **masked-input bomb** (a client against the secure-aggregation server): a
  ``MaskedInput`` frame of 8 MiB that claims ``dim = 2**26`` at modulus 2 (one bit an
  entry). Unpacked, it is a 512 MiB ``uint64`` vector. A second variant fits under the
  session's frame limit (``dim = 50000`` at modulus ``2**16``: 100 kB) but claims 16
  times as many entries at modulus 2;
* **nested-array bomb** (a shuffler against the analyzer): a ``ShuffledBatch`` whose
  list of inner envelopes holds ``2**22`` arrays of eight empty arrays (36 MB; every
  byte becomes a 56-byte Python list if unpacked). A second variant fits the largest
  legal batch frame of an analyzer that takes up to 10,000 reports (0.7 MB): 10,000
  entries (a legal count), each an array of 65 empty arrays, so that only the shape
  walk can refuse it.

For each frame the attack measures the receiver's decoding with
:func:`measure_decode`: the peak of memory allocated while decoding
(``tracemalloc``, the frame itself excluded) and its CPU time
(``time.process_time``), and checks that it ends in ``CodecError`` with at most
:data:`MAX_MEMORY_RATIO` times the frame's size (plus :data:`MAX_FIXED_BYTES`, the
exception and the walker's own frames) and :data:`MAX_CPU_SECONDS`. The
masked-input bomb is also injected into a real session (the engine's envelope hook):
the server refuses it and the session completes without the bomber.
"""
from __future__ import annotations

import gc
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocol.core import codec, wire_secagg, wire_shuffler
from protocol.core.secagg_engine import Envelope, make_config
from protocol.studies.attacks import Outcome, attack
from protocol.studies.attacks.secagg_attacks import _inputs, _reasons, run_checked
from protocol.studies.attacks.shuffler_attacks import make_setup
from secagg.messages import MaskedInput
from shuffler.messages import Context, ShuffledBatch

__all__ = ["DecodeCost", "measure_decode", "masked_input_bomb", "nested_batch_bomb",
           "MAX_MEMORY_RATIO", "MAX_FIXED_BYTES", "MAX_CPU_SECONDS"]

#: goal: decoding any frame allocates at most this many times the frame's size ...
MAX_MEMORY_RATIO = 4.0
#: ... plus this constant (the exception and its message, the walker's frames), which
#: dominates only for frames of a few hundred bytes
MAX_FIXED_BYTES = 16384
#: ... and refusing a bomb takes at most this much CPU
MAX_CPU_SECONDS = 0.1


@dataclass(frozen=True)
class DecodeCost:
    """What decoding one frame cost the receiver.

    Attributes:
        frame_bytes: the frame's size.
        peak_bytes: peak memory allocated during decoding (tracemalloc).
        cpu_seconds: CPU time of decoding (without tracemalloc's overhead).
        error: ``None`` if the frame decoded, else the exception's type and message.
    """

    frame_bytes: int
    peak_bytes: int
    cpu_seconds: float
    error: str | None

    @property
    def ratio(self) -> float:
        return self.peak_bytes / max(1, self.frame_bytes)

    @property
    def refused_by_codec(self) -> bool:
        return self.error is not None and self.error.startswith("CodecError")

    def bounded(self) -> bool:
        """Refused with ``CodecError``, within the memory ratio and CPU goal."""
        return (self.refused_by_codec
                and self.peak_bytes <= MAX_MEMORY_RATIO * self.frame_bytes + MAX_FIXED_BYTES
                and self.cpu_seconds <= MAX_CPU_SECONDS)

    def as_dict(self) -> dict[str, Any]:
        return {"frame_bytes": self.frame_bytes, "peak_bytes": self.peak_bytes,
                "peak_over_frame": round(self.ratio, 6), "cpu_seconds": self.cpu_seconds,
                "error": self.error}


def _decode(frame: bytes, limits: codec.Limits | codec.SessionLimits) -> str | None:
    try:
        codec.decode(frame, limits=limits)
    except Exception as exc:  # noqa: BLE001 - the measurement records whatever escapes
        return f"{type(exc).__name__}: {exc}"
    return None


def measure_decode(frame: bytes, limits: codec.Limits | codec.SessionLimits,
                   collect: bool = True) -> DecodeCost:
    """Decode ``frame`` twice: once timed (CPU), once under ``tracemalloc`` (peak).

    Args:
        frame: the bytes received.
        limits: what the receiver decodes with.
        collect: run the garbage collector before each decode (steadier figures; slow
            in a large process).

    Returns:
        the :class:`DecodeCost`; never raises for a bad frame.
    """
    if collect:
        gc.collect()
    t0 = time.process_time()
    error = _decode(frame, limits)
    cpu = time.process_time() - t0
    if collect:
        gc.collect()
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    _decode(frame, limits)
    peak = tracemalloc.get_traced_memory()[1] - base
    if not tracing:
        tracemalloc.stop()
    return DecodeCost(len(frame), max(0, peak), cpu, error)


def _uint(v: int) -> bytes:
    """msgpack's shortest encoding of a non-negative int (the bombs are written by hand:
    the studies layer does not use msgpack)."""
    if v < 0x80:
        return bytes([v])
    for code, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
        if v < 1 << (8 * size):
            return bytes([code]) + v.to_bytes(size, "big")
    raise ValueError("int too large for msgpack")


def _bin(data: bytes) -> bytes:
    n = len(data)
    head = b"\xc4" + bytes([n]) if n <= 0xFF else b"\xc5" + n.to_bytes(2, "big") \
        if n <= 0xFFFF else b"\xc6" + n.to_bytes(4, "big")
    return head + data


def masked_input_bomb(sender: int = 0, dim: int = 1 << 26, modulus: int = 2) -> bytes:
    """A ``MaskedInput`` frame claiming ``dim`` entries at ``modulus`` (entries all 1).

    At the defaults: 8 MiB of packed bits claiming a 512 MiB vector.
    """
    bits = (modulus - 1).bit_length()
    nbytes = (dim * bits + 7) // 8
    packed = b"\x00" * nbytes if bits * dim % 8 else b"\x01" * nbytes
    # [VERSION, tag, sender, dim, R - 1, packed]: the layout of MaskedInput.to_wire
    return (b"\x96" + _uint(codec.VERSION) + _uint(MaskedInput.TAG) + _uint(sender)
            + _uint(dim) + _uint(modulus - 1) + _bin(packed))


def nested_batch_bomb(context: Context, entries: int = 1 << 22, width: int = 8) -> bytes:
    """A ``ShuffledBatch`` frame whose inner list holds ``entries`` arrays of ``width``
    empty arrays (9 bytes each at the defaults: 36 MB).

    Raises:
        ValueError: ``width`` over 65535 or ``entries`` over ``2**32 - 1``.
    """
    if not 0 <= width <= 0xFFFF or not 0 <= entries < 1 << 32:
        raise ValueError("width < 2**16 and entries < 2**32")
    empty = codec.encode(ShuffledBatch(context, ()))
    assert empty[-1] == 0x90  # the empty list of inner envelopes ends the frame
    entry = (bytes([0x90 | width]) if width < 16 else b"\xdc" + width.to_bytes(2, "big")) \
        + b"\x90" * width
    return empty[:-1] + b"\xdd" + entries.to_bytes(4, "big") + entry * entries


def _bomb_outcome(name: str, costs: dict[str, DecodeCost], extra_ok: bool,
                  parties: dict[str, Any], observed_extra: str = "") -> Outcome:
    ok = extra_ok and all(c.bounded() for c in costs.values())
    worst = max(costs.values(), key=lambda c: c.ratio)
    observed = (f"every frame refused with CodecError: {all(c.refused_by_codec for c in costs.values())}; "
                f"worst peak {worst.peak_bytes} B = {worst.ratio:.2e} x the frame, "
                f"worst CPU {max(c.cpu_seconds for c in costs.values()) * 1e3:.2f} ms"
                + observed_extra)
    return Outcome(name, f"CodecError, peak <= {MAX_MEMORY_RATIO:g}x the frame + "
                   f"{MAX_FIXED_BYTES} B, "
                   f"CPU <= {MAX_CPU_SECONDS:g} s", observed, ok, parties,
                   {k: c.as_dict() for k, c in costs.items()})


@attack("secagg.decode_bomb", system="secagg",
        target="protocol.core.codec: frames bounded by the session (dim, modulus, roster)",
        expected="an 8 MiB MaskedInput claiming dim 2^26 (a 512 MiB vector) is refused at "
                 "framing with CodecError, and one under the frame limit with another dim "
                 "by its shape; decoding stays under 4x the frame and 0.1 s CPU; in a "
                 "session the server drops the bomber and completes")
def masked_bomb(seed: int) -> Outcome:
    """Decode bomb against the server: a MaskedInput whose claimed dimension expands an
    8 MiB frame into a 512 MiB vector."""
    cfg = make_config(8, 50_000, graph="complete", threshold=3, modulus=1 << 16)
    limits = wire_secagg.server_limits(cfg)
    bomber = int(np.random.default_rng(seed).integers(0, cfg.n))
    legal = limits.max_frame(MaskedInput.TAG)
    bomb = masked_input_bomb(bomber)
    small = masked_input_bomb(bomber, dim=(legal - 24) * 8, modulus=2)  # under the limit
    costs = {"8MiB_dim_2^26": measure_decode(bomb, limits),
             "under_frame_limit": measure_decode(small, limits)}

    def hook(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        if round_no == 2 and direction == "up":
            return [e.replace(data=bomb) if e.sender == bomber else e for e in envs]
        return envs

    inputs = _inputs(cfg, seed)
    run = run_checked(cfg, inputs, seed, adversary=hook)
    refused = [r for r in run.transcript.rejected if r[0] == -1 and r[1] == 2]
    ok = (run.completed and bomber not in run.survivors and len(refused) == 1
          and "exceeds the largest legal" in refused[0][2] and len(small) <= legal)
    return _bomb_outcome("secagg.decode_bomb", costs, ok, _reasons(run),
                         f"; in a session: server refused it ({refused[0][2][:60] if refused else None}), "
                         f"session {run.server_state.value}, bomber {bomber} not in U3: "
                         f"{bomber not in run.survivors}")


@attack("shuffler.decode_bomb", system="shuffler",
        target="protocol.core.codec: frames bounded by the batch (context, batch size), "
               "shape walked before unpacking",
        expected="a 36 MB ShuffledBatch of nested empty arrays is refused at framing with "
                 "CodecError, and one cut to the largest legal batch frame by the shape "
                 "walk; decoding stays under 4x the frame and 0.1 s CPU")
def batch_bomb(seed: int) -> Outcome:
    """Decode bomb against the analyzer: a ShuffledBatch of nested empty arrays (each
    byte a Python list if unpacked)."""
    items = [b"w%d" % (i % 5) for i in range(20 + seed % 7)]
    st = make_setup(seed, items)
    ctx = st.encoder.context
    limits = wire_shuffler.session_limits(ctx, 10_000)  # the analyzer takes <= 10^4
    legal = limits.max_frame(ShuffledBatch.TAG)
    head = len(nested_batch_bomb(ctx, 0))
    # as many entries as the analyzer takes, each as wide as the frame limit allows
    fits = nested_batch_bomb(ctx, 10_000, (legal - head) // 10_000 - 3)
    costs = {"36MB_nested": measure_decode(nested_batch_bomb(ctx), limits),
             "under_frame_limit": measure_decode(fits, limits),
             "no_session": measure_decode(nested_batch_bomb(ctx), codec.DEFAULT_LIMITS)}
    sh = st.shuffler()
    for e in st.envelopes:
        sh.submit(e)
    batch = sh.close_batch(ctx).batch
    control = codec.decode(codec.encode(batch), ShuffledBatch, limits) == batch
    return _bomb_outcome("shuffler.decode_bomb", costs, control and len(fits) <= legal,
                         {"analyzer": "refused every bomb; decoded the honest batch"
                          if control else "honest batch not decoded"},
                         f"; honest batch of {len(items)} decoded: {control}")
