"""Heavy hitters by PEM, AoN, Apple's SFP or TrieHH on the same one-word populations,
each scored against the truth it can reach (``fedhh hh``).

Reports what each mechanism discovered with its true rank, precision (fraction of discovered items that occur), recall, precision and F1 at
K (:mod:`mechanisms.metrics`) and the privacy guarantee:

* ``pem`` -- Wang, Li, Jha (TDSC 2019): prefix extension with a frequency oracle
  (``oracle`` grr, oue, olh or aon, default olh); pure local ``epsilon``-LDP (one report
  per user).
* ``aon`` -- the All-or-Nothing heavy-hitter algorithm ("A distributed algorithm
  for differentially private heavy hitters"): the same prefix
  search with the AoN oracle (PEM with ``oracle = aon``); local ``epsilon``-LDP.
* ``sfp`` -- Apple's Sequence Fragment Puzzle (one Count-Mean-Sketch fragment report of
  local ``epsilon``); the central equivalent after shuffling the ``n`` reports is
  printed too (FMT23 numerical bound, and the TrieHH authors' closed form).
* ``triehh`` -- Zhu et al. (AISTATS 2020); ``epsilon``/``delta`` is the central
  target (Corollary 1), plain transport.
* ``poplar1`` -- Boneh et al. (IEEE S&P 2021) as the Poplar1 VDAF of
  draft-irtf-cfrg-vdaf-20: two aggregators, the level-by-level prefix search with a
  count ``threshold`` (:mod:`protocol.studies.runners.poplar1`); no differential privacy
  (``epsilon`` unused); words cut to ``max_length`` characters of TrieHH's alphabet.
  With ``poplar1_mode = "sampled"``: TrieHH's release computed by Poplar1 (a fresh
  sample of ``m`` clients and the threshold ``theta`` of Corollary 1 for the central
  target ``epsilon``/``delta``, one character a round), with TrieHH's Theorem 1
  guarantee; with the same ``seed`` it samples TrieHH's users.

Item encodings. PEM and AoN work on fixed-length bit strings: a word is its first
``word_bytes`` (default 6) bytes of ASCII, zero-padded on the right, as a
``8 * word-bytes``-bit big-endian integer (the datasets' alphabets are ASCII without
NUL, so the mapping is injective on truncated words and decodes by dropping the zero
bytes). SFP truncates words to its ``L = 10`` characters. The truth each mechanism is
scored against is the population's ranking of *truncated* words (frequencies of
words that share a truncation are added).

Datasets: ``en``, ``en-oov``, ``zipf`` (words), a file, and ``zipf32``: a synthetic
Zipf(``s``, default 1.1) population over ``support`` (default 10,000) distinct
32-bit items drawn from a fixed public seed; an item's word is its 8 hex digits, and
PEM/AoN use the 32-bit value itself.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from protocol.studies.errors import StudyError

__all__ = ["MECHANISMS", "HHOptions", "HHResult", "load_population", "truncated_truth",
           "word_codes", "decode_word", "run_pem", "run_sfp", "run_triehh", "score",
           "discover", "run"]

MECHANISMS = ("pem", "sfp", "triehh", "aon", "poplar1")


@dataclass(frozen=True)
class HHOptions:
    """One ``fedhh hh`` run (options of the same names; see the module docstring)."""

    mechanism: str = "pem"
    dataset: str = "zipf32"
    users: int | None = None
    epsilon: float = 4.0
    delta: float | None = None
    oracle: str | None = None
    k: int = 10
    levels: int | None = None
    extension: int | None = None
    word_bytes: int = 6
    T: int = 20
    hash_filter: bool = False
    alphabet: str | None = None
    drop_unencodable: bool = False
    support: int = 10_000
    zipf_s: float = 1.1
    seed: int | None = None
    threshold: int | None = None
    max_length: int | None = None
    poplar1_mode: str = "plain"


def load_population(dataset: str, users: int | None, rng, support: int = 10_000,  # noqa: ANN001, ANN201
                    s: float = 1.1, alphabet: str | None = None,
                    drop_unencodable: bool = False):
    """A one-word-per-user population (``zipf32`` or any :func:`load_dataset` name;
    ``alphabet`` and ``drop_unencodable`` for a word file, as
    :func:`protocol.studies.datasets.load_file`).

    Raises:
        StudyError: bad dataset or a user with several words.
    """
    from protocol.studies.datasets import DatasetError, load_dataset, zipf32_population

    try:
        if dataset == "zipf32" and alphabet is not None:
            raise DatasetError("--alphabet applies to a word file (--dataset PATH); zipf32 "
                               "has its own public alphabet")
        if dataset == "zipf32":
            pop = zipf32_population(100_000 if users is None else users, rng, support, s)
        else:
            pop = load_dataset(dataset, users, rng, alphabet=alphabet,
                               drop_unencodable=drop_unencodable)
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    if (pop.words_per_user > 1).any():
        raise StudyError("fedhh hh takes one word per user")
    return pop.compact()


def truncated_truth(pop, length: int) -> list[str]:  # noqa: ANN001
    """Words truncated to ``length`` characters, most frequent first (frequencies of
    words sharing a truncation added; ties alphabetical)."""
    freq = pop.frequency()
    agg: dict[str, float] = {}
    for w, f in zip(pop.vocabulary, freq):
        if f > 0:
            key = w[:length]
            agg[key] = agg.get(key, 0.0) + float(f)
    return sorted(agg, key=lambda w: (-agg[w], w))


def word_codes(vocabulary, nbytes: int):  # noqa: ANN001, ANN201
    """Each word's first ``nbytes`` ASCII bytes, zero-padded, as a uint64.

    Raises:
        StudyError: ``nbytes`` outside [1, 8] or a non-ASCII word.
    """
    import numpy as np

    if not 1 <= nbytes <= 8:
        raise StudyError("--word-bytes must be between 1 and 8")
    try:
        return np.array([int.from_bytes(w.encode("ascii")[:nbytes].ljust(nbytes, b"\0"), "big")
                         for w in vocabulary], dtype=np.uint64)
    except UnicodeEncodeError:
        raise StudyError("PEM/AoN encode words as ASCII bytes; the dataset has others") from None


def decode_word(code: int, nbytes: int) -> str:
    """Inverse of :func:`word_codes` on one item (zero bytes dropped)."""
    return int(code).to_bytes(nbytes, "big").rstrip(b"\0").decode("ascii", errors="replace")


# ----------------------------------------------------------------------------- runs
@dataclass
class HHResult:
    """What one mechanism discovered: word -> released count (``None``: membership only),
    the truth it is scored against, and its privacy statement."""

    mechanism: str
    discovered: dict[str, float | None]
    truth: list[str]
    privacy: dict[str, Any]
    details: dict[str, Any]


def run_pem(pop, epsilon: float, k: int, oracle: str, rng, *, levels: int | None = None,  # noqa: ANN001
            word_bytes: int = 6, extension: int | None = None,
            transport: Any = None) -> HHResult:
    """PEM (or AoN's heavy hitters with ``oracle='aon'``) on a one-word population; each
    level's oracle round over ``transport`` (default plaintext: reports over plain or the
    shuffler, support vectors over secagg or threshold; the same release).

    Raises:
        StudyError: invalid parameters, or a transport that cannot carry the rounds.
    """
    import numpy as np

    from mechanisms.pem import pem, pem_privacy
    from protocol.studies.datasets import HEX
    from protocol.studies.errors import mechanism_errors

    if pop.alphabet == HEX and all(len(w) == 8 for w in pop.vocabulary[:50]):
        bits, codes = 32, np.array([int(w, 16) for w in pop.vocabulary], dtype=np.uint64)
        decode = lambda c: f"{int(c):08x}"  # noqa: E731
        truth, encoding = pop.top(len(pop.vocabulary)), "32-bit items"
    else:
        bits, codes = 8 * word_bytes, word_codes(pop.vocabulary, word_bytes)
        decode = lambda c: decode_word(int(c), word_bytes)  # noqa: E731
        truth = truncated_truth(pop, word_bytes)
        encoding = f"first {word_bytes} ASCII bytes of the word, zero-padded ({bits} bits)"
        from protocol.studies.datasets import input_report

        cut = input_report(pop, word_bytes)["too_long"]
    items = codes[pop.items]
    g = levels if levels is not None else max(1, bits // 8)
    with mechanism_errors("aon" if oracle == "aon" else "pem",
                          "plain" if transport is None else transport.name):
        res = pem(items, bits, k, epsilon, oracle=oracle, levels=g, extension=extension,
                  rng=rng, transport=transport)
        priv = pem_privacy(epsilon, oracle)
    found = {decode(c): float(cnt) for c, cnt in zip(res.heavy_hitters, res.counts)}
    priv = priv.to_json({"mechanism": "pem", "oracle": oracle, "epsilon": priv.epsilon,
                         "delta": priv.delta, "source": priv.theorem, "kind": "local",
                         "note": "one report per user over disjoint groups"})
    return HHResult("aon" if oracle == "aon" else "pem", found, truth, priv,
                    {"oracle": oracle, "bits": bits, "levels": len(res.lengths),
                     "extension": extension or k, "group_sizes": res.group_sizes[:3],
                     "encoding": encoding,
                     **({} if bits == 32 and pop.alphabet == HEX else
                        {"truncated": {"bytes": word_bytes, "words": cut["words"],
                                       "users": cut["users"]}})})


def run_sfp(pop, epsilon: float, rng, *, delta: float | None = None, T: int = 20,  # noqa: ANN001
            hash_filter: bool = False, transport: Any = None) -> HHResult:
    """SFP at local ``epsilon`` (fragment report only; Appendix C's assembly, plus the
    word-hash filter if ``hash_filter``). The reports go over ``transport`` (default:
    summed in process). Only when they reached the server as an anonymous multiset (the
    shuffler) is the amplified central equivalent reported
    (``central_after_shuffling``); otherwise it is ``None``.

    Raises:
        StudyError: invalid parameters.
    """
    from protocol.studies.ldp_runner import sfp_privacy
    from protocol.studies.runners.sfp import discover_words, users_words

    word_of_user = users_words(pop)
    n = int(word_of_user.shape[0])
    sfp, res, t_rand, t_disc, anonymous = discover_words(
        pop, word_of_user, epsilon, rng, T=T, hash_filter=hash_filter, transport=transport)
    found = {w: float(c) for w, c in zip(res.words, res.counts)}
    # amplification by shuffling only for the path the reports actually took
    priv = sfp_privacy(sfp.privacy(), n, anonymous=anonymous, delta=delta)
    return HHResult("sfp", found, truncated_truth(pop, sfp.length), priv,
                    {"T": T, "k": sfp.k, "m": sfp.m, "length": sfp.length,
                     "hash_filter": hash_filter,
                     "seconds": {"randomize": round(t_rand, 3), "discover": round(t_disc, 3)}})


def run_triehh(pop, epsilon: float, rng, *, delta: float | None = None,  # noqa: ANN001
               transport: Any = None) -> HHResult:
    """TrieHH with Corollary 1's parameters for the central target, its votes over
    ``transport`` (default plain).

    Raises:
        StudyError: invalid parameters or target.
    """
    from protocol.studies.runners import default_transport
    from protocol.studies.runners import triehh

    d = 1.0 / float(pop.n) ** 2 if delta is None else delta
    prep, _ = triehh.prepare(triehh.plain_options(pop.name, pop.n, epsilon, d, 10),
                             population=pop)
    result = triehh.run_once(prep, transport if transport is not None
                             else default_transport("plain"), rng)
    s = triehh.summarize(prep, result)
    priv = dict(s["privacy"], kind="central", mechanism="triehh")
    return HHResult("triehh", dict(result.heavy_hitters), pop.top(len(pop.vocabulary)), priv,
                    {"rounds": len(s["rounds"])})


def score(res: HHResult, k: int) -> dict[str, Any]:
    """Precision, recall@K, F1@K and the discovered items with their true ranks."""
    from mechanisms.metrics import precision, rank_of, topk_metrics

    ranks = rank_of(list(res.discovered), res.truth)
    items = sorted(res.discovered.items(), key=lambda kv: (
        -kv[1] if kv[1] is not None else 0,
        ranks[kv[0]] if ranks[kv[0]] is not None else math.inf, kv[0]))
    m = topk_metrics(res.discovered, res.truth, k)
    return {"precision": precision(res.discovered, set(res.truth)),
            "precision_at_k": m.precision, "recall_at_k": m.recall, "f1_at_k": m.f1,
            "discovered": [{"item": w, "count": c, "true_rank": ranks[w]} for w, c in items]}


def discover(mechanism: str, pop, epsilon: float, rng, *, k: int = 10,  # noqa: ANN001
             oracle: str | None = None, delta: float | None = None, levels: int | None = None,
             word_bytes: int = 6, T: int = 20, extension: int | None = None,
             hash_filter: bool = False, transport: Any = None, threshold: int | None = None,
             max_length: int | None = None, seed: int | None = None,
             poplar1_mode: str = "plain") -> HHResult:
    """Run one mechanism by name (``pem``, ``aon``, ``sfp``, ``triehh``, ``poplar1``) over
    ``transport`` (default: plain; in-process sums for SFP).

    Raises:
        StudyError: invalid parameters.
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise StudyError("--epsilon must be > 0")
    if k < 1:
        raise StudyError("--k must be >= 1")
    if hash_filter and mechanism != "sfp":
        raise StudyError("--hash-filter applies to --mechanism sfp only")
    if mechanism != "poplar1" and (threshold is not None or max_length is not None
                                   or poplar1_mode != "plain"):
        raise StudyError("--threshold, --max-length and --poplar1-mode apply to --mechanism "
                         "poplar1 only")
    if mechanism in ("pem", "aon"):
        if mechanism == "aon" and oracle not in (None, "aon"):
            raise StudyError("--mechanism aon uses the AoN oracle")
        name = "aon" if mechanism == "aon" else (oracle or "olh")
        return run_pem(pop, epsilon, k, name, rng, levels=levels, word_bytes=word_bytes,
                       extension=extension, transport=transport)
    if mechanism == "sfp":
        return run_sfp(pop, epsilon, rng, delta=delta, T=T, hash_filter=hash_filter,
                       transport=transport)
    if mechanism == "triehh":
        return run_triehh(pop, epsilon, rng, delta=delta, transport=transport)
    if mechanism == "poplar1":
        if transport is not None:
            raise StudyError("--mechanism poplar1 runs its own two aggregators; "
                             "--transport does not apply")
        from protocol.studies.runners.poplar1 import run_poplar1, run_poplar1_sampled

        if poplar1_mode == "sampled":
            if threshold is not None:
                raise StudyError("--threshold applies to --poplar1-mode plain (the sampled "
                                 "mode takes TrieHH's theta for --epsilon)")
            return run_poplar1_sampled(pop, k, epsilon=epsilon, delta=delta,
                                       max_length=10 if max_length is None else max_length,
                                       seed=seed, sample_rng=rng.spawn(3)[0])
        if poplar1_mode != "plain":
            raise StudyError("--poplar1-mode is plain or sampled")
        return run_poplar1(pop, k, threshold=threshold,
                           max_length=10 if max_length is None else max_length, seed=seed)
    raise StudyError(f"unknown mechanism {mechanism!r}")


