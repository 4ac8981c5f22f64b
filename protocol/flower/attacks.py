"""Attacks on the Flower adapter (docs/flower.md), in the attack catalogue
(:mod:`protocol.studies.attacks`): a server that deviates from the adapter's protocol --
changes the offer for some nodes, offers weaker parameters, asks for a vote without
secure aggregation, alters frames -- a server that asks a node to vote twice, a node
that tries to count twice, and offers the nodes refuse.

Theory of operation
-------------------
Each attack runs TrieHH level-1 vote sessions
(:class:`~protocol.flower.triehh_app.FlowerVoteTransport`) among 30 nodes of the Zipf
population on :class:`~protocol.flower.plain.PlainGrid`: the nodes run the code a
Flower ClientApp runs (:func:`protocol.flower.node.respond`, the TrieHH node's checks and
ledger, :func:`~protocol.flower.triehh_app.plain_client`), the server is
:class:`~protocol.flower.workflow.SessionDriver` with our honest server state machine,
and the adversary acts through the grid's hooks (what a node is sent, what the driver
receives) or a driver that offers something else (:meth:`SessionDriver._offer`). Flower
itself is not needed: these are the adapter's checks, which sit inside the ClientApp.

Every attack compares the release with the honest one: the plaintext count of the
level-1 votes of the nodes the session summed (their votes computed with
:class:`mechanisms.triehh.ClientVoter`, as each node does), and checks that every node
error is the adapter's typed refusal (:class:`~protocol.flower.session.FlowerSecAggError`),
never an unexpected exception.

The catalogue is a studies module and the studies never import this adapter
(docs/architecture.md), so the CLI's ``fedhh attack`` imports this module to register
these attacks beside the others.
"""
from __future__ import annotations

import dataclasses
import tempfile
from typing import Any, Callable

import numpy as np

from protocol.studies.attacks import Outcome, attack

__all__ = ["Scenario"]

USERS = 30
TASK = "triehh"
_TYPED = {"FlowerSecAggError", "NodeAborted"}


class Scenario:
    """30 nodes, their PKI and the level-1 vote round; ``down``/``up`` hooks and the
    driver class play the adversary."""

    def __init__(self, seed: int, pki: str, *, down: Callable | None = None,
                 up: Callable | None = None, driver: type | None = None) -> None:
        from protocol.core.contract import Kind, RoundSpec
        from protocol.flower.plain import PlainGrid
        from protocol.flower.session import Policy, write_pki
        from protocol.flower.triehh_app import FlowerVoteTransport, _prepared, plain_client
        from protocol.flower.workflow import SessionDriver
        from protocol.studies.runners.triehh import TrieHHOptions

        write_pki(pki, USERS)
        self.opts = TrieHHOptions(dataset="zipf", users=USERS, seed=seed, theta=2,
                                  gamma=1.0, transport="secagg-flower")
        self.prep, _ = _prepared(self.opts)
        self.grid = PlainGrid(plain_client(self.opts, pki=pki), USERS, down=down, up=up)
        self.driver = (driver or SessionDriver)(Policy(), pki)
        self.transport = FlowerVoteTransport(self.grid, self.driver, USERS)
        self.transport.discover()
        self.spec = RoundSpec(TASK, 1, Kind.VOTE,
                              candidates=tuple(self.prep.alphabet.labels), theta=1)
        self.seed = seed

    def run(self) -> tuple[Any, Any]:
        """One vote round among every node: ``(release or None, session outcome)``."""
        from protocol.core.contract import AggregationAborted, AtClients

        try:
            res = self.transport.run_round(self.spec, AtClients(np.arange(USERS)),
                                           np.random.default_rng(self.seed))
            release = res.release
        except AggregationAborted:
            release = None
        return release, self.transport.rounds[-1][4]

    def honest_counts(self, users: list[int]) -> dict[str, int]:
        """The plaintext level-1 counts of ``users``' votes (every candidate with >= 1)."""
        from mechanisms.triehh import ClientVoter

        cands = self.spec.candidates
        voter = ClientVoter(self.prep.data, users, self.prep.alphabet,
                            self.prep.config.max_levels)
        votes = voter.votes(users, 1, cands)
        counts = np.bincount(votes[votes >= 0], minlength=len(cands))
        return {c: int(k) for c, k in zip(cands, counts) if k >= 1}

    def users_of(self, node_ids: Any) -> list[int]:
        user = {nid: u for u, nid in self.transport.node_of.items()}
        return sorted(user[n] for n in node_ids)

    def untyped_errors(self) -> list[str]:
        """Node errors that are not the adapter's typed refusal."""
        return [e for errs in self.grid.errors.values() for e in errs if e not in _TYPED]


