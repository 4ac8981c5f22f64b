"""protocol.flower.session (no Flower needed): quantisation with Flower's options and
exact sums, the session offer and its checks, the node's policy, the PKI, and the
project template."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from protocol.flower import session as fs
from protocol.flower.session import FlowerSecAggError, Offer, Policy, Quantiser


def _offer(**changes) -> Offer:  # noqa: ANN003
    p = Policy().params(12)
    base = dict(label="fit round 1", node_ids=tuple(range(100, 112)),
                identities=tuple(range(12)), degree=p.degree, threshold=p.threshold,
                graph=p.graph, malicious=True, dim=7, modulus=1 << 32,
                server_nonce=bytes(range(32)), app='{"kind": "x"}')
    base.update(changes)
    return Offer(**base)


def test_quantiser_recovers_the_weighted_mean_within_its_step() -> None:
    q = Quantiser()
    rng = np.random.default_rng(1)
    xs = [[rng.normal(size=(3, 2)), rng.normal(size=1)] for _ in range(20)]
    ws = rng.integers(5, 50, size=20).astype(float)
    total = sum(q.encode(x, w, rng) for x, w in zip(xs, ws)) % q.modulus_range
    got = q.decode(total, [(3, 2), (1,)], 20)
    want = [sum(w * x[i] for x, w in zip(xs, ws)) / ws.sum() for i in range(2)]
    # one quantisation unit (2c/Q) per node, divided by the summed weight share, plus
    # the rounding of each weight to Q/W units
    bound = 20 * (2 * q.clipping_range / q.quantization_range) / (ws.sum() / q.max_weight) \
        + 4 * q.max_weight / (q.quantization_range * ws.min())
    for g, w_ in zip(got, want):
        assert g.shape == w_.shape
        assert np.max(np.abs(g - w_)) < bound
    # the error bound is tight enough to notice a wrong offset (one node too many)
    off = q.decode(total, [(3, 2), (1,)], 21)
    assert np.max(np.abs(off[0] - want[0])) > 100 * bound


def test_quantiser_clips_like_flower_and_refuses_what_would_wrap() -> None:
    q = Quantiser(clipping_range=1.0, quantization_range=1 << 10, modulus_range=1 << 16,
                  max_weight=10.0)
    v = q.encode([np.array([5.0, -5.0, 0.0])], 10.0, np.random.default_rng(0))
    assert v.dtype == np.uint64 and v[0] == 1 << 10
    assert list(v[1:3]) == [1 << 10, 0]  # clipped to +c and -c
    q.check_nodes(63)
    with pytest.raises(FlowerSecAggError, match="wrap"):
        q.check_nodes(64)
    with pytest.raises(FlowerSecAggError, match="max_weight"):
        q.encode([np.zeros(2)], 10.5)
    with pytest.raises(FlowerSecAggError, match="finite"):
        q.encode([np.array([np.nan])], 1.0)
    for bad in (dict(modulus_range=3 << 20), dict(modulus_range=1 << 10),
                dict(clipping_range=0.0), dict(max_weight=-1.0),
                dict(quantization_range=2.5)):
        with pytest.raises(FlowerSecAggError):
            Quantiser(**bad)
    with pytest.raises(FlowerSecAggError):
        q.decode(np.zeros(4, dtype=np.uint64), [(3,)], 2)  # the weights sum to zero


def test_offer_round_trips_and_binds_every_field_into_the_context() -> None:
    o = _offer()
    rec = o.to_record()
    assert Offer.from_record({"stage": "setup", **rec}) == o
    assert Offer.from_record(rec).session_config().context == o.context()
    for change in (dict(label="fit round 2"), dict(node_ids=tuple(range(101, 113))),
                   dict(identities=tuple(range(1, 13))), dict(dim=8),
                   dict(modulus=1 << 64), dict(server_nonce=bytes(32)),
                   dict(app='{"kind": "y"}')):
        assert _offer(**change).context() != o.context(), change
    # the modulus 2^64 travels as 8 bytes (Flower's integers are 64-bit)
    assert Offer.from_record(_offer(modulus=1 << 64).to_record()).modulus == 1 << 64


@pytest.mark.parametrize("mutate", [
    lambda r: r.pop("dim"),
    lambda r: r.update(extra=1),
    lambda r: r.update(modulus_minus_one=b"\x01"),
    lambda r: r.update(node_ids=fs._pack_ids([1, 1] + list(range(2, 12)))),
    lambda r: r.update(node_ids=list(range(12))),
    lambda r: r.update(node_ids=fs._pack_ids(range(12))[:-1]),
    lambda r: r.update(identities=fs._pack_ids([0] * 12)),
    lambda r: r.update(identities=b""),
    lambda r: r.update(threshold=0),
    lambda r: r.update(server_nonce=b"short"),
    lambda r: r.update(node_ids=fs._pack_ids([0] * 12)),
    lambda r: r.update(dim="7"),
])
def test_malformed_offers_are_refused(mutate) -> None:  # noqa: ANN001
    rec = _offer().to_record()
    mutate(rec)
    with pytest.raises(FlowerSecAggError):
        Offer.from_record(rec)


def test_a_node_refuses_parameters_its_policy_does_not_give() -> None:
    o = _offer()
    o.check_policy(Policy())
    weaker = _offer(threshold=o.threshold - 1)
    with pytest.raises(FlowerSecAggError, match="policy"):
        weaker.check_policy(Policy())
    semi = dataclasses.replace(o, malicious=False, identities=())
    with pytest.raises(FlowerSecAggError, match="policy"):
        semi.check_policy(Policy())
    with pytest.raises(FlowerSecAggError):
        Policy(threat="paranoid")


def test_position_and_identity_checks() -> None:
    o = _offer()
    assert o.position_of(105, 5) == 5
    with pytest.raises(FlowerSecAggError, match="not in the offered roster"):
        o.position_of(99, 0)
    with pytest.raises(FlowerSecAggError, match="PKI identity"):
        o.position_of(105, 6)


def test_pki_is_written_and_read_back(tmp_path) -> None:  # noqa: ANN001
    from secagg import crypto

    fs.write_pki(tmp_path, 3)
    roster = fs.load_roster(tmp_path)
    assert len(roster) == 3
    sk = fs.load_signing_key(tmp_path, 1)
    sig = crypto.ed25519_sign(sk, b"m")
    crypto.ed25519_verify(roster[1], b"m", sig)
    with pytest.raises(Exception):
        crypto.ed25519_verify(roster[0], b"m", sig)
    assert (tmp_path / "node-1.key").stat().st_mode & 0o777 == 0o600
    with pytest.raises(FlowerSecAggError, match="exists"):
        fs.write_pki(tmp_path, 3)
    with pytest.raises(FlowerSecAggError):
        fs.load_signing_key(tmp_path, 7)
    assert fs.identity_of({"partition-id": 4}) == 4
    assert fs.identity_of({"fedhh-identity": 2, "partition-id": 4}) == 2
    with pytest.raises(FlowerSecAggError):
        fs.identity_of({})


def test_offer_app_json_is_checked() -> None:
    assert _offer().app_json() == {"kind": "x"}
    with pytest.raises(FlowerSecAggError):
        _offer(app="{not json").app_json()


def test_template_writes_a_project(tmp_path) -> None:  # noqa: ANN001
    from protocol.flower.template import write_project

    files = write_project(tmp_path / "my app", app="fedavg", nodes=4)
    names = {f.name for f in files}
    assert {"pyproject.toml", "run.py", "client_app.py", "server_app.py"} <= names
    text = (tmp_path / "my app" / "my_app" / "client_app.py").read_text()
    assert "make_secagg_mod" in text and "# fedhh" in text
    assert 'serverapp = "my_app.server_app:app"' in (tmp_path / "my app" / "pyproject.toml").read_text()
    with pytest.raises(ValueError, match="not empty"):
        write_project(tmp_path / "my app")
    with pytest.raises(ValueError):
        write_project(tmp_path / "other", app="bogus")
    json.dumps([str(f) for f in files])


def test_flower_commands_write_keys_and_refuse_bad_input(tmp_path, capsys) -> None:  # noqa: ANN001
    from protocol.cli import main

    assert main(["flower", "keys", str(tmp_path / "k"), "--nodes", "3"]) == 0
    assert len(fs.load_roster(tmp_path / "k")) == 3
    assert main(["flower", "keys", str(tmp_path / "k"), "--nodes", "3"]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["flower", "keys", str(tmp_path / "k2"), "--nodes", "1"]) == 2
    assert main(["flower", "new", str(tmp_path / "p"), "--nodes", "1"]) == 2
    assert main(["flower", "new", str(tmp_path / "p"), "--nodes", "3",
                 "--threat", "semi-honest"]) == 0
    assert not (tmp_path / "p" / "pki").exists()
    assert 'THREAT = "semi-honest"' in (tmp_path / "p" / "p" / "common.py").read_text()
