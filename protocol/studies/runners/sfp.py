"""Apple's Sequence Fragment Puzzle (Apple Differential Privacy Team, "Learning with
Privacy at Scale", 2017) on a word population.

The local epsilon of the fragment report is either given or derived from a central
target ``(epsilon, delta)`` by amplification by shuffling, with the closed form the
TrieHH authors used for their SFP comparison
(:func:`shuffler.amplification.triehh_blanket_epsilon0`; central 1 and 4 at
n = 659,380, delta = 1/n^2 give local 4.29 and 4.96). The optional word report adds
its own local epsilon by basic composition; amplification is applied to the fragment
report only, as in the paper's discovery-only comparison.

Used by ``fedhh sfp``, ``hh --mechanism sfp`` and ``eval compare``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocol.studies.errors import StudyError

__all__ = ["SFPOptions", "users_words", "fragment_epsilon", "discover_words", "run"]


@dataclass(frozen=True)
class SFPOptions:
    """One ``fedhh sfp`` run (options of the same names).

    ``epsilon``/``delta``: the central target after shuffling (``delta`` defaults to
    ``1/n^2``); ``local_epsilon`` skips the conversion; ``word_epsilon`` 0 sends no word
    report; ``T`` tuples kept per position; ``hash_filter`` adds the word-hash filter