def _with_scenario(seed: int, **kw: Any) -> tuple[Scenario, Any, Any, Any]:
    tmp = tempfile.TemporaryDirectory()
    sc = Scenario(seed, tmp.name, **kw)
    release, out = sc.run()
    return sc, release, out, tmp


def _errors(sc: Scenario, out: Any) -> dict[str, str]:
    """Each refusing node's reason, by population index (an abort's reason, or the
    refusal's sentence shortened)."""
    user = {nid: u for u, nid in sc.transport.node_of.items()}
    reasons: dict[str, str] = {}
    for nid, why in out.rejected:
        short = why.split("aborted the session: ")[-1] if "aborted the session" in why \
            else why.split(": ", 2)[-1][:70]
        reasons[f"node {user.get(nid, nid)}"] = short
    return reasons


def _summed_release_is_honest(sc: Scenario, release: Any, out: Any) -> bool:
    return release is not None and dict(release.counts) == sc.honest_counts(
        sc.users_of(out.survivors))


@attack("flower.changed_offer", system="flower",
        target="the offer bound into every session id, signature and ciphertext "
               "(Offer.context)",
        expected="node 0 shown another candidate order (a mixed trie) computes in another "
                 "session: its vote never enters the sum; the release is the honest "
                 "count of the other nodes, or nothing")
def changed_offer(seed: int) -> Outcome:
    """The server shows one node the level's candidates in another order (its vote would
    land on another candidate), the others the real offer.

    Its round-0 frame carries a signature over another session context, so it never
    shares a session with the rest."""
    victims = {0}

    def down(i: int, _nid: int, records: dict) -> dict:
        rec = records.get("fedhh.secagg", {})
        if i in victims and rec.get("stage") == "setup":
            import json

            doc = json.loads(rec["app"])
            doc["candidates"] = doc["candidates"][::-1]
            rec["app"] = json.dumps(doc)
        return records

    sc, release, out, tmp = _with_scenario(seed, down=down)
    with tmp:
        in_sum = sc.users_of(out.survivors)
        victims_in = sorted(set(in_sum) & victims)
        honest = release is None or _summed_release_is_honest(sc, release, out)
        ok = not victims_in and honest and not sc.untyped_errors()
        observed = (f"{'released' if release is not None else 'nothing released'}; "
                    f"{len(in_sum)} nodes in the sum, victims in it: {victims_in}; release = "
                    f"honest count of the summed nodes: {honest}; rejected at the server "
                    f"(keys signed over another session context): {_errors(sc, out)}")
        return Outcome("flower.changed_offer", _expected("flower.changed_offer"), observed, ok,
                       parties={"rejected": _errors(sc, out)},
                       leakage={"victims_in_sum": victims_in})


class _Weaker:
    """Drivers that offer what the nodes' policy does not give."""

    @staticmethod
    def make(change: Callable[[Any], Any]) -> type:
        from protocol.flower.workflow import SessionDriver

        class Driver(SessionDriver):
            def _offer(self, **fields: Any) -> Any:
                return change(super()._offer(**fields))

        return Driver


def _expected(name: str) -> str:
    from protocol.studies.attacks import ATTACKS

    return ATTACKS[name].expected


@attack("flower.weaker_parameters", system="flower",
        target="the node recomputes (k, t) and the threat model from its own policy "
               "(Offer.check_policy)",
        expected="an offer with threshold t - 1, one with degree k - 2, and one downgraded "
                 "to the semi-honest variant: every node refuses at set-up, nothing "
                 "released")
