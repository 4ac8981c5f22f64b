"""``fedhh hh``: discover heavy hitters with PEM, AoN, Apple's SFP or TrieHH.

One command over the same populations, reporting what each discovered with its true
rank, precision (fraction of discovered items that occur), recall, precision and F1 at
K (:mod:`protocol.studies.evaluation`) and the privacy guarantee:

* ``pem`` -- Wang, Li, Jha (TDSC 2019): prefix extension with a frequency oracle
  (``--oracle grr|oue|olh|aon``, default olh); pure local ``epsilon``-LDP (one report
  per user).
* ``aon`` -- the All-or-Nothing heavy-hitter algorithm (seed 001): the same prefix
  search with the AoN oracle (PEM with ``oracle = aon``); local ``epsilon``-LDP.
* ``sfp`` -- Apple's Sequence Fragment Puzzle (one Count-Mean-Sketch fragment report of
  local ``epsilon``); the central equivalent after shuffling the ``n`` reports is
  printed too (FMT23 numerical bound, and the TrieHH authors' closed form).
* ``triehh`` -- Zhu et al. (AISTATS 2020); ``--epsilon``/``--delta`` is the central
  target (Corollary 1), plain transport.

Item encodings. PEM and AoN work on fixed-length bit strings: a word is its first
``--word-bytes`` (default 6) bytes of ASCII, zero-padded on the right, as a
``8 * word-bytes``-bit big-endian integer (the datasets' alphabets are ASCII without
NUL, so the mapping is injective on truncated words and decodes by dropping the zero
bytes). SFP truncates words to its ``L = 10`` characters. The truth each mechanism is
scored against is the population's ranking of *truncated* words (frequencies of
words that share a truncation are added).

Datasets: ``en``, ``en-oov``, ``zipf`` (words), a file, and ``zipf32``: a synthetic
Zipf(``--zipf-s``, default 1.1) population over ``--support`` (default 10,000) distinct
32-bit items drawn from a fixed public seed; an item's word is its 8 hex digits, and
PEM/AoN use the 32-bit value itself.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

MECHANISMS = ("pem", "sfp", "triehh", "aon")
ZIPF32_SEED = 0x32F1  # public: the 32-bit support is the same for every run
HEX = "0123456789abcdef"


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("hh", "discover heavy hitters with PEM, AoN, SFP or TrieHH", run)
    p.add_argument("--mechanism", choices=MECHANISMS, default="pem")
    p.add_argument("--dataset", default="zipf32",
                   help="en, en-oov, zipf, zipf32 (32-bit items, default) or PATH")
    p.add_argument("--users", type=int, default=None, help="population size (default 100000)")
    p.add_argument("--epsilon", type=float, default=4.0,
                   help="local epsilon (pem, aon, sfp) or central target (triehh); default 4")
    p.add_argument("--delta", type=float, default=None,
                   help="central delta (triehh target; sfp's amplified equivalent); default 1/n^2")
    p.add_argument("--oracle", choices=("grr", "oue", "olh", "aon"), default=None,
                   help="PEM's frequency oracle (default olh; aon for --mechanism aon)")
    p.add_argument("--k", type=int, default=10, help="K: heavy hitters wanted (default 10)")
    p.add_argument("--levels", type=int, default=None,
                   help="PEM/AoN groups (default bits/8: 8 bits per level)")
    p.add_argument("--extension", type=int, default=None,
                   help="PEM/AoN prefixes kept per level (default K, as in PEM)")
    p.add_argument("--word-bytes", type=int, default=6, dest="word_bytes",
                   help="bytes of a word kept by PEM/AoN (default 6, i.e. 48-bit items)")
    p.add_argument("--T", type=int, default=20, help="SFP tuples per position (default 20)")
    p.add_argument("--support", type=int, default=10_000,
                   help="zipf32: distinct items (default 10000)")
    p.add_argument("--zipf-s", type=float, default=1.1, dest="zipf_s",
                   help="zipf32 exponent (default 1.1)")
    p.add_argument("--show", type=int, default=20, help="items listed (default 20)")
    p.add_argument("--seed", type=int, default=None, help="simulation seed")
    p.add_argument("--json", action="store_true", help="print one JSON object")


# ----------------------------------------------------------------------------- data
def zipf32_population(n: int, rng, support: int = 10_000, s: float = 1.1):  # noqa: ANN001, ANN201
    """``n`` users, one 32-bit item each, rank ``r`` with probability proportional to
    ``r^-s`` over ``support`` distinct items (fixed public seed); words are 8 hex digits.

    Raises:
        DatasetError: bad sizes or exponent.
    """
    import numpy as np

    from protocol.studies.datasets import DatasetError, sample_population

    if not 1 <= support <= 1 << 24:
        raise DatasetError("support must be in [1, 2^24]")
    if not (math.isfinite(s) and s > 0):
        raise DatasetError("the Zipf exponent must be > 0")
    g = np.random.default_rng(ZIPF32_SEED)
    items = np.unique(g.integers(0, 1 << 32, 2 * support + 64, dtype=np.uint64))
    items = g.permutation(items)[:support]
    vocab = [f"{int(x):08x}" for x in items]
    probs = np.arange(1, support + 1, dtype=float) ** -s
    return sample_population("zipf32", vocab, probs, n, rng, HEX,
                              f"Zipf(s={s:g}) over {support} random 32-bit items", False, 1.0)


def load_population(dataset: str, users: int | None, rng, support: int = 10_000,  # noqa: ANN001, ANN201
                    s: float = 1.1):
    """A one-word-per-user population (``zipf32`` or any :func:`load_dataset` name).

    Raises:
        UsageError: bad dataset or a user with several words.
    """
    from protocol.cli import UsageError
    from protocol.studies.datasets import DatasetError, load_dataset

    try:
        if dataset == "zipf32":
            pop = zipf32_population(100_000 if users is None else users, rng, support, s)
        else:
            pop = load_dataset(dataset, users, rng)
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    if (pop.words_per_user > 1).any():
        raise UsageError("fedhh hh takes one word per user")
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
        UsageError: ``nbytes`` outside [1, 8] or a non-ASCII word.
    """
    import numpy as np

    from protocol.cli import UsageError

    if not 1 <= nbytes <= 8:
        raise UsageError("--word-bytes must be between 1 and 8")
    try:
        return np.array([int.from_bytes(w.encode("ascii")[:nbytes].ljust(nbytes, b"\0"), "big")
                         for w in vocabulary], dtype=np.uint64)
    except UnicodeEncodeError:
        raise UsageError("PEM/AoN encode words as ASCII bytes; the dataset has others") from None


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
            word_bytes: int = 6, extension: int | None = None) -> HHResult:
    """PEM (or AoN's heavy hitters with ``oracle='aon'``) on a one-word population.

    Raises:
        UsageError: invalid parameters.
    """
    import numpy as np

    from mechanisms.federated.parties import FederatedError
    from mechanisms.pem import pem, pem_privacy
    from protocol.cli import UsageError

    if pop.alphabet == HEX and all(len(w) == 8 for w in pop.vocabulary[:50]):
        bits, codes = 32, np.array([int(w, 16) for w in pop.vocabulary], dtype=np.uint64)
        decode = lambda c: f"{int(c):08x}"  # noqa: E731
        truth, encoding = pop.top(len(pop.vocabulary)), "32-bit items"
    else:
        bits, codes = 8 * word_bytes, word_codes(pop.vocabulary, word_bytes)
        decode = lambda c: decode_word(int(c), word_bytes)  # noqa: E731
        truth = truncated_truth(pop, word_bytes)
        encoding = f"first {word_bytes} ASCII bytes of the word, zero-padded ({bits} bits)"
    items = codes[pop.items]
    g = levels if levels is not None else max(1, bits // 8)
    try:
        res = pem(items, bits, k, epsilon, oracle=oracle, levels=g, extension=extension,
                  rng=rng)
        priv = pem_privacy(epsilon, oracle)
    except FederatedError as exc:
        raise UsageError(str(exc)) from None
    found = {decode(c): float(cnt) for c, cnt in zip(res.heavy_hitters, res.counts)}
    priv = dict(priv, kind="local", note="one report per user over disjoint groups")
    return HHResult("aon" if oracle == "aon" else "pem", found, truth, priv,
                    {"oracle": oracle, "bits": bits, "levels": len(res.lengths),
                     "extension": extension or k, "group_sizes": res.group_sizes[:3],
                     "encoding": encoding})


def run_sfp(pop, epsilon: float, rng, *, delta: float | None = None, T: int = 20) -> HHResult:  # noqa: ANN001
    """SFP at local ``epsilon`` (fragment report only), with its amplified central
    equivalent.

    Raises:
        UsageError: invalid parameters.
    """
    from protocol.cli.commands import sfp as sfp_cmd
    from protocol.studies.ldp_runner import sfp_privacy

    word_of_user = sfp_cmd.users_words(pop)
    n = int(word_of_user.shape[0])
    sfp, res, t_rand, t_disc = sfp_cmd.discover_words(pop, word_of_user, epsilon, rng, T=T)
    found = {w: float(c) for w, c in zip(res.words, res.counts)}
    # discover_words sums the reports in-process (no shuffler): local epsilon only
    priv = sfp_privacy(sfp.privacy(), n, anonymous=False, delta=delta)
    return HHResult("sfp", found, truncated_truth(pop, sfp.length), priv,
                    {"T": T, "k": sfp.k, "m": sfp.m, "length": sfp.length,
                     "seconds": {"randomize": round(t_rand, 3), "discover": round(t_disc, 3)}})


def run_triehh(pop, epsilon: float, rng, *, delta: float | None = None) -> HHResult:  # noqa: ANN001
    """TrieHH with Corollary 1's parameters for the central target, plain transport.

    Raises:
        UsageError: invalid parameters or target.
    """
    from protocol.cli.commands import triehh as triehh_cmd
    from protocol.cli.commands.eval_compare import triehh_args

    d = 1.0 / float(pop.n) ** 2 if delta is None else delta
    prep, _ = triehh_cmd.prepare(triehh_args(pop.name, pop.n, epsilon, d, 10), population=pop)
    result = triehh_cmd.run_once(prep, triehh_cmd.load_transport("plain"), rng,
                                 show_progress=False)
    s = triehh_cmd.summarize(prep, result)
    priv = dict(s["privacy"], kind="central", mechanism="triehh")
    return HHResult("triehh", dict(result.heavy_hitters), pop.top(len(pop.vocabulary)), priv,
                    {"rounds": len(s["rounds"])})


def score(res: HHResult, k: int) -> dict[str, Any]:
    """Precision, recall@K, F1@K and the discovered items with their true ranks."""
    from protocol.studies.evaluation import precision, rank_of, topk_metrics

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
             word_bytes: int = 6, T: int = 20, extension: int | None = None) -> HHResult:
    """Run one mechanism by name (``pem``, ``aon``, ``sfp``, ``triehh``).

    Raises:
        UsageError: invalid parameters.
    """
    from protocol.cli import UsageError

    if not (math.isfinite(epsilon) and epsilon > 0):
        raise UsageError("--epsilon must be > 0")
    if k < 1:
        raise UsageError("--k must be >= 1")
    if mechanism in ("pem", "aon"):
        if mechanism == "aon" and oracle not in (None, "aon"):
            raise UsageError("--mechanism aon uses the AoN oracle")
        name = "aon" if mechanism == "aon" else (oracle or "olh")
        return run_pem(pop, epsilon, k, name, rng, levels=levels, word_bytes=word_bytes,
                       extension=extension)
    if mechanism == "sfp":
        return run_sfp(pop, epsilon, rng, delta=delta, T=T)
    if mechanism == "triehh":
        return run_triehh(pop, epsilon, rng, delta=delta)
    raise UsageError(f"unknown mechanism {mechanism!r}")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError

    if args.users is not None and args.users < 2:
        raise UsageError("--users must be >= 2")
    root = np.random.default_rng(args.seed)
    data_rng, run_rng = root.spawn(2)
    t0 = time.perf_counter()
    pop = load_population(args.dataset, args.users, data_rng, args.support, args.zipf_s)
    t1 = time.perf_counter()
    res = discover(args.mechanism, pop, args.epsilon, run_rng, k=args.k, oracle=args.oracle,
                   delta=args.delta, levels=args.levels, word_bytes=args.word_bytes, T=args.T,
                   extension=args.extension)
    t2 = time.perf_counter()
    sc = score(res, args.k)
    out = {"mechanism": res.mechanism, "dataset": pop.name, "n": pop.n, "k": args.k,
           "privacy": res.privacy, "details": res.details,
           "precision": sc["precision"], f"precision_at_{args.k}": sc["precision_at_k"],
           f"recall_at_{args.k}": sc["recall_at_k"], f"f1_at_{args.k}": sc["f1_at_k"],
           "true_top": res.truth[:args.k], "discovered": sc["discovered"],
           "seconds": {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3)}, "seed": args.seed}
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    pv = res.privacy
    w(f"{res.mechanism.upper()} on {pop.name}: n = {pop.n:,}, K = {args.k}\n")
    if pv["kind"] == "local":
        w(f"privacy: local {pv['epsilon']:g}-LDP per user ({pv['source']})\n")
        c = pv.get("central_after_shuffling")
        if c:
            w(f"  central equivalent after shuffling the n reports, delta {c['delta']:.3g}: "
              + ", ".join(f"{b} {v:.4f}" if isinstance(v, float) else f"{b} {v}"
                          for b, v in c.items() if b != "delta") + "\n")
    else:
        w(f"privacy: central ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP, {pv['theorem']}\n")
    w(f"{len(sc['discovered'])} items discovered; precision {sc['precision']:.3f}, "
      f"recall@{args.k} {sc['recall_at_k']:.3f}, precision@{args.k} "
      f"{sc['precision_at_k']:.3f}, F1@{args.k} {sc['f1_at_k']:.3f}\n")
    w(f"{'item':<16} {'count':>12} {'true rank':>9}\n")
    for d in sc["discovered"][:args.show]:
        cnt = "-" if d["count"] is None else f"{d['count']:.0f}"
        rank = "-" if d["true_rank"] is None else str(d["true_rank"])
        w(f"{d['item']:<16} {cnt:>12} {rank:>9}\n")
    w(f"time: load {t1 - t0:.2f} s, run {t2 - t1:.2f} s\n")
    return 0
