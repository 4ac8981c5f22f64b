"""Attacks by a TrieHH server (Zhu et al., AISTATS 2020, Algorithms 1-2 and Theorem 1).

Theory of operation
-------------------
TrieHH's privacy comes from three server duties: show every client the *same* trie
(candidate set), sample ``m = gamma sqrt(n)`` users uniformly at random each round, and
release only prefixes with at least ``theta`` votes. Theorem 1 gives, per level,
``epsilon_1 = ln(1 + 1/(sqrt(n)/(gamma theta) - 1))`` and ``delta = (theta-2)/((theta-3)
theta!)``. Each attack breaks one duty:

* :func:`mixed_tries` -- different tries to different clients. Over the secure
  aggregation transport the session id hashes the round specification (candidate set
  included, :func:`protocol.core.transports.secagg_transport.spec_context`), so clients
  shown different tries derive unrelated pairwise keys: every share ciphertext fails
  to authenticate and nothing can be aggregated. A small driver here runs honest
  clients built on two configurations against one honest server (the engine builds
  all clients from one configuration, so it cannot express this).
* :func:`targeted_sampling` -- the server always includes a target user. With
  ``c`` holders of the target's word, ``X ~ Hypergeom(n, c, m)`` votes arrive honestly,
  ``1 + Hypergeom(n-1, c-1, m-1)`` under targeting, and ``Hypergeom(n-1, c-1, m')``
  without the target (``m' = floor(gamma sqrt(n-1))``). The implied lower bound on
  epsilon is ``ln((P_target[release] - delta) / P_without[release])`` (and the other
  direction on "not released"), compared with ``epsilon_1``; a Monte Carlo run of the
  real :class:`mechanisms.triehh.TrieHH` with the sampling replaced confirms the
  exact discovery probabilities.
* :func:`lowered_theta` -- the server releases with ``theta' < theta``: we count
  released prefixes whose vote count is below the claimed ``theta``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import hypergeom

from mechanisms.prefix_tree import UnitAlphabet
from mechanisms.triehh import TrieHH, TrieHHConfig, encode_population
from mechanisms.triehh_privacy import batch_size, theorem1, theorem1_delta
from protocol.core import codec
from protocol.core import wire_secagg  # noqa: F401  (registers the message types)
from protocol.core.contract import Kind, RoundSpec
from protocol.studies.attacks import Outcome, attack
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import make_config
from protocol.core.transports.plain import PlainTransport
from protocol.core.transports.secagg_transport import spec_context
from secagg.client import SecAggClient
from secagg.errors import SecAggError
from secagg.server import SecAggServer
from secagg.state import ServerState

__all__ = ["drive_mixed_session", "TargetedTrieHH", "targeted_release_probabilities"]


def drive_mixed_session(client_configs: list[Any], server_config: Any, inputs: np.ndarray,
                        seed: int) -> tuple[SecAggServer, list[SecAggClient]]:
    """Run one session whose clients may hold *different* configurations.

    Every message goes through :mod:`protocol.core.codec`. Client ``i`` uses
    ``client_configs[i]``; the server uses ``server_config``.
    """
    rand = insecure_deterministic_randomness(seed, "mixed-session")
    clients = [SecAggClient(cfg, i, inputs[i], rand.child(f"client-{i}"))
               for i, cfg in enumerate(client_configs)]
    server = SecAggServer(server_config)

    def up(msgs: list[Any]) -> None:
        for m in msgs:
            try:
                server.receive(codec.decode(codec.encode(m)))
            except SecAggError:
                pass

    for c in clients:
        up(c.start())
    while server.state not in (ServerState.COMPLETED, ServerState.ABORTED):
        for recipient, msg in server.close_round():
            try:
                up(clients[recipient].receive(codec.decode(codec.encode(msg))))
            except SecAggError:
                pass
    return server, clients


def _spec(candidates: tuple[str, ...]) -> RoundSpec:
    return RoundSpec("triehh", 2, Kind.VOTE, candidates=candidates, theta=3)


@attack("triehh.mixed_tries", system="triehh",
        target="TrieHH Algorithm 1 step 3 (one public trie per round) over secure "
               "aggregation: the session id binds the round specification",
        expected="clients shown trie A and trie B in one session: every honest client "
                 "aborts with decryption_failed, the server aborts, nothing is released")
def mixed_tries(seed: int) -> Outcome:
    """Different tries to different clients: half the clients see candidates extending
    prefix "ab", half extending "ba" (same number of candidates, so the vectors fit)."""
    n = 8
    cand_a = tuple("ab" + u for u in "abcd")
    cand_b = tuple("ba" + u for u in "abcd")
    cfg_a = make_config(n, len(cand_a), graph="complete", threshold=3,
                        context=spec_context(_spec(cand_a)))
    cfg_b = make_config(n, len(cand_b), graph="complete", threshold=3,
                        context=spec_context(_spec(cand_b)))
    votes = np.zeros((n, len(cand_a)), dtype=np.uint64)
    votes[np.arange(n), np.arange(n) % len(cand_a)] = 1
    mixed = [cfg_a if i < n // 2 else cfg_b for i in range(n)]
    server, clients = drive_mixed_session(mixed, cfg_a, votes, seed)
    control, _ = drive_mixed_session([cfg_a] * n, cfg_a, votes, seed)
    reasons = {f"client {c.index} (trie {'A' if c.index < n // 2 else 'B'})":
               (c.abort_reason.value if c.abort_reason else c.state.value) for c in clients}
    reasons["server"] = server.abort_reason.value if server.abort_reason else server.state.value
    ok = (all(c.abort_reason is not None and c.abort_reason.value == "decryption_failed"
              for c in clients) and server.state is ServerState.ABORTED
          and server.result is None and control.state is ServerState.COMPLETED)
    return Outcome("triehh.mixed_tries", "all clients decryption_failed, server aborts",
                   f"client aborts: {sorted(set(v for k, v in reasons.items() if k != 'server'))}"
                   f"; server: {reasons['server']}; same trie for all (control): "
                   f"{control.state.value}", ok, reasons, {"released": server.result is not None})


class TargetedTrieHH(TrieHH):
    """TrieHH whose server always includes ``target`` in its sample (still ``m`` users)."""

    target: int = 0

    def sample(self) -> np.ndarray:
        s = super().sample()  # ascending: replace a uniformly chosen position, not the first
        if self.target not in s:
            assert self._drawn is not None
            s[int.from_bytes(self._drawn.beacon.seed[:8], "little") % s.size] = self.target
        return s


def targeted_release_probabilities(n: int, holders: int, m: int, theta: int,
                                   m_without: int) -> dict[str, float]:
    """Exact release probabilities of one word held by ``holders`` users (target included).

    Returns ``honest`` (uniform sample of ``m`` from ``n``), ``targeted`` (target always
    sampled) and ``without`` (the neighbouring population without the target).
    """
    return {
        "honest": float(hypergeom.sf(theta - 1, n, holders, m)),
        "targeted": float(hypergeom.sf(theta - 2, n - 1, holders - 1, m - 1)),
        "without": float(hypergeom.sf(theta - 1, n - 1, holders - 1, m_without)),
    }


def _implied_epsilon(p_a: float, p_b: float, delta: float) -> float:
    """Best of the two events {released}, {not released} (pure outputs of one level)."""
    best = 0.0
    for x, y in ((p_a, p_b), (1 - p_a, 1 - p_b), (p_b, p_a), (1 - p_b, 1 - p_a)):
        if x - delta > 0 and y > 0:
            best = max(best, math.log((x - delta) / y))
    return best


@attack("triehh.targeted_sampling", system="triehh", kind="measured",
        target="TrieHH Algorithm 1 step 1 / Theorem 1: uniform sampling of m users",
        expected="always sampling the target raises its word's discovery probability and "
                 "the implied epsilon lower bound exceeds the claimed per-level epsilon; "
                 "honest sampling stays below it")
def targeted_sampling(seed: int) -> Outcome:
    """A server that samples the target user every round instead of at random."""
    n, theta, gamma = 10_000, 10, 2.0
    m, m_wo = batch_size(gamma, n), batch_size(gamma, n - 1)
    claim = theorem1(theta, gamma, n, 1)
    delta = theorem1_delta(theta)
    rows = []
    for c in range(theta, 1200, 10):
        p = targeted_release_probabilities(n, c, m, theta, m_wo)
        rows.append((c, p, _implied_epsilon(p["targeted"], p["without"], delta),
                     _implied_epsilon(p["honest"], p["without"], delta)))
    c_star, p_star, eps_t, _ = max(rows, key=lambda r: r[2])
    # a word only the target holds: thresholding alone keeps it hidden (theta >= 2 votes)
    unique = targeted_release_probabilities(n, 1, m, theta, m_wo)
    eps_honest_max = max(r[3] for r in rows)
    # a word common enough to be found half the time under targeting: Monte Carlo there
    c_mc, p_mc, eps_mc, _ = min(rows, key=lambda r: abs(r[1]["targeted"] - 0.5))
    # Monte Carlo with the real mechanism at c_star: one level, one-character words
    alphabet = UnitAlphabet("abcdefghijklmnopqrstuvwxyz", 2)
    holders = np.zeros(n, dtype=np.int64)           # word 0 = "q", word 1 = "a"
    holders[c_mc:] = 1
    data = encode_population(["q", "a"], np.arange(n + 1), holders,
                             np.ones(n, dtype=np.int64), alphabet, 1)
    cfg = TrieHHConfig(theta=theta, gamma=gamma, max_levels=1, task="target")
    runs = 300
    rng = np.random.default_rng(seed)
    hits = {"honest": 0, "targeted": 0}
    for _ in range(runs):
        for name, cls in (("honest", TrieHH), ("targeted", TargetedTrieHH)):
            res = cls(data, alphabet, cfg, PlainTransport(), rng).result()
            hits[name] += "q" in res.heavy_hitters
    mc = {k: v / runs for k, v in hits.items()}
    # 4 standard errors on each of two binomial proportions: false alarm < 1e-4
    se = lambda q: math.sqrt(q * (1 - q) / runs)  # noqa: E731
    ok = (eps_t > claim.epsilon and eps_mc > claim.epsilon and eps_honest_max <= claim.epsilon
          and abs(mc["targeted"] - p_mc["targeted"]) < 4 * se(p_mc["targeted"]) + 0.01
          and abs(mc["honest"] - p_mc["honest"]) < 4 * se(p_mc["honest"]) + 0.01
          and unique["targeted"] == 0.0)
    return Outcome("triehh.targeted_sampling", "implied epsilon > claimed; honest below",
                   f"word held by {c_mc} users: discovery {p_mc['honest']:.3f} honest (MC "
                   f"{mc['honest']:.3f}), {p_mc['targeted']:.3f} targeted (MC "
                   f"{mc['targeted']:.3f}, {runs} runs), {p_mc['without']:.3f} without the "
                   f"target, implied epsilon {eps_mc:.3f}; worst case ({c_star} holders) "
                   f"{eps_t:.3f}; claimed {claim.epsilon:.3f} per level; a word only the "
                   f"target holds: discovery {unique['targeted']:.0f} even when targeted",
                   ok, {"server": "targets user 0"},
                   {"n": n, "m": m, "theta": theta, "gamma": gamma, "holders": c_mc,
                    "p_release_honest": p_mc["honest"],
                    "p_release_targeted": p_mc["targeted"],
                    "p_release_without_target": p_mc["without"],
                    "implied_epsilon_at_holders": eps_mc, "worst_case_holders": c_star,
                    "unique_word_discovery_targeted": unique["targeted"],
                    "unique_word_discovery_honest": unique["honest"],
                    "monte_carlo_targeted": mc["targeted"], "monte_carlo_honest": mc["honest"],
                    "implied_epsilon_targeted": eps_t,
                    "implied_epsilon_honest_max": eps_honest_max,
                    "claimed_epsilon_per_level": claim.epsilon, "delta": delta})


@attack("triehh.lowered_theta", system="triehh", kind="measured",
        target="TrieHH Algorithm 2 (threshold theta) / Theorem 1's condition theta >= 4",
        expected="a server releasing with theta' = 2 while claiming theta = 10 releases "
                 "prefixes with fewer than 10 votes (none in the honest run)")
def lowered_theta(seed: int) -> Outcome:
    """A server that lowers theta: compare the released prefixes and their vote counts."""
    rng = np.random.default_rng(seed)
    alphabet = UnitAlphabet("abcdefgh", 1)
    letters = np.array(list("abcdefgh"))
    vocab = sorted({"".join(rng.choice(letters, int(rng.integers(2, 5)))) for _ in range(300)})
    n, L = 10_000, 5
    ranks = rng.zipf(1.2, n) - 1
    items = np.minimum(ranks, len(vocab) - 1).astype(np.int64)
    data = encode_population(vocab, np.arange(n + 1), items, np.ones(n, dtype=np.int64),
                             alphabet, L)
    theta, low, gamma = 10, 2, 5.0
    out = {}
    for name, th in (("claimed", theta), ("lowered", low)):
        cfg = TrieHHConfig(theta=th, gamma=gamma, max_levels=L, task="low",
                           release_counts=True)
        res = TrieHH(data, alphabet, cfg, PlainTransport(), np.random.default_rng(seed)).result()
        counts = np.asarray(res.trie.count)[1:]
        out[name] = {"released_prefixes": int(counts.size),
                     "below_claimed_theta": int((counts < theta).sum()),
                     "heavy_hitters": len(res.heavy_hitters),
                     "guarantee": res.guarantee.epsilon if res.guarantee else res.guarantee_note}
    ok = (out["lowered"]["below_claimed_theta"] > 0 and out["claimed"]["below_claimed_theta"] == 0)
    return Outcome("triehh.lowered_theta", "sub-threshold prefixes released only when lowered",
                   f"theta={low}: {out['lowered']['below_claimed_theta']} of "
                   f"{out['lowered']['released_prefixes']} released prefixes had < {theta} votes "
                   f"(honest theta={theta}: {out['claimed']['below_claimed_theta']}); heavy "
                   f"hitters {out['claimed']['heavy_hitters']} -> "
                   f"{out['lowered']['heavy_hitters']}", ok, {"server": f"theta {theta}->{low}"},
                   {"claimed": out["claimed"], "lowered": out["lowered"]})


@attack("triehh.device_asked_again", system="triehh",
        target="the device's ledger in a job (JobPolicy: stale rounds, max_votes; "
               "ClientReporter: one report per job)",
        expected="a server that asks a TrieHH device for a round again, for an old round, "
                 "or for more than L rounds is refused (stale_round, budget_spent); a "
                 "frequency-oracle device asked again sends the same report, so "
                 "averaging 200 answers recovers nothing beyond one report")
def device_asked_again(seed: int) -> Outcome:
    """The server re-queries one device, in a TrieHH job and in a frequency-oracle job."""
    from mechanisms.fo import ClientReporter, make_oracle, vector_modulus
    from protocol.core.net.job import JobPolicy, _task_problem
    from protocol.core.net.messages import Task

    L = 4
    policy = JobPolicy("triehh", 100, max_votes=L)
    member = 7

    def task(rnd: int) -> Task:
        return Task("triehh", rnd, ("a", "b"), 2, False, 1, 0, 0, (1, 2, member, 9))

    answers = {"same round again": _task_problem(task(3), policy, 3, member, 1),
               "an old round": _task_problem(task(2), policy, 3, member, 1),
               f"a round after {L} votes": _task_problem(task(9), policy, 8, member, L),
               "the next round": _task_problem(task(4), policy, 3, member, 1)}
    oracle = make_oracle("grr", 1.0, 8)
    reporter = ClientReporter(oracle, np.array([5]), [member], ClientReporter.os_entropy)
    mod = vector_modulus(1)
    reports = {tuple(reporter.vector(member, r, oracle.vector_dim, mod, 1))
               for r in range(1, 201)}
    refused = [k for k, v in answers.items() if v is not None]
    ok = (set(refused) == set(answers) - {"the next round"}
          and answers["same round again"].startswith("stale_round")
          and answers[f"a round after {L} votes"].startswith("budget_spent")
          and len(reports) == 1 and reporter.reports_drawn == 1)
    return Outcome("triehh.device_asked_again",
                   "re-asked rounds refused; one report per job",
                   f"refused: {', '.join(refused)}; the next round answered; 200 asks of a "
                   f"frequency-oracle device gave {len(reports)} distinct report(s) "
                   f"({reporter.reports_drawn} randomisation)", ok,
                   {k: (v or "answered").split(":")[0] for k, v in answers.items()},
                   {"distinct_reports": len(reports)})
