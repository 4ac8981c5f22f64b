"""What ``fedhh demo`` runs: TrieHH over secure aggregation, checked against plaintext.

The demo is a simulation on the embedded English population: sampling and the
mechanism's choices derive from the seed, the protocol's keys come from the operating
system (:func:`protocol.studies.runners.default_transport`). The same seed then drives a
plaintext trusted aggregator, whose release must equal the secure-aggregation one.
"""
from __future__ import annotations

import copy
import time
from typing import Any

from protocol.studies.errors import StudyError
from protocol.studies.runners import default_transport
from protocol.studies.runners.triehh import TrieHHOptions, prepare, run_once, summarize

__all__ = ["run_demo"]


def run_demo(users: int, epsilon: float, seed: int, progress=None) -> dict[str, Any]:  # noqa: ANN001
    """Run TrieHH over SecAgg+ and over the plaintext transport with the same ``seed``.

    Returns ``{"secagg": summary of the secure run (with seconds), "plain_heavy_hitters",
    "plain_prefixes", "same": whether both released the same trie}``.

    Raises:
        StudyError: fewer than 100 users, or as the TrieHH runner.
    """
    if users < 100:
        raise StudyError("--users must be at least 100")
    opts = TrieHHOptions(users=users, epsilon=epsilon, transport="secagg", seed=seed)
    t0 = time.perf_counter()
    prep, rng = prepare(opts)
    rng_plain = copy.deepcopy(rng)
    transport = default_transport("secagg")
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
            "plain_prefixes": len(plain.prefixes), "same": same}
