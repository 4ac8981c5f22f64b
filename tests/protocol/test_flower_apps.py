"""fedhh inside Flower (needs ``flwr``): the mod and the workflow against Flower's
plaintext FedAvg, node failures mid-round, refusals, a tampering server, TrieHH as a
Flower app against ``fedhh triehh``, and the project template, on the in-process grid
(Flower's messages, records, serialisation and ClientApp; no Ray). The same apps in
Flower's simulation engine: ``test_flower_engine.py`` (slow)."""
from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from protocol.flower.fedavg_app import (  # noqa: E402
    AppConfig, Recorder, make_client_app, make_server_app,
)
from protocol.flower.local import LocalGrid, serve  # noqa: E402
from protocol.flower.session import Quantiser, write_pki  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("flwr").setLevel(logging.WARNING)


def _run(cfg: AppConfig, grid_fail=None, tamper=None) -> Recorder:  # noqa: ANN001
    rec = Recorder()
    grid = LocalGrid(make_client_app(cfg), cfg.nodes, fail=grid_fail)
    if tamper is not None:
        grid = tamper(grid)
    serve(make_server_app(cfg, rec), grid)
    return rec


def _bound(cfg: AppConfig, nodes_in_sum: int) -> float:
    """Quantisation error of one round's mean (every node's weight is cfg.samples)."""
    q = Quantiser()
    share = nodes_in_sum * cfg.samples / q.max_weight
    return (nodes_in_sum * 2 * q.clipping_range / q.quantization_range / share
            + 2 * q.max_weight / (q.quantization_range * cfg.samples))


def _assert_recovered_and_plain(cfg: AppConfig, rec: Recorder, lost: tuple[int, ...]) -> None:
    """Every round of ``cfg`` summed all nodes but ``lost``, and its mean is that of
    Flower's plaintext FedAvg without them, up to the quantisation error."""
    n = cfg.nodes
    assert all(o.total is not None and len(o.survivors) == n - len(lost)
               for o in rec.outcomes)
    plain = _run(AppConfig(nodes=n, rounds=cfg.rounds, dim=cfg.dim, mode="plain", fail=lost))
    for rnd in range(1, cfg.rounds + 1):
        for a, b in zip(plain.params[rnd], rec.params[rnd]):
            assert np.max(np.abs(a - b)) < 3 * rnd * _bound(cfg, n - len(lost))


@pytest.mark.parametrize("fail", [(), (3, 7)])
def test_fedavg_equals_flowers_plaintext_fedavg(tmp_path, fail) -> None:  # noqa: ANN001
    n = 12
    write_pki(tmp_path, n)
    common = dict(nodes=n, rounds=3, dim=4, pki=str(tmp_path), fail=fail, fail_from=2,
                  dropout_rate=0.2)
    plain = _run(AppConfig(mode="plain", **common))
    ours = _run(AppConfig(mode="fedhh", **common))
    assert sorted(plain.params) == sorted(ours.params) == [1, 2, 3]
    for rnd in (1, 2, 3):
        in_sum = n - (len(fail) if rnd >= 2 else 0)
        # later rounds start from slightly different parameters: the bound grows per round
        tol = 3 * rnd * _bound(AppConfig(**common), in_sum)
        for a, b in zip(plain.params[rnd], ours.params[rnd]):
            assert np.max(np.abs(a - b)) < tol, (rnd, np.max(np.abs(a - b)), tol)
    # the failing nodes dropped out after the key exchange and were recovered
    outs = ours.outcomes
    assert all(o.total is not None for o in outs)
    assert [len(o.survivors) for o in outs] == [n, n - len(fail), n - len(fail)]
    if fail:
        assert all("fails in round" in why for o in outs[1:] for _, why in o.rejected)
        assert not np.allclose(plain.params[3][0], _run(AppConfig(
            mode="plain", **{**common, "fail": ()})).params[3][0])


