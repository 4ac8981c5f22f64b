"""``fedhh sfp``: Apple's Sequence Fragment Puzzle on a word population.

The local epsilon of the fragment report is either given (``--local-epsilon``) or
derived from a central target ``(--epsilon, --delta)`` by amplification by shuffling,
with the closed form the TrieHH authors used for their SFP comparison
(:func:`shuffler.amplification.triehh_blanket_epsilon0`; central 1 and 4 at
n = 659,380, delta = 1/n^2 give local 4.29 and 4.96). The optional word report
(``--word-epsilon``) adds its own local epsilon by basic composition; amplification is
applied to the fragment report only, as in the paper's discovery-only comparison.
"""
from __future__ import annotations

import argparse
import time


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("sfp", "discover heavy hitters with Apple's Sequence Fragment Puzzle", run)
    p.add_argument("--dataset", default="zipf", help="en, en-oov, zipf or PATH")
    p.add_argument("--users", type=int, default=None, help="number of users (default 100000)")
    p.add_argument("--epsilon", type=float, default=4.0,
                   help="central epsilon after shuffling (default 4)")
    p.add_argument("--delta", type=float, default=None, help="central delta (default 1/n^2)")
    p.add_argument("--local-epsilon", type=float, default=None,
                   help="local epsilon of the fragment report (skips the conversion)")
    p.add_argument("--word-epsilon", type=float, default=0.0,
                   help="local epsilon of the word report (0 = no word report, the paper's "
                        "discovery-only comparison)")
    p.add_argument("--T", type=int, default=20, help="tuples kept per position (20 or 80)")
    p.add_argument("--k", type=int, default=2048, help="CMS hash functions (default 2048)")
    p.add_argument("--m", type=int, default=1024, help="CMS buckets (default 1024)")
    p.add_argument("--top", type=int, default=50, help="K for recall at K (default 50)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def users_words(pop):  # noqa: ANN001, ANN201
    """Word id of every user holding a word (SFP takes one word per user).

    Raises:
        UsageError: a user holds several words, or fewer than 2 users hold one.
    """
    import numpy as np

    from protocol.cli import UsageError

    per_user = pop.words_per_user
    if np.any(per_user > 1):
        raise UsageError("SFP here takes one word per user")
    holders = per_user == 1
    word_of_user = np.full(pop.n, -1, dtype=np.int64)
    word_of_user[holders] = pop.items
    word_of_user = word_of_user[holders]
    if word_of_user.shape[0] < 2:
        raise UsageError("need at least 2 users holding a word")
    return word_of_user


def fragment_epsilon(n: int, epsilon: float, delta: float,
                     local_epsilon: float | None) -> tuple[float, str]:
    """The fragment report's local epsilon: given, or from the central target by the
    TrieHH authors' closed form of amplification by shuffling.

    Raises:
        UsageError: the conversion fails.
    """
    from protocol.cli import UsageError

    if local_epsilon is not None:
        return local_epsilon, "given"
    try:
        from shuffler.amplification import triehh_blanket_epsilon0
        eps0 = triehh_blanket_epsilon0(n, epsilon, delta)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"cannot convert central to local epsilon: {exc}") from None
    return eps0, "triehh_blanket_epsilon0 (amplification by shuffling)"


def discover_words(pop, word_of_user, eps0: float, rng, *, word_epsilon: float = 0.0,  # noqa: ANN001, ANN201
                   T: int = 20, k: int = 2048, m: int = 1024):
    """One SFP run on the users' words: returns ``(sfp, result, randomize_s, discover_s)``.

    Raises:
        UsageError: invalid SFP parameters or words outside the alphabet.
    """
    from mechanisms.fo import OracleInputError
    from mechanisms.sfp import PAD, SFP
    from protocol.cli import UsageError

    try:
        sfp = SFP(eps0, epsilon_word=word_epsilon, threshold=T, k=k, m=m,
                  alphabet=PAD + "".join(sorted(set(pop.alphabet))))
        codes = sfp.encode_words(list(pop.vocabulary))
    except OracleInputError as exc:
        raise UsageError(str(exc)) from None
    t0 = time.perf_counter()
    reports = sfp.randomize(codes[word_of_user], rng)
    t1 = time.perf_counter()
    result = sfp.discover(reports)
    t2 = time.perf_counter()
    return sfp, result, t1 - t0, t2 - t1


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mechanisms.metrics import precision as precision_of
    from mechanisms.metrics import recall_at_k
    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError
    from protocol.studies.datasets import DatasetError, load_dataset

    rng = np.random.default_rng(args.seed)
    try:
        pop = load_dataset(args.dataset, args.users, rng)
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    word_of_user = users_words(pop)
    n = int(word_of_user.shape[0])
    delta = args.delta if args.delta is not None else 1.0 / n ** 2
    eps0, conversion = fragment_epsilon(n, args.epsilon, delta, args.local_epsilon)
    sfp, result, t_rand, t_disc = discover_words(pop, word_of_user, eps0, rng,
                                                 word_epsilon=args.word_epsilon, T=args.T,
                                                 k=args.k, m=args.m)
    t0, t1, t2 = 0.0, t_rand, t_rand + t_disc
    truncated = {w[: sfp.length] for w in pop.vocabulary}
    top_k = [w[: sfp.length] for w in pop.top(args.top)]
    found = set(result.words)
    recall = recall_at_k(found, top_k)
    precision = precision_of(found, truncated, empty=0.0)
    pr = sfp.privacy()
    out = {
        "mechanism": "sfp", "dataset": pop.name, "users": n,
        "central_epsilon": None if args.local_epsilon is not None else args.epsilon,
        "central_delta": None if args.local_epsilon is not None else delta,
        "local_epsilon_fragment": eps0, "local_epsilon_word": args.word_epsilon,
        "local_epsilon_total": pr.epsilon, "conversion": conversion,
        "T": args.T, "k": args.k, "m": args.m, "discovered": len(result.words),
        f"recall_at_{args.top}": recall, "precision": precision,
        "seconds": {"randomize": round(t1 - t0, 3), "discover": round(t2 - t1, 3)},
        "words": [[w, float(c)] for w, c in zip(result.words[:args.top],
                                                result.counts[:args.top])],
        "seed": args.seed,
        "guarantee": pr.to_json(),
    }
    if args.json:
        print_json(out)
        return 0
    print(f"SFP on {pop.name}: n={n}, local epsilon {eps0:.4f} (fragment) + "
          f"{args.word_epsilon:g} (word), {conversion}")
    print(f"discovered {len(result.words)} words; recall@{args.top} {recall:.3f}, "
          f"precision {precision:.3f}; randomize {t1 - t0:.1f} s, discover {t2 - t1:.1f} s")
    for w, c in out["words"][:20]:
        print(f"  {w:12s} {c:12.0f}")
    return 0
