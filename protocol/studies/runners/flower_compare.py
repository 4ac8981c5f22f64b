"""Our SecAgg+ round against Flower's, same ``n``, vector length, ``k`` and ``t``, in one
process, interleaved (``fedhh bench flower``).

Flower (Beutel et al., "Flower: A Friendly Federated Learning Research Framework",
2020) ships a SecAgg+ implementation (Bell et al., CCS 2020) for its simulations and
deployments: a client "mod" with one function per stage (setup, share keys, collect
masked vectors, unmask) and a server workflow that routes the stages and unmasks. This
module runs a whole Flower round by calling those stage functions directly, and the
server's routing, summing and unmasking steps with Flower's own functions, in the
order its workflow uses them. Nothing of Flower's message framework runs: no
``Message`` objects, no per-stage state records, no serialisation, no Ray. So the
measured Flower CPU is a lower bound on what a Flower simulation of the same round
costs, and the ratio against us is a lower bound on the speedup.

Flower's round is semi-honest SecAgg+ (no signatures, no consistency check), so our
side is our semi-honest round on a Harary graph of the same degree; our malicious
default at the same ``n`` is timed too, for the price of the stronger model.

Flower's client mod and its stage functions are internal to Flower (names with a
leading underscore); the driver was written against ``flwr`` 1.42.0 and refuses other
versions unless told otherwise (``allow_other_version``).

What Flower's round is made of (read from its source, version 1.42.0), which is where
its cost comes from: ECDH on NIST P-384 with HKDF-SHA256 for both pairwise keys,
Fernet (AES-128-CBC with HMAC-SHA256) for the share ciphertexts, Shamir sharing from
PyCryptodome over GF(2^128) in 16-byte chunks with a thread pool per call, and masks
from numpy's ``RandomState`` seeded with the XOR of the key's 32-bit words (so every
mask is one of at most 2^32 sequences, whatever the key).
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import numpy as np

from protocol.studies.errors import StudyError

__all__ = ["FLOWER_VERSION", "flower_shares", "run_flower_round", "bench_flower"]

#: the Flower version the driver was written against (its stage functions are internal)
FLOWER_VERSION = "1.42.0"

# Flower's workflow defaults (SecAggPlusWorkflow): quantisation and the modulus
_CLIPPING_RANGE = 8.0
_QUANTIZATION_RANGE = 1 << 22
_MODULUS_RANGE = 1 << 32


def flower_shares(degree: int, threshold: int) -> tuple[int, int]:
    """Flower's ``(share_num, threshold)`` for our ``(k, t)``.

    Flower's neighbourhood of a client includes the client itself: ``share_num`` nodes
    on a ring, ``share_num // 2`` on each side, so ``share_num = k + 1`` and ``k`` must
    be even (Flower warns on an even ``share_num`` and adds one). The threshold counts
    shares the same way in both (among the ``k + 1`` holders, the owner included).

    Raises:
        StudyError: ``k`` odd or below 2, or ``t`` outside ``[2, k + 1]``.
    """
    if degree < 2 or degree % 2:
        raise StudyError(f"Flower's SecAgg+ ring needs an even degree k >= 2, got {degree}")
    if not 2 <= threshold <= degree + 1:
        raise StudyError(f"threshold {threshold} must be in [2, k + 1 = {degree + 1}]")
    return degree + 1, threshold


def _flower() -> dict[str, Any]:
    """Flower's stage functions and primitives, or a clear error."""
    try:
        import importlib

        import flwr
        # the module, not the function of the same name its package exports
        mod = importlib.import_module("flwr.client.mod.secure_aggregation.secaggplus_mod")
        from flwr.common import bytes_to_ndarray, ndarrays_to_parameters
        from flwr.common.secure_aggregation.crypto.shamir import combine_shares
        from flwr.common.secure_aggregation.ndarrays_arithmetic import (
            factor_extract, get_parameters_shape, parameters_addition, parameters_mod,
            parameters_subtraction,
        )
        from flwr.common.secure_aggregation.secaggplus_constants import Key
        from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
    except ImportError as exc:
        raise StudyError(
            f"fedhh bench flower needs Flower {FLOWER_VERSION} ({exc}); install it with "
            f"pip install 'flwr=={FLOWER_VERSION}' (in a separate environment if its "
            f"dependencies clash with yours)") from None
    return {
        "version": getattr(flwr, "__version__", "unknown"), "mod": mod, "Key": Key,
        "bytes_to_ndarray": bytes_to_ndarray, "to_parameters": ndarrays_to_parameters,
        "combine_shares": combine_shares, "factor_extract": factor_extract,
        "shape": get_parameters_shape, "add": parameters_addition, "mod_": parameters_mod,
        "sub": parameters_subtraction, "prg": pseudo_rand_gen,
    }