def test_nodes_that_stop_answering_are_recovered(tmp_path) -> None:  # noqa: ANN001
    """Two nodes go silent when the training request comes (no reply at all, as a
    node Flower loses): the round completes without them, exactly the others' mean."""
    n = 10
    write_pki(tmp_path, n)
    cfg = AppConfig(nodes=n, rounds=1, dim=3, mode="fedhh", pki=str(tmp_path),
                    dropout_rate=0.2)
    rec = Recorder()

    def silent(i, msg):  # noqa: ANN001, ANN202
        return i in (2, 5) and bool(msg.content.array_records)

    serve(make_server_app(cfg, rec), LocalGrid(make_client_app(cfg), n, silent=silent))
    out = rec.outcomes[0]
    assert out.total is not None and len(out.survivors) == n - 2 and len(out.dropped) == 2
    plain = _run(AppConfig(nodes=n, rounds=1, dim=3, mode="plain", fail=(2, 5)))
    for a, b in zip(plain.params[1], rec.params[1]):
        assert np.max(np.abs(a - b)) < 3 * _bound(cfg, n - 2)


class _Sizes:
    """A grid that records how many messages each send carries."""

    def __init__(self, grid) -> None:  # noqa: ANN001
        self.grid, self.sizes = grid, []

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self.grid, name)

    def send_and_receive(self, messages, *, timeout=None):  # noqa: ANN001, ANN201
        messages = list(messages)
        self.sizes.append(len(messages))
        return self.grid.send_and_receive(messages, timeout=timeout)


def test_a_window_sends_at_most_that_many_and_changes_nothing_else(tmp_path) -> None:  # noqa: ANN001
    """With window 4 every stage goes out in sends of at most 4 messages; two nodes that
    go silent at the training request are recovered; the mean is the plaintext one."""
    n = 10
    write_pki(tmp_path, n)
    cfg = AppConfig(nodes=n, rounds=2, dim=3, mode="fedhh", pki=str(tmp_path),
                    dropout_rate=0.2, window=4)
    rec = Recorder()

    def silent(i, msg):  # noqa: ANN001, ANN202
        return i in (2, 5) and bool(msg.content.array_records)

    grid = _Sizes(LocalGrid(make_client_app(cfg), n, silent=silent))
    serve(make_server_app(cfg, rec), grid)
    assert max(grid.sizes) == 4 and grid.sizes[:3] == [4, 4, 2]  # identify: 10 nodes
    _assert_recovered_and_plain(cfg, rec, (2, 5))


def test_a_window_below_one_is_refused() -> None:
    from protocol.flower.session import FlowerSecAggError
    from protocol.flower.workflow import FedhhSecAggWorkflow, SessionDriver

    for bad in (0, -3, 2.5, True, "all"):
        with pytest.raises(FlowerSecAggError, match="window"):
            SessionDriver(window=bad)
    with pytest.raises(FlowerSecAggError, match="window"):
        FedhhSecAggWorkflow(window=0)


class _Pulling(_Sizes):
    """A grid with Flower's ``pull_interval`` that records it at each send."""

    def __init__(self, grid) -> None:  # noqa: ANN001
        super().__init__(grid)
        self.pull_interval, self.seen = 0.1, []

    def send_and_receive(self, messages, *, timeout=None):  # noqa: ANN001, ANN201
        self.seen.append(self.pull_interval)
        return super().send_and_receive(messages, timeout=timeout)


