"""Fresh sessions: every attempt of a round binds the server's nonce and every client's
nonce into the session id; messages of an earlier attempt of the same round
specification are rejected with ``stale_session`` (malicious-server variant), even when
a malicious server reuses its own nonce."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Envelope, make_config, run_secagg
from secagg import crypto
from secagg.messages import KeyList, UnmaskRequest
from secagg.server import SecAggServer
from secagg.state import AbortReason as R, ClientState, ServerState, SessionConfig

N, DIM, T, VICTIM = 8, 3, 3, 2
NONCE = bytes(range(32))


def _cfg(server_nonce: bytes | None = NONCE) -> SessionConfig:
    return make_config(N, DIM, graph="complete", threshold=T, malicious=True,
                       server_nonce=server_nonce)


def _x() -> np.ndarray:
    return np.arange(N * DIM, dtype=np.uint64).reshape(N, DIM)


def _pki(seed: int = 77) -> tuple[list[bytes], list[bytes]]:
    rand = insecure_deterministic_randomness(seed)
    pairs = [crypto.ed25519_keypair(rand) for _ in range(N)]
    return [sk for sk, _ in pairs], [pk for _, pk in pairs]


SKS, VKS = _pki()


def _run(cfg: SessionConfig, seed: int, hook=None, server=None):
    return run_secagg(cfg, _x(), rand=insecure_deterministic_randomness(seed), adversary=hook,
                      signing_keys=SKS, verify_keys=VKS, server=server)


def _capture(kind: type, round_no: int, store: dict[int, Envelope]):
    def hook(r, direction, envs):
        if direction == "down" and r == round_no:
            store.update({e.recipient: e for e in envs if isinstance(e.message(), kind)})
        return envs
    return hook


def test_every_attempt_has_its_own_session_id() -> None:
    a, b = make_config(N, DIM, threshold=T), make_config(N, DIM, threshold=T)
    assert a.base_session == b.base_session          # same round specification
    assert a.session != b.session                    # fresh server nonce each attempt
    # the graph follows the transcript-bound id, never the base id alone
    root = bytes(range(32))
    assert a.graph_seed(root) != b.graph_seed(root)
    # a server that reuses its nonce still gets a new transcript-bound id: clients' nonces
    r1, r2 = _run(_cfg(), 1), _run(_cfg(), 2)
    assert r1.completed and r2.completed
    assert r1.server.session != r2.server.session
    assert all(c.session == r1.server.session for c in r1.clients)


def test_server_nonce_is_required_and_checked() -> None:
    from secagg.errors import ParameterError

    cfg = _cfg()
    for bad in (b"", bytes(31), "x" * 32):
        with pytest.raises(ParameterError):
            SessionConfig(cfg.params, cfg.participants, cfg.context, cfg.dim, cfg.modulus,
                          malicious=True, server_nonce=bad)


def test_replayed_key_list_of_an_earlier_attempt_is_stale() -> None:
    """Round 0: the server reuses its nonce (same sid_0, so every key signature of the
    earlier attempt still verifies) and replays the victim's earlier key list."""
    old: dict[int, Envelope] = {}
    _run(_cfg(), 1, _capture(KeyList, 0, old))

    def hook(r, direction, envs):
        if direction == "down" and r == 0:
            return [old[VICTIM] if e.recipient == VICTIM else e for e in envs]
        return envs

    run = _run(_cfg(), 2, hook)
    assert run.client_abort_reasons[VICTIM] is R.STALE_SESSION
    assert VICTIM not in run.transcript.reveals


def test_replayed_key_signatures_inside_a_fresh_key_list_fail() -> None:
    """The earlier attempt's signed keys of the victim's peers, spliced into a fresh key
    list: with a fresh server nonce the signatures no longer verify."""
    old: dict[int, Envelope] = {}
    _run(_cfg(NONCE), 1, _capture(KeyList, 0, old))
    stale = {e.sender: e for e in old[VICTIM].message().entries}

    def hook(r, direction, envs):
        out = []
        for e in envs:
            if direction == "down" and r == 0 and e.recipient == VICTIM:
                m = e.message()
                m = replace(m, entries=tuple(stale[a.sender] for a in m.entries))
                e = Envelope.of(e.sender, e.recipient, e.round, m)
            out.append(e)
        return out

    run = _run(_cfg(bytes(32)), 2, hook)
    assert run.client_abort_reasons[VICTIM] is R.INVALID_KEY_SIGNATURE


