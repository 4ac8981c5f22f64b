"""TrieHH++ (Cormode, "Federated Heavy Hitters Revisited", 2021 -- the TrieHH++ variant
with sampled counts): solve the sample size
``m`` and threshold ``theta`` for a target (Lemmas 1 and 3, the Remark after Lemma 3),
run the trie (or one flat round over public candidates) over a transport and compare
every released heavy hitter with the truth.

Used by ``fedhh triehhpp``, ``privacy triehhpp`` and (the solver) ``quantiles``.
"""
from __future__ import annotations

import pathlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from protocol.core.contract import Transport
from protocol.studies.errors import StudyError

__all__ = ["KS", "PrivacyTarget", "TrieHHPPOptions", "solve", "run", "parameters",
           "prepare", "Prepared"]

KS = (10, 50, 100)
#: Users drawn from an embedded dataset by default. At epsilon 1 TrieHH++ samples a
#: fraction of about 0.3% of the users, so at 100,000 users a word needs about 9,000
#: holders (9% of the users) to pass theta at the first level and nothing is found;
#: at 1,000,000 users the top English words are (about 8 at seed 1).
DEFAULT_USERS = 1_000_000
EMBEDDED = ("en", "en-oov", "zipf")
Progress = Callable[[Iterable[Any]], Iterable[Any]]


@dataclass(frozen=True)
class PrivacyTarget:
    """The target TrieHH++'s parameters are solved for (``--epsilon`` ... ``--slack``).

    ``delta`` defaults to ``1/n^2`` (or the caller's default); with ``theta`` fixed and
    no ``delta``, whatever delta that theta gives. ``composition`` is ``basic`` or
    ``advanced``; ``bound`` is ``paper`` (Lemma 3 eq. (4)) or ``eq3``; ``slack`` is the
    ``c`` of ``s = m + c sqrt(m)`` contacted clients.
    """

    epsilon: float = 1.0
    delta: float | None = None
    max_length: int = 10
    composition: str = "basic"
    bound: str = "paper"
    theta: int | None = None
    slack: float = 10.0


@dataclass(frozen=True)
class TrieHHPPOptions(PrivacyTarget):
    """One TrieHH++ run: the target plus dataset, flat mode and seed."""

    dataset: str = "en"
    users: int | None = None
    flat: bool = False
    candidates: str | None = None
    alphabet: str | None = None
    seed: int | None = None
    transport: str = "plain"


def solve(target: PrivacyTarget, n: int, flat: bool,
          default_delta: float | None = None, left: str | None = None,
          what: str = "TrieHH++"):  # noqa: ANN201
    """Solve (m, theta) for the target (``delta`` defaults to ``default_delta`` or
    ``1/n^2``; with ``theta`` and no ``delta`` any delta).

    ``left`` says how many users the run has after what loading dropped
    (:func:`protocol.studies.datasets.users_left`; default ``"the population has n
    users"``): a target too small a population cannot meet is refused with it and the
    smallest population that meets it (:func:`protocol.studies.errors.too_few_users`).

    Raises:
        StudyError: a condition of the theorem fails (the message names it).
    """
    from mechanisms.triehhpp_privacy import PrivacyConditionError, solve_sample_size

    if target.max_length < 1:
        raise StudyError("--max-length must be >= 1")

    def attempt(k: int):  # noqa: ANN202
        delta = target.delta
        if delta is None and target.theta is None:
            delta = default_delta if default_delta is not None else 1.0 / float(k) ** 2
        return solve_sample_size(k, target.epsilon, delta, target.max_length, flat=flat,
                                 composition=target.composition, bound=target.bound,
                                 c=target.slack, theta=target.theta)

    try:
        return attempt(n)
    except PrivacyConditionError as exc:
        why = str(exc)
    from protocol.studies.errors import smallest_population, too_few_users

    def ok(k: int) -> bool:
        try:
            attempt(k)
        except PrivacyConditionError:
            return False
        return True

    needed = smallest_population(ok, start=1)
    if needed is None or needed <= n:  # not a matter of the population's size
        raise StudyError(why)
    if left is None:
        left = f"the population has {n:,} user{'s' * (n != 1)}"
    delta = ("1/n^2" if default_delta is None else f"{default_delta:.3g}") \
        if target.delta is None else f"{target.delta:.3g}"
    if target.theta is not None and target.delta is None:
        delta = f"theta = {target.theta}"
    else:
        delta = f"delta {delta}"
    raise too_few_users(left, f"{what} at epsilon {target.epsilon:g} ({delta}, L = "
                        f"{1 if flat else target.max_length}, bound {target.bound})", needed,
                        why)


