"""Fuzzing of every decoder and parser that reads untrusted bytes.

Targets and the only exception each may raise:

* ``protocol.core.codec.decode`` for every registered tag (secagg 1-15, shuffler 100-105),
  without a session and with the session's limits (memory at most 4x the frame + 16 KiB):
  ``CodecError``;
* the shuffler's envelope opening -- ``Shuffler.submit``, ``Context.parse_header``,
  ``ShufflerEnvelope.from_bytes``, ``AnalyzerEnvelope.from_bytes``,
  ``PlainReport.from_bytes``, ``Analyzer.open_one``: ``ShufflerError``;
* ``secagg.shamir.Share.from_bytes`` and ``secagg.prg.unpack_uints``:
  ``ParameterError`` (a ``ValueError``);
* ``protocol.studies.datasets.load_file`` (text and CSV): ``DatasetError``.

Inputs: random bytes; valid messages (captured from a real malicious-variant session
and a real shuffler batch) with bytes flipped, inserted, deleted or truncated; and
structured messages ``[version, tag, fields...]`` whose fields are arbitrary
msgpack-native values or mutated valid fields. Every example has a deadline (no
hang) and the process's peak RSS is checked (bounded memory: decoding is capped by
the codec's size limits).

The default run is small (hypothesis, ~100-200 examples per target); the ``slow``
tests push at least 100,000 inputs through every decoder with a seeded mutation loop
(``pytest -m slow tests/protocol/test_fuzz_decoders.py``).
"""
from __future__ import annotations

import functools
import resource
from typing import Any, Callable

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.core import codec
from protocol.core import wire_secagg  # noqa: F401
from protocol.core import wire_shuffler  # noqa: F401
from protocol.studies.datasets import DatasetError, load_file
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import make_config, run_secagg
from secagg import prg
from secagg.errors import ParameterError
from secagg.messages import ServerAbort
from secagg.shamir import Share
from shuffler.analyzer import Analyzer
from shuffler.errors import ShufflerError
from shuffler.messages import AnalyzerEnvelope, Context, PlainReport, ShufflerEnvelope
from shuffler.shuffler import Shuffler

