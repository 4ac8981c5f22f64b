"""TrieHH++ (Cormode, "Federated Heavy Hitters Revisited", 2021) as a Flower app: a
ServerApp that grows TrieHH++'s trie over Flower's messaging with our secure
aggregation, and a ClientApp whose node holds its own item, decides itself whether it
takes part, and votes.

* **Server** (:func:`make_server_app`): :func:`mechanisms.triehhpp.run_triehhpp_at_server`
  (it contacts each level's ``s`` clients, builds the candidates and grows the trie from
  the released counts; it never holds an item, and never learns who takes part) over
  :class:`~protocol.flower.triehh_app.FlowerVoteTransport`: each level is one session of
  our secure aggregation among the contacted nodes.
* **Client** (:func:`make_client_app`): on a session's offer the node checks the
  application description (task ``triehhpp``, level, candidates) and refuses a second
  vote at one level (its ledger in its ``Context``). Whether it takes part is its own
  decision, which the server cannot see (section 2.1's deployment requirement):

  - ``participation="key"`` (default): :func:`mechanisms.triehhpp.keyed_participation`
    from the secret the nodes share (``participation.key`` of the node's PKI
    directory, written by ``fedhh flower keys``; a deployment never gives it to the
    server), over the roster of the session;
  - ``participation="replay"`` (simulation only): replayed from the run's seed with
    :class:`mechanisms.triehhpp.ReplayedParticipation`, so the release is exactly
    ``fedhh triehhpp``'s with the same options and seed (the server, which also holds
    the seed here, could replay it too).

  A taking-part node votes for its prefix (:func:`mechanisms.triehhpp.client_vote`),
  any other abstains; both send a vector masked the same way.

The flat variant (one round over public candidates) is not offered as a Flower app.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import numpy as np

from protocol.core.transports.secagg_transport import vote_modulus
from protocol.flower.session import FlowerSecAggError, Offer, Policy
from protocol.flower.triehh_app import LEDGER_RECORD, TRIEHH_APP, FlowerVoteTransport
from protocol.flower.workflow import SessionDriver

__all__ = ["make_server_app", "make_client_app", "options_from_config", "run_app",
           "PARTICIPATION"]

#: how a node decides whether it takes part
PARTICIPATION = ("key", "replay")


def options_from_config(config: Any) -> Any:
    """TrieHH++'s options from a Flower run config (keys ``dataset``, ``users``,
    ``epsilon``, ``delta``, ``max-length``, ``seed``, ``theta``, ``slack``, ``bound``,
    ``composition``), or a
    :class:`~protocol.studies.runners.triehhpp.TrieHHPPOptions` as it is.

    Raises:
        FlowerSecAggError: an unknown key, or the flat variant.
    """
    from protocol.studies.runners.triehhpp import TrieHHPPOptions

    if isinstance(config, TrieHHPPOptions):
        opts = config
    else:
        names = {"dataset": "dataset", "users": "users", "epsilon": "epsilon",
                 "delta": "delta", "max-length": "max_length", "seed": "seed",
                 "theta": "theta", "slack": "slack", "bound": "bound",
                 "composition": "composition"}
        extra = set(config) - set(names) - {"fedhh-pki", "threat", "output", "nodes"}
        if extra:
            raise FlowerSecAggError(f"unknown TrieHH++ options {sorted(extra)}")
        opts = TrieHHPPOptions(transport="secagg-flower",
                               **{names[k]: v for k, v in config.items() if k in names})
    if opts.flat:
        raise FlowerSecAggError("the flat variant of TrieHH++ is not a Flower app here")
    return opts


@functools.lru_cache(maxsize=4)
def _node_side(opts: Any) -> tuple[Any, np.ndarray, Any]:
    """The nodes' copy of the run, once per process: the prepared run, the unit matrix
    (a node reads only its own row) and the replayed participation (simulation)."""
    from mechanisms.triehhpp import ReplayedParticipation
    from protocol.studies.runners import triehhpp

    prep = triehhpp.prepare(opts)
    return prep, prep.unit_matrix(), ReplayedParticipation(prep.params.plan(),
                                                           prep.sampling_rng)


def make_server_app(opts: Any, *, threat: str = "malicious", pki: str | None = None,
                    timeout: float | None = None, out: dict | None = None,
                    **policy: Any) -> Any:
    """The ServerApp: TrieHH++ over our secure aggregation among the grid's nodes; the
    summary (``fedhh triehhpp``'s JSON, with ``flower_rounds``) goes into
    ``out["summary"]`` (or the abort into ``out["error"]``) when ``out`` is given.

    Raises:
        FlowerSecAggError: bad options or policy.
    """
    from flwr.serverapp import ServerApp

    opts = options_from_config(opts)
    driver = SessionDriver(Policy(threat=threat, **policy), pki, timeout)
    app = ServerApp()

    @app.main()
    def main(grid: Any, context: Any) -> None:
        from logging import ERROR, INFO

        from flwr.supercore import log

        from mechanisms.triehhpp import run_triehhpp_at_server
        from protocol.core.contract import AggregationAborted
        from protocol.studies.runners import triehhpp

        t0 = time.perf_counter()
        prep = triehhpp.prepare(opts)  # a fresh run randomness for every run
        transport = FlowerVoteTransport(grid, driver, prep.pop.n)
        transport.discover()
        log(INFO, "TrieHH++ over fedhh secure aggregation: %s of %s users reachable",
            len(transport.node_of), prep.pop.n)
        t1 = time.perf_counter()
        alpha = prep.alphabet
        try:
            res = run_triehhpp_at_server(alpha.num_units, alpha.labels, prep.params,
                                         transport, prep.sampling_rng, prep.transport_rng,
                                         terminal=alpha.terminal)
        except AggregationAborted as exc:
            log(ERROR, "TrieHH++ aborted: %s", exc)
            if out is not None:
                out["error"], out["transport"] = str(exc), transport
            return
        hh = res.heavy_hitters(strip=alpha.eos)
        summary = triehhpp._summary(opts, prep.pop, prep.sol, prep.params, hh, res.levels)
        summary["seconds"] = {"load": round(t1 - t0, 3),
                              "run": round(time.perf_counter() - t1, 3)}
        summary["flower_rounds"] = [
            {"level": spec.round + 1, "contacted": len(users), "in_sum": len(in_sum),
             "wall_seconds": round(w, 3)} for spec, users, in_sum, w, _ in transport.rounds]
        if out is not None:
            out["summary"], out["transport"] = summary, transport
        log(INFO, "TrieHH++ heavy hitters: %s", [h["item"] for h in summary["heavy_hitters"]])

    return app


def make_client_app(opts: Any, *, threat: str = "malicious", pki: str | None = None,
                    participation: str = "key", **policy: Any) -> Any:
    """The ClientApp: node ``partition-id`` (or ``fedhh-identity``) holds that user's
    item, decides whether it takes part (``participation``: ``"key"`` or, simulation
    only, ``"replay"``) and votes in TrieHH++'s sessions; every other message is
    refused.

    Raises:
        FlowerSecAggError: bad options, policy or participation.
    """
    from flwr.clientapp import ClientApp

    from protocol.flower.node import handle
    from protocol.flower.session import (
        RECORD, identity_of, load_participation_key, pki_dir_of,
    )

    opts = options_from_config(opts)
    if participation not in PARTICIPATION:
        raise FlowerSecAggError(f"participation must be one of {PARTICIPATION}, "
                                f"got {participation!r}")
    pol = Policy(threat=threat, **policy)
    app = ClientApp()

    def check(offer: Offer, node_config: Any) -> Any:
        doc = offer.app_json()
        if (not isinstance(doc, dict) or set(doc) != {"kind", "task", "level", "candidates"}
                or doc["kind"] != TRIEHH_APP):
            raise FlowerSecAggError("not a TrieHH++ vote offer")
        cands, level, task = doc["candidates"], doc["level"], doc["task"]
        prep, units, replay = _node_side(opts)
        if (not isinstance(cands, list) or not all(isinstance(c, str) for c in cands)
                or len(set(cands)) != len(cands) or len(cands) != offer.dim
                or type(level) is not int or not 0 <= level < prep.params.max_levels
                or task != prep.params.task):
            raise FlowerSecAggError("the offer's candidates, level or task are malformed")
        if offer.modulus != vote_modulus(offer.n):
            raise FlowerSecAggError("a vote session's modulus is vote_modulus(n)")
        me = identity_of(node_config)
        if me >= prep.pop.n:
            raise FlowerSecAggError(f"identity {me} is outside the population of "
                                    f"{prep.pop.n}")
        key = None
        if participation == "key":
            where = pki_dir_of(node_config, pki)
            if where is None:
                raise FlowerSecAggError("keyed participation needs the nodes' "
                                        "participation.key (node config fedhh-pki, pki= "
                                        "or FEDHH_FLOWER_PKI)")
            key = load_participation_key(where)
        return (f"{task}:{level}", me, level, cands, key)

    @app.train()
    def train(msg: Any, ctxt: Any) -> Any:
        from flwr.app import ConfigRecord

        from mechanisms.triehhpp import (
            ABSTAIN, TrieHHPPError, client_vote, keyed_participation,
        )

        if RECORD not in msg.content.config_records:
            raise FlowerSecAggError("this node votes only through secure aggregation")
        ledger = ctxt.state.config_records.get(LEDGER_RECORD)
        voted = list(ledger["voted"]) if ledger is not None and "voted" in ledger else []

        def vote(sess: Any, vmsg: Any, _ctxt: Any) -> tuple[np.ndarray, None]:
            ledger_key, me, level, cands, key = sess.app
            if ledger_key in voted:
                raise FlowerSecAggError(f"this node already voted at {ledger_key}")
            ctxt.state.config_records[LEDGER_RECORD] = ConfigRecord(
                {"voted": voted + [ledger_key]})
            prep, units, replay = _node_side(opts)
            try:
                if key is None:
                    takes_part = replay.takes_part(level, me)
                else:
                    takes_part = keyed_participation(
                        key, prep.params.plan(), ledger_key.encode(), sess.offer.node_ids,
                        vmsg.metadata.dst_node_id)
                choice = client_vote(units[me], level, cands, prep.alphabet.labels) \
                    if takes_part else ABSTAIN
            except TrieHHPPError as exc:
                raise FlowerSecAggError(str(exc)) from None
            v = np.zeros(sess.offer.dim, dtype=np.uint64)
            if choice >= 0:
                v[choice] = 1
            return v, None

        return handle(msg, ctxt, policy=pol, pki=pki, check_app=check, make_input=vote)

    return app


def run_app(opts: Any, *, engine: str = "local", threat: str = "malicious",
            participation: str = "replay", compare: bool = True, num_cpus: int = 2,
            **policy: Any) -> dict[str, Any]:
    """Run the TrieHH++ Flower app with one node per user (``engine`` ``"local"``: the
    in-process grid; ``"ray"``: Flower's simulation engine) and, with ``compare``,
    ``fedhh triehhpp``'s in-process run over the plaintext transport with the same
    options and seed; report both releases and whether they are equal. The default
    ``participation="replay"`` (the simulation's sample) is what makes them comparable.

    Raises:
        FlowerSecAggError: bad options or engine, or the app aborted.
        protocol.studies.errors.StudyError: TrieHH++ refuses the options.
    """
    import logging
    import os
    import tempfile

    from protocol.core.contract import plaintext_transport
    from protocol.flower.session import write_pki
    from protocol.studies.runners import triehhpp

    if engine not in ("local", "ray"):
        raise FlowerSecAggError(f"engine must be local or ray, got {engine!r}")
    opts = options_from_config(opts)
    nodes = _node_side(opts)[0].pop.n
    out: dict[str, Any] = {}
    logging.getLogger("flwr").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as pki:
        write_pki(pki, nodes)
        server = make_server_app(opts, threat=threat, pki=pki, out=out, **policy)
        client = make_client_app(opts, threat=threat, pki=pki, participation=participation,
                                 **policy)
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
        raise FlowerSecAggError(f"the ServerApp did not finish TrieHH++: "
                                f"{out.get('error', 'no summary')}")
    s = out["summary"]
    release = [(h["item"], h["count"]) for h in s["heavy_hitters"]]
    res: dict[str, Any] = {
        "users": nodes, "engine": engine, "threat": threat, "participation": participation,
        "wall_seconds": round(wall, 1), "levels": s["flower_rounds"],
        "heavy_hitters": release, "flower_summary": s,
    }
    if compare:
        ref = triehhpp.run(dataclasses.replace(opts, transport="plain"),
                           plaintext_transport())
        res["fedhh_triehhpp_heavy_hitters"] = [(h["item"], h["count"])
                                               for h in ref["heavy_hitters"]]
        res["same_release"] = release == res["fedhh_triehhpp_heavy_hitters"]
    return res
