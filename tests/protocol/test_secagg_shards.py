"""The client side of a session in shards: the same run as the in-process simulation
(local engine and Dask workers), and a worker killed mid-round turns its clients into
dropouts."""
from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from protocol.core.cluster import DaskEngine, LocalEngine, ShardLost, make_engine
from protocol.core.contract import Kind, RoundSpec, Votes
from protocol.core.net.session import NetSessionSpec
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Dropout, run_secagg
from protocol.core.secagg_shards import (
    SeededRows, ShardedSecAggSimulation, run_secagg_sharded, shard_bounds,
)
from protocol.core.transports.secagg_transport import SecAggTransport, VoteRows
from protocol.core.transports.threshold import ThresholdTransport
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.state import ModAccumulator


def _config(spec: NetSessionSpec, seed: int):
    rand = insecure_deterministic_randomness(seed)
    return spec.config(rand.token_bytes(FRESH_NONCE_BYTES)), rand


def _records(run):
    return sorted((e.sender, e.recipient, e.round, e.kind, e.size)
                  for e in run.transcript.envelopes)


@pytest.fixture(scope="module")
def dask_engine():
    engine = DaskEngine(2)
    yield engine
    engine.close()


def test_shard_bounds_cover_the_roster():
    assert shard_bounds(10, 3) == [(0, 3), (3, 7), (7, 10)]
    assert shard_bounds(2, 5) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("threat,graph,dropout", [("malicious", "harary", 0.0),
                                                  ("semi-honest", "complete", 0.0),
                                                  ("malicious", "harary", 0.04)])
def test_sharded_run_is_the_simulation(threat, graph, dropout):
    spec = NetSessionSpec(60, dim=12, threat=threat, graph=graph)
    rows = SeededRows(3, 12, spec.modulus)
    drop = (Dropout.random(60, dropout, np.random.default_rng(1)) if dropout
            else None)
    c1, r1 = _config(spec, 7)
    local = run_secagg(c1, rows, rand=r1, dropout=drop)
    c2, r2 = _config(spec, 7)
    sharded = run_secagg_sharded(c2, rows, rand=r2, dropout=drop, shards=5)
    assert local.completed and sharded.completed
    np.testing.assert_array_equal(local.result, sharded.result)
    assert _records(local) == _records(sharded)
    assert local.client_states == sharded.client_states
    assert local.transcript.reveals == sharded.transcript.reveals
    np.testing.assert_array_equal(local.bytes_up, sharded.bytes_up)
    np.testing.assert_array_equal(local.bytes_down, sharded.bytes_down)


def test_dask_workers_give_the_same_run(dask_engine):
    """Two workers: the same run as in process; the clients are regrouped by the ring
    once round 0 closes, so only the pairs across the two workers' boundaries are
    derived twice (by each end's worker), where without it about half are."""
    spec = NetSessionSpec(160, dim=10)
    rows = SeededRows(5, 10, spec.modulus)
    c1, r1 = _config(spec, 11)
    local = run_secagg(c1, rows, rand=r1)
    misses = {}
    for regroup in (True, False):
        c2, r2 = _config(spec, 11)
        sim = ShardedSecAggSimulation(c2, rows, rand=r2, engine=dask_engine, regroup=regroup)
        assert sim.regroup is regroup and sorted(set(sim.workers_of)) == [0, 1]
        sim.run()
        remote = sim.result()
        assert remote.completed
        np.testing.assert_array_equal(local.result, remote.result)
        assert _records(local) == _records(remote)
        assert local.client_states == remote.client_states
        assert remote.client_seconds.sum() > 0  # measured on the workers, reported back
        assert bool(sim.regrouped) is regroup
        misses[regroup] = remote.memo_stats["misses"]["pairwise_keys"]
    pairs, half = 160 * c1.degree // 2, c1.degree // 2
    # two boundaries between the workers' stretches of the ring, each crossed by
    # 1 + 2 + ... + k/2 pairs
    assert misses[True] <= pairs + 2 * half * (half + 1) // 2
    assert misses[False] > pairs + pairs // 4
    # auto: regrouped because the shards are on two workers
    c3, r3 = _config(spec, 11)
    auto = ShardedSecAggSimulation(c3, rows, rand=r3, engine=dask_engine)
    assert auto.regroup
    dask_engine.drop(auto.handles)


