"""TrieHH (Zhu et al., "Federated Heavy Hitters Discovery with Differential Privacy",
AISTATS 2020) as a Flower app: a ServerApp that runs TrieHH's rounds over Flower's
messaging with our secure aggregation, and a ClientApp whose node holds its own word
and votes as :class:`mechanisms.triehh.ClientVoter` does.

* **Server** (:func:`make_server_app`): :meth:`mechanisms.triehh.TrieHH.at_server`
  (it samples, builds each level's candidates and grows the trie; it never holds a
  word) over :class:`FlowerVoteTransport`, a transport whose clients vote themselves
  (``contributions_at_clients``): each round's sampled users are Flower nodes (a
  node's population index is its PKI identity, ``partition-id`` in the simulation
  engine), and their one-hot votes are summed by one session of our secure aggregation
  (:class:`~protocol.flower.workflow.SessionDriver`) modulo
  :func:`~protocol.core.transports.secagg_transport.vote_modulus`. The release is the
  in-process transport's (:func:`~protocol.core.transports.secagg_transport.sum_release`):
  only the candidates with at least ``theta`` votes. With the same options and seed as
  ``fedhh triehh`` the server samples the same users, so without dropouts the heavy
  hitters are the same.
* **Client** (:func:`make_client_app`): on a session's offer the node checks the
  application description (task, level, candidates), refuses to vote twice at one level
  of one task (its ledger, kept in its ``Context``: TrieHH's privacy analysis counts
  one vote per level), votes with its :class:`~mechanisms.triehh.ClientVoter`, and
  sends the one-hot vector only masked.

The population comes from :func:`protocol.studies.runners.triehh.prepare` with the
run's options on both sides (the server for its size, alphabet and parameters, and
for the summary against the truth; each node for its own word only).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import time
from typing import Any

import numpy as np

from protocol.core.contract import (
    AggregationAborted, AtClients, ContractError, Cost, Kind, RoundResult, RoundSpec,
    Transport,
)
from protocol.core.transports.secagg_transport import sum_release, vote_modulus
from protocol.flower.session import FlowerSecAggError, Offer, Policy
from protocol.flower.workflow import SessionDriver

__all__ = ["FlowerVoteTransport", "make_server_app", "make_client_app", "TRIEHH_APP",
           "options_from_config", "check_vote_offer", "vote_once", "plain_client",
           "none_found_reason"]

#: the ``kind`` of the offer's application description for a TrieHH vote round
TRIEHH_APP = "triehh-vote"
LEDGER_RECORD = "fedhh.triehh.ledger"


class FlowerVoteTransport(Transport):
    """Vote rounds whose sampled users are Flower nodes that vote themselves.

    Args:
        grid: the ServerApp's ``Grid``.
        driver: the session driver (policy, PKI, timeout).
        population: the population's size (user ``i`` is the node of identity ``i``).
    """

    name = "secagg-flower"
    kinds = frozenset({Kind.VOTE})
    contributions_at_clients = True

    def __init__(self, grid: Any, driver: SessionDriver, population: int) -> None:
        self.grid, self.driver, self.population = grid, driver, population
        self.node_of: dict[int, int] = {}
        #: per round: (spec, sampled users, users in the sum, wall seconds, outcome)
        self.rounds: list[tuple[RoundSpec, list[int], list[int], float, Any]] = []

    def discover(self) -> None:
        """Ask every node of the grid for its identity (population index)."""
        nodes = list(self.grid.get_node_ids())
        for nid in self.driver.identify(self.grid, "triehh-identify", nodes):
            ident = self.driver.identities[nid]
            if ident < self.population:
                self.node_of[ident] = nid

    def run_round(self, spec: RoundSpec, contributions: Any,
                  rng: np.random.Generator) -> RoundResult:
        if not isinstance(contributions, AtClients):
            raise ContractError("the Flower transport's nodes vote themselves: give it "
                                f"AtClients, not {type(contributions).__name__}")
        users = np.sort(contributions.validate(spec, self.population)).tolist()
        nodes = [self.node_of[u] for u in users if u in self.node_of]
        wall0 = time.perf_counter()
        app = json.dumps({"kind": TRIEHH_APP, "task": spec.task, "level": spec.round,
                          "candidates": list(spec.candidates)})
        try:
            out = self.driver.run(self.grid, nodes, label=f"{spec.task} level {spec.round}",
                                  group=f"{spec.task}-{spec.round}",
                                  dim=spec.domain_size, modulus=vote_modulus(len(nodes)),
                                  app=app)
        except FlowerSecAggError as exc:
            raise AggregationAborted("secagg_not_started", str(exc)) from None
        user_of = {nid: u for u, nid in self.node_of.items()}
        in_sum = sorted(user_of[n] for n in out.survivors)
        self.rounds.append((spec, users, in_sum, time.perf_counter() - wall0, out))
        if out.total is None:
            raise AggregationAborted(f"secagg_{out.abort_reason or 'aborted'}",
                                     f"over Flower, level {spec.round}")
        release = sum_release(spec, out.total, len(out.survivors))
        views = {"server": {"sum": out.total.copy(), "sampled": users, "in_sum": in_sum}}
        cost = Cost({"server": out.server_seconds}, bytes_up=sum(out.bytes_up.values()),
                    bytes_down=sum(out.bytes_down.values()))
        return RoundResult(release, views, cost)


def options_from_config(config: Any) -> Any:
    """TrieHH's options from a Flower run config (keys ``dataset``, ``users``,
    ``epsilon``, ``delta``, ``max-length``, ``seed``, ``theta``, ``gamma``), or a
    :class:`~protocol.studies.runners.triehh.TrieHHOptions` as it is.

    Raises:
        FlowerSecAggError: an unknown key.
    """
    from protocol.studies.runners.triehh import TrieHHOptions

    if isinstance(config, TrieHHOptions):
        return config
    names = {"dataset": "dataset", "users": "users", "epsilon": "epsilon",
             "delta": "delta", "max-length": "max_length", "seed": "seed",
             "theta": "theta", "gamma": "gamma"}
    extra = set(config) - set(names) - {"fedhh-pki", "threat", "output"}
    if extra:
        raise FlowerSecAggError(f"unknown TrieHH options {sorted(extra)}")
    kw = {names[k]: v for k, v in config.items() if k in names}
    return TrieHHOptions(transport="secagg-flower", **kw)


@functools.lru_cache(maxsize=4)
def _prepared(opts: Any) -> Any:
    """The population and parameters for ``opts``, once per process (the nodes' side:
    the run's randomness it also returns is never used from here)."""
    from protocol.studies.runners import triehh

    return triehh.prepare(opts)


def none_found_reason(prep: Any, sampled: int) -> str:
    """Why a TrieHH run released nothing, in one line: the threshold ``theta``, the
    users sampled per level (``sampled``), the fewest holders a word needs to pass at
    all (``theta``) and in expectation (``theta n / sampled``), and how many hold the
    population's most common word (the simulation knows its population)."""
    import math

    theta, n = int(prep.config.theta), int(prep.n)
    pop = prep.population
    top = ""
    ranking = pop.ranking()
    if len(ranking):
        w = int(ranking[0])
        top = (f"; the most common word, {pop.vocabulary[w]!r}, has "
               f"{int(pop.holders()[w])} of the {n} users")
    if sampled <= 0:
        return (f"no heavy hitters: no user was sampled (theta = {theta}, {n} users){top}")
    needed = min(n, math.ceil(theta * n / sampled))
    return (f"no heavy hitters: a prefix needs theta = {theta} votes among the {sampled} "
            f"users sampled per level, so a word must be held by at least {theta} of the "
            f"{n} users to pass at all and by about {needed} ({100 * needed / n:.0f} %) to "
            f"pass in expectation{top} (more users or a larger epsilon lower the bar)")


def make_server_app(opts: Any, *, threat: str = "malicious", pki: str | None = None,
                    timeout: float | None = None, out: dict | None = None,
                    **policy: Any) -> Any:
    """The ServerApp: TrieHH over our secure aggregation among the grid's nodes; the
    summary (``fedhh triehh``'s JSON) goes into ``out["summary"]`` and the Flower
    transport into ``out["transport"]`` when ``out`` is given, and is logged.

    Raises:
        FlowerSecAggError: bad options or policy.
    """
    from flwr.serverapp import ServerApp

    opts = options_from_config(opts)
    driver = SessionDriver(Policy(threat=threat, **policy), pki, timeout)
    app = ServerApp()

    @app.main()
    def main(grid: Any, context: Any) -> None:
        from logging import INFO, WARNING

        from flwr.supercore import log

        from protocol.studies.runners import triehh

        t0 = time.perf_counter()
        prep, rng = triehh.prepare(opts)  # a fresh run randomness for every run
        transport = FlowerVoteTransport(grid, driver, prep.n)
        transport.discover()
        log(INFO, "TrieHH over fedhh secure aggregation: %s of %s users reachable",
            len(transport.node_of), prep.n)
        if len(transport.node_of) < prep.n:
            log(WARNING, "TrieHH: %s of the %s users have a node (one node per user; "
                "Flower's local simulation: flwr run . --federation-config "
                "\"num-supernodes=%s\")", len(transport.node_of), prep.n, prep.n)
        t1 = time.perf_counter()
        result = triehh.run_once(prep, transport, rng)
        summary = triehh.summarize(prep, result)
        summary["seconds"] = {"load": round(t1 - t0, 3),
                              "run": round(time.perf_counter() - t1, 3)}
        summary["flower_rounds"] = [
            {"level": spec.round, "sampled": len(users), "in_sum": len(in_sum),
             "wall_seconds": round(w, 3)} for spec, users, in_sum, w, _ in transport.rounds]
        if out is not None:
            out["summary"], out["transport"] = summary, transport
        words = [h["word"] for h in summary["heavy_hitters"]]
        if not words:
            summary["none_reason"] = none_found_reason(prep, _sampled(summary))
            log(WARNING, "TrieHH: %s", summary["none_reason"])
        log(INFO, "TrieHH heavy hitters: %s", words)

    return app


def make_client_app(opts: Any, *, threat: str = "malicious", pki: str | None = None,
                    **policy: Any) -> Any:
    """The ClientApp: node ``partition-id`` (or ``fedhh-identity``) holds that user's
    word and votes in TrieHH's sessions; every other message is refused.

    Raises:
        FlowerSecAggError: bad options or policy.
    """
    from flwr.clientapp import ClientApp

    from protocol.flower.node import handle, session_record

    opts = options_from_config(opts)
    pol = Policy(threat=threat, **policy)
    app = ClientApp()
    check = functools.partial(check_vote_offer, opts)

    @app.train()
    def train(msg: Any, ctxt: Any) -> Any:
        from flwr.app import ConfigRecord

        session_record(msg.content.config_records)
        ledger = ctxt.state.config_records.get(LEDGER_RECORD)
        voted = list(ledger["voted"]) if ledger is not None and "voted" in ledger else []

        def vote(sess: Any, _msg: Any, _ctxt: Any) -> tuple[np.ndarray, None]:
            v = vote_once(voted, sess)
            ctxt.state.config_records[LEDGER_RECORD] = ConfigRecord({"voted": voted})
            return v, None

        return handle(msg, ctxt, policy=pol, pki=pki, check_app=check, make_input=vote)

    return app


def plain_client(opts: Any, *, threat: str = "malicious", pki: str | None = None,
                 **policy: Any) -> Any:
    """The ClientApp's node without Flower, for :class:`protocol.flower.plain.PlainGrid`:
    the same checks (:func:`check_vote_offer`), ledger (:func:`vote_once`, kept in the
    node's state) and refusal of requests without a session.

    Raises:
        FlowerSecAggError: bad options or policy.
    """
    from protocol.flower.node import respond, session_record

    opts = options_from_config(opts)
    pol = Policy(threat=threat, **policy)
    check = functools.partial(check_vote_offer, opts)

    def node(records: dict, nid: int, state: dict, node_config: dict) -> tuple[dict, None]:
        rec = session_record(records)
        voted = state.setdefault("voted", [])
        out, _ = respond(rec, nid, state, node_config, policy=pol, pki=pki,
                         check_app=check,
                         make_input=lambda sess, _m, _c: (vote_once(voted, sess), None))
        return out, None

    return node


def check_vote_offer(opts: Any, offer: Offer, node_config: Any) -> tuple[str, int]:
    """A TrieHH node's check of a vote session's offer (task, level, candidates,
    modulus); returns its ledger key and its vote (a candidate index or ``-1``).

    Raises:
        FlowerSecAggError: not a well-formed TrieHH vote offer for this node.
    """
    from mechanisms.triehh import ClientVoter, TrieHHError
    from protocol.flower.session import identity_of

    doc = offer.app_json()
    if (not isinstance(doc, dict) or set(doc) != {"kind", "task", "level", "candidates"}
            or doc["kind"] != TRIEHH_APP):
        raise FlowerSecAggError("not a TrieHH vote offer")
    cands, level, task = doc["candidates"], doc["level"], doc["task"]
    if (not isinstance(cands, list) or not all(isinstance(c, str) for c in cands)
            or len(set(cands)) != len(cands) or len(cands) != offer.dim
            or type(level) is not int or not isinstance(task, str)):
        raise FlowerSecAggError("the offer's candidates, level or task are malformed")
    if offer.modulus != vote_modulus(offer.n):
        raise FlowerSecAggError("a vote session's modulus is vote_modulus(n)")
    prep, _ = _prepared(opts)
    me = identity_of(node_config)
    if me >= prep.n:
        raise FlowerSecAggError(f"identity {me} is outside the population of {prep.n}")
    try:
        voter = ClientVoter(prep.data, [me], prep.alphabet, prep.config.max_levels)
        choice = int(voter.votes([me], level, cands)[0])
    except TrieHHError as exc:
        raise FlowerSecAggError(str(exc)) from None
    return (f"{task}:{level}", choice)


def vote_once(voted: list[str], sess: Any) -> np.ndarray:
    """The one-hot vote of a session whose offer passed :func:`check_vote_offer`, after
    the node's ledger ``voted`` (updated in place) shows it has not voted at this level
    of this task (TrieHH's analysis counts one vote per level).

    Raises:
        FlowerSecAggError: the node already voted there.
    """
    key, choice = sess.app
    if key in voted:
        raise FlowerSecAggError(f"this node already voted at {key}")
    voted.append(key)
    v = np.zeros(sess.offer.dim, dtype=np.uint64)
    if choice >= 0:
        v[choice] = 1
    return v


def run_app(opts: Any, *, engine: str = "local", threat: str = "malicious",
            compare: bool = True, num_cpus: int = 2, **policy: Any) -> dict[str, Any]:
    """Run the TrieHH Flower app with one node per user (``engine`` ``"local"``: the
    in-process grid; ``"ray"``: Flower's simulation engine) and, with ``compare``,
    ``fedhh triehh``'s in-process run over the plaintext transport with the same
    options and seed; report both sets of heavy hitters and whether they are equal.

    Raises:
        FlowerSecAggError: bad options or engine.
        protocol.studies.errors.StudyError: TrieHH refuses the options.
    """
    import logging
    import os
    import tempfile

    from protocol.core.contract import plaintext_transport
    from protocol.flower.session import write_pki
    from protocol.studies.runners import triehh

    if engine not in ("local", "ray"):
        raise FlowerSecAggError(f"engine must be local or ray, got {engine!r}")
    opts = options_from_config(opts)
    nodes = _prepared(opts)[0].n
    out: dict[str, Any] = {}
    logging.getLogger("flwr").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as pki:
        if threat == "malicious":
            write_pki(pki, nodes)
        server = make_server_app(opts, threat=threat, pki=pki, out=out, **policy)
        client = make_client_app(opts, threat=threat, pki=pki, **policy)
        t0 = time.perf_counter()
        if engine == "local":
            from protocol.flower.local import LocalGrid, serve

            serve(server, LocalGrid(client, nodes))
        else:
            os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
            from flwr.simulation import run_simulation

            run_simulation(server, client, num_supernodes=nodes,
                           backend_config={"client_resources": {"num_cpus": 1,
                                                                "num_gpus": 0.0},
                                           "init_args": {"num_cpus": num_cpus,
                                                         "include_dashboard": False}})
        wall = time.perf_counter() - t0
    if "summary" not in out:
        raise FlowerSecAggError("the ServerApp did not finish TrieHH")
    s = out["summary"]
    res: dict[str, Any] = {
        "users": nodes, "engine": engine, "threat": threat,
        "wall_seconds": round(wall, 1),
        "levels": s["flower_rounds"],
        "heavy_hitters": [h["word"] for h in s["heavy_hitters"]],
        "flower_summary": s,
    }
    if not res["heavy_hitters"]:
        res["none_reason"] = s.get("none_reason") or none_found_reason(
            _prepared(opts)[0], _sampled(s))
    if compare:
        ref = triehh.run(dataclasses.replace(opts, transport="plain"), plaintext_transport())
        res["fedhh_triehh_heavy_hitters"] = [h["word"] for h in ref["heavy_hitters"]]
        res["same_heavy_hitters"] = res["heavy_hitters"] == res["fedhh_triehh_heavy_hitters"]
    return res




def _sampled(summary: dict) -> int:
    """Users sampled per level in a run's summary (``m``)."""
    m = summary.get("privacy", {}).get("m")
    if m is None and summary.get("rounds"):
        m = summary["rounds"][0]["sampled"]
    return int(m or 0)
