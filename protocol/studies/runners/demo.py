"""What ``fedhh demo`` runs: TrieHH over secure aggregation, checked against plaintext.

The demo is a simulation on the embedded English population: sampling and the
mechanism's choices derive from the seed, the protocol's keys come from the operating
system (:func:`protocol.studies.runners.default_transport`). The same seed then drives a
plaintext trusted aggregator, whose release must equal the secure-aggregation one.

The secure aggregation runs under a named threat model (``threat``, default
``malicious``: signed keys, the consistency round, and parameters for a server that may
equivocate, choose which clients drop and collude with 5% of the sampled users);
:func:`server_guarantee` states what that model lets the server learn about the vote
totals (:attr:`secagg.params.SecAggParams.min_honest`), which the demo prints.
"""
from __future__ import annotations

import copy
import time
from typing import Any

from protocol.studies.errors import StudyError
from protocol.studies.runners import default_transport
from protocol.studies.runners.triehh import TrieHHOptions, prepare, run_once, summarize

__all__ = ["run_demo", "server_guarantee"]


def run_demo(users: int, epsilon: float, seed: int, progress=None,  # noqa: ANN001
             threat: str = "malicious") -> dict[str, Any]:
    """Run TrieHH over SecAgg+ and over the plaintext transport with the same ``seed``.

    Returns ``{"secagg": summary of the secure run (with seconds), "plain_heavy_hitters",
    "plain_prefixes", "same": whether both released the same trie, "threat",
    "guarantee": what the threat model lets the server learn (text)}``.

    Raises:
        StudyError: fewer than 100 users, an unknown threat model, or as the TrieHH
            runner.
    """
    if users < 100:
        raise StudyError("--users must be at least 100")
    opts = TrieHHOptions(users=users, epsilon=epsilon, transport="secagg", seed=seed)
    t0 = time.perf_counter()
    prep, rng = prepare(opts)
    rng_plain = copy.deepcopy(rng)
    from protocol.core.transports import get_transport

    try:
        transport = get_transport("secagg", simulate=False, threat=threat)
    except ValueError as exc:
        raise StudyError(f"transport 'secagg': {exc}") from None
    t1 = time.perf_counter()
    secagg = run_once(prep, transport, rng, progress)
    t2 = time.perf_counter()
    out = summarize(prep, secagg)
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3),
                      "total": round(t2 - t0, 3)}
    plain = run_once(prep, default_transport("plain"), rng_plain)
    same = (set(plain.heavy_hitters) == set(secagg.heavy_hitters)
            and set(plain.prefixes) == set(secagg.prefixes))
    return {"secagg": out, "plain_heavy_hitters": len(plain.heavy_hitters),
            "plain_prefixes": len(plain.prefixes), "same": same, "threat": threat,
            "guarantee": server_guarantee(threat, secagg.m)}


def server_guarantee(threat: str, m: int) -> str:
    """What secure aggregation guarantees about a round's vote totals, for ``m``
    sampled users under ``threat`` (one sentence, printed by the demo).

    Raises:
        StudyError: an unknown threat model.
    """
    from secagg.errors import ParameterError
    from secagg.params import (
        DEFAULT_CORRUPT_FRACTION, DEFAULT_DROPOUT_RATE, default_grinding_bits, find_params,
    )

    if m < 3:
        return "(rounds too small for secure aggregation)"
    try:
        # the parameters the transport uses: its default graph, dropout budget and grinding
        g = default_grinding_bits(m, DEFAULT_DROPOUT_RATE, graph="harary",
                                  malicious=threat == "malicious")
        p = find_params(m, threat=threat, grinding_bits=g)
    except ParameterError as exc:
        raise StudyError(str(exc)) from None
    gamma = f"{100 * DEFAULT_CORRUPT_FRACTION:g}%"
    if threat == "malicious":
        return (f"any total it can learn covers at least {p.min_honest:,} honest users of the "
                f"{m:,} sampled (k = {p.degree}, t = {p.threshold}), even if it equivocates, "
                f"chooses who drops and colludes with {gamma} of them; with more colluders "
                f"or sybils a total over few users can reveal a vote")
    return (f"while it follows the protocol and dropouts are random, each total covers at "
            f"least {p.min_honest:,} honest users of the {m:,} sampled (k = {p.degree}, "
            f"t = {p.threshold}); a server that sends different survivor lists to different "
            f"users can recover an individual vote (use --threat malicious)")