def parameters(target: PrivacyTarget, n: int, flat: bool = False) -> dict[str, Any]:
    """The solved parameters, their guarantee and the sampling plan's figures
    (``fedhh privacy triehhpp``).

    Raises:
        StudyError: ``n < 1`` or a condition of the theorem fails.
    """
    from mechanisms.sampling import plan_poisson_sampling
    from mechanisms.triehhpp_privacy import lemma1_theta, p_theta

    if n < 1:
        raise StudyError("--users must be >= 1")
    sol = solve(target, n, flat)
    g = sol.guarantee
    plan = plan_poisson_sampling(n, float(sol.m), target.slack)
    target_delta = target.delta if target.delta is not None or target.theta is not None \
        else 1.0 / float(n) ** 2
    levels = 1 if flat else target.max_length
    return {
        "n": n, "target_epsilon": target.epsilon, "target_delta": target_delta,
        "L": levels, "flat": flat,
        "m": sol.m, "theta": sol.theta, "sampling_rate": sol.rate,
        "contacted": plan.contacted,
        "epsilon": g.epsilon, "delta": g.delta, "theorem": g.theorem,
        "p_theta": p_theta(sol.theta),
        "lemma1_theta": lemma1_theta(target_delta) if target_delta else None,
        "truncation_probability": plan.truncation_probability,
        "cormode_scheme_tv_distance": plan.cormode_tv_distance(),
        "quantile_rank_error_bound_alpha4": levels * 3 * sol.theta / sol.m,
        "parameters": dict(g.parameters),
        "guarantee": g.to_json(),
    }


def run(opts: TrieHHPPOptions, transport: Transport,
        progress: Progress | None = None, corrupt: Any = None) -> dict[str, Any]:
    """Load the population, solve the parameters, run TrieHH++ (or its flat round) and
    summarise it (guarantee, per-level figures, estimates against the truth, metrics
    at K, ``seconds``). ``progress`` wraps the trie's levels. ``corrupt``: corrupted
    clients (a :class:`~protocol.core.corruption.CorruptClients` or the short dict of
    :func:`protocol.studies.corrupted.corrupt_clients`; default: those set on the
    transport): the summary then has a ``corrupted`` section (per level, totals,
    whether the target was released) and ``input["corrupt_target"]``.

    Raises:
        StudyError: bad dataset or population, a failing theorem condition, bad
            candidates, corrupted clients the transport cannot simulate, or a
            transport that aborts a round.
    """
    import numpy as np

    from mechanisms.prefix_tree import PrefixTreeError
    from mechanisms.triehhpp import run_flat, run_triehhpp
    from protocol.core.contract import AggregationAborted
    from protocol.studies.corrupted import (
        armed, check_transport, corrupt_from_transport, records_since,
    )

    t0 = time.perf_counter()
    c = corrupt_from_transport(transport, corrupt)
    check_transport(c, transport, opts.transport)
    prep = prepare(opts)
    pop, sol, params, sr, tr = prep.pop, prep.sol, prep.params, prep.sampling_rng, \
        prep.transport_rng
    user_item = pop.items  # single word per user: entry i is user i's word
    cands = flat_candidates(opts.dataset, opts.candidates, pop) if opts.flat else None
    aimed = None if c is None else aim(prep, c, cands)
    t1 = time.perf_counter()
    with armed(transport, None if aimed is None else aimed.clients) as start:
        try:
            if opts.flat:
                pos = {w: i for i, w in enumerate(cands)}
                vocab_pos = np.array([pos.get(w, -1) for w in pop.vocabulary], dtype=np.int64)
                res = run_flat(vocab_pos[user_item], cands, params, transport, sr, tr)
                hh = res.heavy_hitters()
                levels = [res.stats]
            else:
                alpha = prep.alphabet
                um = prep.unit_matrix()
                res = run_triehhpp(um, alpha.num_units, alpha.labels, params, transport, sr,
                                   tr, terminal=alpha.terminal, progress=progress)
                hh = res.heavy_hitters(strip=alpha.eos)
                levels = res.levels
        except (PrefixTreeError, ValueError) as exc:
            raise StudyError(str(exc)) from None
        except AggregationAborted as exc:
            raise StudyError(f"the {opts.transport} transport aborted a round: {exc}") from None
        records = records_since(transport, start)
    t2 = time.perf_counter()
    out = _summary(opts, pop, sol, params, hh, levels)
    if aimed is not None:
        out["input"]["corrupt_target"] = aimed.input_note()
        out["corrupted"] = corrupted_section(aimed, records, [e.label for e in hh])
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3)}
    return out