def test_a_finished_session_leaves_nothing_of_its_own_in_the_driver(dask_engine):
    """Dask's batched streams log their recent messages by default, and the messages
    that start the shards hold the shards' arguments by reference: every finished
    session's configuration, rows and keys stayed in the driver (about 70 MB a session
    at 10^6 users). The engine turns those logs off, so once a session is dropped none
    of its configurations is left in this process."""
    import gc

    from secagg.state import SessionConfig

    spec = NetSessionSpec(40, dim=6)

    def one_session(seed: int) -> bytes:
        config, rand = _config(spec, seed)
        sim = ShardedSecAggSimulation(config, SeededRows(2, 6, spec.modulus), rand=rand,
                                      engine=dask_engine, shards=4)
        sim.run()
        assert sim.result().completed
        return config.server_nonce

    def left_of(nonce: bytes) -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects()
                   if type(o) is SessionConfig and o.server_nonce == nonce)

    nonce = one_session(23)
    one_session(24)          # the next session's messages would push out a short log
    # Dask releases a dropped shard's task in its own thread, a moment later: wait for
    # it (with the logs on, the configurations stay however long one waits)
    deadline = time.monotonic() + 20
    while left_of(nonce) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left_of(nonce) == 0


@pytest.mark.parametrize("threat,dropout", [("malicious", 0.0), ("malicious", 0.04),
                                            ("semi-honest", 0.04)])
def test_a_regrouped_run_is_the_simulation(threat, dropout):
    """Clients moved between shards after round 0 (their keys, randomness, inputs and
    state go with them) give the very same run as the in-process simulation, and each
    shard ends up holding one stretch of the graph's ring."""
    from secagg.graph import ring_order

    n = 90
    spec = NetSessionSpec(n, dim=12, threat=threat)
    rows = SeededRows(3, 12, spec.modulus)
    drop = Dropout.random(n, dropout, np.random.default_rng(1)) if dropout else None
    c1, r1 = _config(spec, 7)
    local = run_secagg(c1, rows, rand=r1, dropout=drop)
    c2, r2 = _config(spec, 7)
    sim = ShardedSecAggSimulation(c2, rows, rand=r2, dropout=drop, shards=5, regroup=True)
    assert sim.regroup and sim.workers_of == [0] * 5
    sim.run()
    sharded = sim.result()
    assert local.completed and sharded.completed
    np.testing.assert_array_equal(local.result, sharded.result)
    assert _records(local) == _records(sharded)
    assert local.client_states == sharded.client_states
    assert local.client_abort_reasons == sharded.client_abort_reasons
    assert local.transcript.reveals == sharded.transcript.reveals
    np.testing.assert_array_equal(local.bytes_up, sharded.bytes_up)
    np.testing.assert_array_equal(local.bytes_down, sharded.bytes_down)
    assert sim.regrouped and sim.regrouped[0] > n // 2
    ring = ring_order(n, c2.graph_seed(sim.server.transcript_root))
    place = np.empty(n, int)
    place[ring] = np.arange(n)
    for s, members in enumerate(sim.members):
        p = np.sort(place[members])
        assert len(p) and np.all(np.diff(p) == 1), s  # one stretch of the ring
    assert sorted(np.concatenate(sim.members).tolist()) == list(range(n))