class _ReplayingServer(SecAggServer):
    """A malicious server that reuses its nonce and, when round 0 closes, swaps in the
    earlier attempt's signed AdvertiseKeys of some clients (the transcript it builds
    is consistent with the keys it distributes)."""

    def __init__(self, config: SessionConfig, old_keys: dict, **kw) -> None:
        super().__init__(config, **kw)
        self.old_keys = old_keys

    def _close_keys(self, event):
        for v, k in self.old_keys.items():
            if self._in_u1[v]:
                self._keys[v] = k
        return super()._close_keys(event)


def test_replayed_keys_in_a_consistent_transcript_are_caught_by_their_owner() -> None:
    old_keys: dict = {}

    def grab(r, direction, envs):
        if direction == "up" and r == 0:
            old_keys.update({e.sender: e.message() for e in envs if e.sender in (VICTIM, 5)})
        return envs

    _run(_cfg(), 1, grab)
    cfg = _cfg()
    srv = _ReplayingServer(cfg, old_keys, verify_keys=VKS)
    run = _run(cfg, 2, server=srv)
    # the owners see a transcript without their fresh nonce and keys: stale_session
    assert run.client_abort_reasons[VICTIM] is R.STALE_SESSION
    assert run.client_abort_reasons[5] is R.STALE_SESSION
    assert VICTIM not in run.transcript.reveals


def test_replayed_consistency_signatures_of_an_earlier_attempt_are_stale() -> None:
    """Round 3: the earlier attempt's unmasking request (with the consistency signatures
    collected then) replayed verbatim is stale; its signatures re-wrapped in a request of
    this attempt do not verify (they sign the earlier transcript-bound id)."""
    old: dict[int, Envelope] = {}
    first = _run(_cfg(), 1, _capture(UnmaskRequest, 3, old))
    assert first.completed

    def replay(mode: str):
        def hook(r, direction, envs):
            out = []
            for e in envs:
                if direction == "down" and r == 3 and e.recipient == VICTIM:
                    if mode == "verbatim":
                        e = old[VICTIM]
                    else:
                        m, o = e.message(), old[VICTIM].message()
                        m = replace(m, signers=o.signers, signatures=o.signatures)
                        e = Envelope.of(e.sender, e.recipient, e.round, m)
                out.append(e)
            return out
        return hook

    run = _run(_cfg(), 2, replay("verbatim"))
    assert run.client_abort_reasons[VICTIM] is R.STALE_SESSION
    assert VICTIM not in run.transcript.reveals
    run = _run(_cfg(), 3, replay("rewrapped"))
    assert run.client_abort_reasons[VICTIM] is R.INVALID_CONSISTENCY_SIGNATURE
    assert VICTIM not in run.transcript.reveals


def test_replayed_consistency_request_is_stale() -> None:
    from secagg.messages import ConsistencyRequest

    old: dict[int, Envelope] = {}
    _run(_cfg(), 1, _capture(ConsistencyRequest, 2, old))

    def hook(r, direction, envs):
        if direction == "down" and r == 2:
            return [old[VICTIM] if e.recipient == VICTIM else e for e in envs]
        return envs

    run = _run(_cfg(), 2, hook)
    assert run.client_abort_reasons[VICTIM] is R.STALE_SESSION
    assert run.client_states[VICTIM] is ClientState.ABORTED


def test_transcript_tree_paths() -> None:
    for n in (2, 3, 5, 8, 9, 1000):
        leaves = {i: crypto.transcript_leaf(i, bytes([i % 256]) * 32, bytes(32), bytes(32))
                  for i in range(0, n, 3)}
        levels = crypto.transcript_tree(n, leaves)
        root = levels[-1][0]
        for i in list(leaves)[:20]:
            path = crypto.transcript_path(levels, i)
            assert len(path) == crypto.transcript_depth(n)
            assert crypto.transcript_root_from_path(leaves[i], i, path) == root
            # the same leaf at another position, or another leaf, gives another root
            j = i ^ 1
            assert crypto.transcript_root_from_path(leaves[i], j, path) != root or j >= n
            other = crypto.transcript_leaf(i, b"\xff" * 32, bytes(32), bytes(32))
            assert crypto.transcript_root_from_path(other, i, path) != root
        # each level is one buffer of 32-byte nodes, indexed like a list
        assert [len(level) for level in levels] == [
            1 << (len(levels) - 1 - h) for h in range(len(levels))]
        assert levels[0][-1] == levels[0][len(levels[0]) - 1]
    from secagg.errors import ParameterError

    with pytest.raises(ParameterError):
        crypto.transcript_tree(4, {0: b"not a 32-byte hash"})   # would shift every node