(not in Appendix C, off by default: :class:`mechanisms.sfp.SFP`); ``k``/``m`` the Count-Mean-Sketch hash
    functions and buckets; ``top`` the K of recall at K.
    """

    dataset: str = "zipf"
    users: int | None = None
    epsilon: float = 4.0
    delta: float | None = None
    local_epsilon: float | None = None
    word_epsilon: float = 0.0
    T: int = 20
    k: int = 2048
    m: int = 1024
    top: int = 50
    hash_filter: bool = False
    alphabet: str | None = None
    drop_unencodable: bool = False
    seed: int | None = None


def users_words(pop) -> np.ndarray:  # noqa: ANN001
    """Word id of every user holding a word (SFP takes one word per user).

    Raises:
        StudyError: a user holds several words, or fewer than 2 users hold one.
    """
    per_user = pop.words_per_user
    if np.any(per_user > 1):
        raise StudyError("SFP here takes one word per user")
    holders = per_user == 1
    word_of_user = np.full(pop.n, -1, dtype=np.int64)
    word_of_user[holders] = pop.items
    word_of_user = word_of_user[holders]
    if word_of_user.shape[0] < 2:
        from protocol.studies.datasets import users_left
        from protocol.studies.errors import too_few_users

        raise too_few_users(users_left(pop), "SFP (users holding a word)", 2)
    return word_of_user


def fragment_epsilon(n: int, epsilon: float, delta: float,
                     local_epsilon: float | None) -> tuple[float, str]:
    """The fragment report's local epsilon: given, or from the central target by the
    TrieHH authors' closed form of amplification by shuffling.

    Raises:
        StudyError: the conversion fails.
    """
    if local_epsilon is not None:
        return local_epsilon, "given"
    try:
        from shuffler.amplification import triehh_blanket_epsilon0
        eps0 = triehh_blanket_epsilon0(n, epsilon, delta)
    except (ImportError, ValueError) as exc:
        raise StudyError(f"cannot convert central to local epsilon: {exc}") from None
    return eps0, "triehh_blanket_epsilon0 (amplification by shuffling)"


def discover_words(pop, word_of_user: np.ndarray, eps0: float, rng: np.random.Generator, *,  # noqa: ANN001, ANN201
                   word_epsilon: float = 0.0, T: int = 20, k: int = 2048, m: int = 1024,
                   transport: Any = None, hash_filter: bool = False):
    """One SFP run on the users' words: returns ``(sfp, result, randomize_s, discover_s,
    anonymous)``.

    ``transport`` (a :class:`protocol.core.contract.Transport`) carries the reports to
    the server (:meth:`mechanisms.sfp.SFP.collect`; its randomness is spawned from
    ``rng``, so the release is the same); ``None`` sums them in process. ``anonymous``
    says whether the reports reached the server as an anonymous multiset (a report round
    over the shuffler): only then may amplification by shuffling be claimed.

    Raises:
        StudyError: invalid SFP parameters, words outside the alphabet, or a transport
            that cannot carry the reports (or aborted).
    """
    from mechanisms.fo import OracleInputError
    from mechanisms.sfp import PAD, SFP

    try:
        sfp = SFP(eps0, epsilon_word=word_epsilon, threshold=T, k=k, m=m,
                  hash_filter=hash_filter,
                  alphabet=PAD + "".join(sorted(set(pop.alphabet))))
        codes = sfp.encode_words(list(pop.vocabulary))
    except OracleInputError as exc:
        symbols = len(set(pop.alphabet)) + 1  # with the padding symbol
        if symbols > 64 and "64 bits" in str(exc):
            raise StudyError(
                f"SFP packs a word of 10 characters into 64 bits, so its alphabet may have "
                f"at most 63 characters; {pop.name}'s has {symbols - 1}: give a smaller "
                "--alphabet (lower or lower-digits, or the characters), with "
                "--drop-unencodable for the words it cannot encode") from None
        raise StudyError(str(exc)) from None
    t0 = time.perf_counter()
    reports = sfp.randomize(codes[word_of_user], rng)
    t1 = time.perf_counter()
    from protocol.studies.errors import mechanism_errors

    with mechanism_errors("SFP", None if transport is None else transport.name):
        agg = (sfp.aggregate(reports) if transport is None
               else sfp.collect(reports, transport, rng.spawn(1)[0]))
    result = sfp.discover(agg)
    t2 = time.perf_counter()
    return sfp, result, t1 - t0, t2 - t1, bool(agg.anonymous)


def run(opts: SFPOptions, transport: Any = None) -> dict[str, Any]:
    """Load the population, choose the local epsilon, run SFP and score it: recall at
    ``top`` of the true top words (truncated to SFP's length) and precision.

    ``transport`` carries the reports (a :class:`protocol.core.contract.Transport`).
    ``None`` chooses: the shuffler when the local epsilon is derived from a central
    target (the target holds only for shuffled reports), in-process sums when
    ``local_epsilon`` is given. A central target with a transport that does not deliver
    the reports as an anonymous multiset is refused.

    Raises:
        StudyError: bad dataset, population, parameters, conversion or transport.
    """
    from mechanisms.metrics import precision as precision_of
    from mechanisms.metrics import recall_at_k
    from protocol.studies.datasets import DatasetError, load_dataset

    if (opts.local_epsilon is None and transport is not None
            and not transport.anonymous_reports):
        raise StudyError(f"the central target (--epsilon) holds only for shuffled reports; "
                         f"--transport {transport.name} does not shuffle them: use "
                         f"--transport shuffler, or give --local-epsilon")
    rng = np.random.default_rng(opts.seed)
    try:
        pop = load_dataset(opts.dataset, opts.users, rng, alphabet=opts.alphabet,
                           drop_unencodable=opts.drop_unencodable)
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    word_of_user = users_words(pop)
    n = int(word_of_user.shape[0])
    delta = opts.delta if opts.delta is not None else 1.0 / n ** 2
    eps0, conversion = fragment_epsilon(n, opts.epsilon, delta, opts.local_epsilon)
    if opts.local_epsilon is None and transport is None:
        # the central target holds only for shuffled reports: send them through the
        # shuffler (the transport declares anonymous report rounds)
        from protocol.core.transports import get_transport

        transport = get_transport("shuffler", simulate=opts.seed is not None)
        if not transport.anonymous_reports:
            raise StudyError("the shuffler transport does not declare anonymous reports")
    sfp, result, t_rand, t_disc, anonymous = discover_words(
        pop, word_of_user, eps0, rng, word_epsilon=opts.word_epsilon, T=opts.T, k=opts.k,
        m=opts.m, transport=transport, hash_filter=opts.hash_filter)
    if opts.local_epsilon is None and not anonymous:
        raise StudyError(f"--transport {transport.name} did not deliver SFP's reports as an "
                         "anonymous multiset, so the central target does not hold; give "
                         "--local-epsilon")
    truncated = {w[: sfp.length] for w in pop.vocabulary}
    top_k = [w[: sfp.length] for w in pop.top(opts.top)]
    found = set(result.words)
    recall = recall_at_k(found, top_k)
    precision = precision_of(found, truncated, empty=0.0)
    pr = sfp.privacy()
    return {
        "mechanism": "sfp", "dataset": pop.name, "users": n,
        "central_epsilon": None if opts.local_epsilon is not None else opts.epsilon,
        "central_delta": None if opts.local_epsilon is not None else delta,
        "local_epsilon_fragment": eps0, "local_epsilon_word": opts.word_epsilon,
        "local_epsilon_total": pr.epsilon, "conversion": conversion,
        "T": opts.T, "k": opts.k, "m": opts.m, "hash_filter": opts.hash_filter,
        "discovered": len(result.words),
        f"recall_at_{opts.top}": recall, "precision": precision,
        "transport": "in process" if transport is None else transport.name,
        "reports_anonymous": anonymous,
        "seconds": {"randomize": round(t_rand, 3), "discover": round(t_disc, 3)},
        "words": [[w, float(c)] for w, c in zip(result.words[:opts.top],
                                                result.counts[:opts.top])],
        "seed": opts.seed,
        "guarantee": pr.to_json(),
        "input": _input(pop, word_of_user, sfp.length),
    }


def _input(pop, word_of_user, length: int) -> dict:  # noqa: ANN001
    """What loading and SFP's fixed length did to the words
    (:func:`protocol.studies.datasets.input_report` plus the users whose word SFP cut
    to ``length`` characters)."""
    from protocol.studies.datasets import input_report

    out = input_report(pop)
    long = np.fromiter((len(w) > length for w in pop.vocabulary), dtype=bool,
                       count=len(pop.vocabulary))
    held = np.asarray(word_of_user)
    cut = int(long[held[held >= 0]].sum()) if long.any() else 0
    if cut:
        out["truncated"] = {"users": cut, "max_characters": int(length),
                            "what": f"SFP sees only their first {length} characters"}
    return out