def test_a_shard_exports_and_adopts_only_what_it_is_told():
    """export hands over the named clients (and nothing it does not hold); adopt takes
    them with the destination's shared state; the moved client goes on exactly where
    it left off."""
    from protocol.core.secagg_shards import ClientShard

    spec = NetSessionSpec(12, dim=4)
    config, rand = _config(spec, 5)
    rows = SeededRows(1, 4, spec.modulus)
    from secagg import crypto

    keys = [crypto.ed25519_keypair(rand) for _ in range(12)]
    sk, vk = [k for k, _ in keys], [v for _, v in keys]
    seeds = [rand.token_bytes(32) for _ in range(12)]
    a = ClientShard(config, 0, 6, rows, seeds[:6], sk[:6], vk, b"t")
    b = ClientShard(config, 6, 12, rows, seeds[6:], sk[6:], vk, b"t")
    a.start(range(6))
    blobs = a.export({1: [2, 3, 40]})
    assert sorted(a.clients) == [0, 1, 4, 5] and list(blobs) == [1]
    assert b.adopt([blobs[1]]) == 2
    moved = b.clients[3]
    assert moved._memo is b.memo and moved._verify_keys is b.verify_keys
    assert moved.config is b.config and moved.state.name == "AWAIT_KEYS"
    np.testing.assert_array_equal(moved._value(), rows(3))  # still computed on demand
    assert b.finish()["indices"] == [2, 3, 6, 7, 8, 9, 10, 11]
    # a vote round's client takes its own vote along, not the shard's (nor its row)
    votes = VoteRows(np.arange(12) % 3 - 1, 5000)
    c = ClientShard(config, 0, 6, votes.shard(0, 6), seeds[:6], sk[:6], vk, b"t")
    c.start(range(6))
    d = ClientShard(config, 6, 12, votes.shard(6, 12), seeds[6:], sk[6:], vk, b"t")
    blob = c.export({1: [5]})[1]
    assert len(blob) < 3000  # its row would be 40,000 bytes
    d.adopt([blob])
    assert d.clients[5]._value.inputs.choice.tolist() == [votes.choice[5]]
    np.testing.assert_array_equal(d.clients[5]._value(), votes(5))


def test_transports_on_workers_release_the_same(dask_engine):
    spec = RoundSpec(task="t", round=1, kind=Kind.VOTE, candidates=("a", "b", "c"), theta=5)
    choice = np.random.default_rng(2).integers(-1, 3, size=40)
    votes = Votes(choice)
    for cls in (SecAggTransport, ThresholdTransport):
        here = cls(simulate=True, workers=1).run_round(spec, votes, np.random.default_rng(4))
        there = cls(simulate=True, workers=2)
        there._engine = dask_engine  # the module's cluster (one start for the module)
        away = there.run_round(spec, votes, np.random.default_rng(4))
        assert away.release == here.release, cls.__name__


def test_vote_rows_shard_keeps_only_its_clients():
    rows = VoteRows(np.array([2, -1, 0, 1]), 3)
    part = rows.shard(1, 3)
    assert part.choice.tolist() == [-1, 0]
    np.testing.assert_array_equal(part(2), rows(2))
    np.testing.assert_array_equal(part(1), np.zeros(3, dtype=np.uint64))


@pytest.mark.slow  # 33 s: starts a Dask cluster and kills a worker (run with -m slow)
def test_a_killed_worker_turns_its_clients_into_dropouts():
    """Four workers, one shard each; the worker holding shard 0 is killed (SIGKILL)
    after round 1 has closed. Its clients never send a masked input; the session, built
    to tolerate 30% dropouts, completes over exactly the others."""
    spec = NetSessionSpec(60, dim=8, dropout=0.3)
    rows = SeededRows(9, 8, spec.modulus)
    config, rand = _config(spec, 13)
    with DaskEngine(4) as engine:
        sim = ShardedSecAggSimulation(config, rows, rand=rand, engine=engine, shards=4)
        sim.start()
        sim.step()  # round 0 closed: keys out, shares being made
        pids = engine.client.run(os.getpid)
        actor_worker = engine.worker_addresses()[0]  # shard 0 was placed there
        os.kill(pids[actor_worker], signal.SIGKILL)
        while not sim.finished:
            sim.step()
        run = sim.result()
    assert 0 in sim.lost
    assert sim.regrouped  # the worker died after its shard took its stretch of the ring
    held = set(sim.members[0].tolist())
    assert run.completed, run.server_abort_reason
    assert held and not held & run.survivors
    acc = ModAccumulator(8, spec.modulus)
    for i in sorted(run.survivors):
        acc.add(rows(i))
    np.testing.assert_array_equal(acc.value(), run.result)
    assert any("shard 0 lost" in r for _, _, r in run.transcript.rejected)


