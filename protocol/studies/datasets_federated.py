"""Multi-party populations for the federated heavy-hitter mechanisms.

SYN (Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with Local Differential Privacy",
section 7.1 and Table 2), regenerated from its description
-----------------------------------------------------------------------------------
The paper draws item domains for eight parties from the Tmall logs with a Dirichlet
split: all items are sorted into ``N = 6`` groups; each party samples
``q ~ Dir_N(beta = 0.5)`` and takes a ``q_j`` proportion of its items from group ``j``;
the users' frequencies follow the Zipf or Poisson law Table 2 gives each party, and
Table 2 states each party's users and distinct ("unique") items and the items common
to the parties. The Tmall item list is not available here, and the paper does not say
how a law over items was turned into users, so we build a population that has Table
2's statistics by construction (``fedhh federated --describe`` prints them next to the
paper's):

* items are distinct random 48-bit ids; the ``C = 276`` common items (Table 2) are held
  by every party; the rest of the universe is ``N = 6`` groups of ``group_size = 7000``
  items;
* party ``i`` with ``U_i`` distinct items (Table 2) samples ``q ~ Dir_N(beta)`` and takes
  ``U_i - C`` further items, ``q_j`` of them (largest-remainder rounding) drawn uniformly
  from group ``j``; two parties share such an item only by chance, so the items common to
  all eight are the ``C`` (checked);
* the party ranks its ``U_i`` items by a party-specific taste: ``-log(1 + global rank)``
  plus Gaussian noise (``taste = 1``; the common items have the best global ranks, so
  they tend to be popular everywhere, as best sellers are);
* every item gets one user (so the party has exactly ``U_i`` distinct items), and the
  other ``n_i - U_i`` users are spread over the ranks ``r = 0, 1, ...`` by the party's
  law: Zipf(``a``) ``p_r ∝ (r + 1)^-a``, Poisson(``lam``) ``p_r ∝ lam^r e^-lam / r!``
  (one multinomial draw). A Poisson party therefore has about ``2 lam`` heavy items of
  similar size over a tail of items held by one user each.

Party sizes, laws and distinct items are Table 2's: 220k Poisson(10) 5,484; 170k
Poisson(8) 6,260; 120k Zipf(1.1) 6,688; 80k Zipf(1.3) 6,796; 70k Poisson(6) 4,590;
60k Poisson(4) 4,429; 30k Zipf(1.5) 4,813; 30k Zipf(1.7) 5,024; 276 common items;
780,000 users. ``scale`` multiplies users, distinct and common items alike.
Everything is reproducible from ``seed``.

The hard regime (:func:`regime_population`)
-------------------------------------------
On SYN as regenerated, summing every party's exact local top-k already gives the global
top-k: the global heavy hitters are the large parties' local heavy hitters. The
paper's claim for TAP/TAPS (aligning the parties on the global targets) needs data on
which that fails. :func:`regime_population` builds it, with one knob, ``own``:

* ``parties`` parties (20) of skewed sizes, ``n_i`` proportional to
  ``(i + 1)^-size_skew`` (``size_skew = 0.5``: the largest holds 4.5 times the smallest),
  ``users`` users in all (390,000, half SYN's total, so that the map's 1,080 runs
  finish within an hour on two shared cores);
* *diffuse* global items: ``global_items`` (500) random 48-bit ids whose law is the
  same Zipf(``global_zipf = 0.8``) in every party, so each is frequent globally and
  equally (un)remarkable everywhere;
* *own* items: every party has ``own_head`` (20) items of its own, held by nobody
  else, each by a share ``own / own_head`` of its users;
* a tail: a share ``tail`` (0.05) of each party's users hold a random item of their
  own (one user each).

A user holds a global item with probability ``1 - own - tail``, an own item with
probability ``own``, a tail item otherwise (one multinomial draw per party). As ``own``
rises, a party's own items overtake the global ones in its local ranking while
staying below them globally (a party's own item has at most ``n_max own / own_head``
users, a global top-k item ``N (1 - own - tail) p_k``), so the local-top-k recall of
the global top-k falls from about 1 (``own = 0``) to about 0.1 (``own = 0.5`` at
k = 10). :func:`local_topk_stats` measures it (``fedhh federated --describe``).

Other sources
-------------
* :func:`from_csv`: ``party,user,item`` rows (item: an integer below ``2**bits`` or a
  word, encoded as below).
* :func:`words_population`: parties from the embedded English word frequencies
  (``wordfreq``, as in :mod:`protocol.studies.datasets`); words become 48-bit items
  (their first 6 bytes of UTF-8, zero padded, big-endian).
"""
from __future__ import annotations

