"""secagg.shamir: field, reference cross-check, threshold properties, encoding, speed."""
from __future__ import annotations

import json
import pathlib
import random
import statistics
import timeit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.randomness import insecure_deterministic_randomness
from secagg.errors import ParameterError
from secagg.shamir import (LANE_BITS, LANES, PRIME, SHARE_BYTES, SHARE_WIRE_BYTES, Share,
                           check_encodings, combine, combine_encoded, combine_encoded_many,
                           split, split_encoded, split_encoded_many)

VECTORS = json.loads((pathlib.Path(__file__).parent / "vectors" / "secagg_prg_shamir.json")
                     .read_text())


def miller_rabin(n: int, rounds: int = 64, rng: random.Random | None = None) -> bool:
    """Strong probable-prime test: 12 fixed prime bases plus ``rounds`` random bases.

    A composite passes with probability <= 4^-(12 + rounds) (Rabin 1980); "composite"
    answers are always correct.
    """
    if n < 2:
        return False
    small = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]
    if n in small:
        return True
    if any(n % q == 0 for q in small):
        return False
    rng = rng or random.Random(0)
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small + [rng.randrange(2, n - 1) for _ in range(rounds)]:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def test_prime_is_the_mersenne_prime_2_31_minus_1_and_lanes_cover_256_bits() -> None:
    assert PRIME == 2**31 - 1
    assert miller_rabin(PRIME)  # composite slips through with probability <= 4^-76
    assert LANES * LANE_BITS >= 256 and (LANES - 1) * LANE_BITS < 256
    assert 2**LANE_BITS < PRIME          # every secret lane is a field element
    assert SHARE_BYTES == 4 * LANES


# ------------------------------------------------------------------ reference

def reference_coefficients(seed: str, count: int) -> list[int]:
    """The first ``count`` 31-bit values of the deterministic stream (none equal p on
    the vectors' seeds: the reference refuses to guess the redraw order)."""
    stream = insecure_deterministic_randomness(seed).token_bytes(4 * count)
    out = [int.from_bytes(stream[i:i + 4], "big") & PRIME for i in range(0, 4 * count, 4)]
    assert PRIME not in out
    return out