def test_engines_refuse_bad_arguments():
    with pytest.raises(ValueError):
        make_engine(0)
    assert isinstance(make_engine(1), LocalEngine)
    assert ShardLost(1, "x").shard == 1


def test_a_local_cluster_runs_without_dasks_profiler_and_system_monitor(dask_engine):
    """The workers of a cluster the engine starts spend no CPU on Dask's sampling
    profiler or its disk monitor (they took about 3% of a worker in a large round);
    the setting is the cluster's, not the process's afterwards."""
    import dask

    def probe(dask_worker):
        return ("profile" in dask_worker.periodic_callbacks,
                dask.config.get("distributed.worker.profile.enabled"),
                dask.config.get("distributed.admin.system-monitor.disk"),
                dask.config.get("distributed.worker.memory.monitor-interval"))

    seen = dask_engine.client.run(probe)
    assert len(seen) == 2 and set(seen.values()) == {(False, False, False, "1s")}
    # the nannies live in this process: their memory monitor runs once a second
    nannies = list(dask_engine._cluster.workers.values())
    assert len(nannies) == 2 and all(
        nanny.periodic_callbacks["memory_monitor"].callback_time == 1000 for nanny in nannies)
    assert dask.config.get("distributed.worker.profile.enabled") is True


def test_an_existing_scheduler_by_address(dask_engine):
    """``--cluster ADDRESS`` goes through the same code path as a local cluster."""
    address = dask_engine.client.scheduler.address
    spec = NetSessionSpec(30, dim=6, threat="semi-honest")
    rows = SeededRows(2, 6, spec.modulus)
    c1, r1 = _config(spec, 3)
    local = run_secagg(c1, rows, rand=r1)
    with make_engine(None, address) as remote_engine:
        assert isinstance(remote_engine, DaskEngine) and remote_engine.workers == 2
        c2, r2 = _config(spec, 3)
        remote = run_secagg_sharded(c2, rows, rand=r2, engine=remote_engine)
    np.testing.assert_array_equal(local.result, remote.result)
    assert dask_engine.client.scheduler_info()["workers"]  # the cluster outlives the client


def test_the_driver_hands_each_shards_replies_up_before_awaiting_the_next():
    """Replies are given to the server shard by shard as they come (the driver decodes
    one shard's messages while the workers compute the next ones'), with progress
    reported per shard; the run is still the in-process one."""
    events: list[tuple] = []

    class Recording(LocalEngine):
        def imap(self, handles, method, args):
            for i, res in enumerate(super().imap(handles, method, args)):
                events.append(("result", method, i))
                yield res

    spec = NetSessionSpec(40, dim=6, threat="semi-honest", graph="complete")
    rows = SeededRows(5, 6, spec.modulus)
    c1, r1 = _config(spec, 11)
    local = run_secagg(c1, rows, rand=r1)
    c2, r2 = _config(spec, 11)
    sim = ShardedSecAggSimulation(
        c2, rows, rand=r2, engine=Recording(), shards=4,
        progress=lambda step, done, total: events.append(("progress", step, done, total)))
    sim.run()
    run = sim.result()
    np.testing.assert_array_equal(run.result, local.result)
    assert _records(run) == _records(local)
    calls = [e for e in events if e[0] == "result" and e[1] in ("start", "deliver")]
    assert len(calls) == 4 * 4  # round 0 and the three rounds a semi-honest session runs
    # each shard's result is followed by its progress report before the next shard's
    for i, e in enumerate(events):
        if e[0] == "result" and e[1] in ("start", "deliver"):
            assert events[i + 1][0] == "progress", events[i:i + 2]
    by_step: dict[int, list[tuple]] = {}
    for e in events:
        if e[0] == "progress":
            by_step.setdefault(e[1], []).append(e[2:])
    assert sorted(by_step) == [0, 1, 2, 3]
    for reports in by_step.values():
        # a report of 0 served as the step starts, then one per shard
        dones = [d for d, _ in reports]
        assert len(reports) == 5 and dones[0] == 0 and dones == sorted(set(dones))
        assert reports[-1][0] == reports[-1][1] == 40


