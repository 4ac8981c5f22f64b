"""secagg.prg: exactness, determinism and packing of the mask PRG.

The reference below rebuilds the keystream from AES-256 in ECB mode on explicit counter
blocks (not the CTR mode the implementation uses) and parses it one candidate at a time
in plain Python, following the definition in the module docstring.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from secagg import prg
from secagg.errors import ParameterError
from secagg.prg import (expand_mask, keystream, mask_bytes_per_entry, pack_uints,
                        unpack_uints)

VECTORS = json.loads((pathlib.Path(__file__).parent / "vectors" / "secagg_prg_shamir.json")
                     .read_text())
SEED = bytes(range(32))
MODULI = [2, 3, 5, 255, 256, 257, 1000, 2**16, 2**20, 3 * 2**30, 2**32, 2**32 + 1,
          2**61 - 1, 2**63, 2**64 - 59, 2**64]


def reference_keystream(seed: bytes, nbytes: int) -> bytes:
    """AES-256 of the big-endian 128-bit counters 0, 1, 2, ... (ECB, block by block)."""
    ecb = Cipher(algorithms.AES(seed), modes.ECB()).encryptor()
    blocks = (nbytes + 15) // 16
    out = b"".join(ecb.update(i.to_bytes(16, "big")) for i in range(blocks))
    return out[:nbytes]


def reference_expand(seed: bytes, dim: int, modulus: int) -> list[int]:
    """First ``dim`` accepted candidates, one at a time, straight from the definition."""
    b = (modulus - 1).bit_length()
    w = next(x for x in (1, 2, 4, 8) if 8 * x >= b)
    out: list[int] = []
    nbytes = 16 * w * (dim + 8)
    while True:
        ks = reference_keystream(seed, nbytes)
        out.clear()
        for off in range(0, len(ks) - w + 1, w):
            cand = int.from_bytes(ks[off:off + w], "little") & ((1 << b) - 1)
            if cand < modulus:
                out.append(cand)
                if len(out) == dim:
                    return out
        nbytes *= 2


def test_keystream_is_aes256_ctr_from_counter_zero() -> None:
    for n in (0, 1, 15, 16, 17, 1000, (1 << 20) + 33):  # crosses the internal chunk size
        assert keystream(SEED, n) == reference_keystream(SEED, n)


@pytest.mark.parametrize("modulus", MODULI)
def test_expand_matches_reference(modulus: int) -> None:
    got = expand_mask(SEED, 300, modulus)
    assert got.dtype == np.uint64 and got.shape == (300,)
    assert got.tolist() == reference_expand(SEED, 300, modulus)


def test_published_custom_vectors_recomputed_by_reference() -> None:
    for vec in VECTORS["prg"]:
        seed, dim, m = bytes.fromhex(vec["seed"]), vec["dim"], int(vec["modulus"])
        expected = [int(v) for v in vec["values"]]
        assert reference_expand(seed, dim, m) == expected, vec["modulus"]
        assert expand_mask(seed, dim, m).tolist() == expected, vec["modulus"]


@pytest.mark.parametrize("modulus", [2**8, 2**16, 2**20, 2**32, 2**64, 3, 1000, 2**61 - 1])
def test_prefix_property_across_internal_batches(modulus: int) -> None:
    # the output is "the first dim accepted candidates", so it cannot depend on how the
    # implementation batches the keystream: a short mask is a prefix of a long one
    long = expand_mask(SEED, 300_000, modulus)
    for d in (0, 1, 7, 1000, 131_073, 262_145):
        assert np.array_equal(expand_mask(SEED, d, modulus), long[:d])
    assert int(long.max()) < modulus or modulus == 2**64


def test_determinism_and_seed_sensitivity() -> None:
    a = expand_mask(SEED, 10_000, 2**32)
    assert np.array_equal(a, expand_mask(SEED, 10_000, 2**32))
    other = bytes([1]) + SEED[1:]
    b = expand_mask(other, 10_000, 2**32)
    # two independent uniform 32-bit vectors agree in an entry with prob 2^-32 each
    assert np.count_nonzero(a == b) <= 2


def _chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * counts.sum()
    return float(stats.chisquare(counts, expected).pvalue)


# Each chi-square test below uses a fixed seed; for a correct implementation with a
# random seed the p-value is uniform, so the threshold 1e-6 would fail with probability
# 1e-6 per test.
P_MIN = 1e-6


@pytest.mark.parametrize("modulus,bins", [(3, 3), (5, 5), (1000, 1000), (3 * 2**30, 3),
                                          (2**20, 256), (2**32, 256), (2**64, 256),
                                          (2**61 - 1, 64)])
def test_uniformity_chi_square(modulus: int, bins: int) -> None:
    v = expand_mask(b"\x07" * 32, 200_000, modulus)
    if bins == modulus:
        idx = v.astype(np.int64)
    elif modulus % bins == 0:
        idx = (v // np.uint64(modulus // bins)).astype(np.int64)
    else:  # 2^61 - 1: top 6 of 61 bits; bin sizes differ by one element in 2^55
        idx = (v >> np.uint64(55)).astype(np.int64)
    counts = np.bincount(idx, minlength=bins)
    assert counts.size == bins
    assert _chi2_pvalue(counts, np.full(bins, 1.0 / bins)) > P_MIN
    # low bits too (catches a stream that is uniform only in its high bits)
    if modulus >= 2**16 and modulus % 256 == 0:
        low = np.bincount((v & np.uint64(255)).astype(np.int64), minlength=256)
        assert _chi2_pvalue(low, np.full(256, 1 / 256)) > P_MIN


def test_chi_square_detects_modulo_bias() -> None:
    # sanity check of the statistical test: "keystream mod m" is biased for m = 3 * 2^30
    m = 3 * 2**30
    raw = np.frombuffer(keystream(b"\x07" * 32, 4 * 200_000), "<u4").astype(np.uint64)
    counts = np.bincount((raw % np.uint64(m) // np.uint64(2**30)).astype(np.int64), minlength=3)
    assert _chi2_pvalue(counts, np.full(3, 1 / 3)) < 1e-100


@pytest.mark.parametrize("modulus,expected", [(2, 1), (256, 1), (257, 2), (2**16, 2),
                                              (2**16 + 1, 4), (2**32, 4), (2**32 + 1, 8),
                                              (2**64, 8)])
def test_mask_bytes_per_entry(modulus: int, expected: int) -> None:
    assert mask_bytes_per_entry(modulus) == expected


@pytest.mark.parametrize("args", [(b"short", 4, 8), (SEED, -1, 8), (SEED, 4, 1), (SEED, 4, 2**64 + 1),
                                  (SEED, 4, 2.0), ("x" * 32, 4, 8), (SEED, True, 8)])
def test_expand_rejects_bad_arguments(args: tuple) -> None:
    with pytest.raises(ParameterError):
        expand_mask(*args)


# ------------------------------------------------------------------ packing

def reference_pack(values: list[int], modulus: int) -> bytes:
    b = (modulus - 1).bit_length()
    acc = 0
    for i, v in enumerate(values):
        acc |= v << (i * b)
    return acc.to_bytes((len(values) * b + 7) // 8, "little")


@pytest.mark.parametrize("modulus", [2, 3, 2**20, 2**32, 2**64, 2**61 - 1, 256, 2**16, 1000])
def test_pack_matches_reference_and_round_trips(modulus: int) -> None:
    for dim in (0, 1, 7, 8, 9, 1001, 70_001):  # 70_001 crosses the internal chunk
        v = expand_mask(SEED, dim, modulus)
        packed = pack_uints(v, modulus)
        b = (modulus - 1).bit_length()
        assert len(packed) == (dim * b + 7) // 8
        if dim <= 1001:
            assert packed == reference_pack(v.tolist(), modulus)
        assert np.array_equal(unpack_uints(packed, dim, modulus), v)


@st.composite
def _modulus_and_values(draw: st.DrawFn) -> tuple[int, list[int]]:
    modulus = draw(st.one_of(st.sampled_from([2, 3, 2**20, 2**32, 2**64, 2**61 - 1]),
                             st.integers(2, 2**64)))
    values = draw(st.lists(st.integers(0, modulus - 1), max_size=80))
    return modulus, values


@settings(max_examples=200, deadline=None)
@given(_modulus_and_values())
def test_pack_round_trip_property(mv: tuple[int, list[int]]) -> None:
    modulus, values = mv
    arr = np.array(values, dtype=np.uint64)
    packed = pack_uints(arr, modulus)
    assert packed == reference_pack(values, modulus)
    assert unpack_uints(packed, len(values), modulus).tolist() == values


def test_pack_accepts_signed_and_small_dtypes() -> None:
    assert pack_uints(np.array([1, 2, 0], np.int8), 3) == pack_uints(np.array([1, 2, 0], np.uint64), 3)


@pytest.mark.parametrize("values,modulus", [([3], 3), ([-1], 5), ([2**20], 2**20),
                                            ([[1, 2]], 5), ([1.0], 5), ([2**61 - 1], 2**61 - 1)])
def test_pack_rejects_out_of_range(values: list, modulus: int) -> None:
    with pytest.raises(ValueError):
        pack_uints(np.array(values), modulus)


def test_unpack_rejects_malformed_data() -> None:
    good = pack_uints(np.array([1, 2, 0, 1, 2], np.uint64), 3)  # 10 bits -> 2 bytes
    with pytest.raises(ValueError, match="bytes"):
        unpack_uints(good + b"\x00", 5, 3)
    with pytest.raises(ValueError, match="bytes"):
        unpack_uints(good[:1], 5, 3)
    with pytest.raises(ValueError, match="padding"):
        unpack_uints(good[:1] + bytes([good[1] | 0x80]), 5, 3)
    with pytest.raises(ValueError, match=">= modulus"):
        unpack_uints(b"\x03", 1, 3)  # 2-bit entry 3 with modulus 3
    with pytest.raises(ValueError, match=">= modulus"):
        unpack_uints(((2**61 - 1)).to_bytes(8, "little"), 1, 2**61 - 1)
    with pytest.raises(ValueError, match=">= modulus"):
        unpack_uints(b"\xff\xff\xff\xff", 1, 2**31 + 5)
    with pytest.raises(ValueError):
        unpack_uints("abc", 1, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        unpack_uints(b"", -1, 3)


def test_twenty_bit_entries_use_twenty_bits() -> None:
    assert len(pack_uints(np.zeros(1000, np.uint64), 2**20)) == 2500


@pytest.mark.slow
def test_keystream_rate_power_of_two() -> None:
    """Throughput check (slow, machine dependent): >= 1 GB/s of keystream at 2^32."""
    import timeit
    t = min(timeit.repeat(lambda: expand_mask(SEED, 10**6, 2**32), number=1, repeat=7))
    assert 4e6 / t > 1e9, f"{4e6 / t / 1e9:.2f} GB/s"


@st.composite
def _packed_garbage(draw: st.DrawFn) -> tuple[bytes, int, int]:
    modulus = draw(st.one_of(st.sampled_from([2, 3, 2**20, 2**32, 2**61 - 1, 2**64]),
                             st.integers(2, 2**64)))
    count = draw(st.integers(0, 40))
    right = (count * (modulus - 1).bit_length() + 7) // 8
    size = draw(st.one_of(st.just(right), st.integers(0, right + 9)))
    return draw(st.binary(min_size=size, max_size=size)), count, modulus


@settings(max_examples=400, deadline=None)
@given(_packed_garbage())
def test_unpack_of_garbage_returns_canonical_values_or_raises_value_error(
        case: tuple[bytes, int, int]) -> None:
    data, count, modulus = case
    try:
        out = unpack_uints(data, count, modulus)
    except ValueError:
        return
    assert out.shape == (count,) and (modulus == 2**64 or int(out.max(initial=0)) < modulus)
    assert pack_uints(out, modulus) == data  # only canonical encodings are accepted


@pytest.mark.parametrize("modulus", [2, 4, 1 << 7, 1 << 8, 1 << 9, 1 << 16, 1 << 20, 1 << 32,
                                     1 << 33, 1 << 63, 1 << 64])
@pytest.mark.parametrize("dim", [0, 1, 5, 1000, 16385, 300001])
def test_mask_sum_is_the_signed_sum_of_the_masks(modulus: int, dim: int) -> None:
    """The same masks as expand_mask, summed mod the modulus: below and above the
    one-call size and across keystream chunks (300,001 entries of 4 or 8 bytes)."""
    import hashlib

    from secagg.state import ModAccumulator

    terms = [(hashlib.sha256(b"%d %d %d" % (modulus.bit_length(), dim, i)).digest(), s)
             for i, s in enumerate((1, -1, -1, 1, 1))]
    acc = ModAccumulator(dim, modulus)
    for seed, sign in terms:
        mask = prg.expand_mask(seed, dim, modulus)
        acc.add(mask) if sign == 1 else acc.sub(mask)
    got = prg.mask_sum(terms, dim, modulus)
    assert got.dtype == np.uint64 and got.shape == (dim,)
    assert np.array_equal(got, acc.value())
    if dim:
        assert int(got.max()) < modulus or modulus == 1 << 64


def test_mask_sum_refuses_what_it_cannot_sum() -> None:
    seed = bytes(32)
    with pytest.raises(ParameterError, match="power-of-two"):
        prg.mask_sum([(seed, 1)], 4, 1000003)
    for sign in (0, 2, True, 1.0):
        with pytest.raises(ParameterError, match="sign"):
            prg.mask_sum([(seed, sign)], 4, 1 << 32)
    with pytest.raises(ParameterError):
        prg.mask_sum([(bytes(31), 1)], 4, 1 << 32)
    assert np.array_equal(prg.mask_sum([], 3, 1 << 16), np.zeros(3, np.uint64))


@pytest.mark.parametrize("modulus", [1000003, (1 << 61) - 1, 1 << 32, 1 << 64])
def test_accumulator_add_masks_is_the_mask_by_mask_sum(modulus: int) -> None:
    """ModAccumulator.add_masks (what client and server call): mask_sum for a
    power-of-two modulus, expand_mask one by one otherwise; the same sum either way."""
    import hashlib

    from secagg.state import ModAccumulator

    dim = 257
    terms = [(hashlib.sha256(b"%d" % i).digest(), s) for i, s in enumerate((1, -1, 1, -1, -1))]
    want = ModAccumulator(dim, modulus)
    for seed, sign in terms:
        mask = prg.expand_mask(seed, dim, modulus)
        want.add(mask) if sign == 1 else want.sub(mask)
    got = ModAccumulator(dim, modulus)
    got.add_masks(terms)
    assert np.array_equal(got.value(), want.value())
    with pytest.raises(ParameterError, match="sign"):
        ModAccumulator(dim, modulus).add_masks([(terms[0][0], 0)])


def _assert_mask_sum_is_the_masks_one_by_one(terms: list[tuple[bytes, int]], dim: int,
                                             modulus: int) -> None:
    """``mask_sum`` and ``ModAccumulator.add_masks`` over ``terms`` both equal the
    signed sum of ``expand_mask`` of each seed, in exact integers mod ``modulus``."""
    from secagg.state import ModAccumulator

    ref = np.zeros(dim, dtype=object)
    for seed, sign in terms:
        ref = (ref + sign * prg.expand_mask(seed, dim, modulus).astype(object)) % modulus
    got = prg.mask_sum(terms, dim, modulus)
    assert got.dtype == np.uint64 and [int(v) for v in got] == [int(v) for v in ref]
    acc = ModAccumulator(dim, modulus)
    acc.add_masks(terms)
    assert np.array_equal(acc.value(), got)


def test_mask_sum_for_the_committee_prime_equals_the_masks_one_by_one() -> None:
    """``2^61 - 1`` (the threshold committee's field) sums its masks from the keystream
    words with a fold per six masks; the result is the mask-by-mask sum."""
    import os

    p = prg.MERSENNE61
    for dim in (0, 1, 7, 1456, 8192, 8193, 20_001):
        terms = [(os.urandom(32), 1 if i % 3 else -1) for i in range(14)]
        _assert_mask_sum_is_the_masks_one_by_one(terms, dim, p)
    with pytest.raises(ParameterError):
        prg.mask_sum([(os.urandom(32), 2)], 4, p)


@pytest.fixture(params=["openssl", "cryptography"])
def keystream_backend(request, monkeypatch):  # type: ignore[no-untyped-def]
    """The keystream rows from libcrypto's context keyed again per seed (the default
    where libcrypto loads, as here), or from one ``cryptography`` context per seed."""
    if request.param == "openssl":
        assert prg._openssl_ctr() is not None, "libcrypto's AES-256-CTR did not load"
    else:
        monkeypatch.setattr(prg, "_CTR_STATE", [None])
    return request.param


@pytest.mark.parametrize("modulus", [prg.MERSENNE61, 1 << 32, 1 << 20, 1 << 64, 256])
@pytest.mark.parametrize("masks, dim", [(8, 1), (89, 300), (89, 1000), (300, 2048),
                                        (9, 2049), (7, 100), (1, 3)])
def test_keystream_matrix_sum_is_the_mask_by_mask_sum(modulus: int, masks: int,
                                                      dim: int, keystream_backend) -> None:
    """Many short masks are summed as the rows of one keystream matrix, in column
    blocks and row groups (89 rows of 1000 words span three blocks; 300 rows two
    groups); the sum is the one of the masks taken one by one (expand_mask, on
    ``cryptography``'s AES-256-CTR), from either keystream backend."""
    import hashlib

    terms = [(hashlib.sha256(b"matrix %d %d %d" % (masks, dim, i)).digest(),
              -1 if i % 3 == 1 else 1) for i in range(masks)]
    ref = np.zeros(dim, dtype=object)
    for seed, sign in terms:
        ref = (ref + sign * prg.expand_mask(seed, dim, modulus).astype(object)) % modulus
    assert prg._matrix_pays(masks, dim) == (masks >= 8 and dim <= 2048)
    got = prg.mask_sum(terms, dim, modulus)
    assert got.dtype == np.uint64 and [int(v) for v in got] == [int(v) for v in ref]


def test_keystream_matrix_leaves_a_rejected_word_to_the_exact_path(monkeypatch) -> None:
    """A keystream word equal to ``2^61 - 1`` is rejected by expand_mask (the mask's
    later entries shift): the matrix sum sees it and the sum is taken mask by mask."""
    import hashlib

    p = prg.MERSENNE61
    seeds = [hashlib.sha256(b"reject %d" % i).digest() for i in range(10)]
    rows = prg._keystream_rows

    def planted(seeds_: list[bytes], dim: int, w: int):  # type: ignore[no-untyped-def]
        for start, words in rows(seeds_, dim, w):
            words[len(seeds_) // 2, 0] = np.uint64(p)   # a word the PRG rejects
            yield start, words

    monkeypatch.setattr(prg, "_keystream_rows", planted)
    assert prg._sum_m61(seeds, 50) is None
    streamed = []
    monkeypatch.setattr(prg, "_streamed_sum_m61",
                        lambda *a: streamed.append(a) or np.zeros(50, np.uint64))
    prg.mask_sum_mersenne61([(s, 1) for s in seeds], 50)
    assert len(streamed) == 1


@pytest.mark.parametrize("modulus", [prg.MERSENNE61, 1 << 32, 1 << 61, 1 << 64, 1 << 8])
@pytest.mark.parametrize("masks, dim, added", [(4, 769, 2), (13, 1000, 13), (13, 1000, 0),
                                               (89, 4200, 45), (7, 9000, 1), (6, 1372, 5)])
def test_grouped_sums_are_the_mask_by_mask_sums(modulus: int, masks: int, dim: int,
                                                added: int) -> None:
    """Long masks are summed six whole rows at a time (2^61 - 1) or as many as a group
    holds (powers of two), the added and subtracted rows of a group apart, groups that
    mix the two included: the sum is the one of the masks taken one by one."""
    import hashlib

    w = prg._word_bytes(prg._bits(modulus))
    assert prg._grouped_pays(masks, dim, w)
    terms = [(hashlib.sha256(b"grouped %d %d %d" % (masks, dim, i)).digest(),
              1 if i < added else -1) for i in range(masks)]
    _assert_mask_sum_is_the_masks_one_by_one(terms, dim, modulus)


def test_grouped_paths_serve_only_where_they_pay(monkeypatch) -> None:
    """Short masks keep the keystream matrix, few or very long ones the streamed sums,
    and without libcrypto's context the grouped sums are not used."""
    assert not prg._grouped_pays(89, 768, 8) and prg._grouped_pays(89, 769, 8)
    assert not prg._grouped_pays(3, 4200, 8) and prg._grouped_pays(4, 4200, 8)
    assert prg._grouped_pays(9, 1 << 15, 8) and not prg._grouped_pays(9, (1 << 15) + 1, 8)
    assert prg._grouped_pays(9, 1 << 16, 4) and not prg._grouped_pays(9, 1 << 17, 4)
    monkeypatch.setattr(prg, "_CTR_STATE", [None])
    assert not prg._grouped_pays(89, 4200, 8)


def test_grouped_sum_expands_a_mask_with_a_rejected_word_exactly(monkeypatch) -> None:
    """A keystream word equal to ``2^61 - 1`` is rejected by expand_mask (the mask's
    later entries shift): the grouped sum takes that mask from expand_mask itself, and
    the others from their rows."""
    import hashlib

    p = prg.MERSENNE61
    dim = 1000
    seeds = [hashlib.sha256(b"grouped reject %d" % i).digest() for i in range(9)]
    planted_seed = 7
    rows = prg._grouped_rows

    def planted(seeds_: list[bytes], dim_: int, w: int, max_rows: int):  # type: ignore[no-untyped-def]
        for first, words in rows(seeds_, dim_, w, max_rows):
            if first <= planted_seed < first + words.shape[0]:
                words[planted_seed - first, 3] = np.uint64(p)   # a word the PRG rejects
            yield first, words

    expanded: list[bytes] = []
    real_expand = prg.expand_mask

    def expand(seed: bytes, dim_: int, modulus: int) -> np.ndarray:
        expanded.append(seed)
        return real_expand(seed, dim_, modulus)

    terms = [(sd, 1 if i % 2 else -1) for i, sd in enumerate(seeds)]
    want = prg.mask_sum(terms, dim, p)
    monkeypatch.setattr(prg, "_grouped_rows", planted)
    monkeypatch.setattr(prg, "expand_mask", expand)
    assert np.array_equal(prg.mask_sum(terms, dim, p), want)
    # the planted mask's row was replaced by its exact expansion (and no other's)
    assert expanded == [prg._signed_seeds(terms)[0][planted_seed]]


def test_libcrypto_rows_are_the_ctr_keystream_from_any_block() -> None:
    """Keyed again per seed on one context, libcrypto's rows are ``cryptography``'s
    AES-256-CTR keystream of each seed from the counter block asked for, over
    lengths that end inside a block; a thread of its own gets its own context."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    assert prg._openssl_ctr() is not None
    seeds = [hashlib.sha256(b"rows %d" % i).digest() for i in range(5)]

    def rows(block: int, nb: int) -> bytes:
        buf = np.empty(len(seeds) * nb, np.uint8)
        prg._ctr_rows(seeds, block, nb, buf)
        return buf.tobytes()

    for block, nb in [(0, 1), (0, 16), (3, 37), (1000, 4096), (7, 100_000)]:
        want = b"".join(Cipher(algorithms.AES(sd), modes.CTR(block.to_bytes(16, "big")))
                        .encryptor().update(bytes(nb)) for sd in seeds)
        assert rows(block, nb) == want
        with ThreadPoolExecutor(2) as pool:
            assert list(pool.map(lambda _: rows(block, nb), range(4))) == [want] * 4


def test_libcrypto_rows_refuse_what_would_read_or_write_out_of_bounds() -> None:
    """The rows are written by C through raw pointers: a short seed, a row past the
    zero buffer or a buffer too small for the rows is refused before any call."""
    assert prg._openssl_ctr() is not None
    buf = np.empty(64, np.uint8)
    with pytest.raises(ParameterError):
        prg._ctr_rows([bytes(31)], 0, 16, buf)
    with pytest.raises(ValueError):
        prg._ctr_rows([bytes(32)] * 5, 0, 16, buf)              # 80 bytes into 64
    with pytest.raises(ValueError):
        prg._ctr_rows([bytes(32)], 0, prg._ZEROS.size + 16, np.empty(2 << 20, np.uint8))