def test_the_pull_interval_grows_with_the_batch_and_is_put_back(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Flower's in-process grid asks for a batch's replies every ``pull_interval``: the
    driver raises it for large batches (never lowers it) and restores it after each,
    also when the send raises; the sum is unchanged."""
    from protocol.flower import workflow

    assert workflow.pull_interval(1) == workflow.pull_interval(200) == 0.1
    assert workflow.pull_interval(600) == pytest.approx(0.3)
    assert workflow.pull_interval(10**6) == workflow.PULL_MAX == 0.5

    class Raising:
        pull_interval = 0.1

        def send_and_receive(self, messages, *, timeout=None):  # noqa: ANN001, ANN201
            assert self.pull_interval == 0.5
            raise RuntimeError("lost")

    g = Raising()
    with pytest.raises(RuntimeError, match="lost"):
        with workflow._pulling_every(g, 0.5):
            g.send_and_receive([])
    assert g.pull_interval == 0.1
    slow = Raising()
    slow.pull_interval = 3.0  # a grid that already waits longer keeps its interval
    with workflow._pulling_every(slow, 0.5):
        assert slow.pull_interval == 3.0
    with workflow._pulling_every(object(), 0.5):  # no pull_interval: left alone
        pass

    n = 6
    write_pki(tmp_path, n)
    monkeypatch.setattr(workflow, "PULL_PER_MESSAGE", 0.05)  # 6 messages: 0.3 s
    cfg = AppConfig(nodes=n, rounds=1, dim=3, mode="fedhh", pki=str(tmp_path))
    rec = Recorder()
    grid = _Pulling(LocalGrid(make_client_app(cfg), n))
    serve(make_server_app(cfg, rec), grid)
    assert grid.seen and all(v == pytest.approx(0.3) for v in grid.seen)
    assert grid.pull_interval == 0.1
    assert rec.outcomes[0].total is not None and len(rec.outcomes[0].survivors) == n
    plain = _run(AppConfig(nodes=n, rounds=1, dim=3, mode="plain"))
    for a, b in zip(plain.params[1], rec.params[1]):
        assert np.max(np.abs(a - b)) < 3 * _bound(cfg, n)


class _InMemory:
    """What the workflow sees of Flower's ``InMemoryGrid`` (``pull_interval``, and
    messages pushed and pulled one by one) over the in-process grid: a pushed message
    is delivered when its reply is first asked for. Records the most messages stored
    at once."""

    def __init__(self, grid) -> None:  # noqa: ANN001
        self.grid, self.pull_interval, self.stored, self.most = grid, 0.1, {}, 0
        self.pushed = 0

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self.grid, name)

    def push_messages(self, messages):  # noqa: ANN001, ANN201
        import uuid

        ids = []
        for m in messages:
            mid = uuid.uuid4().hex
            self.stored[mid] = m
            ids.append(mid)
        self.pushed += len(ids)
        self.most = max(self.most, len(self.stored))
        return ids

    def pull_messages(self, ids):  # noqa: ANN001, ANN201
        out = []
        for mid in list(ids)[:2]:  # two "workers": at most two replies an ask
            msg = self.stored.pop(mid, None)
            if msg is None:
                continue
            for r in self.grid.send_and_receive([msg]):
                r.metadata.__dict__["_reply_to_message_id"] = mid
                out.append(r)
        return out

    def send_and_receive(self, messages, *, timeout=None):  # noqa: ANN001, ANN201
        raise AssertionError("the simulation grid is driven by push and pull")


@pytest.mark.parametrize("window, most", [("auto", 8), (3, 3)])
def test_a_sliding_window_in_the_simulation_engine(tmp_path, window, most) -> None:  # noqa: ANN001
    """On a grid like the simulation engine's, the workflow keeps at most the window's
    messages stored at once (8 by default), sending the next as replies come; two
    nodes whose ClientApp fails mid-round are recovered; the mean is the plaintext
    one."""
    n = 12
    write_pki(tmp_path, n)
    cfg = AppConfig(nodes=n, rounds=2, dim=3, mode="fedhh", pki=str(tmp_path),
                    dropout_rate=0.2, window=window, fail=(4, 9))
    rec = Recorder()
    grid = _InMemory(LocalGrid(make_client_app(cfg), n))
    serve(make_server_app(cfg, rec), grid)
    assert grid.most == most and grid.pushed > 4 * n
    _assert_recovered_and_plain(cfg, rec, (4, 9))


def test_a_sliding_window_stops_at_the_stage_timeout() -> None:
    """Replies that never come: the window stops at the deadline with what it has, and
    the messages it never sent stay unsent."""
    import time

    from protocol.flower import workflow

    class Mute:
        pull_interval = 0.1

        def __init__(self) -> None:
            self.pushed = []

        def push_messages(self, messages):  # noqa: ANN001, ANN201
            self.pushed.extend(messages)
            return [str(m) for m in messages]

        def pull_messages(self, ids):  # noqa: ANN001, ANN201
            return []

    g = Mute()
    t0 = time.monotonic()
    got = workflow._slide(g, list(range(20)), 4, time.monotonic() + 0.3)
    assert got == [] and g.pushed == [0, 1, 2, 3]
    assert 0.25 < time.monotonic() - t0 < 5


def test_the_mod_pickles_by_reference() -> None:
    """The engine pickles the ClientApp with every message: our mod goes as a reference
    to its class and its policy, not as a closure's code (as Flower's secaggplus_mod)."""
    import pickle

    from protocol.flower.secagg_mod import FedhhSecAggMod, fedhh_secagg_mod, \
        make_secagg_mod

    mod = make_secagg_mod(threat="semi-honest", pki="/somewhere", dropout_rate=0.1)
    back = pickle.loads(pickle.dumps(mod))
    assert isinstance(back, FedhhSecAggMod)
    assert (back.policy, back.pki, back.allow_plaintext) == (mod.policy, "/somewhere", False)
    assert len(pickle.dumps(fedhh_secagg_mod)) < 400


def test_semi_honest_variant_needs_no_pki() -> None:
    rec = _run(AppConfig(nodes=6, rounds=1, mode="fedhh", threat="semi-honest"))
    assert rec.outcomes[0].total is not None and not rec.outcomes[0].offer.malicious
    assert sorted(rec.params) == [1]


def test_malicious_default_without_pki_does_not_aggregate() -> None:
    rec = _run(AppConfig(nodes=5, rounds=1, mode="fedhh", pki=None))
    assert rec.params == {} and rec.outcomes == [None]


def test_the_mod_refuses_plaintext_training(tmp_path) -> None:  # noqa: ANN001
    """A server that leaves secure aggregation out gets errors, not updates."""
    write_pki(tmp_path, 5)
    cfg = AppConfig(nodes=5, rounds=1, mode="fedhh", pki=str(tmp_path))
    rec = Recorder()
    grid = LocalGrid(make_client_app(cfg), 5)
    plain_server = make_server_app(AppConfig(nodes=5, rounds=1, mode="plain"), rec)
    serve(plain_server, grid)
    assert rec.params == {}


def test_nodes_refuse_a_server_with_weaker_parameters(tmp_path) -> None:  # noqa: ANN001
    """The server runs semi-honest parameters; the nodes' malicious policy refuses them."""
    write_pki(tmp_path, 6)
    rec = Recorder()
    nodes_cfg = AppConfig(nodes=6, rounds=1, mode="fedhh", pki=str(tmp_path))
    server_cfg = AppConfig(nodes=6, rounds=1, mode="fedhh", threat="semi-honest")
    serve(make_server_app(server_cfg, rec), LocalGrid(make_client_app(nodes_cfg), 6))
    assert rec.params == {}
    out = rec.outcomes[0]
    assert out.total is None and len(out.rejected) == 6
    assert all("policy" in why for _, why in out.rejected)