def test_the_dask_engine_keeps_a_window_of_calls_in_flight():
    """At most 2 x workers calls are in flight (made, result not yet taken), each call's
    arguments are built only when it is made, results come in the handles' order, and a
    call that cannot be made is a ShardLost in its place: a step's messages and replies
    are then not all in the driver at once. Fakes stand in for the actors."""
    engine = object.__new__(DaskEngine)  # the cluster is not needed for the scheduling
    engine.workers = 2
    events: list[tuple[str, int]] = []

    class Future:
        def __init__(self, i: int) -> None:
            self.i = i

        def result(self) -> int:
            events.append(("take", self.i))
            return 10 * self.i

    class Handle:
        def __init__(self, i: int) -> None:
            self.i = i

        def go(self, x: int) -> Future:
            if self.i == 7:
                raise RuntimeError("actor gone")
            events.append(("call", self.i))
            return Future(self.i)

    def args():
        for i in range(12):
            events.append(("args", i))
            yield (i,)

    out = list(engine.imap([Handle(i) for i in range(12)], "go", args()))
    assert [r for r in out if not isinstance(r, ShardLost)] == [10 * i for i in range(12) if i != 7]
    assert isinstance(out[7], ShardLost) and out[7].shard == 7 and "actor gone" in out[7].detail
    in_flight = peak = 0
    for kind, i in events:
        in_flight += {"call": 1, "take": -1}.get(kind, 0)
        peak = max(peak, in_flight)
        if kind == "args":  # an argument is built only when its call is about to be made
            assert sum(k == "take" for k, _ in events[:events.index((kind, i))]) >= i - 4
    assert peak == 4


def test_seeded_rows_total_is_the_plaintext_sum() -> None:
    rows = SeededRows(4, 7, 1 << 16)
    want = sum(rows(i).astype(np.int64) for i in (0, 3, 5)) % (1 << 16)
    np.testing.assert_array_equal(rows.total([0, 3, 5]), want.astype(np.uint64))
    np.testing.assert_array_equal(rows.total([]), np.zeros(7, np.uint64))


def test_bench_secagg_regroups_on_workers_unless_told_not_to(monkeypatch):
    """``fedhh bench secagg --workers 2`` regroups by default; ``--no-regroup`` passes
    ``regroup=False`` down to the sharded simulation."""
    import protocol.studies.runners.benchmarks as bm
    from protocol.cli import main

    seen = []

    def fake(*args, **kwargs):
        seen.append(kwargs.get("regroup"))
        raise SystemExit(0)

    monkeypatch.setattr(bm, "bench_secagg", fake)
    for argv, want in ((["--workers", "2"], None), (["--workers", "2", "--no-regroup"], False)):
        with pytest.raises(SystemExit):
            main(["bench", "secagg", "--clients", "20", "--dim", "4", *argv])
        assert seen[-1] is want


def test_bench_secagg_measures_the_speedup_on_alternating_pairs(dask_engine, monkeypatch):
    """``--workers 2 --repeats N``: N pairs of the same round, one in this process and
    one on the workers, each pair's ratio and their median, every release the same;
    ``--repeats`` with neither workers nor ``--compare-threats`` is refused."""
    import statistics

    import protocol.core.cluster as cluster_mod
    from protocol.cli import main
    from protocol.studies.runners.benchmarks import bench_secagg

    class Kept:
        """The module's two-worker cluster, which the bench must not close."""

        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(dask_engine, name)

        def close(self) -> None:
            pass

    monkeypatch.setattr(cluster_mod, "make_engine", lambda workers, cluster=None: Kept())
    out = bench_secagg(40, 4, threat="semi-honest", seed=3, workers=2, repeats=3,
                       bare_sample=5)
    d = out["distributed"]
    assert d["release_equal"] and d["pairs_release_equal"] and d["repeats"] == 3
    assert len(d["pairs"]) == 3
    for p in d["pairs"]:
        assert p["seconds"] > 0 and p["one_worker_seconds"] > 0
        # each figure is rounded to 3 decimals (walls of milliseconds here): the ratio
        # holds within what the rounding of the two walls allows
        slack = 1e-3 * (1 + p["seconds"] + p["speedup"])
        assert abs(p["speedup"] * p["seconds"] - p["one_worker_seconds"]) <= slack
    assert d["speedup_median"] == round(statistics.median(p["speedup"] for p in d["pairs"]), 3)
    # each step of both runs timed: round 0, then the server's closes of rounds 0, 1, 2
    # and 4 (no round 3 without the consistency check); together about the run's wall
    names = ["start", "close 0", "close 1", "close 2", "close 4"]
    for steps, wall in ((out["steps"], out["seconds"]), (d["steps"], d["seconds"])):
        assert [s["step"] for s in steps] == names
        assert all(s["seconds"] >= 0 and s["cpu_seconds"] >= 0 for s in steps)
        assert sum(s["seconds"] for s in steps) <= wall + 0.01
    assert main(["bench", "secagg", "--clients", "20", "--dim", "4", "--repeats", "2"]) == 2