def reference_split_many(secrets: list[bytes], xs: list[int], t: int,
                         seed: str) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Textbook Shamir lane by lane: lane l of the secret (30 bits from the bottom) is
    f_l(0); the coefficients are drawn secret by secret, lane by lane, degree 1..t-1."""
    rand = reference_coefficients(seed, len(secrets) * LANES * (t - 1))
    out = []
    for k, secret in enumerate(secrets):
        value = int.from_bytes(secret, "big")
        polys = []
        for lane in range(LANES):
            row = (k * LANES + lane) * (t - 1)
            polys.append([(value >> (LANE_BITS * lane)) & (2**LANE_BITS - 1)]
                         + rand[row:row + t - 1])
        out.append([(x, tuple(sum(c * pow(x, i, PRIME) for i, c in enumerate(f)) % PRIME
                              for f in polys)) for x in xs])
    return out


def reference_split(secret: bytes, xs: list[int], t: int,
                    seed: str) -> list[tuple[int, tuple[int, ...]]]:
    return reference_split_many([secret], xs, t, seed)[0]


def reference_combine(points: list[tuple[int, tuple[int, ...]]]) -> bytes:
    """Textbook Lagrange at zero, lane by lane, with one Fermat inverse per term."""
    value = 0
    for lane in range(LANES):
        total = 0
        for i, (xi, yi) in enumerate(points):
            num = den = 1
            for j, (xj, _) in enumerate(points):
                if j != i:
                    num = num * xj % PRIME
                    den = den * (xj - xi) % PRIME
            total += yi[lane] * num * pow(den, PRIME - 2, PRIME)
        value |= (total % PRIME) << (LANE_BITS * lane)
    return value.to_bytes(32, "big")


def _y(hex_y: str) -> tuple[int, ...]:
    raw = bytes.fromhex(hex_y)
    return tuple(int.from_bytes(raw[i:i + 4], "big") for i in range(0, len(raw), 4))


def test_custom_vectors_recomputed_by_reference() -> None:
    assert len(VECTORS["shamir"]) >= 5
    for vec in VECTORS["shamir"]:
        secret, xs, t = bytes.fromhex(vec["secret"]), vec["xs"], vec["threshold"]
        expected = [(x, _y(y)) for x, y in vec["shares"]]
        assert reference_split(secret, xs, t, vec["randomness_seed"]) == expected
        got = split(secret, xs, t, insecure_deterministic_randomness(vec["randomness_seed"]))
        assert [(s.x, s.y) for s in got] == expected
        assert reference_combine(expected[-t:]) == secret
        assert combine(got[-t:], t) == secret


def test_split_matches_reference_for_a_large_threshold() -> None:
    secret = bytes(range(32))
    xs = list(range(1, 61))
    got = split(secret, xs, 40, insecure_deterministic_randomness("big"))
    assert [(s.x, s.y) for s in got] == reference_split(secret, xs, 40, "big")


def test_split_encoded_many_is_each_secret_in_turn() -> None:
    secrets = [bytes(range(32)), b"\xff" * 32, bytes(32)]
    xs = [3, 70, 65535, 1, 9]
    many = split_encoded_many(secrets, xs, 4, insecure_deterministic_randomness("many"))
    ref = reference_split_many(secrets, xs, 4, "many")
    assert many == [[Share(x, y).to_bytes() for x, y in r] for r in ref]
    for enc, secret in zip(many, secrets):
        assert combine_encoded(b"".join(enc[1:]), 4) == secret


def test_powers_table_and_direct_powers_agree() -> None:
    """The cached power table and the direct baby-step giant-step powers are the same
    numbers (the table is only used when it is small)."""
    import numpy as np

    from secagg import shamir
    xs = np.array([1, 2, 77, 4096, 65535], np.uint64)
    expected = np.array([[pow(int(x), i, PRIME) for x in xs] for i in range(23)], np.uint64)
    saved = dict(shamir._POWER_TABLES)
    try:
        shamir._POWER_TABLES.clear()
        assert (shamir._powers(xs, 23) == expected).all()       # 65535 * 23 entries: cached
        shamir._POWER_TABLES.clear()
        limit = shamir._TABLE_ENTRIES
        shamir._TABLE_ENTRIES = 0
        try:
            assert (shamir._powers(xs, 23) == expected).all()   # computed directly
            assert not shamir._POWER_TABLES
        finally:
            shamir._TABLE_ENTRIES = limit
    finally:
        shamir._POWER_TABLES.clear()
        shamir._POWER_TABLES.update(saved)


# ------------------------------------------------------------------ properties

@st.composite
def _sharing(draw: st.DrawFn) -> tuple[bytes, list[int], int, list[int]]:
    n = draw(st.integers(1, 25))
    xs = draw(st.lists(st.integers(1, 2**16 - 1), min_size=n, max_size=n, unique=True))
    t = draw(st.integers(1, n))
    secret = draw(st.binary(min_size=32, max_size=32))
    subset = draw(st.permutations(range(n)))
    return secret, xs, t, list(subset)


@settings(max_examples=150, deadline=None)
@given(_sharing(), st.integers(0, 2**32))
def test_any_t_shares_recover(case: tuple, seed: int) -> None:
    secret, xs, t, order = case
    shares = split(secret, xs, t, insecure_deterministic_randomness(seed))
    assert [s.x for s in shares] == xs
    chosen = [shares[i] for i in order[:t]]
    assert combine(chosen, t) == secret
    # more than t shares: the first t are used (all valid, so same answer)
    assert combine([shares[i] for i in order], t) == secret


@settings(max_examples=100, deadline=None)
@given(_sharing().filter(lambda c: c[2] >= 2), st.integers(0, 2**32))
def test_fewer_than_t_shares_do_not_give_the_secret(case: tuple, seed: int) -> None:
    secret, xs, t, order = case
    shares = split(secret, xs, t, insecure_deterministic_randomness(seed))
    few = [shares[i] for i in order[:t - 1]]
    with pytest.raises(ParameterError, match=f"need {t} shares"):
        combine(few, t)
    # interpolating t-1 points gives f'(0) for the wrong polynomial: the secret only
    # with probability about 1/p (one value of the random top coefficient)
    try:
        assert combine(few, t - 1) != secret
    except ParameterError:
        pass  # lanes outside their widths, also not the secret


def test_threshold_minus_one_shares_are_consistent_with_every_secret() -> None:
    # information-theoretic hiding, checked on one instance: for t = 2 and one share
    # (x, y), any candidate secret s' has the line through (0, s') and (x, y)
    # (x, y_l) of every lane, any candidate lane s' has the line through (0, s')
    # and (x, y_l), and the lanes' slopes are independent
    shares = split(b"\x11" * 32, [5, 9], 2, insecure_deterministic_randomness(1))
    x, ys = shares[0].x, shares[0].y
    for y in ys:
        for candidate in (0, 1, 2**LANE_BITS - 1):
            slope = (y - candidate) * pow(x, -1, PRIME) % PRIME
            assert (candidate + slope * x) % PRIME == y


def test_wrong_shares_outside_32_bytes_raise() -> None:
    with pytest.raises(ParameterError, match="32 bytes"):
        combine([Share(1, (2**LANE_BITS,) + (0,) * (LANES - 1))], 1)
    with pytest.raises(ParameterError, match="32 bytes"):   # the top lane holds 16 bits
        combine([Share(1, (0,) * (LANES - 1) + (2**16,))], 1)
    # a tampered share makes the reconstruction wrong (or out of range), never the secret
    shares = split(b"\x22" * 32, [1, 2, 3], 2, insecure_deterministic_randomness(2))
    y = list(shares[0].y)
    y[4] = (y[4] + 1) % PRIME
    bad = Share(shares[0].x, tuple(y))
    try:
        assert combine([bad, shares[1]], 2) != b"\x22" * 32
    except ParameterError:
        pass


def _lanes(v: int) -> tuple[int, ...]:
    return (v,) * LANES


@pytest.mark.parametrize("shares,t,msg", [
    ([], 1, "need 1 shares"),
    ([Share(1, _lanes(1)), Share(1, _lanes(2))], 1, "repeated"),
    ([Share(1, _lanes(1)), Share(2, _lanes(2)), Share(1, _lanes(3))], 2, "repeated"),
    ([Share(1, _lanes(1))], 0, "threshold"),
    ([(1, 1)], 1, "Share objects"),
])
def test_combine_rejects_bad_input(shares: list, t: int, msg: str) -> None:
    with pytest.raises(ParameterError, match=msg):
        combine(shares, t)


@pytest.mark.parametrize("secret,xs,t", [
    (b"\x00" * 31, [1, 2], 1), (b"\x00" * 33, [1, 2], 1), ("s" * 32, [1], 1),
    (b"\x00" * 32, [0, 1], 1), (b"\x00" * 32, [1, 2**16], 1), (b"\x00" * 32, [1, 1], 1),
    (b"\x00" * 32, [1, 2], 3), (b"\x00" * 32, [1, 2], 0), (b"\x00" * 32, [True], 1),
])
def test_split_rejects_bad_input(secret: object, xs: list, t: int) -> None:
    with pytest.raises(ParameterError):
        split(secret, xs, t, insecure_deterministic_randomness(0))  # type: ignore[arg-type]


def test_split_draws_fresh_coefficients() -> None:
    rng = insecure_deterministic_randomness(3)
    a = split(b"\x01" * 32, [1, 2, 3], 2, rng)
    b = split(b"\x01" * 32, [1, 2, 3], 2, rng)
    assert a != b


# ------------------------------------------------------------------ encoding

@settings(max_examples=100, deadline=None)
@given(st.integers(1, 2**16 - 1), st.lists(st.integers(0, PRIME - 1), min_size=LANES,
                                           max_size=LANES))
def test_share_encoding_round_trip(x: int, y: list) -> None:
    s = Share(x, tuple(y))
    enc = s.to_bytes()
    assert len(enc) == 38 and enc[:2] == x.to_bytes(2, "big")
    assert enc[2:] == b"".join(v.to_bytes(4, "big") for v in y)
    assert Share.from_bytes(enc) == s


@pytest.mark.parametrize("data", [
    b"\x00\x00" + b"\x00" * 36,                                   # x = 0
    b"\x00\x01" + PRIME.to_bytes(4, "big") + b"\x00" * 32,        # a lane = p
    b"\x00\x01" + b"\x00" * 32 + b"\xff" * 4,                    # a lane >= p
    b"\x00\x01" + b"\x00" * 35,                                   # short
    b"\x00\x01" + b"\x00" * 37,                                   # long
    "text",
])
def test_share_decoding_rejects_invalid(data: object) -> None:
    with pytest.raises(ValueError):
        Share.from_bytes(data)  # type: ignore[arg-type]


@pytest.mark.parametrize("x,y", [(0, _lanes(1)), (2**16, _lanes(1)), (1, _lanes(-1)),
                                 (1, _lanes(PRIME)), (True, _lanes(1)), (1, _lanes(1.0)),
                                 (1, (1,) * (LANES - 1)), (1, [1] * LANES), (1, 1)])
def test_share_constructor_validates(x: object, y: object) -> None:
    with pytest.raises(ValueError):
        Share(x, y)  # type: ignore[arg-type]


# ------------------------------------------------------------------ speed

def _split_and_combine() -> None:
    rng = insecure_deterministic_randomness(9)
    shares = split(b"\x5a" * 32, list(range(1, 1001)), 501, rng)
    assert combine(shares[499:], 501) == b"\x5a" * 32


def test_split_1000_threshold_501_plus_combine_is_fast() -> None:
    # acceptance target 0.5 s (median of 5, see the slow test); generous here because
    # the default suite runs on shared machines
    assert min(timeit.repeat(_split_and_combine, number=1, repeat=2)) < 2.0


@pytest.mark.slow
def test_split_1000_threshold_501_plus_combine_median_under_half_a_second() -> None:
    times = timeit.repeat(_split_and_combine, number=1, repeat=5)
    assert statistics.median(times) < 0.5, times


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(min_size=38, max_size=38), st.binary(max_size=42)))
def test_share_decoding_of_garbage_returns_a_valid_share_or_raises_value_error(data: bytes) -> None:
    try:
        s = Share.from_bytes(data)
    except ValueError:
        return
    assert len(data) == 38 and 1 <= s.x < 2**16 and all(0 <= v < PRIME for v in s.y)
    assert s.to_bytes() == data


@pytest.mark.parametrize("xs,t", [([1, 2, 3], 2), (list(range(1, 31)), 17),
                                  ([65535, 7, 300], 3)])
def test_split_encoded_is_split_in_wire_encoding(xs: list, t: int) -> None:
    # same randomness, same polynomial: the encodings a client sends equal Share.to_bytes
    secret = bytes(range(32))
    a = split(secret, xs, t, insecure_deterministic_randomness(5))
    b = split_encoded(secret, xs, t, insecure_deterministic_randomness(5))
    assert b == [s.to_bytes() for s in a]
    assert combine([Share.from_bytes(e) for e in b[:t]], t) == secret


@pytest.mark.parametrize("secret,xs,t", [(b"short", [1, 2], 2), (bytes(32), [1, 1], 2),
                                         (bytes(32), [0, 2], 2), (bytes(32), [1, 2], 3)])
def test_split_encoded_rejects_what_split_rejects(secret: bytes, xs: list, t: int) -> None:
    with pytest.raises(ParameterError):
        split_encoded(secret, xs, t, insecure_deterministic_randomness(1))


def test_share_value_checks_an_encoding_without_decoding() -> None:
    """The value of an encoded share at an expected point; anything else refused."""
    from secagg.shamir import share_value

    rand = insecure_deterministic_randomness(b"share_value")
    for sh in split(bytes(range(32)), [1, 7, 65535], 2, rand):
        assert share_value(sh.to_bytes(), sh.x) == sh.to_bytes()[2:]
        with pytest.raises(ParameterError, match="wrong evaluation point"):
            share_value(sh.to_bytes(), sh.x + 1 if sh.x < 65535 else 1)
    good = Share(3, _lanes(5)).to_bytes()
    for bad in (good[:-1], good + b"\x00", bytearray(good), "x" * len(good)):
        with pytest.raises(ParameterError):
            share_value(bad, 3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="outside the field"):
        share_value(good[:2] + good[2:-4] + PRIME.to_bytes(4, "big"), 3)
    with pytest.raises(ParameterError, match="wrong evaluation point"):  # x = 0 is never a point
        share_value(bytes(2) + good[2:], 3)


@pytest.mark.parametrize("blob,t,msg", [
    (b"", 1, "need 1"),
    (Share(1, _lanes(1)).to_bytes()[:-1], 1, "need 1"),
    (Share(1, _lanes(1)).to_bytes() * 2, 2, "distinct"),
    (bytes(2) + Share(1, _lanes(1)).to_bytes()[2:], 1, "distinct"),
    (Share(1, _lanes(1)).to_bytes()[:-4] + b"\xff" * 4, 1, "outside the field"),
    (bytearray(Share(1, _lanes(1)).to_bytes()), 1, "need 1"),
])
def test_combine_encoded_rejects_bad_input(blob: bytes, t: int, msg: str) -> None:
    with pytest.raises(ParameterError, match=msg):
        combine_encoded(blob, t)  # type: ignore[arg-type]


def test_split_for_a_server_reconstruction_matches_combine() -> None:
    rand = insecure_deterministic_randomness("both")
    shares = split(b"\x07" * 32, list(range(10, 30)), 11, rand)
    assert combine_encoded(b"".join(s.to_bytes() for s in shares[5:16]), 11) == b"\x07" * 32
    assert combine(shares[5:16], 11) == b"\x07" * 32


def test_check_encodings_refuses_what_share_value_refuses() -> None:
    """The batch check accepts exactly the lists whose every entry passes
    share_value at the point."""
    from secagg.shamir import share_value

    good = [Share(4, _lanes(v)).to_bytes() for v in (0, 7, PRIME - 1)]
    check_encodings(good, 4)
    check_encodings([], 4)
    bad_lists = [
        good[:1] + [Share(5, _lanes(1)).to_bytes()],                # another point
        good + [good[0][:-4] + PRIME.to_bytes(4, "big")],           # a lane = p
        good + [good[0][:-1]],                                      # short
        good + [good[0] + b"\x00"],                                 # long
        [good[0][:-1], good[1] + good[1][:1]],                      # lengths that sum right
        good + [bytearray(good[0])],                                # not bytes
    ]
    for encs in bad_lists:
        with pytest.raises(ParameterError):
            check_encodings(encs, 4)  # type: ignore[arg-type]
        with pytest.raises(ParameterError):
            for e in encs:
                share_value(e, 4)  # type: ignore[arg-type]


@pytest.mark.parametrize("t,count", [(1, 3), (2, 5), (7, 40), (66, 90), (120, 50)])
def test_combine_encoded_many_is_combine_encoded_row_by_row(t: int, count: int) -> None:
    """A batch gives each row's own secret, rows with different points included, on
    both sides of the small-batch inversion path (``count * t`` below and above 4096)."""
    rng = random.Random(t * 1000 + count)
    rand = insecure_deterministic_randomness(t + count)
    secrets, blobs = [], []
    for _ in range(count):
        secret = bytes(rng.randrange(256) for _ in range(32))
        xs = rng.sample(range(1, 1 << 16), t + 5)
        enc = split_encoded(secret, xs, t, rand)
        pick = rng.sample(range(t + 5), t)
        secrets.append(secret)
        blobs.append(b"".join(enc[i] for i in pick))
    assert combine_encoded_many(blobs, t) == secrets
    assert [combine_encoded(b, t) for b in blobs[:5]] == secrets[:5]
    assert combine_encoded_many([], t) == []


@pytest.mark.parametrize("t,copies", [(17, 20), (51, 8)])
def test_combine_encoded_many_works_in_bounded_memory(t: int, copies: int) -> None:
    """A server rebuilds every owner's seed in one call: its working arrays stay a
    fixed size however many owners there are (numpy's buffers are traced by
    tracemalloc). At 2^19 entries a block, 1000 owners took 11 to 19 MB."""
    import tracemalloc

    rand = insecure_deterministic_randomness(t)
    xs = list(range(1, t + 1))
    one = [b"".join(split_encoded(bytes([i % 256]) * 32, xs, t, rand)) for i in range(50)]
    blobs = one * copies   # 1000 or 400 owners (repeats do not matter to the interpolation)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = combine_encoded_many(blobs, t)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert out == [bytes([i % 256]) * 32 for i in range(50)] * copies
    # the inputs joined for one block, the arrays of one block, the outputs
    assert peak < 2 << 20, peak


def test_combine_encoded_many_refuses_any_bad_row() -> None:
    rand = insecure_deterministic_randomness(3)
    good = [b"".join(split_encoded(bytes([i]) * 32, list(range(1, 8)), 5, rand)[:5])
            for i in range(4)]
    assert combine_encoded_many(good, 5) == [bytes([i]) * 32 for i in range(4)]
    repeated = good[1][:SHARE_WIRE_BYTES] * 2 + good[1][2 * SHARE_WIRE_BYTES:]
    zero_x = b"\x00\x00" + good[2][2:]
    outside = good[3][:2] + b"\xff" * 4 + good[3][6:]
    # the lanes of another secret's shares: inconsistent with this row's points
    mixed = good[0][:SHARE_WIRE_BYTES] + good[1][SHARE_WIRE_BYTES:]
    for bad in (repeated, zero_x, outside, good[0][:-1], "x" * len(good[0])):
        with pytest.raises(ParameterError):
            combine_encoded_many(good[:2] + [bad] + good[2:], 5)  # type: ignore[list-item]
    try:
        out = combine_encoded_many([mixed], 5)
    except ParameterError:
        pass
    else:   # lanes that happen to fit: a secret, but not the one that was shared
        assert out[0] not in (b"\x00" * 32, b"\x01" * 32)
