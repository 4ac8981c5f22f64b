"""Quantiles and range queries from the TrieHH++ trie (Cormode 2021, section 4).

Values in a public range ``[lo, hi]`` become base-``alpha`` prefixes of length ``L``;
TrieHH++ releases the trie with counts; quantiles and the rank of every grid point are
answered from it and compared with the truth. The embedded default population is
log-normal "session lengths in seconds" (median 300 s, sigma 1, range [0, 3600],
generated from a fixed public seed so it is the same on every run).
"""
from __future__ import annotations

import pathlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from protocol.studies.errors import StudyError
from protocol.studies.runners.triehhpp import PrivacyTarget, solve

__all__ = ["SYNTHETIC_SEED", "QuantileOptions", "synthetic_sessions", "load_values", "run"]

SYNTHETIC_SEED = 20210714  # public: the embedded population is the same for every run
SESSION_MEDIAN_SECONDS = 300.0
SESSION_SIGMA = 1.0
SESSION_RANGE = (0.0, 3600.0)


@dataclass(frozen=True)
class QuantileOptions(PrivacyTarget):
    """The TrieHH++ target (``delta`` defaults to 1e-6 here) plus the values and queries.

    ``values`` is a file of numbers (one per line, or ``.npy``) that needs the public
    range ``lo``/``hi``; without it the embedded log-normal population of ``users``
    (default 1,000,000) values. A value outside ``[lo, hi]`` is an error unless
    ``clip``, which clips it to the range and counts it (``input["clipped"]``).
    """

    values: str | None = None
    users: int | None = None
    lo: float | None = None
    hi: float | None = None
    alpha: int = 4
    quantiles: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 0.9)
    grid: int = 2001
    seed: int | None = None
    transport: str = "plain"
    clip: bool = False


def synthetic_sessions(n: int) -> np.ndarray:
    """The embedded population: ``n`` log-normal session lengths (seconds), capped at
    the embedded range ``[0, 3600]`` (a session is recorded for at most an hour: part
    of the population's definition, not a clip of the caller's data)."""
    rng = np.random.default_rng(SYNTHETIC_SEED)
    return np.minimum(rng.lognormal(np.log(SESSION_MEDIAN_SECONDS), SESSION_SIGMA, n),
                      SESSION_RANGE[1])