def weaker_parameters(seed: int) -> Outcome:
    """The server offers a lower threshold, a lower degree, or the semi-honest variant
    (no signatures, no consistency check), hoping the nodes go along."""
    changes = {
        "t-1": lambda o: dataclasses.replace(o, threshold=o.threshold - 1),
        "k-2": lambda o: dataclasses.replace(o, degree=o.degree - 2,
                                             threshold=min(o.threshold, o.degree - 2)),
        "semi-honest": lambda o: dataclasses.replace(o, malicious=False, identities=()),
    }
    seen: dict[str, str] = {}
    ok = True
    for label, change in changes.items():
        sc, release, out, tmp = _with_scenario(seed, driver=_Weaker.make(change))
        with tmp:
            refused = sum("policy gives" in why for _, why in out.rejected)
            good = release is None and refused == USERS and not sc.untyped_errors()
            ok &= good
            seen[label] = (f"{refused}/{USERS} refused, "
                           f"{'nothing released' if release is None else 'RELEASED'}")
    observed = "; ".join(f"{k}: {v}" for k, v in seen.items())
    return Outcome("flower.weaker_parameters", _expected("flower.weaker_parameters"),
                   observed, ok, parties=seen)


@attack("flower.plaintext_request", system="flower",
        target="a node sends its input only inside a session (node.session_record; the "
               "FedAvg mod's allow_plaintext=False)",
        expected="a vote request without the session record: every node refuses; no "
                 "reply carries a vote")
def plaintext_request(seed: int) -> Outcome:
    """The server leaves secure aggregation out: it sends each node a request without
    the session's record, asking for the vote in the clear."""
    with tempfile.TemporaryDirectory() as pki:
        sc = Scenario(seed, pki)
        # after discovery, every message of the round goes without its session record
        sc.grid.down = lambda _i, _nid, records: {"triehh.vote": {"level": 1}}
        release, out = sc.run()
        refused = sum("only through secure aggregation" in why for _, why in out.rejected)
        carried = sum(not why.startswith("error") for _, why in out.rejected)
        ok = refused == USERS and carried == 0 and release is None and \
            not sc.untyped_errors()
        observed = (f"{refused}/{USERS} refused the request; replies carrying anything: "
                    f"{carried}; {'nothing released' if release is None else 'RELEASED'}")
        return Outcome("flower.plaintext_request", _expected("flower.plaintext_request"),
                       observed, ok, parties={"refused": refused})


def _flip(frame: bytes, where: int) -> bytes:
    b = bytearray(frame)
    b[where % len(b)] ^= 0x01
    return bytes(b)


@attack("flower.altered_frames", system="flower",
        target="frames inside Flower records: the strict codec, AEAD on shares, "
               "signatures (secagg.client)",
        expected="one bit flipped in the shares routed to node 3 and in the unmask "
                 "request to node 7: both abort with a named reason; node 3 drops before "
                 "its masked input, node 7's masked input is already in and is unmasked "
                 "from the others' shares; the release is the honest count of the 29 "
                 "summed nodes")