#: what a TrieHH++ level names as its voters (its rounds name no sample)
POSITIONS_NOTE = ("TrieHH++'s levels name no sample: --corrupt-users and --corrupt-share "
                  "index each level's contacted clients, not the population")


def aim(prep: "Prepared", c: Any, flat_list: Any = None):  # noqa: ANN201
    """The corrupted clients aimed at their target: a word (with the end symbol, the
    trie's label of the whole word), or in a flat run a public candidate. Without a
    target: a word nobody holds (flat: the candidate the fewest users hold).

    Raises:
        StudyError: a target outside the alphabet.
    """
    import dataclasses

    import numpy as np

    from protocol.studies.corrupted import Aim, aim_word

    if flat_list is None:
        # the users a corrupted-users choice names are positions in a level's contact
        # list, at most the population
        return aim_word(c, prep.pop.vocabulary, prep.alphabet.symbols,
                        int(prep.params.max_levels), prep.alphabet.eos, prep.pop.n)
    from protocol.studies.corrupted import check_users

    check_users(c, prep.pop.n)
    if c.target is not None:
        return Aim(c, c.target, False, "given")
    holders = dict(zip(prep.pop.vocabulary, prep.pop.holders().tolist()))
    held = np.array([holders.get(w, 0) for w in flat_list])
    word = flat_list[int(np.argmin(held))]
    how = ("the default: a candidate no user holds" if held.min() == 0 else
           f"the default: the candidate the fewest users hold, {int(held.min())}")
    return Aim(dataclasses.replace(c, target=word), word, True, how)


def corrupted_section(aimed: Any, records: Any, released: list[str]) -> dict[str, Any]:
    """The ``corrupted`` section of a TrieHH++ (or quantiles) run: per level and in
    all (:func:`protocol.studies.corrupted.section`), and whether the target was
    released."""
    from protocol.studies.corrupted import section

    out = section(aimed, records)
    for r in out["rounds"]:  # a level's round number counts from 0, its level from 1
        r["level"] = r.pop("round") + 1
    out["target_released"] = aimed.word in released
    if aimed.clients.per_round is None:
        out["note"] = POSITIONS_NOTE
    return out


@dataclass
class Prepared:
    """A run's population, solved parameters and randomness (:func:`prepare`)."""

    pop: Any
    sol: Any
    params: Any
    alphabet: Any
    sampling_rng: Any
    transport_rng: Any

    def unit_matrix(self) -> Any:
        """Each user's item as a row of unit ids (``-1`` past its end)."""
        return self.alphabet.encode(list(self.pop.vocabulary),
                                    self.params.max_levels)[self.pop.items]


def prepare(opts: TrieHHPPOptions) -> Prepared:
    """Load the population, solve the parameters and split the run's randomness, as
    :func:`run` does (a Flower app's server and nodes rebuild the same run from it).

    Raises:
        StudyError: bad dataset or population, a failing theorem condition, bad
            candidates.
    """
    import numpy as np

    from mechanisms.prefix_tree import UnitAlphabet
    from mechanisms.triehhpp import TrieHHPPParams, spawn_rngs
    from protocol.studies.datasets import DatasetError, load_dataset

    if opts.users is not None and opts.users < 1:
        raise StudyError("--users must be >= 1")
    if opts.candidates is not None and not opts.flat:
        raise StudyError("--candidates is the public list of a --flat run; add --flat or "
                         "leave it out")
    if opts.candidates is not None:
        flat_candidates(opts.dataset, opts.candidates, None)  # refuse a bad file first
    users = opts.users
    if users is None and opts.dataset in EMBEDDED:
        users = DEFAULT_USERS
    data_seq, run_seq = np.random.SeedSequence(opts.seed).spawn(2)
    try:
        pop = load_dataset(opts.dataset, users, np.random.default_rng(data_seq),
                           False, opts.alphabet)
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    if not pop.single_word:
        raise StudyError("TrieHH++ takes exactly one item per client; this population has "
                         "users with several (or no) words")
    n = pop.n
    from protocol.studies.datasets import users_left

    sol = solve(opts, n, opts.flat, left=users_left(pop))
    try:
        params = TrieHHPPParams(n, float(sol.m), sol.theta,
                                1 if opts.flat else opts.max_length, c=opts.slack)
    except ValueError as exc:
        raise StudyError(str(exc)) from None
    sr, tr = spawn_rngs(int(np.random.default_rng(run_seq).integers(2**63)))
    try:
        alpha = None if opts.flat else UnitAlphabet(pop.alphabet)
    except ValueError as exc:
        raise StudyError(str(exc)) from None
    return Prepared(pop, sol, params, alpha, sr, tr)