import csv
import pathlib
from dataclasses import dataclass

import numpy as np

from mechanisms.federated.parties import FederatedError, Party, Population

__all__ = ["SYN_PARTIES", "SYN_COMMON", "SYN_GROUPS", "SYN_GROUP_SIZE", "SYN_TASTE", "SynParty",
           "syn_population", "describe", "encode_words", "decode_item", "from_csv",
           "words_population", "load_population", "RegimeParams", "REGIME_OWN",
           "regime_population", "local_topk_stats", "PAPER_TABLE7"]


@dataclass(frozen=True)
class SynParty:
    """One SYN party of Table 2: size, frequency law ("zipf" or "poisson", parameter)
    and number of distinct items."""

    name: str
    users: int
    law: str
    param: float
    distinct: int


SYN_PARTIES: tuple[SynParty, ...] = (
    SynParty("SYN0", 220_000, "poisson", 10.0, 5_484),
    SynParty("SYN1", 170_000, "poisson", 8.0, 6_260),
    SynParty("SYN2", 120_000, "zipf", 1.1, 6_688),
    SynParty("SYN3", 80_000, "zipf", 1.3, 6_796),
    SynParty("SYN4", 70_000, "poisson", 6.0, 4_590),
    SynParty("SYN5", 60_000, "poisson", 4.0, 4_429),
    SynParty("SYN6", 30_000, "zipf", 1.5, 4_813),
    SynParty("SYN7", 30_000, "zipf", 1.7, 5_024),
)
#: Table 2's common items of SYN (held by every party)
SYN_COMMON = 276
#: the generator's other parameters (our choices; the paper names N = 6 groups)
SYN_GROUPS, SYN_GROUP_SIZE, SYN_TASTE = 6, 7000, 1.0


def _law(spec: SynParty, d: int) -> np.ndarray:
    """The party's law over ranks ``0..d-1``, normalised."""
    r = np.arange(d, dtype=float)
    if spec.law == "zipf":
        w = (r + 1.0) ** (-spec.param)
    elif spec.law == "poisson":
        from scipy import stats

        w = stats.poisson.pmf(r, spec.param)
    else:
        raise FederatedError(f"unknown law {spec.law!r}")
    return w / w.sum()


