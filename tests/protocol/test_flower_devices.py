"""Fewer Flower nodes than secure aggregation needs: each node hosts several devices of
the session (``protocol.flower.session.device_layout``: device ``j`` on node ``j mod
nodes``), its input on its first device and zeros on the others, all of its devices'
frames in one message. The sum is the nodes' sum; a node that drops drops all its
devices. In process, without Flower (``PlainGrid``) and with Flower's messages
(``LocalGrid``)."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from protocol.flower import session as fs
from protocol.flower.node import respond
from protocol.flower.plain import PlainGrid
from protocol.flower.session import (
    RECORD, FlowerSecAggError, Offer, Policy, device_layout, devices_for, write_pki,
)
from protocol.flower.workflow import SessionDriver
from secagg.state import MAX_PARTICIPANTS

MOD = 1 << 32
DIM = 6


def test_the_layout_puts_device_j_on_node_j_mod_nodes() -> None:
    assert device_layout(2, 5) == (0, 1, 0, 1, 0)
    assert device_layout(3, 5) == (0, 1, 2, 0, 1)
    assert device_layout(4, 4) == (0, 1, 2, 3)


@pytest.mark.parametrize("nodes, devices", [
    (0, 5), (-1, 5), (3, 2), (2, MAX_PARTICIPANTS + 1), (True, 5), (2, 5.0), ("2", 5),
])
def test_the_layout_refuses_bad_input(nodes, devices) -> None:  # noqa: ANN001
    with pytest.raises(FlowerSecAggError):
        device_layout(nodes, devices)


def test_the_devices_are_the_fewest_the_policy_has_parameters_for() -> None:
    mal, semi = Policy(), Policy(threat="semi-honest")
    assert [devices_for(mal, n) for n in (2, 3, 4, 5, 6, 10)] == [5, 5, 5, 5, 6, 10]
    assert [devices_for(semi, n) for n in (2, 3, 4, 5)] == [4, 4, 4, 5]
    for bad in (1, 0, 2.0):
        with pytest.raises(FlowerSecAggError, match="at least 2 nodes"):
            devices_for(mal, bad)


def _inputs(nodes: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 1 << 20, DIM, dtype=np.uint64) for _ in range(nodes)]


def _grid(nodes: int, threat: str, pki: str | None, inputs: list[np.ndarray],
          fails: set[int] = frozenset(), **hooks) -> PlainGrid:  # noqa: ANN003
    policy = Policy(threat=threat)

    def make_input(sess, msg, ctxt):  # noqa: ANN001, ANN202
        pid = sess.app
        if pid in fails:
            raise FlowerSecAggError(f"node {pid} fails at its input")
        return inputs[pid], None

    def node(records, nid, state, cfg):  # noqa: ANN001, ANN202
        return respond(records[RECORD], nid, state, cfg, policy=policy, pki=pki,
                       check_app=lambda offer, c: c["partition-id"], make_input=make_input)

    return PlainGrid(node, nodes, **hooks)


def _session(grid: PlainGrid, threat: str, pki: str | None):  # noqa: ANN202
    driver = SessionDriver(Policy(threat=threat), pki=pki)
    return driver.run(grid, grid.get_node_ids(), label="devices", group="1", dim=DIM,
                      modulus=MOD, app="{}", host_devices=True)


@pytest.mark.parametrize("threat", ["malicious", "semi-honest"])
@pytest.mark.parametrize("nodes", [2, 3])
def test_few_nodes_hosting_the_devices_give_the_plaintext_sum(tmp_path, nodes, threat) -> None:  # noqa: ANN001
    write_pki(tmp_path, 10)
    pki = str(tmp_path) if threat == "malicious" else None
    inputs = _inputs(nodes)
    grid = _grid(nodes, threat, pki, inputs)
    out = _session(grid, threat, pki)
    want = devices_for(Policy(threat=threat), nodes)
    assert out.devices == out.offer.n == want > nodes
    ids = grid.get_node_ids()
    assert out.offer.node_ids == tuple(ids[j % nodes] for j in range(want))
    if threat == "malicious":  # device j carries PKI identity j (node i is identity i)
        assert out.offer.identities == tuple(range(want))
    assert out.total is not None and out.rejected == []
    assert np.array_equal(out.total, sum(inputs) % MOD)
    assert out.survivors == tuple(ids) and out.dropped == ()
    # one message per node and stage: each carried all of that node's devices' frames
    assert all(len(s) == len(grid.sent[ids[0]]) for s in grid.sent.values())


def test_enough_nodes_host_one_device_each(tmp_path) -> None:  # noqa: ANN001
    write_pki(tmp_path, 6)
    inputs = _inputs(6)
    grid = _grid(6, "malicious", str(tmp_path), inputs)
    out = _session(grid, "malicious", str(tmp_path))
    assert out.devices == 6 and not out.offer.hosted
    assert np.array_equal(out.total, sum(inputs) % MOD)


def test_three_nodes_lose_one_and_sum_the_other_two(tmp_path) -> None:  # noqa: ANN001
    """3 nodes, 5 devices (threshold 3; the server needs t + 1 = 4 masked inputs): node
    2 hosts device 2 only and fails when its input is asked; the 4 devices of nodes 0
    and 1 complete the round with their inputs."""
    write_pki(tmp_path, 10)
    inputs = _inputs(3, seed=2)
    grid = _grid(3, "malicious", str(tmp_path), inputs, fails={2})
    out = _session(grid, "malicious", str(tmp_path))
    ids = grid.get_node_ids()
    assert np.array_equal(out.total, (inputs[0] + inputs[1]) % MOD)
    assert out.survivors == (ids[0], ids[1]) and out.dropped == (ids[2],)
    assert [nid for nid, _ in out.rejected] == [ids[2]]


@pytest.mark.parametrize("nodes, fails", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_a_dropped_node_takes_all_its_devices_and_too_few_abort(tmp_path, nodes, fails) -> None:  # noqa: ANN001
    """A node hosting 2 or 3 of the 5 devices fails at its input: all its devices drop,
    3 or fewer masked inputs are left, and the server aborts, naming why (with 2 nodes
    any dropout aborts: the round would be the survivor's update alone)."""
    write_pki(tmp_path, 10)
    grid = _grid(nodes, "malicious", str(tmp_path), _inputs(nodes), fails={fails})
    out = _session(grid, "malicious", str(tmp_path))
    assert out.total is None and out.survivors == ()
    assert out.abort_reason == "too_few_masked_inputs"


def test_without_hosting_two_nodes_are_refused(tmp_path) -> None:  # noqa: ANN001
    write_pki(tmp_path, 10)
    grid = _grid(2, "malicious", str(tmp_path), _inputs(2))
    with pytest.raises(FlowerSecAggError, match="no secure-aggregation parameters for 2"):
        SessionDriver(Policy(), pki=str(tmp_path)).run(
            grid, grid.get_node_ids(), label="x", group="1", dim=DIM, modulus=MOD, app="{}")


def test_hosting_needs_the_pki_to_hold_every_device(tmp_path) -> None:  # noqa: ANN001
    write_pki(tmp_path, 3)
    grid = _grid(2, "malicious", str(tmp_path), _inputs(2))
    with pytest.raises(FlowerSecAggError, match="a PKI of at least 5"):
        _session(grid, "malicious", str(tmp_path))


def _offer(**kw) -> Offer:  # noqa: ANN003
    base = dict(label="t", node_ids=(7, 9, 7, 9, 7), identities=(0, 1, 2, 3, 4), degree=4,
                threshold=3, graph="harary", malicious=True, dim=3, modulus=MOD,
                server_nonce=b"\1" * 32)
    base.update(kw)
    return Offer(**base)


def test_an_offer_keeps_to_the_layout() -> None:
    o = _offer()
    assert o.hosts == (7, 9) and o.hosted and o.n == 5
    assert o.positions_of(7, 0) == (0, 2, 4) and o.positions_of(9, 1) == (1, 3)
    o.check_policy(Policy())
    assert Offer.from_record(o.to_record()) == o
    with pytest.raises(FlowerSecAggError, match="device layout"):
        _offer(node_ids=(7, 9, 9, 7, 7))  # not device j on node j mod 2
    with pytest.raises(FlowerSecAggError, match="2 distinct nodes"):
        _offer(node_ids=(7,) * 5)
    with pytest.raises(FlowerSecAggError, match="hosted device's PKI identity"):
        _offer(identities=(0, 1, 3, 2, 4))  # node 7's second device is not 0 + 2
    with pytest.raises(FlowerSecAggError, match="PKI identity"):
        o.positions_of(9, 0)


def test_a_node_refuses_another_number_of_devices() -> None:
    six = _offer(node_ids=(7, 9) * 3, identities=tuple(range(6)))
    with pytest.raises(FlowerSecAggError, match="offers 6 devices on 2 nodes"):
        six.check_policy(Policy())
    with pytest.raises(FlowerSecAggError, match="offers 5 devices on 2 nodes"):
        dataclasses.replace(_offer(), malicious=False, identities=()).check_policy(
            Policy(threat="semi-honest"))


def test_a_node_refuses_a_frame_for_a_device_it_does_not_host(tmp_path) -> None:  # noqa: ANN001
    write_pki(tmp_path, 10)

    def down(i, nid, records):  # noqa: ANN001, ANN202
        rec = records[RECORD]
        if i == 0 and rec.get("stage") == "round" and "to" in rec:
            rec["to"] = fs._pack_ids([1] + list(fs._unpack_ids(rec["to"], "to"))[1:])
        return records

    grid = _grid(2, "malicious", str(tmp_path), _inputs(2), down=down)
    out = _session(grid, "malicious", str(tmp_path))
    assert out.total is None
    assert any("devices this node hosts" in why for _, why in out.rejected)


def test_a_reply_with_a_bad_frame_drops_all_the_nodes_devices(tmp_path) -> None:  # noqa: ANN001
    """3 nodes, node 1 hosting devices 1 and 4 answers the setup with device 1's frame
    twice: none of its frames is taken, 3 devices are left and the server aborts. Had
    device 1's been taken (node 1 sending only that frame), its 4 devices would have
    completed the round, node 1's input (on device 1) in the sum."""
    write_pki(tmp_path, 10)

    def tamper(frames):  # noqa: ANN001, ANN202
        def up(i, nid, rec):  # noqa: ANN001, ANN202
            if i == 1 and len(rec.get("frames") or []) == 2 and "identity" not in rec:
                rec["frames"] = frames(rec["frames"])
            return rec
        return up

    inputs = _inputs(3)
    grid = _grid(3, "malicious", str(tmp_path), inputs, up=tamper(lambda f: [f[0], f[0]]))
    out = _session(grid, "malicious", str(tmp_path))
    ids = grid.get_node_ids()
    assert out.rejected == [(ids[1], "sender does not match the node")]
    assert out.total is None and out.abort_reason == "too_few_advertised"
    part = _session(_grid(3, "malicious", str(tmp_path), inputs,
                          up=tamper(lambda f: [f[0]])), "malicious", str(tmp_path))
    assert np.array_equal(part.total, sum(inputs) % MOD)


# -- with Flower's messages: the FedAvg app on the in-process grid ------------------------

def test_fedavg_on_two_and_three_nodes_equals_plaintext_fedavg(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("flwr")
    from protocol.flower.fedavg_app import (
        AppConfig, Recorder, make_client_app, make_server_app,
    )
    from protocol.flower.local import LocalGrid, serve

    logging.getLogger("flwr").setLevel(logging.WARNING)
    write_pki(tmp_path, 10)

    def run(cfg: AppConfig) -> Recorder:
        rec = Recorder()
        serve(make_server_app(cfg, rec), LocalGrid(make_client_app(cfg), cfg.nodes))
        return rec

    for nodes in (2, 3):
        common = dict(nodes=nodes, rounds=2, dim=4, pki=str(tmp_path))
        plain, ours = run(AppConfig(mode="plain", **common)), run(AppConfig(**common))
        assert [(o.devices, len(o.survivors)) for o in ours.outcomes] == [(5, nodes)] * 2
        for rnd in (1, 2):
            for a, b in zip(plain.params[rnd], ours.params[rnd]):
                # a few quantisation units: 2c/Q = 3.8e-6 per node and round
                assert np.max(np.abs(a - b)) < 1e-4 * rnd
        assert np.max(np.abs(plain.params[2][0])) > 0.01  # the model moved