class _Tamper:
    """A grid that flips one byte of every frame of one kind going to the nodes."""

    def __init__(self, grid, stage_round: int) -> None:  # noqa: ANN001
        self.grid, self.stage_round, self.calls = grid, stage_round, 0

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self.grid, name)

    def send_and_receive(self, messages, *, timeout=None):  # noqa: ANN001, ANN201
        from protocol.flower.session import RECORD

        messages = list(messages)
        rounds = [m for m in messages if m.content.config_records[RECORD].get("stage") == "round"]
        if rounds:
            self.calls += 1
            if self.calls == self.stage_round:
                for m in rounds:
                    rec = m.content.config_records[RECORD]
                    f = bytearray(rec["frames"][0])
                    f[-5] ^= 1
                    rec["frames"] = [bytes(f)]
        return self.grid.send_and_receive(messages, timeout=timeout)


@pytest.mark.parametrize("stage_round", [1, 2])
def test_a_tampering_server_makes_the_nodes_fail_not_leak(tmp_path, stage_round) -> None:  # noqa: ANN001
    """Altered key lists (1) or routed shares (2): every node refuses; nothing is
    aggregated."""
    write_pki(tmp_path, 6)
    cfg = AppConfig(nodes=6, rounds=1, mode="fedhh", pki=str(tmp_path))
    rec = _run(cfg, tamper=lambda g: _Tamper(g, stage_round))
    assert rec.params == {}
    out = rec.outcomes[0]
    assert out.total is None and out.abort_reason
    assert len(out.rejected) == 6 and all(why.startswith("error") for _, why in out.rejected)


