"""Full sessions through the engine: exact sums for every kind of modulus, both graphs
and both variants, determinism, session binding, transcript and cost accounting."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import SERVER, Dropout, make_config, run_secagg
from secagg.errors import ParameterError
from secagg.params import find_params
from secagg.state import ClientState, ModAccumulator, SessionConfig, set_to_bitmap


def _sum(x: np.ndarray, rows, modulus: int) -> list[int]:
    return [sum(int(v) for v in x[sorted(rows), j]) % modulus for j in range(x.shape[1])]


def _inputs(n: int, dim: int, modulus: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if modulus == 1 << 64:
        return rng.integers(0, 1 << 64, (n, dim), dtype=np.uint64, endpoint=False)
    return rng.integers(0, modulus, (n, dim), dtype=np.uint64)


@pytest.mark.parametrize("modulus", [2, 3, 7, 1 << 8, 1 << 16, 1000003, 1 << 32,
                                     (1 << 61) - 1, (1 << 63) + 5, (1 << 64) - 59, 1 << 64])
def test_exact_sum_for_any_modulus(modulus: int) -> None:
    cfg = make_config(6, 9, threshold=3, modulus=modulus)
    x = _inputs(6, 9, modulus)
    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(modulus))
    assert run.completed
    assert [int(v) for v in run.result] == _sum(x, range(6), modulus)


@pytest.mark.parametrize("graph", ["complete", "harary"])
@pytest.mark.parametrize("malicious", [False, True])
def test_full_round_with_found_parameters(graph: str, malicious: bool) -> None:
    n = 24
    params = find_params(n, graph=graph, malicious=malicious)
    cfg = SessionConfig(params, tuple(range(1000, 1000 + n)), b"ctx", 16, 1 << 32,
                        malicious=malicious, server_nonce=bytes(range(32)))
    x = _inputs(n, 16, 1 << 32, 1)
    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(2))
    assert run.completed and all(s is ClientState.COMPLETED for s in run.client_states)
    assert [int(v) for v in run.result] == _sum(x, range(n), 1 << 32)
    # every message went through the codec, in both directions
    kinds = {e.kind for e in run.transcript.envelopes}
    expected = {"AdvertiseKeys", "KeyList", "ShareKeys", "RoutedShares", "MaskedInput",
                "UnmaskRequest", "UnmaskShares"}
    if malicious:
        expected |= {"ConsistencyRequest", "ConsistencySignature"}
    assert kinds == expected
    # nobody revealed both shares of anyone
    for c in range(n):
        for p in range(n):
            assert not run.transcript.revealed_both(c, p)
    assert run.bytes_up.sum() == sum(e.size for e in run.transcript.envelopes
                                     if e.sender != SERVER)
    assert run.bytes_down.sum() == sum(e.size for e in run.transcript.envelopes
                                       if e.sender == SERVER)
    assert (run.client_seconds > 0).all() and run.server_seconds > 0


def test_harary_neighbourhoods_are_recomputed_consistently() -> None:
    cfg = make_config(30, 2, graph="harary", degree=6, threshold=3)
    run = run_secagg(cfg, np.zeros((30, 2), np.uint64),
                     rand=insecure_deterministic_randomness(3))
    assert run.completed
    server_graph = run.server.neighbours
    for i, c in enumerate(run.clients):
        assert c.neighbours == server_graph[i] and len(c.neighbours) == 6
        assert all(i in server_graph[j] for j in c.neighbours)   # symmetric
    # SecAgg+ cost: a client sends k ciphertexts, not n - 1
    shares = [e for e in run.transcript.envelopes if e.kind == "ShareKeys"]
    full = make_config(30, 2)
    run_full = run_secagg(full, np.zeros((30, 2), np.uint64),
                          rand=insecure_deterministic_randomness(3))
    shares_full = [e for e in run_full.transcript.envelopes if e.kind == "ShareKeys"]
    assert max(e.size for e in shares) * 3 < min(e.size for e in shares_full)


def test_deterministic_with_seed_and_fresh_without() -> None:
    cfg = make_config(5, 4, threshold=3)
    x = _inputs(5, 4, 1 << 32)
    a = run_secagg(cfg, x, rand=insecure_deterministic_randomness(7))
    b = run_secagg(cfg, x, rand=insecure_deterministic_randomness(7))
    c = run_secagg(cfg, x)  # OsRandom
    assert a.input_digests == b.input_digests
    assert a.input_digests != c.input_digests
    assert np.array_equal(a.result, c.result)


def test_masked_inputs_do_not_reveal_inputs() -> None:
    """Each masked vector differs from its input (uniform masks: equality of an entry
    has probability 2^-32 per entry; 40 entries)."""
    cfg = make_config(4, 10, threshold=2)
    x = _inputs(4, 10, 1 << 32)
    seen = []

    def hook(round_no, direction, envs):
        if direction == "up" and round_no == 2:
            seen.extend(e.message().vector().copy() for e in envs)
        return envs

    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(5), adversary=hook)
    assert run.completed and len(seen) == 4
    for y in seen:
        assert not any((y == row).any() for row in x)


def test_session_binds_parameters_roster_and_context() -> None:
    base = make_config(5, 4, threshold=3)
    variants = [make_config(5, 4, threshold=3, context=b"other"),
                make_config(5, 4, threshold=2),
                make_config(5, 5, threshold=3),
                make_config(5, 4, threshold=3, modulus=1 << 16),
                make_config(5, 4, threshold=3, participants=[0, 1, 2, 4, 3]),
                make_config(5, 4, threshold=3, malicious=True)]
    sessions = {base.session} | {v.session for v in variants}
    assert len(sessions) == 1 + len(variants)


def test_config_validation() -> None:
    with pytest.raises(ParameterError):
        make_config(5, 0)
    with pytest.raises(ParameterError):
        make_config(5, 3, modulus=1)
    with pytest.raises(ParameterError):
        make_config(5, 3, modulus=(1 << 64) + 1)
    with pytest.raises(ParameterError):
        make_config(5, 3, participants=[1, 2, 3])


def test_callable_inputs_and_input_errors() -> None:
    cfg = make_config(4, 3, threshold=2)
    x = _inputs(4, 3, 1 << 32)
    run = run_secagg(cfg, lambda i: x[i], rand=insecure_deterministic_randomness(1))
    assert [int(v) for v in run.result] == _sum(x, range(4), 1 << 32)
    with pytest.raises(ParameterError):
        run_secagg(cfg, x[:3])


@pytest.mark.parametrize("modulus", [5, (1 << 63) + 5, 1 << 20])
def test_mod_accumulator_matches_python(modulus: int) -> None:
    rng = np.random.default_rng(modulus % 1000)
    hi = min(modulus, 1 << 63)
    acc = ModAccumulator(7, modulus)
    ref = [0] * 7
    for step in range(300):
        v = rng.integers(0, hi, 7, dtype=np.uint64)
        if step % 3:
            acc.add(v)
            ref = [(a + int(b)) % modulus for a, b in zip(ref, v)]
        else:
            acc.sub(v)
            ref = [(a - int(b)) % modulus for a, b in zip(ref, v)]
    assert [int(v) for v in acc.value()] == ref


def test_random_dropout_model_is_reproducible() -> None:
    a = Dropout.random(100, 0.2, np.random.default_rng(1))
    b = Dropout.random(100, 0.2, np.random.default_rng(1))
    assert a.schedule == b.schedule
    dropped = sum(len(v) for v in a.schedule.values())
    assert 5 <= dropped <= 40  # Binomial(100, 0.2): outside with prob < 1e-4
    with pytest.raises(ValueError):
        Dropout.random(3, 1.5, np.random.default_rng(0))


def test_bitmap_roundtrip() -> None:
    from secagg.state import bitmap_to_mask

    for n in (1, 7, 8, 9, 100):
        members = list(range(0, n, 3))
        mask = bitmap_to_mask(set_to_bitmap(members, n), n)
        assert np.flatnonzero(mask).tolist() == members
    with pytest.raises(ValueError):
        bitmap_to_mask(b"\xff", 7)  # padding bit set
    with pytest.raises(ValueError):
        bitmap_to_mask(b"\x00\x00", 7)


@pytest.mark.slow
def test_bench_command_small(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from protocol.cli import main

    assert main(["bench", "secagg", "--clients", "40", "--dim", "200", "--graph", "harary",
                 "--dropout", "0.1", "--seed", "1", "--json", "--bare-sample", "50"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["correct"] is True and out["clients"] == 40
    for key in ("seconds", "client_seconds_mean", "server_seconds", "bytes_up_per_client",
                "bytes_down_per_client", "primitives", "peak_rss_mb"):
        assert key in out


@pytest.mark.slow
def test_thousand_clients_harary_with_dropouts_is_exact() -> None:
    """The acceptance configuration of the benchmark (correctness only; timing is
    reported by ``fedhh bench secagg``, not asserted, since CI machines are shared)."""
    from protocol.studies.runners.benchmarks import bench_secagg

    out = bench_secagg(1000, 200, graph="harary", dropout=0.1, seed=5, bare_sample=20)
    assert out["correct"] is True and out["survivors"] < 1000


def test_clients_forget_their_secrets_when_done() -> None:
    """After a run no client keeps its secret keys, self-mask seed, pairwise keys or the
    shares it held; a client that drops after round 2 has already dropped all but the
    shares (it may still be asked for them)."""
    from protocol.core.secagg_engine import Dropout

    cfg = make_config(8, 3, threshold=3)
    run = run_secagg(cfg, np.ones((8, 3), dtype=np.uint64),
                     rand=insecure_deterministic_randomness(2), dropout=Dropout({4: {6}}))
    assert run.completed
    for c in run.clients:
        assert c._c_sk == c._s_sk == c._b == b""
        assert not c._share_keys and not c._mask_seeds
        if c.index == 6:  # dropped before round 4: still holds its peers' shares
            assert c._held_b and c._held_s
        else:
            assert not c._held_b and not c._held_s


def test_clients_drop_round_0_secrets_after_round_1_and_keep_shares_over_their_keys() -> None:
    """Once its key list is handled a client keeps neither key pair nor its round-0
    nonce (the pairwise keys are derived, ``s_sk`` is shared), only the self-mask
    seed; the shares it receives in round 2 are written over the pairwise keys in the
    same buffer, and that buffer is zeroed when dropped."""
    from protocol.core.secagg_engine import SecAggSimulation

    cfg = make_config(8, 3, threshold=3)
    sim = SecAggSimulation(cfg, np.ones((8, 3), dtype=np.uint64),
                           rand=insecure_deterministic_randomness(4))
    sim.start()
    assert all(c._c_sk and c._s_sk and c._c_pk and c._nonce for c in sim.clients)
    sim.step()  # round 0 closed: every client handled its key list and sent shares
    buffers = []
    for c in sim.clients:
        assert c._c_sk == c._s_sk == c._c_pk == c._s_pk == c._nonce == b""
        assert len(c._b) == 32 and len(c._share_keys) == 7 and not c._held_b
        buffers.append(c._records)
    sim.step()  # round 1 closed: every client received its shares and masked its input
    for c, buf in zip(sim.clients, buffers):
        assert c._records is buf and c._b == b"" and not c._share_keys
        assert len(c._held_b) == len(c._held_s) == 7
        # what the buffer holds now is the shares alone (their y lanes: every held
        # share is at the client's own point x = u + 1): no byte of a pairwise key left
        x = (c.index + 1).to_bytes(2, "big")
        shares = [(c._held_share(i, 0), c._held_share(i, 1)) for i in range(len(c.neighbours))]
        assert all(bs[:2] == ss[:2] == x for bs, ss in shares)
        assert bytes(buf) == b"".join(bs[2:] + ss[2:] for bs, ss in shares)
    sim.run()
    assert sim.server.result is not None and [int(v) for v in sim.server.result] == [8] * 3
    assert all(not any(buf) for buf in buffers)  # zeroed when the shares were dropped


# --------------------------------------------------------------- round numbers: one source

def test_message_table_in_the_docstring_matches_tag_and_round() -> None:
    import re

    import secagg.messages as mm

    rows = {m.group(3): (int(m.group(1)), None if m.group(2) == "--" else int(m.group(2)))
            for m in re.finditer(r"^\s*(\d+)\s+(\d|--)\s+(\w+) \(", mm.__doc__, re.M)}
    assert rows == {c.__name__: (c.TAG, c.ROUND) for c in mm.ALL_MESSAGES}


def test_rounds_are_derived_from_the_messages() -> None:
    from protocol.core.invariants import client_rounds
    from secagg.messages import CLIENT_MESSAGES, ConsistencySignature, SERVER_MESSAGES
    from secagg.server import COLLECTING_ROUND

    assert [c.ROUND for c in CLIENT_MESSAGES] == [0, 1, 2, 3, 4]
    # a server message asks for the client message of its ROUND
    assert [c.ROUND for c in SERVER_MESSAGES[:-1]] == [1, 2, 3, 4]
    assert client_rounds(True) == [0, 1, 2, 3, 4]
    assert client_rounds(False) == [0, 1, 2, 4]
    assert ConsistencySignature.ROUND not in client_rounds(False)
    assert sorted(COLLECTING_ROUND.values()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("malicious", [False, True])
def test_engine_envelopes_carry_the_message_round(malicious: bool) -> None:
    from secagg import messages as mm

    cfg = make_config(6, 3, threshold=3, malicious=malicious)
    run = run_secagg(cfg, np.ones((6, 3), dtype=np.uint64),
                     rand=insecure_deterministic_randomness(5))
    assert run.completed
    by_name = {c.__name__: c for c in mm.ALL_MESSAGES}
    for e in run.transcript.envelopes:
        cls = by_name[e.kind]
        if e.sender >= 0:
            assert e.round == cls.ROUND
        else:  # the server's messages are sent as the round before their answer closes
            assert e.round < cls.ROUND
    assert sorted({e.round for e in run.transcript.envelopes if e.sender >= 0}) == (
        [0, 1, 2, 3, 4] if malicious else [0, 1, 2, 4])