def read_numbers(path: pathlib.Path) -> np.ndarray:
    """The numbers of a file, one per line (blank lines skipped), or of a ``.npy``
    array; every refusal is one line naming the file (and the line), and nothing of
    numpy's warnings reaches the caller.

    Raises:
        StudyError: a missing, unreadable, binary or empty file, or a line that is not
            one finite number.
    """
    if not path.exists():
        raise StudyError(f"--values file not found: {path}")
    if not path.is_file():
        raise StudyError(f"--values {path} is not a file")
    if path.suffix == ".npy":
        try:
            v = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise StudyError(f"cannot read {path} as a .npy array: {exc}") from None
        if v.dtype.kind not in "iuf":
            raise StudyError(f"{path}: a .npy array of {v.dtype} is not numbers")
        v = np.asarray(v, dtype=np.float64).ravel()
    else:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StudyError(f"{path} is not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from None
        except OSError as exc:
            raise StudyError(f"cannot read {path}: {exc.strerror}") from None
        text = text.removeprefix("\ufeff")
        out = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            item = line.strip()
            if not item:
                continue
            try:
                x = float(item)
            except ValueError:
                raise StudyError(f"{path}:{lineno}: {item[:40]!r} is not a number (one "
                                 "number per line)") from None
            if not np.isfinite(x):
                raise StudyError(f"{path}:{lineno}: {item[:40]!r} is not a finite number")
            out.append(x)
        v = np.asarray(out, dtype=np.float64)
    if v.size == 0:
        raise StudyError(f"{path} holds no values (one number per line)")
    if not np.isfinite(v).all():
        raise StudyError(f"{path}: every value must be finite")
    return v


def clip_to_range(values: np.ndarray, lo: float, hi: float, clip: bool,
                  where: str, option: str = "--clip") -> tuple[np.ndarray, dict[str, Any]]:
    """``values`` checked against the public range ``[lo, hi]``: with ``clip`` the
    values outside are clipped to it and counted (the ``input["clipped"]`` report:
    how many below, how many above); without, they are an error that says how many
    and names ``option``.

    Raises:
        StudyError: values outside the range without ``clip``.
    """
    below = int((values < lo).sum())
    above = int((values > hi).sum())
    if not below and not above:
        return values, {}
    if not clip:
        first = float(values[(values < lo) | (values > hi)][0])
        raise StudyError(f"{where}: {below + above:,} of {values.size:,} values are outside "
                         f"the public range [{lo:g}, {hi:g}] ({below:,} below, {above:,} "
                         f"above; the first is {first:g}); pass {option} to clip them to "
                         "the range (counted and reported), or widen the range")
    return np.clip(values, lo, hi), {"clipped": {"below": below, "above": above,
                                                 "lo": float(lo), "hi": float(hi)}}


def load_values(opts: QuantileOptions) -> tuple[np.ndarray, float, float, str]:
    """The values, the public range and a description of the source.

    Raises:
        StudyError: a bad size, a missing range, an unreadable or empty file.
    """
    if opts.values is None:
        n = 1_000_000 if opts.users is None else opts.users
        if n < 1:
            raise StudyError("--users must be >= 1")
        lo = SESSION_RANGE[0] if opts.lo is None else opts.lo
        hi = SESSION_RANGE[1] if opts.hi is None else opts.hi
        return synthetic_sessions(n), lo, hi, "synthetic log-normal session lengths (s)"
    if opts.lo is None or opts.hi is None:
        raise StudyError("--values needs the public range --lo and --hi (deriving it from "
                         "the data would leak the minimum and maximum)")
    path = pathlib.Path(opts.values)
    v = read_numbers(path)
    if opts.users is not None:
        if not 1 <= opts.users <= v.size:
            raise StudyError(f"--users must be in [1, {v.size}]: {path} holds {v.size:,} "
                             "values")
        v = np.random.default_rng(SYNTHETIC_SEED).choice(v, opts.users, replace=False)
    return v, opts.lo, opts.hi, f"file {path}"


def run(opts: QuantileOptions,
        progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
        transport: Any = None, corrupt: Any = None) -> dict[str, Any]:
    """Release the TrieHH++ trie over ``transport`` (default the plaintext one), answer
    the quantiles and the range queries at ``grid`` points, and compare with the truth.
    ``corrupt``: corrupted clients (as :func:`protocol.studies.runners.triehhpp.run`;
    their target is a cell of ``L`` base-``alpha`` digits, by default the lowest cell
    no value falls in): the summary then has a ``corrupted`` section and
    ``input["corrupt_target"]``.

    Raises:
        StudyError: bad quantiles, grid, values, range, target, corrupted clients the
            transport cannot simulate, or an aborted round.
    """
    from mechanisms.quantiles import AlphaAdicEncoder, QuantileError, QuantileSketch
    from mechanisms.triehhpp import TrieHHPPParams, run_triehhpp, spawn_rngs
    from protocol.core.contract import AggregationAborted
    from protocol.core.transports.plain import PlainTransport
    from protocol.studies.corrupted import (
        armed, check_transport, corrupt_from_transport, records_since,
    )
    from protocol.studies.runners.triehhpp import corrupted_section

    t0 = time.perf_counter()
    transport = PlainTransport() if transport is None else transport
    c = corrupt_from_transport(transport, corrupt)
    check_transport(c, transport, opts.transport)
    qs = list(opts.quantiles)
    if not qs or any(not 0 <= q <= 1 for q in qs):
        raise StudyError("--quantiles must be in [0, 1]")
    if opts.grid < 2:
        raise StudyError("--grid must be >= 2")
    values, lo, hi, source = load_values(opts)
    if not lo < hi:
        raise StudyError(f"the public range needs --lo < --hi, got [{lo:g}, {hi:g}]")
    values, clipped = clip_to_range(values, lo, hi, opts.clip,
                                    source if opts.values is None else str(opts.values))
    n = int(values.size)
    try:
        enc = AlphaAdicEncoder(float(lo), float(hi), opts.alpha, opts.max_length)
    except QuantileError as exc:
        raise StudyError(str(exc)) from None
    sol = solve(opts, n, flat=False, default_delta=1e-6, what="TrieHH++ quantiles")
    params = TrieHHPPParams(n, float(sol.m), sol.theta, opts.max_length, c=opts.slack,
                            task="quantiles")
    um = enc.unit_matrix(values)
    aimed = None if c is None else aim_cell(c, enc, values)
    sr, tr = spawn_rngs(opts.seed)
    t1 = time.perf_counter()
    with armed(transport, None if aimed is None else aimed.clients) as start:
        try:
            res = run_triehhpp(um, enc.alpha, enc.unit_labels, params, transport, sr, tr,
                               progress=progress)
        except AggregationAborted as exc:
            raise StudyError(f"a round aborted: {exc}") from None
        records = records_since(transport, start)
    sketch = QuantileSketch(res, enc)
    answers = sketch.quantiles(qs)
    t2 = time.perf_counter()
    sv = np.sort(np.clip(values, lo, hi))
    grid = np.linspace(lo, hi, opts.grid)
    err = np.abs(sketch.ranks(grid) - np.searchsorted(sv, grid, side="right") / n)
    rows = []
    for a in answers:
        true_rank = float(np.searchsorted(sv, a.value, side="right") / n)
        rows.append({"q": a.q, "estimate": a.value, "true_quantile": float(np.quantile(sv, a.q)),
                     "true_rank_of_estimate": true_rank, "rank_error": true_rank - a.q,
                     "error_bound": a.error_bound})
    g = sol.guarantee
    extra: dict[str, Any] = {"input": dict(clipped)} if clipped else {}
    if aimed is not None:
        extra["input"] = {**clipped, "corrupt_target": aimed.input_note()}
        extra["corrupted"] = corrupted_section(
            aimed, records, [e.label for e in res.node_estimates()])
    return {
        "source": source, "n": n, "transport": opts.transport, "range": [lo, hi],
        "alpha": opts.alpha, "L": opts.max_length, **extra,
        "privacy": g.as_dict(), "m": sol.m, "theta": sol.theta,
        "contacted": params.plan().contacted,
        "error_bound": sketch.error_bound,
        "trie_nodes": len(res.trie) - 1,
        "levels": [{"level": s.level, "candidates": s.candidates, "released": s.released}
                   for s in res.levels],
        "quantiles": rows,
        "range_query_rank_error": {
            "points": int(opts.grid), "median": float(np.median(err)),
            "p95": float(np.quantile(err, 0.95)), "max": float(err.max()),
            "fraction_within_bound": float((err <= sketch.error_bound).mean()),
        },
        "seconds": {"load": round(t1 - t0, 3), "run_and_query": round(t2 - t1, 3)},
    }


def aim_cell(c: Any, enc: Any, values: np.ndarray):  # noqa: ANN201
    """The corrupted clients aimed at a cell: its ``L``-digit label (a shorter given
    label aims at that prefix). Without a target: the lowest cell no value falls in.

    Raises:
        StudyError: a target that is not a string of at most ``L`` of the digits, or
            corrupted users outside the population.
    """
    import dataclasses

    from protocol.studies.corrupted import Aim, check_users

    check_users(c, int(values.size))
    digits, L = enc.unit_labels, enc.max_levels
    if c.target is not None:
        if len(c.target) > L or set(c.target) - set(digits):
            raise StudyError(f"--corrupt-target {c.target!r}: a quantile cell is at most "
                             f"L = {L} base-{enc.alpha} digits ({''.join(digits)})")
        return Aim(c, c.target, False, "given")
    held = np.unique(enc.leaf_cells(values))
    gaps = np.flatnonzero(held != np.arange(held.size, dtype=held.dtype))
    cell = int(gaps[0]) if gaps.size else int(held.size)
    if cell >= enc.cells:
        raise StudyError("every value cell is held: give --corrupt-target")
    label = "".join(digits[(cell // enc.alpha ** (L - 1 - i)) % enc.alpha] for i in range(L))
    a, b = enc.cell_interval(L, cell)
    return Aim(dataclasses.replace(c, target=label), label, True,
               f"the default: the lowest cell no value falls in, [{a:.6g}, {b:.6g})")
