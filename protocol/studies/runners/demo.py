"""What ``fedhh demo`` runs: TrieHH over the thresholding committee, checked against
plaintext, and what each party learned, read from the recorded views.

The demo is a simulation on the embedded English population: sampling and the
mechanism's choices derive from the seed, the protocol's keys come from the operating
system (:func:`protocol.studies.runners.default_transport`). Every vote is counted by
secure aggregation into a committee (the server and two helpers) that opens only which
prefixes reach theta (:mod:`protocol.core.transports.threshold`). The same seed then
drives a plaintext trusted aggregator, whose release must equal the committee's.

The secure aggregation runs under a named threat model (``threat``, default
``malicious``: signed keys, the consistency round, and parameters for a server that may
equivocate, choose which clients drop and collude with 5% of the sampled users);
:func:`server_guarantee` states what that model lets the server learn about the vote
totals (:attr:`secagg.params.SecAggParams.min_honest`), which the demo prints. Over
the committee the server unmasks only the blinded totals; the guarantee bounds which
subsets a total can cover.

Under the malicious model the committee's input is, by default, each device's
validated report (``committee_input="reports"``): its vote split into three shares,
the helpers' parts encrypted to them, checked one-hot-or-zero on the shares, invalid
reports dropped by name; ``committee_input="secagg"`` feeds the committee the blinded
sum of a secure-aggregation session instead (no client input is checked).

"What each party learned" is computed from each round's ``RoundResult.views`` (each
member's intake of the reports -- received, valid, dropped by reason -- or, over
secure aggregation, the server's masked inputs and blinded sum; the committee's
opened bits and counts; the clients' drops or aborts), summarised round by round as
the run goes (:class:`ViewRecorder`), never from fixed text.

With corrupted clients (``corrupt``) the plaintext check reruns the same samples with
those clients abstaining: plain TrieHH over the honest clients' votes
(:func:`protocol.studies.runners.triehh.run_corrupted`).
"""
from __future__ import annotations

import copy
import time
from typing import Any, Callable

import numpy as np

from protocol.core.contract import (
    Contributions, RoundResult, RoundSpec, Sample, SamplesThroughInner, Transport,
)
from protocol.studies.errors import StudyError
from protocol.studies.runners import default_transport
from protocol.studies.runners.triehh import TrieHHOptions, prepare, run_once, summarize

__all__ = ["run_demo", "server_guarantee", "ViewRecorder", "DEMO_TRANSPORT"]

#: the transport the demo runs TrieHH over
DEMO_TRANSPORT = "threshold"


class ViewRecorder(SamplesThroughInner, Transport):
    """Delegates every round to ``inner`` and folds its ``RoundResult.views`` into a
    per-party summary of what the party saw (counts only, so memory stays flat).

    The summary per committee member: rounds, candidates compared, pass bits opened
    (and how many passed), counts opened and the smallest of them (never below theta
    in a correct run), messages received; over validated reports the reports it took,
    how many were valid and those dropped by reason (and the accusations it made);
    over secure aggregation the server's masked inputs and the size of the blinded
    sums; clients: the reports dropped by reason (validated reports) or the aborts.
    """

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.kinds = inner.kinds  # type: ignore[misc]
        self.thetas: set[int] = set()
        self.parties: dict[str, dict[str, Any]] = {}
        self.samples: dict[tuple[str, int], Sample] = {}

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
        if party == "corrupted":
            return
        if party == "clients":
            s["aborted"] = s.get("aborted", 0) + len(view.get("aborted", {}))
            if "sampled" in view:  # validated reports
                s["sampled"] = s.get("sampled", 0) + int(view["sampled"])
                s["valid"] = s.get("valid", 0) + int(view["valid"])
                drops = s.setdefault("dropped", {})
                for reason, k in (view.get("dropped") or {}).items():
                    drops[reason] = drops.get(reason, 0) + int(k)
            return
        intake = view.get("intake")
        if intake is not None:
            s["input"] = "reports"
            s["reports"] = s.get("reports", 0) + int(intake.get("reports", 0))
            s["valid"] = s.get("valid", 0) + int(intake.get("valid", 0))
            drops = s.setdefault("dropped", {})
            for _user, reason, _accuser in intake.get("dropped", ()):
                drops[reason] = drops.get(reason, 0) + 1
            own = MEMBER_INDEX.get(party)
            if own is not None:
                s["accusations"] = (s.get("accusations", 0)
                                    + int((intake.get("accusations") or {}).get(own, 0)))
        elif party == "server":
            s["input"] = "secagg"
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


#: committee members by name -> their index in the intake's accusation counts
MEMBER_INDEX = {"server": 0, "helper1": 1, "helper2": 2}


def _drops(drops: dict[str, int] | None) -> str:
    if not drops:
        return "none dropped"
    return "dropped: " + ", ".join(f"{k:,} {reason}" for reason, k in sorted(drops.items()))


def learned_lines(parties: dict[str, dict[str, Any]], thetas: set[int]) -> list[str]:
    """One line per party from a :class:`ViewRecorder` summary."""
    theta = min(thetas) if thetas else None
    lines = []
    for name in ("server", "helper1", "helper2"):
        s = parties.get(name)
        if s is None:
            continue
        parts = []
        if s.get("input") == "reports":
            what = ("reports received (each device's vote in three shares, the helpers' "
                    "parts encrypted to them; it opens none)" if name == "server" else
                    "reports relayed to it, its share of each decrypted from its own part")
            parts.append(f"{s.get('reports', 0):,} {what}, {s.get('valid', 0):,} valid, "
                         f"{_drops(s.get('dropped'))}"
                         + (f", {s['accusations']:,} accused by it"
                            if s.get("accusations") else ""))
        elif name == "server":
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
        c = parties["clients"]
        if "sampled" in c:
            lines.append(f"clients: {c['sampled']:,} sampled over {c['rounds']} rounds, "
                         f"{c['valid']:,} valid reports counted, {_drops(c.get('dropped'))}")
        else:
            lines.append(f"clients: {c.get('aborted', 0)} aborts")
    return lines