def flat_candidates(dataset: str, candidates: str | None, pop) -> tuple[str, ...]:  # noqa: ANN001
    """The public candidate list of a flat run: the file ``candidates`` (one item per
    line), or an embedded dataset's public vocabulary.

    Raises:
        StudyError: the file cannot be read, or a file dataset without a list.
    """
    if candidates:
        try:
            lines = pathlib.Path(candidates).read_text(encoding="utf-8").split()
        except OSError as exc:
            raise StudyError(f"cannot read --candidates {candidates}: "
                             f"{exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise StudyError(f"--candidates {candidates}: not UTF-8 text (byte "
                             f"{exc.start})") from None
        if not lines:
            raise StudyError(f"--candidates {candidates} lists no candidate")
        return tuple(dict.fromkeys(lines))
    if dataset not in ("en", "en-oov", "zipf"):
        raise StudyError("--flat on a file dataset needs a public --candidates list "
                         "(the file's own vocabulary is private)")
    return tuple(pop.vocabulary)


def _summary(opts, pop, sol, params, hh, levels) -> dict[str, Any]:  # noqa: ANN001
    import numpy as np

    from mechanisms.metrics import topk_metrics

    holders = pop.holders()
    index = {w: i for i, w in enumerate(pop.vocabulary)}
    ranking = [pop.vocabulary[i] for i in pop.ranking()]
    rank = {w: r + 1 for r, w in enumerate(ranking[:100_000])}
    rows = []
    for e in hh:
        true = int(holders[index[e.label]]) if e.label in index else 0
        rows.append({"item": e.label, "count": e.count, "estimate": round(e.estimate, 1),
                     "estimate_se": round(e.estimate_se, 1), "true": true,
                     "true_rank": rank.get(e.label),
                     "relative_error": (e.estimate - true) / true if true else None,
                     "z": (e.estimate - true) / e.estimate_se if e.estimate_se > 0 else None})
    rel = np.array([abs(r["relative_error"]) for r in rows if r["relative_error"] is not None])
    z = np.array([abs(r["z"]) for r in rows if r["z"] is not None])
    discovered = {e.label: float(e.count) for e in hh}
    g = sol.guarantee
    from protocol.studies.datasets import input_report

    return {
        "dataset": pop.name, "n": pop.n, "transport": opts.transport, "flat": opts.flat,
        # a word needs its end symbol inside the L levels to be released whole
        "input": input_report(pop, None if opts.flat else params.max_levels - 1),
        "privacy": g.as_dict(),
        "parameters": {"m": sol.m, "theta": sol.theta, "rate": sol.rate,
                       "contacted": params.plan().contacted, "L": params.max_levels,
                       "slack_c": params.c},
        "levels": [{"level": s.level, "candidates": s.candidates, "released": s.released,
                    "contacted": s.contacted, "participants_sim_only": s.participants,
                    "voters_sim_only": s.voters, "truncated": s.truncated} for s in levels],
        "heavy_hitters": rows,
        "estimation": {
            "median_abs_relative_error": float(np.median(rel)) if rel.size else None,
            "max_abs_relative_error": float(rel.max()) if rel.size else None,
            "within_2se": float((z <= 2).mean()) if z.size else None,
        },
        "at_k": [topk_metrics(discovered, ranking, k).as_dict() for k in KS],
    }