def altered_frames(seed: int) -> Outcome:
    """The server alters one bit of a frame it forwards: the routed shares of one node
    (inside a share ciphertext) and the unmasking request of another."""
    rounds: dict[int, int] = {}

    def down(i: int, _nid: int, records: dict) -> dict:
        rec = records.get("fedhh.secagg", {})
        if rec.get("stage") == "round":
            rounds[i] = rounds.get(i, 0) + 1
            # round messages: 1 = routed shares, 2 = masked-input list (malicious),
            # 3 = unmask request
            if (i == 3 and rounds[i] == 1) or (i == 7 and rounds[i] == 3):
                rec["frames"] = [_flip(rec["frames"][0], len(rec["frames"][0]) // 2)]
        return records

    sc, release, out, tmp = _with_scenario(seed, down=down)
    with tmp:
        in_sum = sc.users_of(out.survivors)
        honest = _summed_release_is_honest(sc, release, out)
        dropped = sorted(set(range(USERS)) - set(in_sum))
        reasons = _errors(sc, out)
        ok = (honest and dropped == [3] and set(reasons) == {"node 3", "node 7"}
              and not sc.untyped_errors())
        observed = (f"aborts {reasons}; dropped {dropped}; {len(in_sum)} nodes in the sum; "
                    f"release = honest count of the summed nodes: {honest}")
        return Outcome("flower.altered_frames", _expected("flower.altered_frames"), observed,
                       ok, parties={"rejected": _errors(sc, out)})


@attack("flower.node_votes_twice", system="flower",
        target="one vote per node and level (the TrieHH node's ledger; the driver's one "
               "frame per reply and sender check)",
        expected="the server runs level 1 again among the same nodes: every node refuses "
                 "(already voted), nothing more released; a node replying with its "
                 "masked input twice, or under another node's position, is refused and "
                 "its input is counted at most once")
def node_votes_twice(seed: int) -> Outcome:
    """Two ways to count a node twice: the server asks for a level again (to average the
    sample or fish for a different one), and a node sends a second masked input (two
    frames, or one claiming another node's position)."""
    from protocol.core import codec, wire_secagg  # noqa: F401  (registers the messages)
    from secagg.messages import MaskedInput

    first, out1 = None, None
    with tempfile.TemporaryDirectory() as pki:
        sc = Scenario(seed, pki)
        first, out1 = sc.run()
        again, out2 = sc.run()
        refused = sum("already voted" in why for _, why in out2.rejected)
        part1 = (first is not None and _summed_release_is_honest(sc, first, out1)
                 and again is None and refused == USERS and not sc.untyped_errors())

    def up(i: int, _nid: int, rec: dict) -> dict:
        frames = rec.get("frames") or []
        m = codec.decode(frames[0]) if frames else None
        if isinstance(m, MaskedInput):
            if i == 5:
                rec["frames"] = [frames[0], frames[0]]  # its masked input twice
            elif i == 9:  # a second masked input under its neighbour's position
                rec["frames"] = [codec.encode(dataclasses.replace(m, sender=m.sender + 1))]
        return rec

    sc2, release, out, tmp = _with_scenario(seed, up=up)
    with tmp:
        in_sum = sc2.users_of(out.survivors)
        why = _errors(sc2, out)
        part2 = (_summed_release_is_honest(sc2, release, out) and 5 not in in_sum
                 and 9 not in in_sum and 10 in in_sum and len(in_sum) == USERS - 2
                 and "one frame list" in why.get("node 5", "")
                 and "sender does not match" in why.get("node 9", ""))
    ok = part1 and part2
    observed = (f"level 1 again: {refused}/{USERS} refused (already voted), "
                f"{'nothing released' if again is None else 'RELEASED'}; first release "
                f"honest: {part1}; node 5 (masked input twice) and node 9 (as node 10) "
                f"refused: {why}; in the sum: node 5 {5 in in_sum}, node 9 {9 in in_sum}, "
                f"node 10 {10 in in_sum}; release honest over {len(in_sum)} nodes: {part2}")
    return Outcome("flower.node_votes_twice", _expected("flower.node_votes_twice"),
                   observed, ok)


@attack("flower.refused_offer", system="flower",
        target="the node's check of the application and roster (check_vote_offer, "
               "Offer.position_of)",
        expected="a vote offer with a modulus the sums could wrap: every node refuses, "
                 "nothing released; a roster giving two nodes each other's PKI identity: "
                 "those two refuse, the session completes without them and the release "
                 "is the honest count of the others")
def refused_offer(seed: int) -> Outcome:
    """Offers an honest node must refuse: a vote session modulo 2 (a count would wrap),
    and a roster that names two nodes under each other's PKI identity."""
    wrap = _Weaker.make(lambda o: dataclasses.replace(o, modulus=2))
    sc, release, out, tmp = _with_scenario(seed, driver=wrap)
    with tmp:
        refused = sum("vote_modulus" in why for _, why in out.rejected)
        part1 = release is None and refused == USERS and not sc.untyped_errors()

    def swap(o: Any) -> Any:
        ids = list(o.identities)
        ids[0], ids[1] = ids[1], ids[0]
        return dataclasses.replace(o, identities=tuple(ids))

    sc2, release2, out2, tmp2 = _with_scenario(seed, driver=_Weaker.make(swap))
    with tmp2:
        in_sum = sc2.users_of(out2.survivors)
        refused2 = sum("PKI identity" in why for _, why in out2.rejected)
        part2 = (refused2 == 2 and _summed_release_is_honest(sc2, release2, out2)
                 and len(in_sum) == USERS - 2 and not sc2.untyped_errors())
    ok = part1 and part2
    observed = (f"modulus 2: {refused}/{USERS} refused, "
                f"{'nothing released' if release is None else 'RELEASED'}; swapped "
                f"identities: {refused2} refused, {len(in_sum)} in the sum, release honest: "
                f"{part2}")
    return Outcome("flower.refused_offer", _expected("flower.refused_offer"), observed, ok)