def run_demo(users: int, epsilon: float, seed: int, progress=None,  # noqa: ANN001
             threat: str = "malicious",
             say: Callable[[str], None] | None = None,
             committee_input: str | None = None,
             min_valid_fraction: float | None = None,
             corrupt: Any = None) -> dict[str, Any]:
    """Run TrieHH over the threshold transport and over plaintext with the same ``seed``.

    Returns ``{"threshold": summary of the committee run (with seconds), "learned":
    lines per party from the recorded views, "views": the per-party summary,
    "plain_heavy_hitters", "plain_prefixes", "same": whether both released the same
    trie, "threat", "input": the committee's input (``reports`` or ``secagg``),
    "guarantee": what the committee's input lets a member learn (text)}``; with
    ``corrupt`` (corrupted clients, as :func:`protocol.studies.runners.triehh.run`)
    the plaintext run is the honest clients' votes alone and the committee run's
    summary has a ``corrupted`` section.

    ``say`` receives a one-line estimate before a run predicted to take more than a
    minute (:func:`protocol.studies.runners.triehh.estimate_seconds`).

    Raises:
        StudyError: fewer than 100 users, an unknown threat model, a committee input
            the threat model does not take, or as the TrieHH runner.
    """
    from protocol.studies.corrupted import corrupt_clients

    if users < 100:
        raise StudyError("--users must be at least 100")
    c = corrupt_clients(corrupt)
    opts = TrieHHOptions(users=users, epsilon=epsilon, transport=DEMO_TRANSPORT, seed=seed)
    t0 = time.perf_counter()
    prep, rng = prepare(opts)
    rng_plain = copy.deepcopy(rng)
    from secagg.params import THREATS

    if threat not in THREATS:
        raise StudyError(f"unknown threat model {threat!r} (expected one of {THREATS})")
    from protocol.core.transports import get_transport

    extra: dict[str, Any] = {}
    if committee_input is not None:
        extra["committee_input"] = committee_input
    if min_valid_fraction is not None:
        extra["min_valid_fraction"] = min_valid_fraction
    try:
        inner = get_transport(DEMO_TRANSPORT, simulate=False,
                              malicious=threat == "malicious", **extra)
    except (ValueError, TypeError) as exc:
        raise StudyError(f"transport {DEMO_TRANSPORT!r}: {exc}") from None
    recorder = ViewRecorder(inner)
    from protocol.studies.runners.triehh import aim

    aimed = aim(prep, c, recorder)
    if say is not None:
        from protocol.studies.runners.triehh import _m, cpu_phrase, estimate_seconds

        predicted = estimate_seconds(prep, recorder.inner)
        if predicted is not None and predicted > 60:
            say(f"estimate: up to {cpu_phrase(predicted, recorder.inner, _m(prep))} for the "
                "secure run, from a measured per-client cost")
    t1 = time.perf_counter()
    # the clients served inside each round, on the same line as the round
    # (protocol.studies.progress.RunProgress), when the caller's progress shows them
    if hasattr(recorder.inner, "client_progress") and hasattr(progress, "client"):
        recorder.inner.client_progress = progress.client
    if aimed is None:
        secure = run_once(prep, recorder, rng, progress)
    else:
        from protocol.studies.runners.triehh import run_corrupted

        # the plaintext run of the same samples with the corrupted clients abstaining
        secure, corrupted = run_corrupted(prep, recorder, rng, aimed, progress)
    t2 = time.perf_counter()
    out = summarize(prep, secure)
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3),
                      "total": round(t2 - t0, 3)}
    if aimed is None:
        # the committee drew each round's sample from OS randomness (its beacon): the
        # plaintext rerun asks the same users
        from protocol.core.transports.plain import PlainTransport

        plain = run_once(prep, PlainTransport(samples=recorder.samples), rng_plain)
        same = (set(plain.heavy_hitters) == set(secure.heavy_hitters)
                and set(plain.prefixes) == set(secure.prefixes))
        plain_hh, plain_prefixes = len(plain.heavy_hitters), len(plain.prefixes)
    else:
        out["input"]["corrupt_target"] = aimed.input_note()
        out["corrupted"] = corrupted
        same = bool(corrupted["release_equals_honest"])
        plain_hh = len(corrupted["honest_heavy_hitters"])
        plain_prefixes = int(corrupted["honest_frequent_prefixes"])
    validated = bool(getattr(inner, "validates", False))
    return {"threshold": out, "learned": learned_lines(recorder.parties, recorder.thetas),
            "views": recorder.parties, "plain_heavy_hitters": plain_hh,
            "plain_prefixes": plain_prefixes, "same": same, "threat": threat,
            "input": "reports" if validated else "secagg",
            "guarantee": reports_guarantee(recorder.parties) if validated
            else server_guarantee(threat, secure.m)}


def reports_guarantee(parties: dict[str, dict[str, Any]]) -> str:
    """What the validated reports let one committee member learn (one sentence, printed
    by the demo), with the drops the run's views hold."""
    clients = parties.get("clients", {})
    return ("each device's vote reached the committee as three shares, each member "
            "holding two, which together are uniform: no single member (the server or a "
            "helper) holds a vote or a count below theta; the members checked every "
            "report (signed by its device, bound to the round, one-hot-or-zero on the "
            "shares) and counted only the valid ones ("
            + _drops(clients.get("dropped")) + "), even if one member deviates")


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
