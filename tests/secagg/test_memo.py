"""The session memo of pure cryptographic work (secagg.memo): each distinct piece of
work done once, every party still deciding on exactly the bytes it received, failures
remembered as failures, and an equivocating server rejected by every group it lied to."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import SERVER, Envelope, SecAggSimulation, make_config
from secagg import crypto
from secagg.errors import CryptoError
from secagg.memo import PAIRWISE, VERIFY, SessionMemo
from secagg.messages import KeyList, UnmaskRequest
from secagg.state import AbortReason, ClientState


def _rand(label: str) -> Any:
    return insecure_deterministic_randomness(7, label)


# ----------------------------------------------------------------------- signatures

def test_a_valid_triple_is_verified_once() -> None:
    sk, pk = crypto.ed25519_keypair(_rand("sig"))
    msg = b"the message"
    sig = crypto.ed25519_sign(sk, msg)
    memo = SessionMemo()
    for _ in range(5):
        memo.verify(pk, msg, sig)
    assert memo.misses[VERIFY] == 1 and memo.hits[VERIFY] == 4


def test_other_bytes_are_checked_afresh() -> None:
    """A hit needs the very same (key, message, signature): a changed message, a
    signature of the same key on other bytes, or another key is checked again and
    refused."""
    rand = _rand("sig2")
    sk, pk = crypto.ed25519_keypair(rand)
    _, other_pk = crypto.ed25519_keypair(rand)
    msg, other = b"alive set 1", b"alive set 2"
    sig, sig_other = crypto.ed25519_sign(sk, msg), crypto.ed25519_sign(sk, other)
    memo = SessionMemo()
    memo.verify(pk, msg, sig)
    for public, message, signature in ((pk, other, sig), (pk, msg, sig_other),
                                       (other_pk, msg, sig)):
        with pytest.raises(CryptoError):
            memo.verify(public, message, signature)
    assert memo.misses[VERIFY] == 4 and memo.hits[VERIFY] == 0
    memo.verify(pk, other, sig_other)   # a genuine triple of its own still passes


def test_a_failed_check_is_remembered_as_failed() -> None:
    sk, pk = crypto.ed25519_keypair(_rand("sig3"))
    forged = bytes(64)
    memo = SessionMemo()
    for _ in range(3):
        with pytest.raises(CryptoError):
            memo.verify(pk, b"m", forged)
    assert memo.misses[VERIFY] == 1 and memo.hits[VERIFY] == 2
    # malformed arguments are refused as the plain check refuses them
    with pytest.raises(CryptoError):
        memo.verify(pk[:31], b"m", crypto.ed25519_sign(sk, b"m"))
    with pytest.raises(CryptoError):
        memo.verify(pk, 5, forged)  # type: ignore[arg-type]


def test_accounting_charges_hits_at_the_mean_cost() -> None:
    # a reading of this clock costs 0.25 (the memo measures that first, from 62
    # readings), then the timed miss's readings are 1.25 apart: it cost 1.0
    ticks = iter([0.25 * i for i in range(62)] + [100.0 + 1.25 * i for i in range(40)])
    memo = SessionMemo(clock=lambda: next(ticks))
    sk, pk = crypto.ed25519_keypair(_rand("sig4"))
    sig = crypto.ed25519_sign(sk, b"m")
    memo.verify(pk, b"m", sig)            # one miss, 1.0 once the clock's cost is off
    memo.verify(pk, b"m", sig)
    memo.verify(pk, b"m", sig)
    assert memo.seconds[VERIFY] == 1.0 and memo.charged == 2.0
    assert memo.stats()["charged_seconds"] == 2.0


# ----------------------------------------------------------------------- pairwise keys

class _Party:
    """A simulated client's two X25519 key pairs."""

    def __init__(self, label: str) -> None:
        rand = _rand(label)
        self.c, self.c_pk = crypto.x25519_keypair(rand)
        self.s, self.s_pk = crypto.x25519_keypair(rand)

    def keys(self, memo: SessionMemo, peer: "_Party", ctx: bytes,
             c_peer: bytes | None = None) -> tuple[bytes, bytes]:
        return memo.pairwise_keys(ctx, self.c, self.c_pk, c_peer or peer.c_pk,
                                  self.s, self.s_pk, peer.s_pk)

    def direct(self, peer_c: bytes, peer_s: bytes, ctx: bytes) -> tuple[bytes, bytes]:
        return (crypto.hkdf(crypto.x25519_shared(self.c, peer_c),
                            label=crypto.LABEL_SHARE_KEY, context=ctx),
                crypto.hkdf(crypto.x25519_shared(self.s, peer_s),
                            label=crypto.LABEL_MASK_SEED, context=ctx))