def _flower_inputs(n: int, dim: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Each client's quantised vector (integers below the quantisation range) and the
    float vector Flower's client is given, chosen on the quantisation grid so that
    Flower's stochastic rounding gives back exactly the integers; and their sum mod
    the modulus, which the round must output."""
    q = [np.random.default_rng([seed, i]).integers(0, _QUANTIZATION_RANGE, dim)
         for i in range(n)]
    step = 2 * _CLIPPING_RANGE / _QUANTIZATION_RANGE  # 2^-18: exact in binary
    floats = [qi.astype(np.float64) * step - _CLIPPING_RANGE for qi in q]
    total = np.zeros(dim, dtype=np.int64)
    for qi in q:
        total = (total + qi) % _MODULUS_RANGE
    return floats, total


def run_flower_round(n: int, dim: int, share_num: int, threshold: int, *,
                     seed: int = 0, fl: dict[str, Any] | None = None) -> dict[str, Any]:
    """One whole Flower SecAgg+ round, no dropouts; returns its process CPU seconds,
    whether the unmasked sum equals the inputs' sum (``correct``), and the number of
    P-384 key agreements its clients made.

    The ring of neighbours is Flower's (``share_num // 2`` each side of each client,
    on a shuffled order of node ids).

    Raises:
        StudyError: Flower is not installed, or ``share_num`` is not odd and at most n.
    """
    fl = fl or _flower()
    if share_num % 2 == 0 or not 3 <= share_num <= n:
        raise StudyError(f"share_num must be odd and in [3, n = {n}], got {share_num}")
    mod, Key = fl["mod"], fl["Key"]
    floats, want = _flower_inputs(n, dim, seed)
    params = [fl["to_parameters"]([x]) for x in floats]
    ids = [i + 1 for i in range(n)]  # Flower node ids; 0 is its "unset"
    order = [int(x) for x in np.random.default_rng([seed, 1 << 40]).permutation(ids)]
    half = share_num >> 1
    neighbours = {nid: {order[(i + off) % n] for off in range(-half, half + 1)}
                  for i, nid in enumerate(order)}
    setup_cfg = {
        Key.SAMPLE_NUMBER: n, Key.SHARE_NUMBER: share_num, Key.THRESHOLD: threshold,
        Key.CLIPPING_RANGE: _CLIPPING_RANGE, Key.TARGET_RANGE: _QUANTIZATION_RANGE,
        Key.MOD_RANGE: _MODULUS_RANGE, Key.MAX_WEIGHT: 1.0,
    }
    cpu0 = time.process_time()
    # stage 0: setup (two P-384 key pairs per client)
    states: dict[int, Any] = {}
    pks: dict[int, tuple[bytes, bytes]] = {}
    for nid in ids:
        st = mod.SecAggPlusState()
        st.nid = nid
        res = mod._setup(st, dict(setup_cfg))
        states[nid] = st
        pks[nid] = (res[Key.PUBLIC_KEY_1], res[Key.PUBLIC_KEY_2])
    # stage 1: share keys; the server forwards each ciphertext to its destination
    fwd: dict[int, tuple[list[int], list[bytes]]] = {nid: ([], []) for nid in ids}
    for nid in ids:
        res = mod._share_keys(states[nid], {str(j): pks[j] for j in neighbours[nid]})
        for dst, ct in zip(res[Key.DESTINATION_LIST], res[Key.CIPHERTEXT_LIST]):
            fwd[dst][0].append(nid)
            fwd[dst][1].append(ct)
    # stage 2: masked vectors; the server sums them
    masked = None
    for nid in ids:
        srcs, cts = fwd.pop(nid)
        res = mod._collect_masked_vectors(
            states[nid], {Key.CIPHERTEXT_LIST: cts, Key.SOURCE_LIST: srcs}, 1,
            params[nid - 1])
        vec = [fl["bytes_to_ndarray"](b) for b in res[Key.MASKED_PARAMETERS]]
        masked = vec if masked is None else fl["add"](masked, vec)
    assert masked is not None
    masked = fl["mod_"](masked, _MODULUS_RANGE)
    # stage 3: unmask; every client is alive, so only self-mask seeds are revealed
    collected: dict[int, list[bytes]] = {nid: [] for nid in ids}
    alive = set(ids)
    for nid in ids:
        res = mod._unmask(states[nid], {Key.ACTIVE_NODE_ID_LIST: list(neighbours[nid] & alive),
                                        Key.DEAD_NODE_ID_LIST: []})
        for owner, share in zip(res[Key.NODE_ID_LIST], res[Key.SHARE_LIST]):
            collected[owner].append(share)
    shapes = fl["shape"](masked)
    for nid, shares in collected.items():
        if len(shares) < threshold:
            raise StudyError(f"Flower round: {len(shares)} shares for node {nid}, "
                             f"below the threshold {threshold}")
        seed_bytes = fl["combine_shares"](shares)
        masked = fl["sub"](masked, fl["prg"](seed_bytes, _MODULUS_RANGE, shapes))
    recon = fl["mod_"](masked, _MODULUS_RANGE)
    factor, vectors = fl["factor_extract"](recon)
    cpu = time.process_time() - cpu0
    correct = bool(np.array_equal(np.asarray(vectors[0], dtype=np.int64), want)
                   and int(factor) == (n * _QUANTIZATION_RANGE) % _MODULUS_RANGE)
    return {"cpu_seconds": cpu, "correct": correct,
            "key_agreements": 2 * (share_num - 1) * n, "key_pairs": 2 * n}


def _p384_bare_seconds(ops: int, pairs: int, sample: int) -> tuple[float, float]:
    """Bare cost of ``ops`` P-384 ECDH exchanges and ``pairs`` key generations (the
    ``cryptography`` calls Flower makes), timed on ``sample`` of each and scaled."""
    from cryptography.hazmat.primitives.asymmetric import ec

    a = ec.generate_private_key(ec.SECP384R1())
    peers = [ec.generate_private_key(ec.SECP384R1()).public_key() for _ in range(8)]
    a.exchange(ec.ECDH(), peers[0])  # one untimed call
    c0 = time.process_time()
    for i in range(sample):
        a.exchange(ec.ECDH(), peers[i % 8])
    per_exchange = (time.process_time() - c0) / sample
    c0 = time.process_time()
    for _ in range(sample):
        ec.generate_private_key(ec.SECP384R1()).public_key()
    per_pair = (time.process_time() - c0) / sample
    return per_exchange * ops, per_pair * pairs


def _flower_shamir_bare_seconds(n: int, share_num: int, threshold: int,
                                 sample: int) -> float:
    """Bare cost of Flower's Shamir calls in a round without dropouts, timed on
    ``sample`` of each and scaled: per client, sharing its 32-byte mask seed and its
    serialised P-384 private key (PEM, about 300 bytes, shared 16 bytes at a time), and
    on the server one reconstruction of every client's seed."""
    import os

    from flwr.common.secure_aggregation.crypto.shamir import combine_shares, create_shares
    from flwr.supercore.primitives.asymmetric import generate_key_pairs, private_key_to_bytes

    sk = private_key_to_bytes(generate_key_pairs()[0])
    seed = os.urandom(32)
    create_shares(seed, threshold, share_num)  # one untimed call
    c0 = time.process_time()
    for _ in range(sample):
        shares = create_shares(seed, threshold, share_num)
        create_shares(sk, threshold, share_num)
    split = (time.process_time() - c0) / sample
    c0 = time.process_time()
    for _ in range(sample):
        combine_shares(shares[:threshold])
    combine = (time.process_time() - c0) / sample
    return n * (split + combine)