def syn_population(seed: int = 0, beta: float = 0.5, scale: float = 1.0,
                   groups: int = SYN_GROUPS, group_size: int = SYN_GROUP_SIZE, bits: int = 48,
                   taste: float = SYN_TASTE,
                   parties: tuple[SynParty, ...] = SYN_PARTIES,
                   common: int = SYN_COMMON) -> Population:
    """The SYN population (see the module docstring).

    Args:
        seed: generator seed (same seed, same population).
        beta: Dirichlet concentration (0.2, 0.5, 0.8 in Table 8).
        scale: multiply every party's users and distinct items and the common items
            (e.g. 0.05 for fast tests).
        groups: number of item groups ``N``.
        group_size: items per group.
        bits: item length.
        taste: standard deviation of a party's taste noise in its item ranking.
        parties: the parties (Table 2's by default).
        common: items held by every party.

    Raises:
        FederatedError: on non-positive parameters, or a party with fewer users than
            distinct items or more distinct items than the groups and common items hold.
    """
    if beta <= 0 or scale <= 0 or groups < 1 or group_size < 1 or common < 0:
        raise FederatedError("beta, scale, groups and group_size must be positive and "
                             "common >= 0")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A4E]))
    n_common = int(round(common * scale))
    universe = n_common + groups * group_size
    ids = np.unique(rng.integers(0, 1 << bits, size=universe + 64, dtype=np.uint64))
    ids = rng.permutation(ids)[:universe]  # ids[r]: the item of global rank r
    rest = np.arange(n_common, universe)
    by_group = [rest[j::groups] for j in range(groups)]  # global ranks of each group
    out = []
    for spec in parties:
        n = max(1, int(round(spec.users * scale)))
        d = max(n_common + 1, int(round(spec.distinct * scale)))
        own_total = d - n_common
        if n < d or own_total > groups * group_size:
            raise FederatedError(f"{spec.name}: {n} users cannot hold {d} distinct items")
        q = rng.dirichlet(np.full(groups, beta))
        alloc = np.floor(q * own_total).astype(np.int64)
        for j in np.argsort(-(q * own_total - alloc), kind="stable")[:own_total - alloc.sum()]:
            alloc[j] += 1
        over = np.flatnonzero(alloc > group_size)
        for j in over:  # a group cannot give more than it holds: move the excess on
            extra, alloc[j] = alloc[j] - group_size, group_size
            for k in np.argsort(alloc):
                take = min(extra, group_size - alloc[k])
                alloc[k] += take
                extra -= take
        own = [rng.choice(g, int(a), replace=False) for g, a in zip(by_group, alloc) if a]
        ranks = np.concatenate([np.arange(n_common)] + own)
        # party-specific taste: sort by log global popularity plus Gaussian noise
        key = -np.log1p(ranks.astype(float)) + taste * rng.standard_normal(ranks.size)
        ranks = ranks[np.argsort(-key, kind="stable")]
        counts = 1 + rng.multinomial(n - d, _law(spec, d))  # every item held at least once
        out.append(Party(spec.name, rng.permutation(np.repeat(ids[ranks], counts))))
    return Population(tuple(out), bits)


def describe(pop: Population) -> dict[str, object]:
    """Users, distinct items and the items common to every party, per party and in all.

    Returns:
        ``{"parties": [{"name", "users", "distinct"}...], "users", "distinct",
        "common"}`` (``common``: items every party holds).
    """
    sets = [np.unique(p.items) for p in pop.parties]
    common = sets[0]
    for s_ in sets[1:]:
        common = np.intersect1d(common, s_, assume_unique=True)
    return {"parties": [{"name": p.name, "users": int(p.size), "distinct": int(s_.size)}
                        for p, s_ in zip(pop.parties, sets)],
            "users": int(sum(p.size for p in pop.parties)),
            "distinct": int(np.unique(np.concatenate(sets)).size),
            "common": int(common.size)}


@dataclass(frozen=True)
class RegimeParams:
    """The hard-regime generator's parameters (module docstring); ``own`` is the knob."""

    own: float = 0.3
    users: int = 390_000
    parties: int = 20
    size_skew: float = 0.5
    global_items: int = 500
    global_zipf: float = 0.8
    own_head: int = 20
    tail: float = 0.05

    def __post_init__(self) -> None:
        if not (0 <= self.own and 0 <= self.tail and self.own + self.tail < 1):
            raise FederatedError("own and tail must be >= 0 with own + tail < 1 (some users "
                                 f"must hold global items), got own={self.own}, tail={self.tail}")
        if self.parties < 1 or self.global_items < 1 or self.own_head < 1:
            raise FederatedError("parties, global_items and own_head must be >= 1")
        if self.users < self.parties:
            raise FederatedError(f"{self.users} users cannot fill {self.parties} parties")
        if not (self.size_skew >= 0 and self.global_zipf >= 0):
            raise FederatedError("size_skew and global_zipf must be >= 0")


#: the knob values of ``fedhh eval federated --experiment regime`` (the map)
REGIME_OWN = (0.0, 0.25, 0.5)


