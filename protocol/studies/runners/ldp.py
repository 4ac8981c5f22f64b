"""One local-DP frequency oracle (GRR, OUE, OLH, AoN; :mod:`mechanisms.fo`) on a
population, its estimates compared with the truth (``fedhh ldp``).

The population is a synthetic Zipf(s) population or an item file
(:mod:`protocol.studies.datasets_items`). Without a transport the oracle estimates in
process; with one, the reports travel over it through :mod:`protocol.studies.ldp_runner`
(the shuffler adds the amplified central guarantee).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocol.core.contract import Transport
from protocol.studies.datasets_items import file_population, zipf_population
from protocol.studies.errors import StudyError

__all__ = ["MECHANISMS", "LDPOptions", "build_population", "population_and_oracle", "run",
           "job_name", "input_lines", "choice_lines"]

MECHANISMS = ("grr", "oue", "olh", "aon")


@dataclass(frozen=True)
class LDPOptions:
    """One ``fedhh ldp`` run (options of the same names). ``g``/``B`` 0: the oracle's
    default hash range; ``transport`` is the name reported (``none``: in process)."""

    mechanism: str = "olh"
    dataset: str = "zipf"
    users: int | None = None
    domain: int | None = None
    epsilon: float = 2.0
    zipf_s: float = 1.1
    g: int = 0
    B: int = 0
    top: int = 10
    seed: int | None = None
    transport: str = "none"
    delta: float | None = None
    bound: str = "fmt23_numerical"


def build_population(opts: LDPOptions, rng: np.random.Generator, notes: dict | None = None
                     ) -> tuple[np.ndarray, list[str] | None, int]:
    """``zipf`` (``users`` default 100,000 over ``domain`` default 1,000) or an item file
    (what reading it changed goes to ``notes``:
    :func:`~protocol.studies.datasets_items.file_population`).

    Raises:
        StudyError: bad sizes, exponent or file.
    """
    try:
        if opts.dataset == "zipf":
            users = 100_000 if opts.users is None else opts.users
            domain = 1000 if opts.domain is None else opts.domain
            return zipf_population(users, domain, opts.zipf_s, rng), None, domain
        return file_population(opts.dataset, opts.domain, opts.users, rng, notes)
    except (ValueError, OSError) as exc:
        raise StudyError(str(exc)) from None


def population_and_oracle(opts: LDPOptions, notes: dict | None = None
                          ) -> tuple[np.ndarray, list[str] | None, Any, np.random.Generator]:
    """The population (``values``, item names or ``None``), the public oracle and the
    run's remaining randomness, all from ``opts`` (a ``fedhh client --job ldp`` process
    derives the same population and oracle from the same options); what reading an
    item file changed goes to ``notes``.

    Raises:
        StudyError: bad population or oracle parameters.
    """
    from mechanisms.fo import OracleInputError, make_oracle

    rng = np.random.default_rng(opts.seed)
    values, names, domain = build_population(opts, rng, notes)
    extra: dict[str, Any] = {}
    if opts.mechanism == "olh" and opts.g:
        extra["g"] = opts.g
    if opts.mechanism == "aon" and opts.B:
        extra["B"] = opts.B
    try:
        oracle = make_oracle(opts.mechanism, opts.epsilon, domain,
                             dummy=bool((values < 0).any()), **extra)
    except OracleInputError as exc:
        raise StudyError(str(exc)) from None
    return values, names, oracle, rng


def job_name(oracle: Any) -> str:
    """The task name of an oracle's round over the network: it binds the oracle's public
    parameters, so a device configured with another mechanism, epsilon, domain or hash
    range refuses the round (``job_mismatch``) instead of contributing under them."""
    import hashlib

    params = {k: getattr(oracle, k) for k in ("g", "B") if hasattr(oracle, k)}
    text = repr((oracle.name, float(oracle.epsilon), int(oracle.domain_size),
                 bool(oracle.dummy), sorted(params.items())))
    return f"ldp-{oracle.name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def run(opts: LDPOptions, transport: Transport | None = None) -> tuple[dict[str, Any], Any]:
    """Randomise every user's value, estimate the frequencies (in process, or over
    ``transport``) and compare with the truth: the ``top`` most frequent items, MSE,
    analytical variance and the guarantee. Returns ``(summary, carried)`` where
    ``carried`` is the :mod:`protocol.studies.ldp_runner` result (``None`` in process).
    Over a transport whose clients contribute themselves (the network prototype's),
    each device randomises its own value: nothing is randomised here.

    Raises:
        StudyError: bad population or oracle parameters, or a transport failure.
    """
    notes: dict[str, Any] = {}
    values, names, oracle, rng = population_and_oracle(opts, notes)
    n = values.shape[0]
    domain = int(oracle.domain_size)
    at_clients = bool(getattr(transport, "contributions_at_clients", False))
    t0 = time.perf_counter()
    reports = None if at_clients else oracle.randomize(values, rng)
    t1 = time.perf_counter()
    if transport is None:
        est, carried = oracle.estimate(reports), None
    else:
        from protocol.core.contract import AggregationAborted
        from mechanisms.fo import ReportError
        from protocol.studies.ldp_runner import LDPTransportError, run_ldp

        try:
            carried = run_ldp(oracle, reports, transport, rng, delta=opts.delta,
                              bound=opts.bound, population=n if at_clients else None,
                              **({"task": job_name(oracle)} if at_clients else {}))
        except (LDPTransportError, AggregationAborted, ReportError) as exc:
            raise StudyError(str(exc)) from None
        est = carried.estimates
    t2 = time.perf_counter()
    inside = values[values >= 0]
    truth = np.bincount(inside, minlength=domain)[:domain] / n
    err = est - truth
    std = np.sqrt(oracle.variance(n, truth))
    mse = float(np.mean(err ** 2))
    order = np.argsort(-truth, kind="stable")[: max(0, opts.top)]
    rows = [{"item": int(i) if names is None else names[i], "true": float(truth[i]),
             "estimate": float(est[i]), "error": float(err[i]), "std": float(std[i]),
             "z": float(err[i] / std[i])} for i in order]
    priv = oracle.privacy()
    params = {k: getattr(oracle, k) for k in ("g", "B") if hasattr(oracle, k)}
    summary = {
        "mechanism": oracle.name, "epsilon": priv.epsilon,
        "effective_epsilon": priv.effective_epsilon, "delta": priv.delta,
        "source": priv.theorem, "users": n, "domain": domain, "dummy": oracle.dummy,
        "params": params, "support_probabilities": list(oracle.support_probabilities),
        "mse": mse, "mean_analytical_variance": float(np.mean(std ** 2)),
        "variance_at_f0": oracle.variance(n, 0.0),
        "max_abs_z": float(np.max(np.abs(err / std))),
        "seconds": {"randomize": t1 - t0, "estimate": t2 - t1},
        "seed": opts.seed, "top": rows,
        "transport": opts.transport,
        "guarantee": priv.to_json(),
    }
    if notes:
        summary["input"] = notes
    if carried is not None:
        summary["transport_encoding"] = carried.encoding
        summary["central"] = carried.central
    return summary, carried


def choice_lines(notes: dict[str, Any]) -> list[str]:
    """The ``input:`` lines of what was chosen for the user (the domain of an item
    file)."""
    if "domain_chosen" not in notes:
        return []
    return [f"input: domain {notes['domain']} items: {notes['domain_chosen']}"]


def input_lines(notes: dict[str, Any]) -> list[str]:
    """The sentences a person should read about an item file's ``notes``
    (:func:`~protocol.studies.datasets_items.file_population`): the word files' ones
    (:func:`~protocol.studies.datasets.input_warnings`: blank lines), then the item
    file's own."""
    from protocol.studies.datasets import input_warnings

    out = input_warnings(notes)
    if notes.get("with_replacement"):
        out.append(f"--users {notes['users_drawn']} is more than the file's "
                   f"{notes['lines']} lines: users drawn from them with replacement")
    elif "users_drawn" in notes:
        out.append(f"{notes['users_drawn']} of the file's {notes['lines']} lines drawn "
                   "(--users)")
    if notes.get("outside_domain"):
        out.append(f"{notes['outside_domain']} users hold an item outside the top --domain "
                   "items: they count as one 'other' item (the oracle's dummy)")
    return out
