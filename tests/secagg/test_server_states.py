"""Exhaustive (state x event) tests of the server state machine, and the checks that
make it ignore a client message that does not fit the session."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import make_config, run_secagg
from secagg import crypto
from secagg.client import SecAggClient
from secagg.memo import VERIFY, SessionMemo
from secagg.messages import (
    ALL_MESSAGES, AdvertiseKeys, ConsistencySignature, MaskedInput, ServerAbort, ShareKeys,
    UnmaskShares,
)
from secagg.server import SERVER_TRANSITIONS, SecAggServer
from secagg.state import (
    AbortReason as R, CloseRound, InvalidMessage, ServerState as S, UnexpectedEvent,
)

N, DIM = 5, 4
ROUND_MESSAGE = {S.COLLECT_KEYS: AdvertiseKeys, S.COLLECT_SHARES: ShareKeys,
                 S.COLLECT_INPUTS: MaskedInput, S.COLLECT_SIGNATURES: ConsistencySignature,
                 S.COLLECT_UNMASK: UnmaskShares}


def drive(target: S, malicious: bool) -> tuple[SecAggServer, list[Any]]:
    """The server in ``target`` with the messages honest clients send in that round."""
    cfg = make_config(N, DIM, threshold=2, malicious=malicious)
    rand = insecure_deterministic_randomness(0)
    pairs = [crypto.ed25519_keypair(rand) for _ in range(N)]
    vks = [pk for _, pk in pairs]
    x = np.arange(N * DIM, dtype=np.uint64).reshape(N, DIM)
    clients = [SecAggClient(cfg, i, x[i], rand.child(f"c{i}"), signing_key=pairs[i][0],
                            verify_keys=vks) for i in range(N)]
    server = SecAggServer(cfg, verify_keys=vks)
    up = [m for c in clients for m in c.start()]
    if target is S.ABORTED:
        server.close_round()          # nobody's keys arrived
        assert server.state is S.ABORTED
        return server, []
    while server.state is not target:
        for m in up:
            server.receive(m)
        out = server.close_round()
        up = [r for u, m in out for r in clients[u].receive(m)]
    return server, up


def fingerprint(s: SecAggServer) -> tuple:
    return (s.state, s.abort_reason, s._in_u1.tobytes(), s._in_u2.tobytes(),
            s._in_u3.tobytes(), s._in_u4.tobytes(), s._in_u5.tobytes(),
            tuple(sorted(s.sets.items())), len(s._keys), len(s._signatures),
            s._cts.tobytes(), s._cts_start.tobytes(),
            s._acc.acc.tobytes(), tuple((k, len(v)) for k, v in sorted(s._b_shares.items())),
            None if s.result is None else s.result.tobytes())


def _samples() -> dict[type, Any]:
    seen: dict[type, Any] = {}

    def hook(round_no, direction, envs):
        for e in envs:
            seen.setdefault(type(e.message()), e.message())
        return envs

    cfg = make_config(N, DIM, threshold=2, malicious=True)
    run_secagg(cfg, np.zeros((N, DIM), dtype=np.uint64),
               rand=insecure_deterministic_randomness(99), adversary=hook)
    seen[ServerAbort] = ServerAbort(R.TOO_FEW_ADVERTISED.value)
    return seen


SAMPLES = _samples()
EVENTS = [CloseRound, *ALL_MESSAGES]


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("event", EVENTS, ids=lambda t: t.__name__)
def test_every_state_event_pair(malicious: bool, state: S, event: type) -> None:
    if state is S.COLLECT_SIGNATURES and not malicious:
        pytest.skip("round 3 exists only in the malicious variant")
    server, honest = drive(state, malicious)
    before = fingerprint(server)
    table = SERVER_TRANSITIONS[malicious]
    legal = (state, event) in table
    if not legal:
        with pytest.raises(UnexpectedEvent):
            if event is CloseRound:
                server.close_round()
            else:
                server.receive(SAMPLES[event])
        assert fingerprint(server) == before
        return
    if event is CloseRound:
        for m in honest:
            server.receive(m)
        out = server.close_round()
        assert server.abort_reason is None
        if state is S.COLLECT_UNMASK:
            assert server.state is S.COMPLETED and out == []
            want = np.arange(N * DIM, dtype=np.uint64).reshape(N, DIM).sum(axis=0)
            assert np.array_equal(server.result, want)
        else:
            assert server.state is not state and len(out) == N
        assert server.state is table[(state, event)].next_state
        return
    assert ROUND_MESSAGE[state] is event
    server.receive(honest[0])
    assert fingerprint(server) != before
    assert server.state is state is table[(state, event)].next_state


@pytest.mark.parametrize("malicious", [False, True])
def test_transition_table_shape(malicious: bool) -> None:
    table = SERVER_TRANSITIONS[malicious]
    rounds = {s: m for s, m in ROUND_MESSAGE.items()
              if malicious or s is not S.COLLECT_SIGNATURES}
    for state, msg in rounds.items():
        assert table[(state, msg)].next_state is state   # a message keeps the round open
        assert (state, CloseRound) in table
    assert len(table) == 2 * len(rounds)
    # closing round after round from COLLECT_KEYS visits every collecting state once
    path, state = [], S.COLLECT_KEYS
    while state is not S.COMPLETED:
        path.append(state)
        state = table[(state, CloseRound)].next_state
    assert path == sorted(rounds, key=list(S).index)
    assert all(callable(getattr(SecAggServer, t.handler, None)) for t in table.values())


# --------------------------------------------------------------- invalid messages

def _rejects(server: SecAggServer, msg: Any) -> None:
    before = fingerprint(server)
    with pytest.raises(InvalidMessage):
        server.receive(msg)
    assert fingerprint(server) == before


def test_round0_checks() -> None:
    server, up = drive(S.COLLECT_KEYS, True)
    server.receive(up[0])
    _rejects(server, up[0])                                        # duplicate
    _rejects(server, dataclasses.replace(up[1], sender=N + 3))     # unknown sender
    _rejects(server, dataclasses.replace(up[1], signature=bytes(64)))  # bad signature
    _rejects(server, dataclasses.replace(up[1], s_pk=up[1].c_pk))  # equal keys
    plain, up2 = drive(S.COLLECT_KEYS, False)
    _rejects(plain, dataclasses.replace(up2[0], signature=bytes(64)))


def test_round1_checks() -> None:
    server, up = drive(S.COLLECT_SHARES, False)
    m = up[0]
    _rejects(server, ShareKeys(m.sender, m.recipients[:-1], m.ciphertexts[:-1]))
    server.receive(m)
    _rejects(server, m)


def test_round1_ciphertexts_must_have_the_share_length() -> None:
    """A recipient could not decrypt a ciphertext of another length; the server refuses
    the message whole (the sender leaves U2) instead of forwarding it."""
    from secagg.client import SHARE_CIPHERTEXT_BYTES

    server, up = drive(S.COLLECT_SHARES, False)
    m = up[0]
    assert {len(ct) for ct in m.ciphertexts} == {SHARE_CIPHERTEXT_BYTES}
    for bad in (m.ciphertexts[0][:-1], m.ciphertexts[0] + b"\0"):
        _rejects(server, ShareKeys(m.sender, m.recipients, (bad,) + m.ciphertexts[1:]))
    server.receive(m)


@pytest.mark.parametrize("silent", [None, 4])
def test_round1_replies_route_each_ciphertext_to_its_recipient(silent: int | None) -> None:
    """The replies that close round 1 are built as they are taken (not a list), the
    same each time, and carry for ``u`` exactly what each sender addressed to ``u``, in
    sender order; also when a client never advertised keys (``silent``), so that the
    senders address fewer than their neighbours."""
    cfg = make_config(N, DIM, threshold=2)
    server = SecAggServer(cfg)
    rand = insecure_deterministic_randomness(3)
    clients = [SecAggClient(cfg, i, np.zeros(DIM, np.uint64), rand.child(str(i)))
               for i in range(N)]
    for c in clients:
        if c.index != silent:
            server.receive(c.start()[0])
    shares = [r for u, msg in server.close_round() for r in clients[u].receive(msg)]
    for m in shares:
        server.receive(m)
    out = server.close_round()
    assert not isinstance(out, list) and len(out) == N - (silent is not None)
    taken = list(out)
    assert list(out) == taken and out[0] == taken[0] and out[1:3] == taken[1:3]
    sent = {(m.sender, r): ct for m in shares for r, ct in zip(m.recipients, m.ciphertexts)}
    assert len(sent) == sum(len(m.recipients) for m in shares)
    for u, rs in taken:
        assert rs.senders == tuple(v for v in range(N) if v not in (u, silent))
        assert rs.ciphertexts == tuple(sent[(v, u)] for v in rs.senders)


def test_round1_sender_must_have_advertised() -> None:
    cfg = make_config(N, DIM, threshold=2)
    server = SecAggServer(cfg)
    rand = insecure_deterministic_randomness(1)
    clients = [SecAggClient(cfg, i, np.zeros(DIM, np.uint64), rand.child(str(i)))
               for i in range(N)]
    starts = [c.start()[0] for c in clients]
    for m in starts[:-1]:                       # client 4's keys never arrive
        server.receive(m)
    out = server.close_round()
    shares = [r for u, msg in out for r in clients[u].receive(msg)]
    fake = ShareKeys(4, shares[0].recipients[:1], shares[0].ciphertexts[:1])
    _rejects(server, fake)


def test_round2_checks() -> None:
    server, up = drive(S.COLLECT_INPUTS, False)
    m = up[0]
    _rejects(server, MaskedInput.from_vector(m.sender, np.zeros(DIM + 1, np.uint64),
                                             m.modulus))
    _rejects(server, MaskedInput.from_vector(m.sender, m.vector() & np.uint64(0xFFFF), 1 << 16))
    server.receive(m)
    _rejects(server, m)


def test_round3_checks() -> None:
    server, up = drive(S.COLLECT_SIGNATURES, True)
    _rejects(server, ConsistencySignature(up[0].sender, bytes(64)))
    _rejects(server, ConsistencySignature(up[0].sender, up[1].signature))


def test_round4_checks() -> None:
    server, up = drive(S.COLLECT_UNMASK, False)
    m = up[0]
    # claims peer 1 dropped (s-share) although it is alive
    _rejects(server, UnmaskShares(m.sender, m.b_owners[1:], m.b_shares[1:],
                                  m.b_owners[:1], m.b_shares[:1]))
    # a share with another evaluation point
    other = up[1]
    _rejects(server, UnmaskShares(m.sender, m.b_owners,
                                  (other.b_shares[0],) + m.b_shares[1:], (), ()))
    # malformed shares: y outside the field, the point x = 0 (the secret itself)
    from secagg.shamir import PRIME

    own_x = m.b_shares[0][:2]
    outside = m.b_shares[0][2:-4] + PRIME.to_bytes(4, "big")   # the last lane = p
    for bad in (own_x + outside, bytes(2) + m.b_shares[0][2:]):
        _rejects(server, UnmaskShares(m.sender, m.b_owners, (bad,) + m.b_shares[1:], (), ()))
    server.receive(m)
    _rejects(server, m)


def test_too_few_unmask_responses_aborts() -> None:
    server, up = drive(S.COLLECT_UNMASK, False)
    server.receive(up[0])
    assert server.close_round() == []
    assert server.state is S.ABORTED
    assert server.abort_reason is R.TOO_FEW_UNMASK_RESPONSES
    with pytest.raises(UnexpectedEvent):
        server.close_round()


def test_abort_notifies_remaining_clients() -> None:
    server, up = drive(S.COLLECT_SHARES, False)
    server.receive(up[0])
    out = server.close_round()
    assert server.abort_reason is R.TOO_FEW_SHARE_SENDERS
    assert [u for u, _ in out] == [0]
    assert all(isinstance(m, ServerAbort) and m.reason == R.TOO_FEW_SHARE_SENDERS.value
               for _, m in out)


def test_malicious_round2_and_round4_messages_are_signed() -> None:
    """In the malicious variant a masked input and an unmasking answer carry their
    sender's signature over the session, the sender and the body: an unsigned, a
    re-signed-by-another or an altered message is refused (a replica of the server
    that is handed them checks the same)."""
    server, up = drive(S.COLLECT_INPUTS, True)
    m = up[0]
    assert len(m.signature) == 64
    _rejects(server, m.signed(b""))
    _rejects(server, m.signed(up[1].signature))
    shifted = m.vector().copy()
    shifted[0] = (int(shifted[0]) + 1) % m.modulus
    _rejects(server, MaskedInput.from_vector(m.sender, shifted, m.modulus).signed(m.signature))
    server.receive(m)

    server, up = drive(S.COLLECT_UNMASK, True)
    m = up[0]
    assert len(m.signature) == 64
    _rejects(server, dataclasses.replace(m, signature=b""))
    _rejects(server, dataclasses.replace(m, signature=up[1].signature))
    # two well-formed shares swapped between owners: the body differs from what was signed
    assert len(m.b_shares) > 1 and m.b_shares[0] != m.b_shares[1]
    swapped = (m.b_shares[1], m.b_shares[0]) + m.b_shares[2:]
    _rejects(server, dataclasses.replace(m, b_shares=swapped))
    server.receive(m)


def test_a_shared_memo_skips_only_identical_checks() -> None:
    """Two servers of one session sharing a memo (a simulation's replica): the second
    does not re-verify a signature the first verified on the same bytes, and still
    refuses altered bytes."""
    import copy

    first, up = drive(S.COLLECT_INPUTS, True)
    second = copy.deepcopy(first)                  # the same session, state and all
    memo = SessionMemo()
    first._memo = second._memo = memo
    m = up[0]
    first.receive(m)
    assert memo.misses[VERIFY] == 1 and memo.hits[VERIFY] == 0
    second.receive(m)
    assert memo.misses[VERIFY] == 1 and memo.hits[VERIFY] == 1   # a hit, not a new check
    shifted = m.vector().copy()
    shifted[0] = (int(shifted[0]) + 1) % m.modulus
    forged = MaskedInput.from_vector(up[1].sender, shifted, m.modulus).signed(up[1].signature)
    _rejects(second, forged)