def regime_population(own: float = 0.3, seed: int = 0, *, scale: float = 1.0,
                      bits: int = 48, **params: float) -> Population:
    """The hard regime (module docstring): ``own`` is the share of every party's users
    holding the party's own items; ``params`` override the other
    :class:`RegimeParams` fields; ``scale`` multiplies ``users``.

    Raises:
        FederatedError: on out-of-range parameters or an unknown parameter name.
    """
    names = set(RegimeParams.__dataclass_fields__) - {"own"}
    unknown = set(params) - names
    if unknown:
        raise FederatedError(f"unknown regime parameters {sorted(unknown)}; choose from "
                             f"{sorted(names)}")
    if not scale > 0:
        raise FederatedError("scale must be > 0")
    p = RegimeParams(own=float(own), **params)  # type: ignore[arg-type]
    users = int(round(p.users * scale))
    p = RegimeParams(**{**p.__dict__, "users": users})
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7A95]))
    w = (np.arange(p.parties) + 1.0) ** -p.size_skew
    sizes = np.floor(users * w / w.sum()).astype(np.int64)
    sizes[0] += users - int(sizes.sum())
    need = p.global_items + p.parties * p.own_head
    ids = np.unique(rng.integers(0, 1 << bits, size=need + 64, dtype=np.uint64))
    if ids.size < need:
        raise FederatedError(f"{bits}-bit items cannot give {need} distinct ids")
    ids = rng.permutation(ids)[:need]
    glob = ids[:p.global_items]
    own_ids = ids[p.global_items:].reshape(p.parties, p.own_head)
    law = (np.arange(p.global_items) + 1.0) ** -p.global_zipf
    law /= law.sum()
    out = []
    for i, n in enumerate(sizes):
        kinds = rng.multinomial(int(n), [1.0 - p.own - p.tail, p.own, p.tail])
        items = np.concatenate([
            glob[rng.choice(p.global_items, int(kinds[0]), p=law)],
            own_ids[i][rng.integers(0, p.own_head, int(kinds[1]))],
            rng.integers(0, 1 << bits, int(kinds[2]), dtype=np.uint64)])
        out.append(Party(f"R{i}", rng.permutation(items)))
    return Population(tuple(out), bits)


#: Table 7 of Zhang, Ye, Hu (epsilon 4, k = 10): mean recall of the global top-k among
#: the parties' local heavy hitters, per dataset: (parties, GTF, FedPEM, TAPS)
PAPER_TABLE7 = {"RDB": (2, 0.304, 0.302, 0.413), "YCM": (4, 0.262, 0.255, 0.368),
                "TYS": (6, 0.296, 0.283, 0.333), "UBA": (6, 0.295, 0.294, 0.325),
                "SYN": (8, 0.162, 0.162, 0.179)}


def local_topk_stats(pop: Population, k: int) -> dict[str, object]:
    """How far each party's *exact* local top-``k`` is from the global top-``k`` (no
    privacy noise: what a perfect per-party oracle would upload).

    Returns:
        ``{"k", "local_recall"`` (the mean over parties of the share of the global
        top-k in the party's top-k; Table 7's measure, here without noise),
        ``"per_party"`` (each party's recall), ``"sum_of_local_top_k_f1"`` (F1 of the
        top-k of the summed exact local top-k counts: FedPEM without noise),
        ``"global_in_some_local"`` (share of the global top-k in at least one party's
        top-k)``}``.

    Raises:
        FederatedError: ``k < 1``.
    """
    from mechanisms.federated import aggregate_counts, f1_at_k
    from mechanisms.federated.parties import top_k_counts

    if k < 1:
        raise FederatedError("k must be >= 1")
    truth = pop.true_top_k(k)
    locs = [top_k_counts(p.items, k) for p in pop.parties]
    per = [float(np.isin(truth, v).mean()) for v, _ in locs]
    summed, _ = aggregate_counts([v for v, _ in locs], [c for _, c in locs], k)
    anywhere = np.isin(truth, np.concatenate([v for v, _ in locs])).mean()
    return {"k": int(k), "local_recall": round(float(np.mean(per)), 4),
            "per_party": [round(x, 4) for x in per],
            "sum_of_local_top_k_f1": round(float(f1_at_k(truth, summed)), 4),
            "global_in_some_local": round(float(anywhere), 4)}


def encode_words(words: list[str] | np.ndarray, nbytes: int = 6) -> np.ndarray:
    """Words -> ``8 * nbytes``-bit items: the first ``nbytes`` UTF-8 bytes, zero padded."""
    out = np.zeros(len(words), dtype=np.uint64)
    for i, w in enumerate(words):
        b = str(w).encode("utf-8")[:nbytes].ljust(nbytes, b"\0")
        out[i] = int.from_bytes(b, "big")
    return out