_CTX = bytes(32) + (1).to_bytes(8, "big") + (2).to_bytes(8, "big")


def test_both_ends_get_the_keys_each_would_compute() -> None:
    u, v = _Party("u"), _Party("v")
    memo = SessionMemo()
    k_u = u.keys(memo, v, _CTX)
    assert len(memo) == 1
    k_v = v.keys(memo, u, _CTX)
    assert k_u == k_v == u.direct(v.c_pk, v.s_pk, _CTX) == v.direct(u.c_pk, u.s_pk, _CTX)
    assert k_u[0] != k_u[1]                      # share key and mask seed differ
    assert memo.misses[PAIRWISE] == 1 and memo.hits[PAIRWISE] == 1
    assert len(memo) == 0           # taken by its second end: nothing kept
    # another context (session or pair) is another derivation
    other = u.keys(memo, v, bytes(48))
    assert other != k_u and memo.misses[PAIRWISE] == 2


def test_a_substituted_key_misses_the_memo() -> None:
    """A server that hands ``u`` its own key ``M`` in place of ``v``'s: ``u`` derives
    with ``M`` (what it received), never from ``v``'s entry."""
    u, v, mallory = _Party("u"), _Party("v"), _Party("m")
    memo = SessionMemo()
    k_v = v.keys(memo, u, _CTX)
    k_u = u.keys(memo, v, _CTX, c_peer=mallory.c_pk)
    assert k_u == u.direct(mallory.c_pk, v.s_pk, _CTX) and k_u[0] != k_v[0]
    assert memo.hits[PAIRWISE] == 0


def test_a_low_order_key_fails_every_time() -> None:
    u, v = _Party("u"), _Party("v")
    memo = SessionMemo()
    for _ in range(3):
        with pytest.raises(CryptoError):
            u.keys(memo, v, _CTX, c_peer=bytes(32))
    assert memo.misses[PAIRWISE] == 1 and memo.hits[PAIRWISE] == 2


def test_pending_keys_are_capped() -> None:
    memo = SessionMemo(max_pending=2)
    u = _Party("u")
    peers = [_Party(f"p{i}") for i in range(3)]
    got = [u.keys(memo, p, _CTX) for p in peers]
    assert len(memo) == 2          # the third waits nowhere
    for p, keys in zip(peers, got):   # and every end still gets its keys
        assert p.keys(memo, u, _CTX) == keys
    assert memo.hits[PAIRWISE] == 2 and memo.misses[PAIRWISE] == 4


# ----------------------------------------------------------------------- equivocation

def _session(n: int) -> SecAggSimulation:
    cfg = make_config(n, 3, malicious=True, rand=_rand("cfg"))
    return SecAggSimulation(cfg, np.ones((n, 3), dtype=np.uint64), rand=_rand("run"),
                            adversary=None)


def _rewrite(envs: list[Envelope], kind: type, change: Any) -> list[Envelope]:
    out = []
    for env in envs:
        msg = env.message()
        if isinstance(msg, kind):
            new = change(env.recipient, msg)
            if new is not msg:
                env = Envelope.of(SERVER, env.recipient, env.round, new)
        out.append(env)
    return out