@pytest.mark.slow  # about 40 s on 2 busy cores: 300 nodes, 3 sessions of 69
def test_triehh_flower_app_releases_what_fedhh_triehh_releases() -> None:
    from protocol.core.contract import plaintext_transport
    from protocol.flower.triehh_app import run_app
    from protocol.studies.runners import triehh

    # theta and gamma given: Corollary 1 needs a larger population to find anything
    kw = dict(dataset="en", users=300, theta=2, gamma=4.0, seed=5, max_length=3)
    out = run_app(triehh.TrieHHOptions(transport="secagg-flower", **kw), engine="local",
                  threat="semi-honest", compare=False)
    ref = triehh.run(triehh.TrieHHOptions(**kw), plaintext_transport())
    assert out["heavy_hitters"] == [h["word"] for h in ref["heavy_hitters"]]
    assert out["heavy_hitters"]  # something was found
    assert [lv["sampled"] for lv in out["levels"]] == [r["sampled"] for r in ref["rounds"]]
    assert all(lv["in_sum"] == lv["sampled"] for lv in out["levels"])


def test_triehh_node_votes_once_per_level() -> None:
    """A node's ledger refuses a second vote at one level of one task: the node fails
    that session (it drops out), the others' votes are summed; a repeated round finds
    every node refusing and aborts."""
    from flwr.app import ConfigRecord
    from flwr.supercore.task_identity import TaskIdentity

    from protocol.core.contract import AggregationAborted, AtClients, Kind, RoundSpec
    from protocol.flower.session import Policy
    from protocol.flower.triehh_app import (
        LEDGER_RECORD, FlowerVoteTransport, _prepared, make_client_app as triehh_client,
    )
    from protocol.flower.workflow import SessionDriver
    from protocol.studies.runners import triehh

    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 1
    opts = triehh.TrieHHOptions(dataset="zipf", users=40, seed=1, theta=2, gamma=1.0,
                                transport="secagg-flower")
    prep, _ = _prepared(opts)
    grid = LocalGrid(triehh_client(opts, threat="semi-honest", dropout_rate=0.3), 40)
    transport = FlowerVoteTransport(
        grid, SessionDriver(Policy(threat="semi-honest", dropout_rate=0.3)), 40)
    transport.discover()
    assert sorted(transport.node_of) == list(range(40))
    # user 0 already voted at level 1 of this task
    grid.contexts[transport.node_of[0]].state.config_records[LEDGER_RECORD] = \
        ConfigRecord({"voted": ["triehh:1"]})
    spec = RoundSpec("triehh", 1, Kind.VOTE, candidates=tuple(prep.alphabet.labels),
                     theta=1)
    res = transport.run_round(spec, AtClients(np.arange(10)), np.random.default_rng(0))
    _, users, in_sum, _, out = transport.rounds[-1]
    assert users == list(range(10)) and in_sum == list(range(1, 10))
    assert any("already voted" in why for _, why in out.rejected)
    assert res.release.contributions == 9
    with pytest.raises(AggregationAborted):
        transport.run_round(spec, AtClients(np.arange(10)), np.random.default_rng(0))
    assert sum("already voted" in why for _, why in transport.rounds[-1][4].rejected) == 10


@pytest.mark.slow  # about 3 s: a subprocess that imports Flower and runs the project
def test_fedhh_flower_new_project_runs(tmp_path) -> None:  # noqa: ANN001
    from protocol.cli import main

    proj = tmp_path / "demo"
    assert main(["flower", "new", str(proj), "--nodes", "5"]) == 0
    assert (proj / "pki" / "roster.json").exists()
    r = subprocess.run([sys.executable, str(proj / "run.py"), "--local"], capture_output=True,
                       text=True, timeout=300,
                       env={"PYTHONPATH": ":".join(sys.path), "FLWR_TELEMETRY_ENABLED": "0",
                            "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "5 nodes in the secure sum, 0 dropped" in r.stderr
    assert "Run finished 3 round(s)" in r.stderr
    assert main(["flower", "new", str(proj)]) == 2  # not empty