def test_server_session_is_bound_to_every_round_0_contribution() -> None:
    cfg = _cfg()
    run = _run(cfg, 4)
    assert run.server_state is ServerState.COMPLETED
    srv = run.server
    leaves = {v: crypto.transcript_leaf(v, k.nonce, k.c_pk, k.s_pk) for v, k in srv._keys.items()}
    root = crypto.transcript_tree(cfg.n, leaves)[-1][0]
    assert srv.session == cfg.transcript_session(root)
    # one client's nonce changed -> another transcript-bound id
    k0 = srv._keys[0]
    leaves[0] = crypto.transcript_leaf(0, bytes(32), k0.c_pk, k0.s_pk)
    assert cfg.transcript_session(crypto.transcript_tree(cfg.n, leaves)[-1][0]) != srv.session


def test_split_view_with_replayed_signatures_across_attempts_fails() -> None:
    """The replay that used to beat the consistency check: 8 clients, ``t = 5``, three
    corrupt (their signing keys known to the server). Attempt 1 collects everyone's
    signatures on ``S1`` (all alive), attempt 2 the signatures on ``S2`` (the victim
    dropped), both with the same server nonce. In attempt 3 group A = {0, 1, victim} is
    shown ``S1`` and group B = {3, 4} ``S2``; each honest member gets the signatures of
    its own group and the corrupt clients, which is below ``t`` for B, plus the other
    group's signatures on its set replayed from the earlier attempts (enough for ``t``
    if they verified). They do not: B never reveals a mask-key share of the victim, so
    the server holds at most the 3 corrupt shares of it (< t)."""
    from secagg.messages import ConsistencyRequest, ConsistencySignature
    from secagg.state import set_to_bitmap

    t, victim = 5, VICTIM
    group_a, group_b, corrupt = {0, 1, victim}, {3, 4}, {5, 6, 7}
    cfg = make_config(N, DIM, graph="complete", threshold=t, malicious=True,
                      server_nonce=NONCE)
    s1 = set_to_bitmap(range(N), N)
    s2 = set_to_bitmap(sorted(set(range(N)) - {victim}), N)

    def collect(run_no: int, shown: bytes) -> dict[int, bytes]:
        sigs: dict[int, bytes] = {}

        def hook(r, direction, envs):
            if direction == "down" and r == 2:
                return [Envelope.of(e.sender, e.recipient, e.round,
                                    replace(e.message(), alive=shown)) for e in envs]
            if direction == "up" and r == 3:
                sigs.update({e.sender: e.message().signature for e in envs
                             if isinstance(e.message(), ConsistencySignature)})
            return envs

        _run(cfg, run_no, hook)
        return sigs

    old_s1, old_s2 = collect(1, s1), collect(2, s2)
    assert set(old_s1) == set(range(N)) and set(old_s2) == set(range(N)) - {victim}

    def attack(replay: bool):
        current: dict[int, bytes] = {}

        def hook(r, direction, envs):
            if direction == "down" and r == 2:
                return [Envelope.of(e.sender, e.recipient, e.round, replace(
                    e.message(), alive=s2 if e.recipient in group_b else s1)) for e in envs]
            if direction == "up" and r == 3:
                current.update({e.sender: e.message().signature for e in envs
                                if isinstance(e.message(), ConsistencySignature)})
            if direction == "down" and r == 3:
                # the honest server rejected B's signatures on S2 (U4 lacks B); the
                # attacking server answers every client anyway
                out, m = [], envs[0].message()
                for c in range(N):
                    in_b = c in group_b
                    shown = s2 if in_b else s1
                    sig = {w: current[w] for w in (group_b if in_b else group_a | corrupt)
                           if w in current}
                    for w in corrupt:  # the server signs for its clients, on any set
                        sig[w] = crypto.ed25519_sign(SKS[w],
                                                     cfg.consistency_message(m.session, shown))
                    if replay:
                        old = old_s2 if in_b else old_s1
                        for w in (group_a - {victim} if in_b else group_b):
                            sig.setdefault(w, old[w])
                    signers = tuple(sorted(sig))
                    out.append(Envelope.of(envs[0].sender, c, r, UnmaskRequest(
                        m.session, N, shown, set_to_bitmap([victim] if in_b else [], N),
                        signers, tuple(sig[w] for w in signers))))
                return out
            return envs

        return _run(cfg, 3, hook)

    for replay, reason in ((True, R.INVALID_CONSISTENCY_SIGNATURE),
                           (False, R.TOO_FEW_SIGNATURES)):
        run = attack(replay)
        for c in group_b:
            assert run.client_abort_reasons[c] is reason
        s_holders = {c for c, (_, s) in run.transcript.reveals.items() if victim in s}
        assert not s_holders & (group_a | group_b)
        assert len(s_holders | corrupt) < t