def decode_item(item: int, nbytes: int = 6) -> str:
    """Inverse of :func:`encode_words` (best effort; trailing zero bytes removed)."""
    return int(item).to_bytes(nbytes, "big").rstrip(b"\0").decode("utf-8", errors="replace")


def from_csv(path: str | pathlib.Path, bits: int = 48) -> Population:
    """Read ``party,user,item`` rows (a header row is skipped if present).

    Items that are decimal integers are used as they are; anything else is treated as a
    word and encoded with :func:`encode_words` (``bits`` must then be 48). A user may
    appear once per party.

    Raises:
        FederatedError: on a malformed file, duplicate users or oversized items.
    """
    path = pathlib.Path(path)
    rows: dict[str, list[tuple[str, str]]] = {}
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            for lineno, row in enumerate(csv.reader(fh), 1):
                if not row or (lineno == 1 and [c.strip().lower() for c in row[:3]] == ["party", "user", "item"]):
                    continue
                if len(row) != 3:
                    raise FederatedError(f"{path}:{lineno}: expected 3 columns party,user,item")
                rows.setdefault(row[0].strip(), []).append((row[1].strip(), row[2].strip()))
    except (OSError, UnicodeDecodeError) as exc:
        raise FederatedError(f"cannot read {path}: {exc}") from exc
    if not rows:
        raise FederatedError(f"{path}: no rows")
    parties = []
    for name, recs in rows.items():
        users = [u for u, _ in recs]
        if len(set(users)) != len(users):
            raise FederatedError(f"{path}: party {name!r} lists a user twice (one item per user)")
        raw = [it for _, it in recs]
        if all(x.isdigit() for x in raw):
            vals = [int(x) for x in raw]
            if max(vals) >= 1 << bits:
                raise FederatedError(f"{path}: party {name!r} has an item with more than {bits} bits")
            items = np.array(vals, dtype=np.uint64)
        else:
            if bits != 48:
                raise FederatedError("word items need bits = 48")
            items = encode_words(raw)
        parties.append(Party(name, items))
    return Population(tuple(parties), bits)


def _word_counts(n_words: int) -> tuple[list[str], np.ndarray]:
    """The ``n_words`` most frequent English words and their wordfreq frequencies."""
    from wordfreq import top_n_list, word_frequency

    words = top_n_list("en", n_words)
    return words, np.array([word_frequency(w, "en") for w in words], dtype=float)


def words_population(users: int = 200_000, parties: int = 4, seed: int = 0,
                     n_words: int = 5000, skew: float = 2.0) -> Population:
    """Parties of users holding English words, with party-specific preferences.

    Each party reweights the common word distribution by a random log-normal factor per
    word (``sigma = skew``), so parties disagree on their heavy hitters (non-IID) while
    sharing a vocabulary; party sizes decrease geometrically (ratio 0.7).

    Raises:
        FederatedError: on non-positive sizes.
    """
    if users < parties or parties < 1 or n_words < 2:
        raise FederatedError("need users >= parties >= 1 and n_words >= 2")
    words, freq = _word_counts(n_words)
    items = encode_words(words)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x3D]))
    w = 0.7 ** np.arange(parties)
    sizes = np.maximum(1, np.round(users * w / w.sum()).astype(int))
    out = []
    for i, n in enumerate(sizes):
        p = freq * rng.lognormal(0.0, skew, size=freq.size)
        out.append(Party(f"words{i}", items[rng.choice(freq.size, size=int(n), p=p / p.sum())]))
    return Population(tuple(out), 48)


def load_population(source: str, seed: int = 0, beta: float = 0.5, scale: float = 1.0,
                    own: float = RegimeParams.own) -> Population:
    """``"syn"``, ``"regime"`` (:func:`regime_population` with knob ``own``), ``"words"``
    or a CSV path.

    Raises:
        FederatedError: for a missing file or a malformed source.
    """
    if source == "syn":
        return syn_population(seed=seed, beta=beta, scale=scale)
    if source == "regime":
        return regime_population(own, seed=seed, scale=scale)
    if source == "words":
        return words_population(users=int(200_000 * scale), seed=seed)
    p = pathlib.Path(source)
    if not p.exists():
        raise FederatedError(f"no such dataset: {source!r} (use syn, regime, words or a CSV "
                             "path)")
    return from_csv(p)
