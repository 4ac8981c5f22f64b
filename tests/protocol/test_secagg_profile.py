"""The per-primitive profile of a secure-aggregation run and its bare-cost replay."""
from __future__ import annotations

import numpy as np

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Dropout, make_config, profile_primitives, run_secagg
import pytest

from protocol.core.secagg_profile import FAMILIES, bare_costs, device_profile, primitive_table
from secagg import crypto


def _run(n: int, graph: str, dropout: Dropout | None = None,  # noqa: ANN202
         degree: int | None = None, share_work: bool = False, malicious: bool = False,
         every: int = 1):
    # without the session memo unless asked: the counts are then the protocol's
    cfg = make_config(n, 7, graph=graph, degree=degree, malicious=malicious,
                      rand=insecure_deterministic_randomness(4))
    with profile_primitives(every) as prof:
        res = run_secagg(cfg, np.ones((n, 7), dtype=np.uint64),
                         rand=insecure_deterministic_randomness(3),
                         dropout=dropout or Dropout.none(), share_work=share_work)
    return cfg, res, prof


def test_counts_match_the_protocol_complete_graph() -> None:
    n = 12
    cfg, res, prof = _run(n, "complete")
    assert res.completed
    # two key pairs per client; keypair's own x25519_public is not counted again
    assert prof.calls["x25519_keypair"] == 2 * n
    assert prof.calls.get("x25519_public", 0) == 0
    # a c-secret and an s-secret with every other client
    assert prof.calls["x25519_shared"] == 2 * n * (n - 1)
    # n-1 pairwise masks and a self mask per client, summed in one call (the modulus
    # 2^32 is a power of two), and the server's n self masks in one more
    assert prof.calls["mask_sum"] == n + 1
    assert prof.shapes["mask_sum"] == {(7, 1 << 32, n): n + 1}
    assert prof.calls.get("expand_mask", 0) == 0
    # each client shares b and s_sk in one call; the server rebuilds the n self-mask
    # seeds in one batch (no dropout: no s key to rebuild, and no call for none)
    assert prof.calls["split_encoded_many"] == n
    assert prof.calls["combine_encoded_many"] == 1 and "combine_encoded" not in prof.calls
    assert prof.shapes["combine_encoded_many"] == {(n, cfg.threshold): 1}
    assert prof.shapes["split_encoded_many"] == {(2, n - 1, cfg.threshold): n}


def test_counts_on_a_sparse_graph_with_a_dropout() -> None:
    n = 60
    # client 5 sends its shares but not its masked input: the server rebuilds its s key
    cfg, res, prof = _run(n, "harary", Dropout({2: {5}}), degree=10)
    k = cfg.degree
    assert res.completed and k < n - 1 and 5 not in res.survivors
    assert prof.calls["x25519_keypair"] == 2 * n
    assert prof.calls["x25519_public"] == 1  # the server checks the rebuilt s key
    # clients: 2 per neighbour; the server: the dropped client's s-secret per neighbour
    assert prof.calls["x25519_shared"] == 2 * n * k + k


def test_wrappers_are_removed_after_the_block() -> None:
    before = crypto.x25519_shared
    with profile_primitives():
        assert crypto.x25519_shared is not before
    assert crypto.x25519_shared is before


def test_primitive_table_and_bare_replay() -> None:
    _, _, prof = _run(12, "complete")
    table = primitive_table(prof, sample=20)
    assert set(table) == set(FAMILIES)
    ka = table["key_agreement"]
    assert ka["calls"] == prof.calls["x25519_keypair"] + prof.calls["x25519_shared"]
    assert ka["bare_seconds"] > 0 and ka["overhead_ratio"] is not None
    assert table["signature"]["calls"] == 0 and table["signature"]["bare_seconds"] == 0
    assert table["signature"]["overhead_ratio"] is None
    # the full replay and the sampled one estimate the same cost (loose: timing noise)
    full, sampled = bare_costs(prof, 0), bare_costs(prof, 20)
    assert full["key_agreement"] > 0 and sampled["key_agreement"] > 0
    assert 0.2 < full["key_agreement"] / sampled["key_agreement"] < 5


@pytest.mark.parametrize("malicious", [False, True])
def test_the_device_profile_counts_what_devices_execute(malicious: bool) -> None:
    """With the session memo the process executes fewer key agreements and signature
    checks; the per-device profile adds its hits back and gets exactly the counts of
    a run in which every party computes everything itself."""
    n, k = 40, 10
    _, shared_res, shared = _run(n, "harary", degree=k, share_work=True,
                                 malicious=malicious)
    _, alone_res, alone = _run(n, "harary", degree=k, share_work=False,
                               malicious=malicious)
    assert shared_res.completed and alone_res.completed
    assert np.array_equal(shared_res.result, alone_res.result)
    stats = shared_res.memo_stats
    assert stats["hits"]["pairwise_keys"] == n * k // 2   # the second end of every pair
    assert shared.calls["x25519_shared"] == alone.calls["x25519_shared"] - n * k
    if malicious:
        assert stats["hits"]["ed25519_verify"] > 0
        assert shared.calls["ed25519_verify"] < alone.calls["ed25519_verify"]
    assert alone_res.memo_stats is None
    device = device_profile(shared, stats)
    for fn in ("x25519_shared", "hkdf", "ed25519_verify", "ed25519_sign", "aead_encrypt"):
        assert device.calls.get(fn, 0) == alone.calls.get(fn, 0), fn
    # the per-device CPU is the simulation's plus what the memo spared
    assert shared_res.device_seconds > float(shared_res.client_seconds.sum())
    assert np.all(shared_res.device_client_seconds >= shared_res.client_seconds)


def test_sampled_timing_counts_every_call() -> None:
    _, _, every = _run(12, "complete")
    _, _, sampled = _run(12, "complete", every=7)
    assert sampled.calls == every.calls
    n = sampled.calls["x25519_shared"]
    assert sampled.timed["x25519_shared"] == -(-n // 7)   # the first, then every 7th
    assert every.timed["x25519_shared"] == n
    # scaled to all calls: the same order of magnitude as timing every call
    assert 0.2 < sampled.seconds["x25519_shared"] / every.seconds["x25519_shared"] < 5
    with pytest.raises(ValueError):
        with profile_primitives(0):
            pass


def test_bench_secagg_refuses_a_session_larger_than_the_protocol_allows(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A session holds at most MAX_PARTICIPANTS clients: more is a one-line usage
    error (exit 2), not a traceback from deep inside the session's setup."""
    from protocol.cli import main
    from secagg.state import MAX_PARTICIPANTS

    assert main(["bench", "secagg", "--clients", str(MAX_PARTICIPANTS + 1),
                 "--dim", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--clients" in err and str(MAX_PARTICIPANTS) in err and "\n" not in err