def test_lazy_rounds_are_encoded_shard_by_shard(monkeypatch):
    """The key lists and the routed ciphertexts are built and encoded when each shard's
    call is made: as a shard is handed its clients' messages, the transcript holds
    those of the shards called so far, not the whole round's; the run is the
    in-process simulation's."""
    from protocol.core.secagg_shards import ClientShard

    spec = NetSessionSpec(60, dim=4)
    c1, r1 = _config(spec, 9)
    local = run_secagg(c1, SeededRows(1, 4, spec.modulus), rand=r1)
    c2, r2 = _config(spec, 9)
    sim = ShardedSecAggSimulation(c2, SeededRows(1, 4, spec.modulus), rand=r2, shards=4)
    seen: list[tuple[int, int]] = []
    deliver = ClientShard.deliver

    def counting(self, blob):  # noqa: ANN001, ANN202
        seen.append((sim.server.round, sum(1 for e in sim.transcript.envelopes
                                           if e.kind in ("KeyList", "RoutedShares"))))
        return deliver(self, blob)

    monkeypatch.setattr(ClientShard, "deliver", counting)
    sim.run()
    run = sim.result()
    assert run.completed and _records(run) == _records(local)
    np.testing.assert_array_equal(run.result, local.result)
    sizes = [len(m) for m in sim.members]
    for round_no, before in ((1, 0), (2, 60)):
        counts = [k for r, k in seen if r == round_no]
        assert len(counts) == 4
        # each call sees its own shard's messages and those of the calls before it
        assert counts[0] - before < 60 and counts == sorted(set(counts))
        assert counts[-1] == before + 60
        assert counts[0] - before in sizes


def test_large_steps_get_more_shards():
    """A shard's largest step (its masked inputs up, or its key lists down) stays
    under SHARD_STEP_BYTES: small sessions keep 4 shards per worker, a 10^6-user
    TrieHH round with 7,224 candidates gets enough shards for about 32 MiB each."""
    from protocol.core.secagg_shards import SHARD_STEP_BYTES, shards_for_bytes

    small = NetSessionSpec(60, dim=4)
    c, r = _config(small, 1)
    assert shards_for_bytes(c) == 1
    sim = ShardedSecAggSimulation(c, SeededRows(1, 4, small.modulus), rand=r)
    assert len(sim.bounds) == 4          # the local engine: 1 worker, 4 shards

    class Big:   # the shape of one such session (no keys drawn for 21,980 clients)
        n, dim, degree, modulus = 21980, 7224, 88, (1 << 61) - 1

    count = shards_for_bytes(Big)  # type: ignore[arg-type]
    per_client = -(-7224 * 61 // 8)
    assert (count - 1) * SHARD_STEP_BYTES < 21980 * per_client <= count * SHARD_STEP_BYTES
    assert 30 <= count <= 40
    Big.dim = 28                 # then the key lists are the largest step
    assert shards_for_bytes(Big) == -(-21980 * 88 * 160 // SHARD_STEP_BYTES)  # type: ignore[arg-type]
