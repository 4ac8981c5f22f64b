"""``fedhh bench secagg``: one full secure-aggregation round on random inputs.

Prints (``--json``) one object with the configuration, whether the unmasked result equals
the plaintext sum over the clients whose masked input arrived (``correct``), wall time of
the round (``seconds``), CPU time of this process during the round (``cpu_seconds``; the
wall time exceeds it when other processes share the cores), CPU time per party, bytes per client, and for each primitive family (key agreement,
PRG, Shamir, AEAD, signatures, KDF) the time spent inside it during the round next to
the bare cost of the same operations measured in the same process: one libsodium X25519
scalar multiplication per key agreement, the raw AES-256-CTR keystream for the mask
bytes, ``shamir.split``/``combine`` called directly, ChaCha20-Poly1305, Ed25519 and
HKDF-SHA256 called directly on ``cryptography`` objects.

The bare cost is measured on up to ``--bare-sample`` operations of each kind (same
sizes as in the round) and scaled linearly to the round's operation count
(``--bare-sample 0`` replays every operation; slow for large rounds). Both the time
inside the primitives and the bare cost are CPU seconds (``time.process_time``), so
they do not depend on how busy the machine is.
"""
from __future__ import annotations

import argparse
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "secagg", "benchmark one secure-aggregation round", run)
    p.add_argument("--clients", type=int, default=100, help="number of clients n")
    p.add_argument("--dim", type=int, default=1000, help="vector length")
    p.add_argument("--graph", choices=("complete", "harary"), default="harary",
                   help="complete graph (SecAgg) or Harary graph (SecAgg+)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="probability that a client drops, before a uniformly random round")
    p.add_argument("--malicious", action="store_true",
                   help="malicious-server variant (signatures, consistency check)")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic simulation seed (INSECURE keys; default: OS randomness)")
    p.add_argument("--modulus", type=int, default=1 << 32, help="arithmetic modulus R")
    p.add_argument("--bare-sample", type=int, default=2000,
                   help="operations per primitive replayed bare (0: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError

    if args.clients < 2:
        raise UsageError("--clients must be at least 2")
    if args.dim < 1:
        raise UsageError("--dim must be at least 1")
    if not 2 <= args.modulus <= 1 << 64:
        raise UsageError("--modulus must be in [2, 2**64]")
    if not 0.0 <= args.dropout < 1.0:
        raise UsageError("--dropout must be in [0, 1)")
    out = bench_secagg(args.clients, args.dim, graph=args.graph, dropout=args.dropout,
                       malicious=args.malicious, seed=args.seed, modulus=args.modulus,
                       bare_sample=args.bare_sample)
    if args.json:
        from protocol.benchutil import print_json

        print_json(out)
    else:
        _print_table(out)
    return 0


def bench_secagg(clients: int, dim: int, *, graph: str = "harary", dropout: float = 0.0,
                 malicious: bool = False, seed: int | None = None, modulus: int = 1 << 32,
                 bare_sample: int = 2000) -> dict[str, Any]:
    """Run one round and return the figures (see the module docstring).

    Raises:
        protocol.cli.UsageError: no parameters satisfy the threat model for this ``n``.
    """
    import secrets
    import time

    import numpy as np

    from protocol.cli import UsageError
    from protocol.randomness import OsRandom, insecure_deterministic_randomness
    from protocol.secagg_engine import (
        Dropout, category_seconds, profile_primitives, run_secagg,
    )
    from secagg.errors import ParameterError
    from secagg.params import find_params
    from secagg.state import ModAccumulator, SessionConfig

    try:
        params = find_params(clients, graph=graph, dropout_rate=max(0.05, dropout),
                             malicious=malicious)
    except ParameterError as exc:
        raise UsageError(f"no SecAgg parameters for this setting: {exc}") from None
    config = SessionConfig(params, tuple(range(clients)), b"fedhh bench secagg", dim,
                           modulus, malicious=malicious)
    data_seed = seed if seed is not None else secrets.randbits(64)
    rand = insecure_deterministic_randomness(seed) if seed is not None else OsRandom()

    def input_of(i: int) -> np.ndarray:
        rng = np.random.default_rng([data_seed, i])
        if modulus == 1 << 64:
            return rng.integers(0, 1 << 64, dim, dtype=np.uint64, endpoint=False)
        return rng.integers(0, modulus, dim, dtype=np.uint64)

    rounds = (0, 1, 2, 3, 4) if malicious else (0, 1, 2, 4)
    drop = Dropout.random(clients, dropout, np.random.default_rng([data_seed, 1 << 40]),
                          rounds=rounds)
    cpu0 = time.process_time()
    with profile_primitives() as prof:
        res = run_secagg(config, input_of, rand=rand, dropout=drop)
    cpu_round = time.process_time() - cpu0
    correct = False
    if res.completed and res.result is not None:
        acc = ModAccumulator(dim, modulus)
        for i in sorted(res.survivors):
            acc.add(input_of(i))
        correct = bool(np.array_equal(acc.value(), res.result))
    took_part = res.bytes_up > 0
    cats = category_seconds(prof)
    bare = _bare_costs(prof, bare_sample)
    primitives = {}
    for cat in ("key_agreement", "prg", "shamir", "aead", "signature", "kdf"):
        calls = sum(prof.calls.get(fn, 0) for fn in _FNS[cat])
        b = bare.get(cat, 0.0)
        primitives[cat] = {
            "calls": calls, "seconds": round(cats.get(cat, 0.0), 4),
            "bare_seconds": round(b, 4),
            "overhead_ratio": round(cats[cat] / b, 2) if b > 0 else None,
        }
    bits = (modulus - 1).bit_length()
    plain_bytes = dim * bits / 8
    up_mean = float(res.bytes_up[took_part].mean()) if took_part.any() else 0.0
    return {
        "clients": clients, "dim": dim, "graph": graph, "degree": config.degree,
        "threshold": config.threshold, "modulus": modulus, "dropout": dropout,
        "malicious": malicious, "seed": seed, "correct": correct,
        "aborted": not res.completed,
        "abort_reason": res.server_abort_reason.value if res.server_abort_reason else None,
        "survivors": len(res.survivors),
        "dropped": clients - len(res.survivors),
        "seconds": round(res.wall_seconds, 3),
        "cpu_seconds": round(cpu_round, 3),
        "client_seconds_mean": round(float(res.client_seconds[took_part].mean()), 5),
        "client_seconds_max": round(float(res.client_seconds.max()), 5),
        "server_seconds": round(res.server_seconds, 3),
        "codec_seconds": round(res.codec_seconds, 3),
        "bytes_up_per_client": round(up_mean, 1),
        "bytes_down_per_client": round(float(res.bytes_down[took_part].mean()), 1),
        "expansion_up": round(up_mean / plain_bytes, 3),
        "primitives": primitives,
        "primitive_seconds_total": round(sum(cats.values()), 3),
    }


_FNS = {
    "key_agreement": ("x25519_shared", "x25519_keypair", "x25519_public"),
    "prg": ("expand_mask",), "shamir": ("split", "combine"),
    "aead": ("aead_encrypt", "aead_decrypt"), "signature": ("ed25519_sign", "ed25519_verify"),
    "kdf": ("hkdf",),
}


def _bare_costs(prof: Any, sample: int) -> dict[str, float]:
    """Seconds the bare library calls take for the same operations as ``prof`` counted.

    Each kind is timed on ``min(count, sample)`` operations and scaled to ``count``.
    """
    import os
    import time

    import numpy as np
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    import nacl.bindings as nacl_b
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    from protocol.randomness import OsRandom
    from secagg import prg, shamir

    def timed(count: int, fn: Any) -> float:
        if count <= 0:
            return 0.0
        reps = count if sample <= 0 else min(count, sample)
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        return (time.process_time() - t0) * count / reps

    calls = prof.calls
    out: dict[str, float] = {}
    # key agreement: one X25519 scalar multiplication per operation (libsodium)
    sk, pk = os.urandom(32), X25519PrivateKey.generate().public_key().public_bytes_raw()
    out["key_agreement"] = timed(
        calls.get("x25519_shared", 0), lambda: nacl_b.crypto_scalarmult(sk, pk)) + timed(
        calls.get("x25519_keypair", 0) + calls.get("x25519_public", 0),
        lambda: nacl_b.crypto_scalarmult_base(sk))
    # PRG: the raw AES-256-CTR keystream for the same number of bytes
    prg_t = 0.0
    for (dim, modulus), count in prof.shapes.get("expand_mask", {}).items():
        nbytes = dim * prg.mask_bytes_per_entry(modulus)
        zeros = np.zeros(nbytes, np.uint8)
        buf = np.empty(nbytes + 16, np.uint8)
        key = os.urandom(32)
        prg_t += timed(count, lambda: Cipher(algorithms.AES(key), modes.CTR(bytes(16)))
                       .encryptor().update_into(zeros, buf))
    out["prg"] = prg_t
    sh_t = 0.0
    rnd = OsRandom()
    for (m, t), count in prof.shapes.get("split", {}).items():
        xs = list(range(1, m + 1))
        sec = os.urandom(32)
        sh_t += timed(count, lambda: shamir.split(sec, xs, t, rnd))
    for t, count in prof.shapes.get("combine", {}).items():
        shares = shamir.split(os.urandom(32), list(range(1, t + 1)), t, rnd)
        sh_t += timed(count, lambda: shamir.combine(shares, t))
    out["shamir"] = sh_t
    ae_t = 0.0
    key = os.urandom(32)
    for name in ("aead_encrypt", "aead_decrypt"):
        for (pl, al), count in prof.shapes.get(name, {}).items():
            aead = ChaCha20Poly1305
            nonce = os.urandom(12)
            pt, ad = os.urandom(max(pl - (28 if name == "aead_decrypt" else 0), 0)), \
                os.urandom(al)
            if name == "aead_encrypt":
                ae_t += timed(count, lambda: aead(key).encrypt(nonce, pt, ad))
            else:
                ct = aead(key).encrypt(nonce, pt, ad)
                ae_t += timed(count, lambda: aead(key).decrypt(nonce, ct, ad))
    out["aead"] = ae_t
    ed = Ed25519PrivateKey.generate()
    edpk = ed.public_key()
    msg = os.urandom(100)
    sig = ed.sign(msg)
    out["signature"] = timed(calls.get("ed25519_sign", 0), lambda: ed.sign(msg)) + timed(
        calls.get("ed25519_verify", 0), lambda: edpk.verify(sig, msg))
    ikm = os.urandom(32)
    out["kdf"] = timed(calls.get("hkdf", 0), lambda: HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"", info=b"x" * 90).derive(ikm))
    return out


def _print_table(out: dict[str, Any]) -> None:
    print(f"secagg round: n={out['clients']} dim={out['dim']} graph={out['graph']} "
          f"k={out['degree']} t={out['threshold']} R={out['modulus']} "
          f"dropout={out['dropout']} malicious={out['malicious']}")
    print(f"  correct={out['correct']}  survivors={out['survivors']}  "
          f"abort={out['abort_reason']}")
    print(f"  wall {out['seconds']:.3f} s (process CPU {out['cpu_seconds']:.3f} s)   client CPU mean {out['client_seconds_mean']:.4f} s"
          f"   server CPU {out['server_seconds']:.3f} s   codec {out['codec_seconds']:.3f} s")
    print(f"  bytes per client: up {out['bytes_up_per_client']:.0f}  "
          f"down {out['bytes_down_per_client']:.0f}  (expansion {out['expansion_up']}x)")
    print(f"  {'primitive':<14}{'calls':>9}{'in round s':>12}{'bare s':>10}{'ratio':>8}")
    for k, v in out["primitives"].items():
        ratio = "-" if v["overhead_ratio"] is None else f"{v['overhead_ratio']:.2f}"
        print(f"  {k:<14}{v['calls']:>9}{v['seconds']:>12.4f}{v['bare_seconds']:>10.4f}"
              f"{ratio:>8}")