def test_an_equivocating_key_list_is_refused_by_every_group_it_reaches() -> None:
    """Round 1: the server gives one group the genuine signed key list, a second group
    lists with one entry's signature swapped for another genuine signature (a valid
    signature, by another key on other bytes), a third group lists with one entry's
    mask key replaced (the original signature kept). The genuine triples are verified
    and memoised by the first group; each lying group still refuses its own bytes
    (INVALID_KEY_SIGNATURE), and the memo saw hits, so the lies met a warm memo."""
    n = 24
    honest, swapped, altered = range(0, 8), range(8, 16), range(16, 24)
    fresh = crypto.x25519_keypair(_rand("fresh"))[1]

    def lie(recipient: int, msg: KeyList) -> KeyList:
        entries = list(msg.entries)
        victim = next(i for i, e in enumerate(entries) if e.sender != recipient)
        other = next(i for i, e in enumerate(entries)
                     if e.sender not in (recipient, entries[victim].sender))
        if recipient in swapped:
            entries[victim] = dataclasses.replace(entries[victim],
                                                  signature=entries[other].signature)
        elif recipient in altered:
            entries[victim] = dataclasses.replace(entries[victim], s_pk=fresh)
        else:
            return msg
        return dataclasses.replace(msg, entries=tuple(entries))

    def hook(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        return _rewrite(envs, KeyList, lie) if direction == "down" else envs

    sim = _session(n)
    sim.adversary = hook
    sim.run()
    run = sim.result()
    reasons = run.client_abort_reasons
    for u in (*swapped, *altered):
        assert reasons.get(u) is AbortReason.INVALID_KEY_SIGNATURE, u
    for u in honest:
        assert reasons.get(u) is not AbortReason.INVALID_KEY_SIGNATURE, u
        assert any(r.sender == u and r.kind == "ShareKeys" for r in run.transcript.envelopes), u
    assert run.memo_stats["hits"][VERIFY] > 0


def test_an_equivocating_unmask_request_is_refused_by_the_group_it_lies_to() -> None:
    """Round 4: even clients get the genuine signatures on the survivor set; odd
    clients get one neighbour's signature replaced by that neighbour's genuine
    signature on other bytes (its round-0 key signature). The even clients (checking
    first or after, the delivery interleaves them) answer; every odd one aborts with
    INVALID_CONSISTENCY_SIGNATURE, though the memo holds the genuine triples."""
    n = 16
    key_sigs: dict[int, bytes] = {}

    def note(recipient: int, msg: KeyList) -> KeyList:
        for e in msg.entries:
            key_sigs[e.sender] = e.signature
        return msg

    def lie(recipient: int, msg: UnmaskRequest) -> UnmaskRequest:
        if recipient % 2 == 0:
            return msg
        sigs = list(msg.signatures)
        i = next(i for i, w in enumerate(msg.signers) if w != recipient)
        sigs[i] = key_sigs[msg.signers[i]]
        return dataclasses.replace(msg, signatures=tuple(sigs))

    def hook(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        if direction != "down":
            return envs
        return _rewrite(_rewrite(envs, KeyList, note), UnmaskRequest, lie)

    sim = _session(n)
    sim.adversary = hook
    sim.run()
    run = sim.result()
    for u in range(n):
        if u % 2:
            assert run.client_abort_reasons.get(u) is \
                AbortReason.INVALID_CONSISTENCY_SIGNATURE, u
        else:
            assert run.client_states[u] is ClientState.COMPLETED, u
    assert run.memo_stats["hits"][VERIFY] > 0


def test_the_memo_lives_and_dies_with_its_session() -> None:
    """Each session builds its own memo, shared by its clients and its server and by
    nothing else; without it every party computes everything itself."""
    first, second = _session(6), _session(6)
    assert first.memo is not None and first.memo is not second.memo
    assert all(c._memo is first.memo for c in first.clients)
    assert first.server._memo is first.memo
    cfg = make_config(6, 3, malicious=True, rand=_rand("cfg"))
    alone = SecAggSimulation(cfg, np.ones((6, 3), dtype=np.uint64), rand=_rand("run"),
                             share_work=False)
    assert alone.memo is None and all(c._memo is None for c in alone.clients)
    alone.run()
    assert alone.result().memo_stats is None


def test_shards_of_a_session_share_one_memo_per_process() -> None:
    """Sharded: the shards of one session in one process use one memo (pairs across
    shards computed once), another session's shards another, and the release is the
    one of a run without any memo."""
    from protocol.core.secagg_shards import ClientShard, run_secagg_sharded

    cfg = make_config(30, 3, graph="harary", degree=8, malicious=True, rand=_rand("cfg"))
    rows = np.arange(90, dtype=np.uint64).reshape(30, 3)
    shared = run_secagg_sharded(cfg, rows, rand=_rand("run"), shards=3)
    alone = run_secagg_sharded(cfg, rows, rand=_rand("run"), shards=3, share_work=False)
    assert shared.completed and np.array_equal(shared.result, alone.result)
    assert np.array_equal(shared.result, rows.sum(axis=0) % (1 << 32))
    assert alone.memo_stats is None
    # every pair's second end found its keys: the three shards share one memo
    assert shared.memo_stats["hits"][PAIRWISE] == 30 * 8 // 2
    plain = make_config(30, 3, graph="harary", degree=8, rand=_rand("cfg"))
    first = ClientShard(plain, 0, 10, rows[:10], None, None, None, b"session-a")
    second = ClientShard(plain, 10, 20, rows[10:20], None, None, None, b"session-a")
    other = ClientShard(plain, 20, 30, rows[20:], None, None, None, b"session-b")
    assert first.memo is second.memo and other.memo is not first.memo


def test_the_clock_overhead_is_the_median_gap_between_readings() -> None:
    from secagg.memo import clock_overhead

    # gaps of 0.5 except one outlier of 9.0 (a reading interrupted): the median is 0.5
    values, t = [], 0.0
    for i in range(31):
        values += [t, t + (9.0 if i == 3 else 0.5)]
        t += 100.0
    it = iter(values)
    assert clock_overhead(lambda: next(it)) == 0.5
    import time
    assert 0.0 <= clock_overhead(time.process_time) < 1e-3