def run(opts: HHOptions, transport: Any = None) -> dict[str, Any]:
    """Draw the population, run the mechanism over ``transport``, score it at ``k``.

    Raises:
        StudyError: bad population size, dataset or parameters.
    """
    import numpy as np

    if opts.users is not None and opts.users < 2:
        raise StudyError("--users must be >= 2")
    root = np.random.default_rng(opts.seed)
    data_rng, run_rng = root.spawn(2)
    t0 = time.perf_counter()
    pop = load_population(opts.dataset, opts.users, data_rng, opts.support, opts.zipf_s,
                          opts.alphabet, opts.drop_unencodable)
    t1 = time.perf_counter()
    res = discover(opts.mechanism, pop, opts.epsilon, run_rng, k=opts.k, oracle=opts.oracle,
                   delta=opts.delta, levels=opts.levels, word_bytes=opts.word_bytes, T=opts.T,
                   extension=opts.extension, hash_filter=opts.hash_filter,
                   transport=transport, threshold=opts.threshold, max_length=opts.max_length,
                   seed=opts.seed, poplar1_mode=opts.poplar1_mode)
    t2 = time.perf_counter()
    sc = score(res, opts.k)
    k = opts.k
    where = ("in process" if res.mechanism == "sfp" else
             "two aggregators" if res.mechanism == "poplar1" else "plain") \
        if transport is None else transport.name
    return {"mechanism": res.mechanism, "dataset": pop.name, "n": pop.n, "k": k,
            "transport": where,
            "privacy": res.privacy, "details": res.details,
            "precision": sc["precision"], f"precision_at_{k}": sc["precision_at_k"],
            f"recall_at_{k}": sc["recall_at_k"], f"f1_at_{k}": sc["f1_at_k"],
            "true_top": res.truth[:k], "discovered": sc["discovered"],
            "seconds": {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3)},
            "seed": opts.seed}
