"""What ``fedhh demo`` runs: TrieHH over the thresholding committee, checked against
plaintext, and what each party learned, read from the recorded views.

The demo is a simulation on the embedded English population: sampling and the
mechanism's choices derive from the seed, the protocol's keys come from the operating
system (:func:`protocol.studies.runners.default_transport`). Every vote is counted by
secure aggregation into a committee (the server and two helpers) that opens only which
prefixes reach theta (:mod:`protocol.core.transports.threshold`). The same seed then
drives a plaintext trusted aggregator, whose release must equal the committee's.

"What each party learned" is computed from each round's ``RoundResult.views`` (the
server's secure-aggregation and committee views, each helper's share and committee view,
the clients' aborts), summarised round by round as the run goes (:class:`ViewRecorder`),
never from fixed text.
"""
from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np

from protocol.core.contract import Contributions, RoundResult, RoundSpec, Transport
from protocol.studies.errors import StudyError
from protocol.studies.runners import default_transport
from protocol.studies.runners.triehh import TrieHHOptions, prepare, run_once, summarize

__all__ = ["run_demo", "ViewRecorder", "DEMO_TRANSPORT"]

#: the transport the demo runs TrieHH over
DEMO_TRANSPORT = "threshold"


class ViewRecorder(Transport):
    """Delegates every round to ``inner`` and folds its ``RoundResult.views`` into a
    per-party summary of what the party saw (counts only, so memory stays flat).

    The summary per committee member: rounds, candidates compared, pass bits opened
    (and how many passed), counts opened and the smallest of them (never below theta
    in a correct run), messages received; the server also masked inputs received and
    the size of the blinded sums; clients: aborts.
    """

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.kinds = inner.kinds  # type: ignore[misc]
        self.thetas: set[int] = set()
        self.parties: dict[str, dict[str, Any]] = {}

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        """Run the round on the inner transport and record its views.

        Raises:
            AggregationAborted, ContractError: as the inner transport.
        """
        res = self.inner.run_round(spec, contributions, rng)
        if spec.theta is not None:
            self.thetas.add(int(spec.theta))
        for party, view in res.views.items():
            self._fold(party, view)
        return res

    def _fold(self, party: str, view: dict[str, Any]) -> None:
        s = self.parties.setdefault(party, {"rounds": 0})
        s["rounds"] += 1
        if party == "clients":
            s["aborted"] = s.get("aborted", 0) + len(view.get("aborted", {}))
            return
        if party == "server":
            s["masked_inputs"] = (s.get("masked_inputs", 0)
                                  + len(view.get("masked_input_digests", {})))
            if "blinded_sum" in view:
                s["blinded_sum_entries"] = (s.get("blinded_sum_entries", 0)
                                            + int(np.asarray(view["blinded_sum"]).size))
        comm = view.get("committee")
        if not comm:
            return
        bits, counts = comm.get("opened_bits"), comm.get("opened_counts")
        if bits is not None:
            s["compared"] = s.get("compared", 0) + int(bits.size)
            s["passed"] = s.get("passed", 0) + int(np.count_nonzero(bits))
        s["messages_received"] = s.get("messages_received", 0) + len(comm.get("received", ()))
        if counts is not None and counts.size:
            s["counts_opened"] = s.get("counts_opened", 0) + int(counts.size)
            low = int(counts.min())
            s["smallest_count_opened"] = min(s.get("smallest_count_opened", low), low)
        else:
            s.setdefault("counts_opened", 0)


def learned_lines(parties: dict[str, dict[str, Any]], thetas: set[int]) -> list[str]:
    """One line per party from a :class:`ViewRecorder` summary."""
    theta = min(thetas) if thetas else None
    lines = []
    for name in ("server", "helper1", "helper2"):
        s = parties.get(name)
        if s is None:
            continue
        parts = []
        if name == "server":
            parts.append(f"{s.get('masked_inputs', 0):,} masked inputs and "
                         f"{s.get('blinded_sum_entries', 0):,} blinded sum entries "
                         "(uniform: the helpers' vectors are added)")
        else:
            parts.append("its blinding share")
        parts.append(f"{s.get('passed', 0):,} of {s.get('compared', 0):,} pass bits "
                     f"over {s['rounds']} rounds")
        opened = s.get("counts_opened", 0)
        if opened:
            parts.append(f"{opened:,} counts, the smallest {s['smallest_count_opened']:,}")
        else:
            parts.append("no count")
        parts.append(f"{s.get('messages_received', 0):,} masked committee messages")
        lines.append(f"{name}: " + "; ".join(parts))
    below = any(s.get("counts_opened", 0) and theta is not None
                and s["smallest_count_opened"] < theta for s in parties.values())
    lines.append(f"below theta ({theta}): "
                 + ("a count was opened" if below else "no view holds a count"))
    if "clients" in parties:
        lines.append(f"clients: {parties['clients'].get('aborted', 0)} aborts")
    return lines


def run_demo(users: int, epsilon: float, seed: int, progress=None) -> dict[str, Any]:  # noqa: ANN001
    """Run TrieHH over the threshold transport and over plaintext with the same ``seed``.

    Returns ``{"threshold": summary of the committee run (with seconds), "learned":
    lines per party from the recorded views, "views": the per-party summary,
    "plain_heavy_hitters", "plain_prefixes", "same": whether both released the same
    trie}``.

    Raises:
        StudyError: fewer than 100 users, or as the TrieHH runner.
    """
    if users < 100:
        raise StudyError("--users must be at least 100")
    opts = TrieHHOptions(users=users, epsilon=epsilon, transport=DEMO_TRANSPORT, seed=seed)
    t0 = time.perf_counter()
    prep, rng = prepare(opts)
    rng_plain = copy.deepcopy(rng)
    recorder = ViewRecorder(default_transport(DEMO_TRANSPORT))
    t1 = time.perf_counter()
    secure = run_once(prep, recorder, rng, progress)
    t2 = time.perf_counter()
    out = summarize(prep, secure)
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3),
                      "total": round(t2 - t0, 3)}
    plain = run_once(prep, default_transport("plain"), rng_plain)
    same = (set(plain.heavy_hitters) == set(secure.heavy_hitters)
            and set(plain.prefixes) == set(secure.prefixes))
    return {"threshold": out, "learned": learned_lines(recorder.parties, recorder.thetas),
            "views": recorder.parties, "plain_heavy_hitters": len(plain.heavy_hitters),
            "plain_prefixes": len(plain.prefixes), "same": same}
