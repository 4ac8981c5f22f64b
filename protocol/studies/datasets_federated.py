"""Multi-party populations for the federated heavy-hitter mechanisms.

SYN (Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with Local Differential Privacy",
section 7.1 and Table 2), regenerated from its description
-----------------------------------------------------------------------------------
The paper draws item domains for eight parties from the Tmall logs with a Dirichlet
split: all items are sorted into ``N = 6`` groups; each party samples
``q ~ Dir_N(beta = 0.5)`` and takes a ``q_j`` proportion of the items of group ``j``; the
users' frequencies follow Zipf or Poisson laws with the parameters of Table 2. The
Tmall item list is not available here, so we substitute:

* a universe of ``6 x group_size`` items (``group_size = 6000``: a party then holds about
  6,000 distinct items, the order of Table 2's 4,429 - 6,796) with distinct random 48-bit
  ids, in a random global popularity order; item ``r`` of that order belongs to group
  ``r mod 6``;
* party ``i`` takes the ``round(q_j * group_size)`` globally most popular items of group
  ``j`` (a real catalogue share contains a shop's best sellers; this also produces
  items common to all parties, as Table 2's "# common items" column shows);
* the party's items are ranked by the global order and each user draws a rank:
  Zipf(``a``): ``P(r) ∝ (r+1)^-a`` over the party's items; Poisson(``lam``): with
  probability 0.5 ``r ~ Poisson(lam)`` (clipped), otherwise ``r`` uniform over the party's
  items. A pure Poisson over ranks would put 220,000 users on about 30 items, while
  Table 2 lists 5,484 distinct items for that party; the uniform half restores a long
  tail.

Party sizes and laws are Table 2's: 220k Poisson(10), 170k Poisson(8), 120k Zipf(1.1),
80k Zipf(1.3), 70k Poisson(6), 60k Poisson(4), 30k Zipf(1.5), 30k Zipf(1.7): 780,000
users. Everything is reproducible from ``seed``.

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

__all__ = ["SYN_PARTIES", "SynParty", "syn_population", "encode_words", "decode_item",
           "from_csv", "words_population", "load_population"]


@dataclass(frozen=True)
class SynParty:
    """One SYN party of Table 2: size and frequency law ("zipf" or "poisson", parameter)."""

    name: str
    users: int
    law: str
    param: float


SYN_PARTIES: tuple[SynParty, ...] = (
    SynParty("SYN0", 220_000, "poisson", 10.0),
    SynParty("SYN1", 170_000, "poisson", 8.0),
    SynParty("SYN2", 120_000, "zipf", 1.1),
    SynParty("SYN3", 80_000, "zipf", 1.3),
    SynParty("SYN4", 70_000, "poisson", 6.0),
    SynParty("SYN5", 60_000, "poisson", 4.0),
    SynParty("SYN6", 30_000, "zipf", 1.5),
    SynParty("SYN7", 30_000, "zipf", 1.7),
)


def _draw_ranks(rng: np.random.Generator, spec: SynParty, n: int, d: int) -> np.ndarray:
    if spec.law == "zipf":
        w = np.arange(1, d + 1, dtype=float) ** (-spec.param)
        return rng.choice(d, size=n, p=w / w.sum())
    if spec.law == "poisson":
        r = np.minimum(rng.poisson(spec.param, size=n), d - 1)
        tail = rng.random(n) < 0.5
        r[tail] = rng.integers(0, d, size=int(tail.sum()))
        return r
    raise FederatedError(f"unknown law {spec.law!r}")


def syn_population(seed: int = 0, beta: float = 0.5, scale: float = 1.0, groups: int = 6,
                   group_size: int = 6000, bits: int = 48, taste: float = 1.0,
                   parties: tuple[SynParty, ...] = SYN_PARTIES) -> Population:
    """The SYN population (see the module docstring).

    Args:
        seed: generator seed (same seed, same population).
        beta: Dirichlet concentration (0.2, 0.5, 0.8 in Table 8).
        scale: multiply every party size (e.g. 0.1 for fast tests).
        groups: number of item groups ``N``.
        group_size: items per group.
        bits: item length.

    Raises:
        FederatedError: on non-positive parameters.
    """
    if beta <= 0 or scale <= 0 or groups < 1 or group_size < 1:
        raise FederatedError("beta, scale, groups and group_size must be positive")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A4E]))
    universe = groups * group_size
    ids = np.unique(rng.integers(0, 1 << bits, size=universe + 64, dtype=np.uint64))
    ids = rng.permutation(ids)[:universe]  # ids[r]: item of global popularity rank r
    by_group = [np.arange(j, universe, groups) for j in range(groups)]  # global ranks
    out = []
    for spec in parties:
        q = rng.dirichlet(np.full(groups, beta))
        ranks = np.concatenate([g_[:int(round(qj * group_size))] for g_, qj in zip(by_group, q)])
        if ranks.size == 0:
            ranks = by_group[int(np.argmax(q))][:1]
        # party-specific taste: sort by log global popularity plus Gaussian noise
        key = -np.log1p(ranks.astype(float)) + taste * rng.standard_normal(ranks.size)
        ranks = ranks[np.argsort(-key, kind="stable")]
        n = max(1, int(round(spec.users * scale)))
        r = _draw_ranks(rng, spec, n, ranks.size)
        out.append(Party(spec.name, ids[ranks[r]]))
    return Population(tuple(out), bits)


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


def load_population(source: str, seed: int = 0, beta: float = 0.5, scale: float = 1.0) -> Population:
    """``"syn"``, ``"words"`` or a CSV path.

    Raises:
        FederatedError: for a missing file or a malformed source.
    """
    if source == "syn":
        return syn_population(seed=seed, beta=beta, scale=scale)
    if source == "words":
        return words_population(users=int(200_000 * scale), seed=seed)
    p = pathlib.Path(source)
    if not p.exists():
        raise FederatedError(f"no such dataset: {source!r} (use syn, words or a CSV path)")
    return from_csv(p)