FUZZ = settings(max_examples=100, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------ seed corpus
@functools.lru_cache(maxsize=1)
def corpus() -> dict[int, list[bytes]]:
    """Valid encodings of every registered tag."""
    out: dict[int, list[bytes]] = {}

    def keep(data: bytes) -> None:
        tag = msgpack.unpackb(data, raw=False)[1]
        if len(out.setdefault(tag, [])) < 4:
            out[tag].append(data)

    def hook(round_no, direction, envs):
        for e in envs:
            keep(e.data)
        return envs

    cfg = make_config(5, 3, graph="complete", threshold=3, malicious=True)
    x = np.arange(15, dtype=np.uint64).reshape(5, 3)
    run_secagg(cfg, x, rand=insecure_deterministic_randomness(1), adversary=hook)
    keep(codec.encode(ServerAbort("too_few_keys")))
    sh = shuffler_setup()
    keep(codec.encode(sh["envelope"]))
    keep(codec.encode(AnalyzerEnvelope.from_bytes(sh["inner"])))
    keep(codec.encode(PlainReport(16, b"hello")))
    keep(codec.encode(sh["batch"]))
    keep(codec.encode(sh["receipt"]))
    keep(codec.encode(_blinded_batch()))
    missing = set(_tags()) - set(out)
    assert not missing, f"no seed message for tags {missing}"
    return out


def _blinded_batch() -> Any:
    """A small BlindedBatch from shuffler 1 of the blinded-crowd pipeline."""
    from shuffler import Encoder, KeyPair, Shuffler
    from shuffler.blinded import Blinder, DecryptorKey, encrypt_crowd

    rand = insecure_deterministic_randomness(2)
    s1, a, s2 = KeyPair.generate(rand), KeyPair.generate(rand), DecryptorKey.generate(rand)
    enc = Encoder(s1.public_key, a.public_key, "fuzz", 1, 4, rand, blinded=True)
    items = [b"x", b"y", b"x"]
    envs = enc.encode_batch(items, [encrypt_crowd(i, enc.context.header, s2.public, rand)
                                    for i in items])
    sh = Shuffler(s1, rand)
    sh.open_batch(enc.context)
    sh.submit_many(envs)
    return sh.close_blinded_batch(enc.context, Blinder(s2.public, rand)).batch


@functools.lru_cache(maxsize=1)
def shuffler_setup() -> dict[str, Any]:
    from protocol.studies.attacks.shuffler_attacks import make_setup
    st_ = make_setup(0, [b"a", b"b", b"a", b"c"])
    s = st_.shuffler()
    for e in st_.envelopes:
        s.submit(e)
    out = s.close_batch(st_.encoder.context)
    return {"setup": st_, "envelope": ShufflerEnvelope.from_bytes(st_.envelopes[0]),
            "raw": st_.envelopes[0], "inner": out.batch.inner[0], "batch": out.batch,
            "receipt": out.receipt, "context": st_.encoder.context}


def _tags() -> list[int]:
    """The project's message tags (other tests may register throw-away types)."""
    return sorted(cls.TAG for cls in (*wire_secagg.SECAGG_MESSAGES,
                                      *wire_shuffler.MESSAGE_TYPES))


# ------------------------------------------------------------------ targets
def _codec(data: bytes) -> None:
    try:
        codec.decode(data)
    except codec.CodecError:
        pass


def _codec_session(data: bytes) -> None:
    try:
        codec.decode(data, limits=_corpus_limits())
    except codec.CodecError:
        pass


def _fresh_shuffler() -> Shuffler:
    s = shuffler_setup()
    sh = Shuffler(s["setup"].s_keys, insecure_deterministic_randomness(0))
    sh.open_batch(s["context"])
    return sh


def _shuffler_submit(data: bytes) -> None:
    sh = _fresh_shuffler()
    try:
        sh.submit(data)
    except ShufflerError:
        pass


def _shuffler_parsers(data: bytes) -> None:
    s = shuffler_setup()
    for fn in (lambda: Context.parse_header(data), lambda: ShufflerEnvelope.from_bytes(data),
               lambda: AnalyzerEnvelope.from_bytes(data),
               lambda: PlainReport.from_bytes(data, 16),
               lambda: Analyzer(s["setup"].a_keys).open_one(s["context"], data)):
        try:
            fn()
        except ShufflerError:
            pass


def _share(data: bytes) -> None:
    try:
        Share.from_bytes(data)
    except ParameterError:
        pass


def _unpack(data: bytes) -> None:
    for count, modulus in ((len(data), 256), (max(1, len(data) * 8 // 13), 1 << 13),
                           (max(1, len(data) // 8), 1 << 64), (3, 1000)):
        try:
            prg.unpack_uints(data, count, modulus)
        except ParameterError:
            pass


def _dataset(tmp_path_factory: Any) -> Callable[[bytes], None]:
    d = tmp_path_factory.mktemp("fuzz")

    def run(data: bytes) -> None:
        for name in ("f.txt", "f.csv"):
            p = d / name
            p.write_bytes(data)
            try:
                load_file(p)
            except DatasetError:
                pass
    return run


BYTE_TARGETS: dict[str, Callable[[bytes], None]] = {
    "codec": _codec, "codec_session": _codec_session, "shuffler_submit": _shuffler_submit, "shuffler_parsers": _shuffler_parsers,
    "share": _share, "unpack_uints": _unpack,
}


def _seeds_for(target: str) -> list[bytes]:
    if target in ("codec", "codec_session"):
        return [m for ms in corpus().values() for m in ms]
    s = shuffler_setup()
    if target in ("shuffler_submit", "shuffler_parsers"):
        return [s["raw"], s["inner"], PlainReport(16, b"hey").to_bytes()]
    if target == "share":
        return [Share(3, (12345,) * 9).to_bytes()]
    if target == "unpack_uints":
        return [prg.pack_uints(np.arange(7, dtype=np.uint64), 1 << 13)]
    return [b"alice bob\ncarol\n", b"user,item\nu1,abc\nu2,de\n"]


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """One random mutation: flip, set, insert, delete, truncate, extend or splice."""
    b = bytearray(data)
    op = int(rng.integers(0, 7))
    if op == 0 and b:
        i = int(rng.integers(0, len(b)))
        b[i] ^= 1 << int(rng.integers(0, 8))
    elif op == 1 and b:
        i = int(rng.integers(0, len(b)))
        b[i] = int(rng.choice([0, 0x7F, 0x80, 0xC0, 0xC1, 0xD9, 0xDC, 0xDD, 0xFF,
                               int(rng.integers(0, 256))]))
    elif op == 2:
        i = int(rng.integers(0, len(b) + 1))
        b[i:i] = rng.bytes(int(rng.integers(1, 9)))
    elif op == 3 and b:
        i = int(rng.integers(0, len(b)))
        del b[i:i + int(rng.integers(1, 9))]
    elif op == 4:
        b = b[:int(rng.integers(0, len(b) + 1))]
    elif op == 5:
        b += rng.bytes(int(rng.integers(1, 64)))
    elif b:
        i, j = sorted(rng.integers(0, len(b) + 1, 2).tolist())
        b[i:j] = b[i:j][::-1]
    return bytes(b)


# ------------------------------------------------------------------ hypothesis (default)
msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats()
    | st.text(max_size=20) | st.binary(max_size=80),
    lambda inner: st.lists(inner, max_size=6), max_leaves=20)


@pytest.mark.parametrize("target", sorted(BYTE_TARGETS))
@FUZZ
@given(data=st.binary(max_size=600))
def test_random_bytes(target, data):
    BYTE_TARGETS[target](data)


@pytest.mark.parametrize("target", sorted(BYTE_TARGETS))
@FUZZ
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_mutated_valid_inputs(target, seed, rounds):
    rng = np.random.default_rng(seed)
    seeds = _seeds_for(target)
    data = seeds[int(rng.integers(0, len(seeds)))]
    for _ in range(rounds):
        data = mutate(data, rng)
    BYTE_TARGETS[target](data)


@pytest.mark.parametrize("tag", _tags())
@settings(max_examples=60, deadline=2000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_structured_fields_of_every_tag(tag, data):
    """A valid message of ``tag`` with one field replaced by an arbitrary msgpack value,
    or with fields added or removed: decode raises CodecError or returns the type."""
    valid = msgpack.unpackb(corpus()[tag][0], raw=False)
    fields = list(valid[2:])
    choice = data.draw(st.integers(0, 2))
    if choice == 0 and fields:
        i = data.draw(st.integers(0, len(fields) - 1))
        fields[i] = data.draw(msgpack_values)
    elif choice == 1:
        fields.append(data.draw(msgpack_values))
    elif fields:
        fields.pop(data.draw(st.integers(0, len(fields) - 1)))
    blob = msgpack.packb([1, tag, *fields], use_bin_type=True)
    try:
        msg = codec.decode(blob)
    except codec.CodecError:
        return
    assert type(msg) is codec.registered()[tag]
    assert codec.decode(codec.encode(msg)) == msg or tag in (3,)


@FUZZ
@given(data=st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_dataset_loader(tmp_path_factory, data):
    _dataset(tmp_path_factory)(data)


def test_corpus_has_every_tag_and_round_trips():
    assert len(_tags()) == 16  # 10 secagg + 6 shuffler (105: BlindedBatch)
    for tag, msgs in corpus().items():
        for m in msgs:
            assert type(codec.decode(m)).TAG == tag


def test_peak_memory_is_bounded():
    """After the fuzz tests above, the process has not ballooned (codec size limits)."""
    rng = np.random.default_rng(0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    big = msgpack.packb([1, 3, 0, 1 << 30, 255, b"\x00" * 1000])   # huge dim claimed
    _codec(big)
    for _ in range(2000):
        _codec(mutate(big, rng))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100


# ------------------------------------------------------------------ slow: >= 100k per decoder
SLOW_N = 100_000


def _loop(target: Callable[[bytes], None], seeds: list[bytes], n: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    done = 0
    for i in range(n):
        if i % 4 == 0:
            data = rng.bytes(int(rng.integers(0, 200)))
        else:
            data = seeds[int(rng.integers(0, len(seeds)))]
            for _ in range(int(rng.integers(1, 4))):
                data = mutate(data, rng)
        target(data)
        done += 1
    return done


@pytest.mark.slow
@pytest.mark.parametrize("tag", _tags())
def test_slow_codec_every_tag(tag):
    assert _loop(_codec, corpus()[tag], SLOW_N, tag) == SLOW_N


@pytest.mark.slow
@pytest.mark.parametrize("target", ["codec_session", "shuffler_submit", "shuffler_parsers",
                                    "share", "unpack_uints"])
def test_slow_byte_parsers(target):
    assert _loop(BYTE_TARGETS[target], _seeds_for(target), SLOW_N, 7) == SLOW_N


@pytest.mark.slow
def test_slow_dataset_loader(tmp_path_factory):
    run = _dataset(tmp_path_factory)
    assert _loop(run, _seeds_for("dataset"), SLOW_N, 3) == SLOW_N


# ------------------------------------------------------------------ bounded decoding
@functools.lru_cache(maxsize=1)
def _corpus_limits() -> codec.SessionLimits:
    """The session limits of the seed corpus: its secagg session and shuffler batch."""
    from protocol.core.wire_secagg import session_limits as secagg_limits
    from protocol.core.wire_shuffler import session_limits as shuffler_limits
    cfg = make_config(5, 3, graph="complete", threshold=3, malicious=True)
    s = shuffler_setup()
    return secagg_limits(cfg).merged(shuffler_limits(s["context"], 16))


nested = st.recursive(st.just([]) | st.none() | st.binary(max_size=4),
                      lambda inner: st.lists(inner, max_size=40), max_leaves=150)


@pytest.mark.parametrize("tag", _tags())
@settings(max_examples=12, deadline=4000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_decoding_allocates_at_most_a_constant_times_the_frame(tag, data):
    """With the session's limits, a valid message of ``tag`` with a field replaced by
    nested arrays, or mutated bytes, is decoded or refused (CodecError only) within
    4x its frame (+ 16 KiB) of memory and in bounded time."""
    from protocol.studies.attacks.decode_attacks import (
        MAX_FIXED_BYTES, MAX_MEMORY_RATIO, measure_decode,
    )
    limits = _corpus_limits()
    valid = corpus()[tag][0]
    if data.draw(st.booleans()):
        fields = list(msgpack.unpackb(valid, raw=False)[2:])
        i = data.draw(st.integers(0, len(fields) - 1))
        fields[i] = data.draw(nested)
        blob = msgpack.packb([1, tag, *fields], use_bin_type=True)
    else:
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        blob = valid
        for _ in range(data.draw(st.integers(1, 4))):
            blob = mutate(blob, rng)
    cost = measure_decode(blob, limits, collect=False)
    assert cost.error is None or cost.refused_by_codec, cost.error
    assert cost.peak_bytes <= MAX_MEMORY_RATIO * len(blob) + MAX_FIXED_BYTES, (cost, blob[:40])
    assert cost.cpu_seconds < 0.05