def _ours(n: int, dim: int, degree: int, threshold: int, seed: int,
          malicious: bool) -> dict[str, Any]:
    """One of our rounds (OS randomness), its process CPU seconds and correctness."""
    from protocol.core.secagg_engine import make_config, run_secagg
    from protocol.core.secagg_shards import SeededRows

    rows = SeededRows(seed, dim, _MODULUS_RANGE)
    config = make_config(n, dim, graph="harary", degree=degree, threshold=threshold,
                         modulus=_MODULUS_RANGE, malicious=malicious,
                         context=b"fedhh bench flower")
    cpu0 = time.process_time()
    res = run_secagg(config, rows)
    cpu = time.process_time() - cpu0
    correct = bool(res.completed and res.result is not None
                   and np.array_equal(rows.total(range(n)), res.result))
    return {"cpu_seconds": cpu, "correct": correct}


def bench_flower(clients: int, dim: int, *, degree: int | None = None,
                 threshold: int | None = None, repeats: int = 3, seed: int = 0,
                 bare_sample: int = 200, allow_other_version: bool = False,
                 progress: Callable[[str, int, float], None] | None = None) -> dict[str, Any]:
    """Flower's SecAgg+ round and ours at the same ``(n, dim, k, t)``, interleaved
    ``repeats`` times; medians of process CPU and their ratio.

    ``degree``/``threshold`` default to our semi-honest parameters for ``n``
    (:func:`secagg.params.find_params`), which Flower's ring takes as ``share_num =
    k + 1``. Also timed, once per repeat: our malicious default at this ``n`` (its own
    ``k`` and ``t``). The result has the bare cost of each side's key agreements
    (P-384 ECDH and key generation for Flower, X25519 for us), the bare cost of
    Flower's Shamir calls, and the speedup our round would have if it cost no more
    than its X25519 operations.

    Raises:
        StudyError: Flower missing or of another version, ``k`` odd, bad sizes, or a
            round that did not output the inputs' sum.
    """
    if clients < 3 or dim < 1 or repeats < 1:
        raise StudyError("need clients >= 3, dim >= 1 and repeats >= 1")
    from secagg.errors import ParameterError
    from secagg.params import DEFAULT_DROPOUT_RATE, default_grinding_bits, find_params

    fl = _flower()
    if fl["version"] != FLOWER_VERSION and not allow_other_version:
        raise StudyError(f"Flower {fl['version']} is installed; the driver calls Flower's "
                         f"internal stage functions and was written against "
                         f"{FLOWER_VERSION} (pass --allow-other-version to try anyway)")
    try:
        semi = find_params(clients, graph="harary", threat="semi-honest")
        # the malicious default as every command runs it: the graph-seed grinding too
        mal = find_params(clients, graph="harary", threat="malicious",
                          grinding_bits=default_grinding_bits(
                              clients, DEFAULT_DROPOUT_RATE, graph="harary", malicious=True))
    except ParameterError as exc:
        raise StudyError(f"no SecAgg parameters for n = {clients}: {exc}") from None
    if (degree is None) != (threshold is None):
        raise StudyError("give both degree and threshold, or neither")
    k = semi.degree if degree is None else degree
    t = semi.threshold if threshold is None else threshold
    if k >= clients:
        raise StudyError(f"degree {k} must be below the number of clients {clients}")
    share_num, f_t = flower_shares(k, t)

    # a warm-up of each on a small round: imports and first-call costs are nobody's
    run_flower_round(8, dim, 5, 3, seed=seed, fl=fl)
    _ours(8, dim, 4, 3, seed, malicious=False)
    _ours(8, dim, 4, 3, seed, malicious=True)

    runs: dict[str, list[dict[str, Any]]] = {"flower": [], "ours": [], "ours_malicious": []}
    for r in range(repeats):
        for name in ("flower", "ours", "ours_malicious"):
            if name == "flower":
                row = run_flower_round(clients, dim, share_num, f_t, seed=seed + r, fl=fl)
            elif name == "ours":
                row = _ours(clients, dim, k, t, seed + r, malicious=False)
            else:
                row = _ours(clients, dim, mal.degree, mal.threshold, seed + r, malicious=True)
            if not row["correct"]:
                raise StudyError(f"{name} round {r} did not output the sum of its inputs")
            runs[name].append(row)
            if progress is not None:
                progress(name, r, row["cpu_seconds"])

    med = {name: statistics.median(row["cpu_seconds"] for row in rows)
           for name, rows in runs.items()}
    f_row = runs["flower"][0]
    ecdh_bare, keygen_bare = _p384_bare_seconds(f_row["key_agreements"], f_row["key_pairs"],
                                                bare_sample)
    shamir_bare = _flower_shamir_bare_seconds(clients, share_num, f_t, min(bare_sample, 20))
    from protocol.core.secagg_engine import profile_primitives
    from protocol.core.secagg_profile import primitive_table

    with profile_primitives() as prof:
        _ours(clients, dim, k, t, seed, malicious=False)
    x25519_bare = primitive_table(prof, bare_sample)["key_agreement"]["bare_seconds"]
    return {
        "clients": clients, "dim": dim, "degree": k, "threshold": t,
        "flower_version": fl["version"], "flower_share_num": share_num,
        "modulus": _MODULUS_RANGE, "repeats": repeats,
        "flower_cpu_seconds": [round(r["cpu_seconds"], 3) for r in runs["flower"]],
        "ours_cpu_seconds": [round(r["cpu_seconds"], 3) for r in runs["ours"]],
        "ours_malicious_cpu_seconds": [round(r["cpu_seconds"], 3)
                                       for r in runs["ours_malicious"]],
        "malicious_degree": mal.degree, "malicious_threshold": mal.threshold,
        "flower_cpu_median": round(med["flower"], 3),
        "ours_cpu_median": round(med["ours"], 3),
        "ours_malicious_cpu_median": round(med["ours_malicious"], 3),
        "speedup": round(med["flower"] / med["ours"], 1),
        "speedup_malicious_default": round(med["flower"] / med["ours_malicious"], 1),
        "flower_key_agreements": f_row["key_agreements"],
        "flower_p384_ecdh_bare_seconds": round(ecdh_bare, 3),
        "flower_p384_keygen_bare_seconds": round(keygen_bare, 3),
        "flower_shamir_bare_seconds": round(shamir_bare, 3),
        "flower_floor_ratio": round(med["flower"] / max(ecdh_bare + keygen_bare, 1e-9), 2),
        "ours_x25519_bare_seconds": round(x25519_bare, 3),
        "speedup_if_ours_were_its_x25519": round(med["flower"] / max(x25519_bare, 1e-9), 1),
        "correct": True,
        "what_flower_runs": "its stage functions and server unmasking only (no messages, "
                            "state records, serialisation or Ray): a lower bound on a "
                            "Flower simulation's cost",
    }
