"""Conformance of protocol.core.poplar1 with the published test vectors of
draft-irtf-cfrg-vdaf-20 (tests/data/poplar1/README.md names their source).

Every Poplar1 vector is checked byte for byte: the aggregation parameter, the public
share, both input shares, both rounds' verifier shares and messages, the output shares,
the aggregate shares and the aggregate result; the negative vector
(``Poplar1_bad_corr_inner``) must be rejected at the second round's message, as the
draft says. The IDPF vector (public share from ``gen``) and the two XOF vectors
(derived seed and a Field128 expansion) are checked too.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from protocol.core.poplar1 import DRAFT, Poplar1, Poplar1VerificationError, verify_one
from protocol.core.poplar1 import idpf as I
from protocol.core.poplar1.field import P64
from protocol.core.poplar1.vdaf import (Aggregator, decode_field_vec, encode_field_vec,
                                        sketch_accepts, sketch_message)
from protocol.core.poplar1.xof import XofFixedKeyAes128, XofTurboShake128

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "poplar1"
POSITIVE = sorted(DATA.glob("Poplar1_[0-9].json"))
FIELD128 = 2 ** 66 * 4611686018427387897 + 1


def load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


def test_the_vectors_are_there() -> None:
    assert DRAFT == "draft-irtf-cfrg-vdaf-20"
    assert len(POSITIVE) == 6
    assert "draft-irtf-cfrg-vdaf-20" in (DATA / "README.md").read_text()


@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_poplar1_vector(path: pathlib.Path) -> None:
    d = load(path)
    vdaf = Poplar1(d["bits"], bytes.fromhex(d["ctx"]))
    verify_key = bytes.fromhex(d["verify_key"])
    agg_param = vdaf.decode_agg_param(bytes.fromhex(d["agg_param"]))
    assert vdaf.encode_agg_param(agg_param).hex() == d["agg_param"]
    level, prefixes = agg_param
    outs: list[list[bytes]] = [[], []]
    ops = [op["operation"] for op in d["operations"]]
    assert ops[0] == "shard" and ops[-1] == "unshard"
    assert all(op["success"] for op in d["operations"])
    for rep in d["reports"]:
        nonce, rand = bytes.fromhex(rep["nonce"]), bytes.fromhex(rep["rand"])
        public, inputs = vdaf.shard(rep["measurement"], nonce, rand)
        assert public.hex() == rep["public_share"]
        assert [s.hex() for s in inputs] == rep["input_shares"]
        rec = verify_one(vdaf, verify_key, agg_param, nonce, public, inputs)
        assert [[s.hex() for s in r] for r in rec["verifier_shares"]] == rep["verifier_shares"]
        assert [m.hex() for m in rec["verifier_messages"]] == rep["verifier_messages"]
        assert [o.hex() for o in rec["out_shares"]] == rep["out_shares"]
        for j in (0, 1):
            outs[j].append(rec["out_shares"][j])
    # aggregation: decode every output share, sum per prefix, compare encodings
    bits = d["bits"]
    agg_shares = []
    for j in (0, 1):
        vals = [decode_field_vec(level, bits, o, len(prefixes)) for o in outs[j]]
        if level < bits - 1:
            agg = np.zeros(len(prefixes), dtype=np.uint64)
            for v in vals:
                agg = ((agg.astype(object) + v.astype(object)) % P64).astype(np.uint64)
            agg_shares.append(agg)
        else:
            agg_shares.append([sum(c) % (2 ** 255 - 19) for c in zip(*vals)])
    assert [encode_field_vec(level, bits, a).hex() for a in agg_shares] == d["agg_shares"]
    modulus = P64 if level < bits - 1 else 2 ** 255 - 19
    result = [(int(x) + int(y)) % modulus for x, y in zip(agg_shares[0], agg_shares[1])]
    assert result == d["agg_result"]


@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_batch_aggregate_matches_vector(path: pathlib.Path) -> None:
    """The batch path (what the heavy-hitters runner uses) gives the vector's aggregate
    shares from the decoded report."""
    d = load(path)
    vdaf = Poplar1(d["bits"], bytes.fromhex(d["ctx"]))
    level, prefixes = vdaf.decode_agg_param(bytes.fromhex(d["agg_param"]))
    rep = d["reports"][0]
    nonces = np.frombuffer(bytes.fromhex(rep["nonce"]), dtype=np.uint8)[None, :].copy()
    public = vdaf.decode_public_shares([bytes.fromhex(rep["public_share"])])
    aggs = [Aggregator(vdaf, j, bytes.fromhex(d["verify_key"]), nonces, public,
                       vdaf.decode_input_shares([bytes.fromhex(rep["input_shares"][j])]))
            for j in (0, 1)]
    r1 = [a.verify_init((level, prefixes)) for a in aggs]
    msg = sketch_message(level, vdaf.bits, *r1)
    r2 = [a.verify_next(msg) for a in aggs]
    ok = sketch_accepts(level, vdaf.bits, *r2)
    assert ok.tolist() == [True]
    shares = [a.aggregate(ok) for a in aggs]
    assert [encode_field_vec(level, vdaf.bits, s).hex() for s in shares] == d["agg_shares"]


def test_bad_corr_inner_is_rejected_at_the_second_message() -> None:
    d = load(DATA / "Poplar1_bad_corr_inner.json")
    vdaf = Poplar1(d["bits"], bytes.fromhex(d["ctx"]))
    rep = d["reports"][0]
    agg_param = vdaf.decode_agg_param(bytes.fromhex(d["agg_param"]))
    level = agg_param[0]
    verify_key = bytes.fromhex(d["verify_key"])
    nonces = np.frombuffer(bytes.fromhex(rep["nonce"]), dtype=np.uint8)[None, :].copy()
    public = vdaf.decode_public_shares([bytes.fromhex(rep["public_share"])])
    aggs = [Aggregator(vdaf, j, verify_key, nonces, public,
                       vdaf.decode_input_shares([bytes.fromhex(rep["input_shares"][j])]))
            for j in (0, 1)]
    r1 = [a.verify_init(agg_param) for a in aggs]
    assert [encode_field_vec(level, vdaf.bits, s[0]).hex() for s in r1] == rep["verifier_shares"][0]
    msg = sketch_message(level, vdaf.bits, *r1)
    assert encode_field_vec(level, vdaf.bits, msg[0]).hex() == rep["verifier_messages"][0]
    r2 = [a.verify_next(msg) for a in aggs]
    assert [encode_field_vec(level, vdaf.bits, [s[0]]).hex() for s in r2] == rep["verifier_shares"][1]
    assert sketch_accepts(level, vdaf.bits, *r2).tolist() == [False]
    with pytest.raises(Poplar1VerificationError):
        verify_one(vdaf, verify_key, agg_param, bytes.fromhex(rep["nonce"]),
                   bytes.fromhex(rep["public_share"]),
                   [bytes.fromhex(s) for s in rep["input_shares"]])


def test_idpf_vector() -> None:
    d = load(DATA / "IdpfBBCGGI21_0.json")
    bits = d["bits"]
    alpha = np.asarray([d["alpha"]], dtype=bool)
    beta_inner = np.asarray([[[int(x) for x in b] for b in d["beta_inner"]]], dtype=np.uint64)
    beta_leaf = [[int(x) for x in d["beta_leaf"]]]
    nonce = np.frombuffer(bytes.fromhex(d["nonce"]), dtype=np.uint8)[None, :].copy()
    rand = np.frombuffer(b"".join(bytes.fromhex(k) for k in d["keys"]), dtype=np.uint8)[None, :]
    public, keys = I.gen(bits, bytes.fromhex(d["ctx"]), alpha, beta_inner, beta_leaf, nonce,
                         rand.copy())
    assert I.encode_public_share(public, 0).hex() == d["public_share"]
    assert [keys[j, 0].tobytes().hex() for j in (0, 1)] == d["keys"]
    # and the decoder gives back the same correction words
    back = I.decode_public_shares(bits, [bytes.fromhex(d["public_share"])])
    assert I.encode_public_share(back, 0).hex() == d["public_share"]


@pytest.mark.parametrize("name,cls", [("XofTurboShake128", XofTurboShake128),
                                      ("XofFixedKeyAes128", XofFixedKeyAes128)])
def test_xof_vectors(name: str, cls) -> None:  # noqa: ANN001
    d = load(DATA / f"{name}.json")
    seed, dst, binder = (bytes.fromhex(d[k]) for k in ("seed", "dst", "binder"))
    assert cls.derive_seed(seed, dst, binder).hex() == d["derived_seed"]
    vec = cls(seed, dst, binder).next_vec_mod(FIELD128, 16, d["length"])
    assert b"".join(x.to_bytes(16, "little") for x in vec).hex() == d["expanded_vec_field128"]


def run_every_vector() -> None:
    """Every positive vector, the batched aggregation, the negative case and the IDPF
    vector, as the tests above run them (for other tests that change the backend or
    the batching first)."""
    assert POSITIVE
    for path in POSITIVE:
        test_poplar1_vector(path)
        test_batch_aggregate_matches_vector(path)
    test_bad_corr_inner_is_rejected_at_the_second_message()
    test_idpf_vector()
