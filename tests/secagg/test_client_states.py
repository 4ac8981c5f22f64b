"""Exhaustive (state x event) tests of the client state machine, and one test per abort
reason the client raises on a server message."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.studies.attacks.secagg_attacks import _rewrite_unmask
from protocol.core.secagg_engine import SERVER, Envelope, make_config, run_secagg
from secagg import crypto
from secagg.client import CLIENT_TRANSITIONS, PeerStatus, SecAggClient
from secagg.messages import (
    ALL_MESSAGES, AdvertiseKeys, ConsistencyRequest, KeyList, RoutedShares, ServerAbort,
    UnmaskRequest,
)
from secagg.server import SecAggServer
from secagg.state import (
    AbortReason as R, ClientState as S, Start, UnexpectedEvent, bitmap_to_mask,
    set_to_bitmap,
)

N, DIM = 5, 4


def _build(malicious: bool, graph: str = "complete", seed: int = 0):
    cfg = make_config(N, DIM, graph=graph, degree=None if graph == "complete" else 2,
                      threshold=2 if graph == "complete" else 1, malicious=malicious)
    rand = insecure_deterministic_randomness(seed)
    pairs = [crypto.ed25519_keypair(rand) for _ in range(N)]
    vks = [pk for _, pk in pairs]
    x = np.arange(N * DIM, dtype=np.uint64).reshape(N, DIM)
    clients = [SecAggClient(cfg, i, x[i], rand.child(f"c{i}"), signing_key=pairs[i][0],
                            verify_keys=vks) for i in range(N)]
    return cfg, clients, SecAggServer(cfg, verify_keys=vks)


def drive(target: S, malicious: bool, graph: str = "complete") -> tuple[SecAggClient, Any]:
    """Client 0 in ``target`` and the event an honest run would deliver next."""
    cfg, clients, server = _build(malicious, graph)
    c0 = clients[0]
    if target is S.INIT:
        return c0, Start()
    if target is S.ABORTED:
        c0.start()
        c0.receive(ServerAbort(R.TOO_FEW_ADVERTISED.value))
        return c0, None
    up = [m for c in clients for m in c.start()]
    while True:
        for m in up:
            server.receive(m)
        out = server.close_round()
        if c0.state is target:
            return c0, next((m for u, m in out if u == 0), None)
        up = []
        for u, m in out:
            up += clients[u].receive(m)


def fingerprint(c: SecAggClient) -> tuple:
    return (c.state, c.abort_reason, c.server_abort_reason,
            tuple(sorted(c.peer_status.items())), c.revealed_b, c.revealed_s,
            c._signed_alive, tuple(c._held_b), tuple(c._share_keys), c._c_pk)


def _samples() -> dict[type, Any]:
    """One valid instance of every message type, from a full malicious run."""
    seen: dict[type, Any] = {}

    def hook(round_no, direction, envs):
        for e in envs:
            seen.setdefault(type(e.message()), e.message())
        return envs

    cfg = make_config(N, DIM, threshold=2, malicious=True)
    run_secagg(cfg, np.zeros((N, DIM), dtype=np.uint64),
               rand=insecure_deterministic_randomness(99), adversary=hook)
    seen[ServerAbort] = ServerAbort(R.TOO_FEW_ADVERTISED.value)
    assert set(seen) == set(ALL_MESSAGES)
    return seen


SAMPLES = _samples()
EVENTS = [Start, *ALL_MESSAGES]
NEXT = {S.INIT: S.AWAIT_KEYS, S.AWAIT_KEYS: S.AWAIT_SHARES,
        S.AWAIT_SHARES: None,  # AWAIT_CONSISTENCY or AWAIT_UNMASK, by variant
        S.AWAIT_CONSISTENCY: S.AWAIT_UNMASK, S.AWAIT_UNMASK: S.COMPLETED}


def _states(malicious: bool) -> list[S]:
    return [s for s in S if malicious or s is not S.AWAIT_CONSISTENCY]


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("event", EVENTS, ids=lambda t: t.__name__)
def test_every_state_event_pair(malicious: bool, state: S, event: type) -> None:
    if state not in _states(malicious):
        pytest.skip("state unreachable in the honest-but-curious variant")
    client, honest_next = drive(state, malicious)
    before = fingerprint(client)
    table = CLIENT_TRANSITIONS[malicious]
    legal = (state, event) in table
    if not legal:
        msg = Start() if event is Start else SAMPLES[event]
        with pytest.raises(UnexpectedEvent):
            client.receive(msg) if event is not Start else client.start()
        assert fingerprint(client) == before
        return
    if event is ServerAbort:
        assert client.receive(SAMPLES[ServerAbort]) == []
        assert client.state is S.ABORTED and client.abort_reason is R.SERVER_ABORTED
        assert client.server_abort_reason is R.TOO_FEW_ADVERTISED
        assert table[(state, event)].next_state is S.ABORTED
        return
    assert type(honest_next) is event
    out = client.start() if event is Start else client.receive(honest_next)
    assert len(out) == 1 and client.abort_reason is None
    expected = NEXT[state] or (S.AWAIT_CONSISTENCY if malicious else S.AWAIT_UNMASK)
    # the table is the state diagram: the dispatcher moved to the listed next state
    assert client.state is expected is table[(state, event)].next_state


@pytest.mark.parametrize("malicious", [False, True])
def test_transition_table_shape(malicious: bool) -> None:
    table = CLIENT_TRANSITIONS[malicious]
    waiting = [S.AWAIT_KEYS, S.AWAIT_SHARES, S.AWAIT_UNMASK] + (
        [S.AWAIT_CONSISTENCY] if malicious else [])
    # every waiting state accepts exactly one protocol message (+ ServerAbort)
    for state in waiting:
        events = {e for (s, e) in table if s is state}
        assert ServerAbort in events and len(events) == 2
        assert table[(state, ServerAbort)].next_state is S.ABORTED
    assert not any(s in (S.COMPLETED, S.ABORTED) for s, _ in table)
    if not malicious:
        assert not any(s is S.AWAIT_CONSISTENCY or e is ConsistencyRequest for s, e in table)
    # following the protocol messages from INIT visits every state once, ending COMPLETED
    path, state = [], S.INIT
    while state is not S.COMPLETED:
        (edge,) = [t for (s, e), t in table.items() if s is state and e is not ServerAbort]
        path.append(state)
        state = edge.next_state
    assert path == [S.INIT] + sorted(waiting, key=list(S).index)
    # every handler named in the table exists
    assert all(callable(getattr(SecAggClient, t.handler, None)) for t in table.values())


# --------------------------------------------------------------- abort reasons

def _aborts_with(client: SecAggClient, msg: Any, reason: R) -> None:
    assert client.receive(msg) == []
    assert client.state is S.ABORTED and client.abort_reason is reason
    # sticky: nothing is accepted afterwards, nothing is sent
    for m in SAMPLES.values():
        with pytest.raises(UnexpectedEvent):
            client.receive(m)
    assert client.state is S.ABORTED


def test_too_few_keys() -> None:
    c, kl = drive(S.AWAIT_KEYS, False)
    _aborts_with(c, replace(kl, entries=kl.entries[:1]), R.TOO_FEW_KEYS)


def test_key_from_non_neighbour() -> None:
    c, kl = drive(S.AWAIT_KEYS, False, graph="harary")
    # N(0) of the graph seeded by this key list's own transcript root
    outsider = next(v for v in range(1, N) if v not in c.config.neighbours(0, kl.transcript))
    fake = AdvertiseKeys(outsider, bytes(range(32)), bytes(range(1, 33)), bytes(32))
    entries = tuple(sorted(kl.entries + (fake,), key=lambda e: e.sender))
    _aborts_with(c, replace(kl, entries=entries), R.KEY_FROM_NON_NEIGHBOUR)


def test_duplicate_keys() -> None:
    c, kl = drive(S.AWAIT_KEYS, False)
    e0, e1 = kl.entries[0], kl.entries[1]
    ents = (e0, replace(e1, c_pk=e0.c_pk)) + kl.entries[2:]
    _aborts_with(c, replace(kl, entries=ents), R.DUPLICATE_KEYS)


def test_own_keys_altered() -> None:
    c, kl = drive(S.AWAIT_KEYS, False)
    me = AdvertiseKeys(0, bytes(32), bytes([1]) * 32, bytes(32))
    _aborts_with(c, replace(kl, entries=(me,) + kl.entries), R.OWN_KEYS_ALTERED)


def test_low_order_public_key() -> None:
    c, kl = drive(S.AWAIT_KEYS, False)
    e = kl.entries[0]
    ents = (replace(e, c_pk=bytes(32)),) + kl.entries[1:]
    _aborts_with(c, replace(kl, entries=ents), R.INVALID_PUBLIC_KEY)


def test_invalid_key_signature() -> None:
    c, kl = drive(S.AWAIT_KEYS, True)
    e = kl.entries[0]
    bad = replace(e, signature=bytes(64))
    _aborts_with(c, replace(kl, entries=(bad,) + kl.entries[1:]), R.INVALID_KEY_SIGNATURE)


def test_shares_from_unknown_peer_and_too_few_shares() -> None:
    c, rs = drive(S.AWAIT_SHARES, False)
    # a sender whose keys the client never saw
    c2, rs2 = drive(S.AWAIT_SHARES, False, graph="harary")
    outsider = next(v for v in range(1, N) if v not in c2.neighbours)
    senders = tuple(sorted(rs2.senders + (outsider,)))
    cts = tuple(rs2.ciphertexts[0] for _ in senders)
    _aborts_with(c2, RoutedShares(senders, cts), R.SHARES_FROM_UNKNOWN_PEER)
    _aborts_with(c, RoutedShares(rs.senders[:1], rs.ciphertexts[:1]), R.TOO_FEW_SHARES)


def test_decryption_failed() -> None:
    c, rs = drive(S.AWAIT_SHARES, False)
    cts = (rs.ciphertexts[1],) + rs.ciphertexts[1:]
    _aborts_with(c, RoutedShares(rs.senders, cts), R.DECRYPTION_FAILED)


@pytest.mark.parametrize("case", ["b point", "s point", "point 0", "b outside field",
                                  "s outside field", "short"])
def test_malformed_share(case: str) -> None:
    """A peer's ciphertext decrypts, but its plaintext is not two encodings of
    Share(x = u + 1, y < PRIME): the client aborts with MALFORMED_SHARE."""
    from secagg.shamir import PRIME, SHARE_WIRE_BYTES

    c, rs = drive(S.AWAIT_SHARES, False)
    v = rs.senders[0]
    key = c._share_keys[v]
    pt = crypto.aead_decrypt(key, rs.ciphertexts[0], crypto.routing_ad(c.session, 1, v, 0))
    b, s = pt[:SHARE_WIRE_BYTES], pt[SHARE_WIRE_BYTES:]
    outside = b[2:-4] + PRIME.to_bytes(4, "big")   # the last lane = p
    bad = {"b point": (2).to_bytes(2, "big") + b[2:] + s,
           "s point": b + (2).to_bytes(2, "big") + s[2:],
           "point 0": bytes(2) + b[2:] + s,
           "b outside field": b[:2] + outside + s,
           "s outside field": b + s[:2] + outside,
           "short": pt[:-1]}[case]
    ct = crypto.aead_encrypt(key, bad, crypto.routing_ad(c.session, 1, v, 0),
                             insecure_deterministic_randomness(b"malformed"))
    _aborts_with(c, RoutedShares(rs.senders, (ct,) + rs.ciphertexts[1:]), R.MALFORMED_SHARE)


def _unmask_parts(req: UnmaskRequest) -> tuple[set[int], set[int]]:
    return (set(np.flatnonzero(bitmap_to_mask(req.alive, req.n)).tolist()),
            set(np.flatnonzero(bitmap_to_mask(req.dropped, req.n)).tolist()))


def _req(alive: set[int], dropped: set[int], like: UnmaskRequest) -> UnmaskRequest:
    return UnmaskRequest(like.session, N, set_to_bitmap(sorted(alive), N),
                         set_to_bitmap(sorted(dropped), N),
                         like.signers, like.signatures)


@pytest.mark.parametrize("case,reason", [
    ("self_dropped", R.SELF_NOT_ALIVE),
    ("both", R.ALIVE_AND_DROPPED),
    ("mismatch", R.DROPPED_SET_MISMATCH),
    ("too_few", R.TOO_FEW_SURVIVORS),
])
def test_unmask_request_checks(case: str, reason: R) -> None:
    c, req = drive(S.AWAIT_UNMASK, False)
    alive, dropped = _unmask_parts(req)
    assert alive == set(range(N)) and not dropped
    msg = {"self_dropped": _req(alive - {0}, {0}, req),
           "both": _req(alive, {2}, req),
           "mismatch": _req(alive - {2}, set(), req),   # 2 silently missing
           "too_few": _req({0, 1}, {2, 3, 4}, req)}[case]
    _aborts_with(c, msg, reason)
    assert not c.revealed_b and not c.revealed_s


def test_unknown_peer_in_set() -> None:
    c, rs = drive(S.AWAIT_SHARES, False)
    # deliver shares from all but peer 4: the client holds no share of 4
    c.receive(RoutedShares(rs.senders[:-1], rs.ciphertexts[:-1]))
    assert c.peer_status[4] is PeerStatus.DROPPED_AT_ROUND_1
    full = set(range(N))
    req = UnmaskRequest(c.session, N, set_to_bitmap(sorted(full), N), set_to_bitmap([], N))
    _aborts_with(c, req, R.UNKNOWN_PEER_IN_SET)


def test_consistency_checks() -> None:
    c, creq = drive(S.AWAIT_CONSISTENCY, True)
    _aborts_with(c, replace(creq, alive=set_to_bitmap([1, 2, 3, 4], N)), R.SELF_NOT_ALIVE)
    c, creq = drive(S.AWAIT_CONSISTENCY, True)
    _aborts_with(c, replace(creq, alive=set_to_bitmap([0, 1], N)), R.TOO_FEW_SURVIVORS)


@pytest.mark.parametrize("case,reason", [
    ("changed", R.CONSISTENCY_SET_CHANGED),
    ("bad_sig", R.INVALID_CONSISTENCY_SIGNATURE),
    ("few", R.TOO_FEW_SIGNATURES),
])
def test_signature_checks(case: str, reason: R) -> None:
    c, req = drive(S.AWAIT_UNMASK, True)
    alive, dropped = _unmask_parts(req)
    if case == "changed":
        msg = replace(req, alive=set_to_bitmap(sorted(alive - {3}), N),
                      dropped=set_to_bitmap([3], N))
    elif case == "bad_sig":
        sigs = (bytes(64),) + req.signatures[1:]
        msg = replace(req, signatures=sigs)
    else:
        msg = replace(req, signers=req.signers[:2], signatures=req.signatures[:2])
    _aborts_with(c, msg, reason)


def test_honest_unmask_reveals_one_share_per_peer() -> None:
    c, req = drive(S.AWAIT_UNMASK, False)
    (out,) = c.receive(req)
    assert set(out.b_owners) == set(range(1, N)) and not out.s_owners
    assert c.state is S.COMPLETED


def test_bad_inputs_rejected() -> None:
    from secagg.errors import ParameterError

    cfg = make_config(N, DIM)
    with pytest.raises(ParameterError):
        SecAggClient(cfg, N, np.zeros(DIM, dtype=np.uint64), None)
    with pytest.raises(ParameterError):
        SecAggClient(cfg, 0, np.zeros(DIM + 1, dtype=np.uint64), None)
    with pytest.raises(ParameterError):
        SecAggClient(cfg, 0, np.full(DIM, 1 << 32, dtype=np.uint64), None)
    with pytest.raises(ParameterError):  # malicious variant needs the PKI
        SecAggClient(make_config(N, DIM, malicious=True), 0, np.zeros(DIM, np.uint64), None)


# --------------------------------------------------------------- per-peer status decides

def _reveal_matches_status(c: SecAggClient) -> None:
    """What the client revealed is exactly what its per-peer status dictates."""
    st = c.peer_status
    assert c.revealed_b == {v for v in c.neighbours if st[v] is PeerStatus.ALIVE}
    assert c.revealed_s == {v for v in c.neighbours if st[v] is PeerStatus.DROPPED_AT_ROUND_2}
    assert not c.revealed_b & c.revealed_s


def test_status_decides_the_reveal_after_a_drop() -> None:
    c, req = drive(S.AWAIT_UNMASK, False)
    alive, _ = _unmask_parts(req)
    (out,) = c.receive(_req(alive - {3}, {3}, req))
    assert c.peer_status[3] is PeerStatus.DROPPED_AT_ROUND_2
    assert out.s_owners == (3,) and 3 not in out.b_owners
    _reveal_matches_status(c)


@pytest.mark.parametrize("dead", [PeerStatus.DROPPED_AT_ROUND_0, PeerStatus.DROPPED_AT_ROUND_1,
                                  PeerStatus.DROPPED_AT_ROUND_2])
def test_a_dead_peer_is_never_revived(dead: PeerStatus) -> None:
    # status never goes back to ALIVE: an announcement naming a dead peer alive aborts
    c, _ = drive(S.AWAIT_UNMASK, False)
    from secagg.client import _CODE

    c._status[c._slot(3)] = _CODE[dead]
    assert c.peer_status[3] is dead
    from secagg.client import _Abort

    with pytest.raises(_Abort) as exc:
        c._status_after(np.ones(N, dtype=bool))
    assert exc.value.reason is R.UNKNOWN_PEER_IN_SET
    _aborts_with(c, UnmaskRequest(c.session, N, set_to_bitmap(range(N), N),
                                  set_to_bitmap([], N)),
                 R.UNKNOWN_PEER_IN_SET)
    assert not c.revealed_b and not c.revealed_s


def test_unmask_shares_follow_status_alone() -> None:
    c, _ = drive(S.AWAIT_UNMASK, False)
    status = {1: PeerStatus.ALIVE, 2: PeerStatus.DROPPED_AT_ROUND_2,
              3: PeerStatus.DROPPED_AT_ROUND_1, 4: PeerStatus.DROPPED_AT_ROUND_0}
    out = c._unmask_shares(status)
    assert out.b_owners == (1,) and out.s_owners == (2,)
    assert out.b_shares == (c._held_b[1],) and out.s_shares == (c._held_s[2],)


def test_consistency_round_marks_the_left_out_peers_dead() -> None:
    c, _ = drive(S.AWAIT_CONSISTENCY, True)
    c.receive(ConsistencyRequest(c.session, N, set_to_bitmap([0, 1, 2, 4], N)))
    assert c.state is S.AWAIT_UNMASK
    assert c.peer_status[3] is PeerStatus.DROPPED_AT_ROUND_2
    assert all(c.peer_status[v] is PeerStatus.ALIVE for v in (1, 2, 4))


def test_split_view_regression_no_double_reveal_and_status_decides() -> None:
    """The split view of the honest-but-curious variant: each client is shown its own
    survivor set; whatever it is shown, its reveal follows its own per-peer status and
    never names one peer twice."""
    cfg = make_config(7, DIM, graph="complete", threshold=3)
    victim, group_b = 0, {4, 5, 6}

    def split(r, alive, dropped):
        if r in group_b:
            return alive - {victim}, dropped | {victim}
        return alive, dropped

    run = run_secagg(cfg, np.zeros((7, DIM), dtype=np.uint64),
                     rand=insecure_deterministic_randomness(3),
                     adversary=_rewrite_unmask(split))
    for c in run.clients:
        if c.index == victim or c.state is not S.COMPLETED:
            continue
        _reveal_matches_status(c)
        want = (PeerStatus.DROPPED_AT_ROUND_2 if c.index in group_b else PeerStatus.ALIVE)
        assert c.peer_status[victim] is want
