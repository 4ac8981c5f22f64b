"""protocol.core.committee.field.matmul and dot: exact modular products against Python integers."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from protocol.core.committee import field as F

P = F.P
EXTREMES = [0, 1, 2, P - 2, P - 1, (1 << 32) - 1, 1 << 32, (1 << 60) + 12345, (1 << 61) - 2]


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b mod p`` with Python integers: ``sum(int(x) * int(y)) % p`` per entry."""
    rows, k = a.shape[0], b.shape[1]
    out = np.zeros((rows, k), dtype=np.uint64)
    ai = [[int(x) for x in row] for row in a]
    bi = [[int(y) for y in b[:, c]] for c in range(k)]
    for r in range(rows):
        for c in range(k):
            out[r, c] = sum(x * y for x, y in zip(ai[r], bi[c])) % P
    return out


def field(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    if kind == "random":
        return rng.integers(0, P, shape, dtype=np.uint64)
    if kind == "mixed":   # random with extremes sprinkled in
        x = rng.integers(0, P, shape, dtype=np.uint64)
        mask = rng.random(shape) < 0.3
        x[mask] = rng.choice(np.array(EXTREMES, dtype=np.uint64), int(mask.sum()))
        return x
    return np.full(shape, {"max": P - 1, "zeros": 0, "ones": 1}[kind], dtype=np.uint64)


def check(a: np.ndarray, b: np.ndarray) -> None:
    got = F.matmul(a, b)
    assert got.dtype == np.uint64 and got.shape == (a.shape[0], b.shape[1])
    assert (got < P).all()
    np.testing.assert_array_equal(got, reference(a, b))


# d around the float blocks (1024 columns of a) and the 2^11 marks
@pytest.mark.parametrize("d", [1, 2, 1023, 1024, 1025, 2047, 2048, 2049, 5000])
@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_matches_python_integers(d: int, k: int) -> None:
    rng = np.random.default_rng(1000 * d + k)
    check(field(rng, (3, d), "mixed"), field(rng, (d, k), "mixed"))


@pytest.mark.parametrize("kind_a, kind_b", [("max", "max"), ("max", "random"), ("random", "max"),
                                            ("zeros", "random"), ("random", "zeros"),
                                            ("ones", "ones"), ("ones", "max")])
@pytest.mark.parametrize("d", [1, 2048, 2049, 5000])
def test_extremes(kind_a: str, kind_b: str, d: int) -> None:
    rng = np.random.default_rng(d)
    check(field(rng, (2, d), kind_a), field(rng, (d, 2), kind_b))


def test_all_max_closed_form() -> None:
    """All entries ``p - 1 = -1``: every output is ``d mod p``, for large ``d`` too."""
    for d in (1, 1024, 7504, 20000):
        got = F.matmul(np.full((5, d), P - 1, np.uint64), np.full((d, 3), P - 1, np.uint64))
        assert (got == d % P).all()


# entries of a whose 32-bit halves are odd and near 2^32, and entries of b whose digits (for
# b and for 2^32 b mod p) are -1023, or would be 2047 if not balanced: a float block then sums
# values near its 2^53 bound. In row 1 one entry is one less, so that row's block sums are
# odd: past 2^53 they cannot be represented, whatever order BLAS adds in.
A_WORST = [(1 << 64) - 1, ((1 << 29) - 2) << 32 | ((1 << 32) - 1), P - 1]
B_WORST = [1025 + (1 << 29) + (1 << 39), 2047 | (2047 << 29), P - 1, (1 << 64) - 1]


@pytest.mark.parametrize("a_value", A_WORST)
@pytest.mark.parametrize("b_value", B_WORST)
def test_float_bound_worst_case(a_value: int, b_value: int) -> None:
    for d in (1024, 2048, 3001, 4096):
        a = np.full((2, d), a_value, np.uint64)
        a[1, 0] -= np.uint64(1)
        got = F.matmul(a, np.full((d, 2), b_value, np.uint64))
        assert (got[0] == d * a_value * b_value % P).all()
        assert (got[1] == (d * a_value - 1) * b_value % P).all()


def test_long_rows_keep_int64_sums_in_range() -> None:
    """Over 1024 float blocks of worst-case sums: the int64 accumulator must be reduced."""
    d, a_value, b_value = 1_100_000, (1 << 64) - 1, B_WORST[0]
    got = F.matmul(np.full((1, d), a_value, np.uint64), np.full((d, 1), b_value, np.uint64))
    assert int(got[0, 0]) == d * a_value * b_value % P


@pytest.mark.parametrize("rows", [0, 1])
@pytest.mark.parametrize("k", [1, 2, 6])
def test_zero_and_one_rows(rows: int, k: int) -> None:
    rng = np.random.default_rng(rows + 10 * k)
    check(field(rng, (rows, 2049), "random"), field(rng, (2049, k), "random"))


def test_empty_dimensions() -> None:
    assert F.matmul(np.zeros((4, 0), np.uint64), np.zeros((0, 3), np.uint64)).tolist() == [[0] * 3] * 4
    assert F.matmul(np.zeros((4, 5), np.uint64), np.zeros((5, 0), np.uint64)).shape == (4, 0)
    assert F.matmul(np.zeros((0, 5), np.uint64), np.zeros((5, 2), np.uint64)).shape == (0, 2)


def test_realistic_size() -> None:
    """The validity check's shape (d = 7504, k = 2), several row jobs deep."""
    rng = np.random.default_rng(7)
    a = field(rng, (600, 7504), "mixed")
    b = field(rng, (7504, 2), "mixed")
    # jobs of 231 rows in batches of 21: rows 588.. are the last job's rows past its batches
    rows = [0, 1, 20, 21, 230, 231, 232, 461, 462, 587, 588, 599]
    want = reference(a[rows], b)
    for threads in (None, 1, 2, 3):
        np.testing.assert_array_equal(F.matmul(a, b, threads=threads)[rows], want)


def test_any_uint64_is_taken_as_its_integer() -> None:
    """Entries at or above ``p`` (up to ``2^64 - 1``) still give the exact product mod ``p``."""
    rng = np.random.default_rng(3)
    big = np.array([P, P + 1, (1 << 61), (1 << 63), (1 << 64) - 1, (1 << 64) - 2], np.uint64)
    a = rng.choice(big, (4, 1500))
    b = rng.choice(big, (1500, 3))
    check(a, b)
    check(np.full((2, 3000), (1 << 64) - 1, np.uint64), np.full((3000, 2), (1 << 64) - 1, np.uint64))


def test_layouts_and_inputs_untouched() -> None:
    rng = np.random.default_rng(4)
    base = field(rng, (9, 2100), "random")
    b = field(rng, (2100, 4), "random")
    want = reference(base, b)
    a_copy, b_copy = base.copy(), b.copy()
    np.testing.assert_array_equal(F.matmul(np.asfortranarray(base), b), want)
    np.testing.assert_array_equal(F.matmul(base, np.asfortranarray(b)), want)
    np.testing.assert_array_equal(F.matmul(base[::2], b), want[::2])
    np.testing.assert_array_equal(F.matmul(base[:, 1:], b[1:]), reference(base[:, 1:], b[1:]))
    wide = field(rng, (9, 4200), "random")
    np.testing.assert_array_equal(F.matmul(wide[:, ::2], b), reference(wide[:, ::2], b))
    np.testing.assert_array_equal(base, a_copy)
    np.testing.assert_array_equal(b, b_copy)


@pytest.mark.parametrize("budget, call, threads", [
    (1, 1, 1),              # one row per job and per batch
    (1, 1, 3),
    (8 * 2000, 300, 2),     # jobs of 8-24 rows in batches of 4-12, rows past the batches
    (8 * 2000, 300, 1),
    (8 * 4000, 1000, 2),
    (1 << 30, 1 << 30, 1),  # one job, one batch
])
def test_small_blocks_exercise_every_path(monkeypatch: pytest.MonkeyPatch, budget: int,
                                          call: int, threads: int) -> None:
    """Tiny float blocks and jobs, a flush after every block, several threads."""
    monkeypatch.setattr(F, "_BLOCK", 6)
    monkeypatch.setattr(F, "_FLUSH", 1)
    monkeypatch.setattr(F, "_BUDGET", budget)
    monkeypatch.setattr(F, "_CALL", call)
    rng = np.random.default_rng(5)
    for rows, d, k in ((4, 1, 3), (17, 2, 1), (23, 3, 5), (9, 7, 2), (31, 50, 3)):
        a, b = field(rng, (rows, d), "mixed"), field(rng, (d, k), "mixed")
        np.testing.assert_array_equal(F.matmul(a, b, threads=threads), reference(a, b))
    check(field(rng, (3, 40), "max"), field(rng, (40, 2), "max"))


element = st.one_of(st.integers(0, P - 1), st.sampled_from(EXTREMES))


@st.composite
def operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    rows, d, k = draw(st.integers(0, 6)), draw(st.integers(1, 2200)), draw(st.integers(1, 8))
    if draw(st.booleans()):                 # whole arrays from a seed: wide shapes stay cheap
        seed = draw(st.integers(0, 2**32 - 1))
        kinds = ["random", "mixed", "max", "zeros", "ones"]
        rng = np.random.default_rng(seed)
        return (field(rng, (rows, d), draw(st.sampled_from(kinds))),
                field(rng, (d, k), draw(st.sampled_from(kinds))))
    d = min(d, 40)
    return (draw(arrays(np.uint64, (rows, d), elements=element)),
            draw(arrays(np.uint64, (d, k), elements=element)))


@settings(max_examples=60, deadline=None)
@given(operands())
def test_random_shapes(ab: tuple[np.ndarray, np.ndarray]) -> None:
    check(*ab)


def test_dot() -> None:
    rng = np.random.default_rng(6)
    for d in (1, 1024, 1025, 3000):
        a, b = field(rng, (d,), "mixed"), field(rng, (d,), "mixed")
        got = F.dot(a, b)
        assert isinstance(got, int)
        assert got == sum(int(x) * int(y) for x, y in zip(a, b)) % P
    assert F.dot(np.zeros(0, np.uint64), np.zeros(0, np.uint64)) == 0
    assert F.dot(np.full(7, P - 1, np.uint64), np.full(7, P - 1, np.uint64)) == 7


@pytest.mark.parametrize("a, b", [
    (np.zeros(5, np.uint64), np.zeros((5, 2), np.uint64)),              # 1-D a
    (np.zeros((3, 5), np.uint64), np.zeros(5, np.uint64)),              # 1-D b
    (np.zeros((2, 3, 5), np.uint64), np.zeros((5, 2), np.uint64)),      # 3-D a
    (np.zeros((3, 5), np.uint64), np.zeros((4, 2), np.uint64)),         # inner sizes differ
    (np.zeros((3, 5), np.uint64), np.zeros((2, 5), np.uint64)),         # b not transposed
    (np.zeros((3, 5), np.int64), np.zeros((5, 2), np.uint64)),          # signed
    (np.zeros((3, 5), np.uint64), np.zeros((5, 2), np.uint32)),         # narrow
    (np.zeros((3, 5), np.float64), np.zeros((5, 2), np.uint64)),        # float
    (np.zeros((3, 5), np.dtype(">u8") if np.little_endian else np.dtype("<u8")),
     np.zeros((5, 2), np.uint64)),                                      # non-native byte order
    ([[0] * 5] * 3, np.zeros((5, 2), np.uint64)),                       # not an array
    (np.zeros((3, 5), np.uint64), [[0, 0]] * 5),
])
def test_matmul_refuses_bad_arguments(a: object, b: object) -> None:
    with pytest.raises(ValueError):
        F.matmul(a, b)  # type: ignore[arg-type]


@pytest.mark.parametrize("threads", [0, -1])
def test_matmul_refuses_bad_thread_counts(threads: int) -> None:
    with pytest.raises(ValueError):
        F.matmul(np.zeros((3, 5), np.uint64), np.zeros((5, 2), np.uint64), threads=threads)


@pytest.mark.parametrize("a, b", [
    (np.zeros(5, np.uint64), np.zeros(4, np.uint64)),
    (np.zeros((1, 5), np.uint64), np.zeros(5, np.uint64)),
    (np.zeros(5, np.int64), np.zeros(5, np.uint64)),
    ([0] * 5, np.zeros(5, np.uint64)),
])
def test_dot_refuses_bad_arguments(a: object, b: object) -> None:
    with pytest.raises(ValueError):
        F.dot(a, b)  # type: ignore[arg-type]
