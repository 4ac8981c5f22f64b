"""Federated heavy hitters under LDP -- TAPS, TAP, FedPEM and GTF
(:mod:`mechanisms.federated`; Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with
Local Differential Privacy", section 7) -- one run (``fedhh federated``) and the
experiments of ``fedhh eval federated``, which repeat runs and write CSV files and plots:

* ``figures``: F1 and NCR against epsilon for TAPS, TAP, FedPEM and GTF (Figures 4, 5
  and 7); writes ``federated_runs.csv``, ``federated_summary.csv``,
  ``federated_f1.png`` and ``federated_ncr.png``;
* ``extension``: TAPS with fixed extension numbers ``floor(k/2), k, 2k, 3k``, the
  adaptive one (equations 2-3 as printed) and the ``floor`` rule (never below k) at one
  epsilon (Table 5); ``federated_extension.csv``;
* ``shared``: TAPS with and without the shared shallow trie (Table 6);
  ``federated_shared.csv``;
* ``beta``: the four mechanisms on SYN with Dirichlet beta 0.2, 0.5, 0.8 (Table 8);
  ``federated_beta.csv``;
* ``readings``: where the paper is ambiguous, the readings side by side at every
  epsilon: TAP and TAPS under each reading of equation 3's ``E[x]``
  (:data:`mechanisms.federated.adaptive.DRIFT_READINGS`), and TAPS with the validation
  users split between its two sets and without pruning on a non-positive consensus
  score (``FederatedConfig.validation``, ``prune_negative``);
  ``federated_readings.csv``;
* ``regime``: the map of where each method wins (not part of ``all``: about an hour on
  two cores): TAPS and TAP under each extension rule, FedPEM and GTF, on
  :func:`protocol.studies.datasets_federated.regime_population` over its knob ``own``
  (local-top-k recall of the global top-k from about 1 to about 0.1), at every epsilon
  and k; ``federated_regime.csv``, ``.json``, ``.md`` and ``federated_regime_k{k}.png``
  (:func:`regime_map`);
* ``all``: everything above but ``regime``.

Each cell is the mean over ``runs`` runs (simulation seeds ``seed .. seed+runs-1``)
on one fixed population (``data_seed``).
"""
from __future__ import annotations

import csv
import pathlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from protocol.studies.errors import StudyError

__all__ = ["MECHS", "FederatedOptions", "config", "extension_rule", "run", "describe",
           "experiments", "regime_map"]

MECHS = ("taps", "tap", "fedpem", "gtf")


@dataclass(frozen=True)
class FederatedOptions:
    """One ``fedhh federated`` run (options of the same names)."""

    mechanism: str = "taps"
    dataset: str = "syn"
    epsilon: float = 4.0
    k: int = 10
    oracle: str = "grr"
    levels: int = 24
    extension: str | int = "floor"
    no_shared_trie: bool = False
    phase_one_fraction: float | None = None
    drift: str = "variance"
    fedpem_upload: str = "counts"
    beta: float = 0.5
    scale: float = 1.0
    data_seed: int = 0
    seed: int | None = None
    own: float = 0.3


def extension_rule(text: str | int) -> str | int:
    """``"adaptive"``, ``"floor"``, ``"k"`` or a fixed integer ``t`` (``--extension``).

    Raises:
        StudyError: anything else.
    """
    from mechanisms.federated.common import EXTENSION_RULES

    if text in EXTENSION_RULES:
        return str(text)
    try:
        return int(text)
    except (TypeError, ValueError):
        raise StudyError(f"--extension must be one of {', '.join(EXTENSION_RULES)} or an "
                         f"integer, got {text!r}") from None


def config(opts: FederatedOptions):  # noqa: ANN201
    """The :class:`mechanisms.federated.FederatedConfig` of the options.

    Raises:
        StudyError: a bad extension or configuration.
    """
    from mechanisms.federated import FederatedConfig, FederatedError

    ext = extension_rule(opts.extension)
    try:
        return FederatedConfig(epsilon=opts.epsilon, k=opts.k, levels=opts.levels,
                               oracle=opts.oracle, extension=ext,
                               shared_trie=not opts.no_shared_trie,
                               shared_fraction=opts.phase_one_fraction, drift=opts.drift,
                               fedpem_upload=opts.fedpem_upload)
    except FederatedError as exc:
        raise StudyError(str(exc)) from None


def run(opts: FederatedOptions, transport: Any = None) -> dict[str, Any]:
    """One run: F1, NCR, local recall, reports per user, time, communication and the
    heavy hitters (as words too for the ``words`` and CSV datasets).

    ``transport`` (a :class:`protocol.core.contract.Transport`; default plaintext)
    carries every party's oracle rounds: reports over plain or the shuffler, support
    vectors over secure aggregation or the thresholding committee (the mechanism picks
    the kind from the transport's ``kinds``; the estimates, hence the release, are the
    same for the same seed).

    Raises:
        StudyError: a bad configuration or dataset, or a transport that cannot carry
            the rounds (or aborted one).
    """
    import numpy as np

    from mechanisms.federated import f1_at_k, local_recall, ncr, privacy
    from mechanisms.federated import run as run_mechanism
    from protocol.studies.datasets_federated import decode_item, load_population
    from protocol.studies.errors import mechanism_errors

    cfg = config(opts)
    with mechanism_errors(opts.mechanism, "plain" if transport is None else transport.name):
        pop = load_population(opts.dataset, seed=opts.data_seed, beta=opts.beta,
                              scale=opts.scale, own=opts.own)
        rng = np.random.default_rng(opts.seed)
        res = run_mechanism(opts.mechanism, pop, cfg, rng, transport)
    truth = pop.true_top_k(cfg.k)
    out = {
        "mechanism": opts.mechanism, "dataset": opts.dataset, "epsilon": cfg.epsilon,
        "k": cfg.k, "oracle": cfg.oracle, "parties": len(pop.parties), "users": pop.total_users,
        "transport": "plain" if transport is None else transport.name,
        "f1": round(f1_at_k(truth, res.heavy_hitters), 4),
        "ncr": round(ncr(truth, res.heavy_hitters), 4),
        "local_recall": round(local_recall(truth, [p.heavy_hitters for p in res.parties]), 4),
        "max_reports_per_user": res.max_reports_per_user(),
        "seconds": round(res.seconds, 3),
        "communication": res.communication(),
        "heavy_hitters": [f"{int(x):012x}" for x in res.heavy_hitters],
        "privacy": privacy(opts.mechanism, cfg).to_json(),
    }
    if opts.mechanism == "taps":
        from mechanisms.federated.tap import pruning_stats

        out["pruning"] = pruning_stats(res, truth, cfg.levels)
    if opts.dataset == "words" or opts.dataset.endswith(".csv"):
        out["heavy_hitter_words"] = [decode_item(int(x)) for x in res.heavy_hitters]
    return out


def describe(opts: FederatedOptions) -> dict[str, Any]:
    """The population's statistics (users, distinct items per party, items common to
    every party), how far the parties' exact local top-k are from the global top-k
    (``local``: :func:`protocol.studies.datasets_federated.local_topk_stats` at
    ``opts.k``, beside the paper's Table 7 figures), and, for SYN and the regime, the
    generator's parameters; for SYN Table 2's figures (Zhang, Ye, Hu) next to ours,
    with the relative difference.

    Raises:
        StudyError: a bad dataset or ``k``.
    """
    from mechanisms.federated import FederatedError
    from protocol.studies import datasets_federated as df

    try:
        pop = df.load_population(opts.dataset, seed=opts.data_seed, beta=opts.beta,
                                 scale=opts.scale, own=opts.own)
        local = df.local_topk_stats(pop, opts.k)
    except FederatedError as exc:
        raise StudyError(str(exc)) from None
    stats = df.describe(pop)
    out: dict[str, Any] = {"dataset": opts.dataset, **stats}
    table7 = df.PAPER_TABLE7["SYN"]
    out["local"] = {**local, "paper_table7": {
        "dataset": "SYN", "epsilon": 4, "k": 10, "gtf": table7[1], "fedpem": table7[2],
        "taps": table7[3],
        "note": ("the paper's figures are the mechanisms' local recall under LDP noise "
                 "(epsilon 4, k 10); ours is the exact, noise-free local top-k, which a "
                 "mechanism's local recall does not exceed in expectation"),
        "all_datasets": {name: {"parties": v[0], "gtf": v[1], "fedpem": v[2], "taps": v[3]}
                         for name, v in df.PAPER_TABLE7.items()}}}
    if opts.dataset == "regime":
        out["generator"] = {"seed": opts.data_seed, "scale": opts.scale,
                            **df.RegimeParams(own=opts.own).__dict__,
                            "users": pop.total_users, "bits": pop.bits}
    if opts.dataset == "syn":
        paper = {p.name: p for p in df.SYN_PARTIES}
        for row in out["parties"]:
            spec = paper[row["name"]]
            row["law"] = f"{spec.law}({spec.param:g})"
            row["paper_users"] = int(round(spec.users * opts.scale))
            row["paper_distinct"] = int(round(spec.distinct * opts.scale))
            row["distinct_vs_paper"] = round(row["distinct"] / row["paper_distinct"] - 1, 4)
        out["paper_common"] = int(round(df.SYN_COMMON * opts.scale))
        out["common_vs_paper"] = round(out["common"] / max(out["paper_common"], 1) - 1, 4)
        out["generator"] = {"seed": opts.data_seed, "beta": opts.beta, "scale": opts.scale,
                            "groups": df.SYN_GROUPS, "group_size": df.SYN_GROUP_SIZE,
                            "common": df.SYN_COMMON, "taste": df.SYN_TASTE, "bits": pop.bits}
        out["source"] = ("Zhang, Ye, Hu, Federated Heavy Hitter Analytics with Local "
                         "Differential Privacy, Table 2")
    return out


def _evaluate(pop, name, cfg, runs, seed, journal=None, key=(), say=None):  # noqa: ANN001, ANN202
    """``runs`` runs of mechanism ``name`` (seeds ``seed + r``), one row each. With a
    ``journal`` every finished run is recorded under ``key + [r]`` at once, and a run
    the journal already holds is taken from it instead of being run again."""
    import numpy as np

    from mechanisms.federated import f1_at_k, local_recall, ncr
    from mechanisms.federated import run as run_mechanism

    truth = pop.true_top_k(cfg.k)
    rows = []
    for r in range(runs):
        kept = journal.get(list(key) + [r]) if journal is not None else None
        if kept is not None:
            rows.append(kept)
            continue
        res = run_mechanism(name, pop, cfg, np.random.default_rng(seed + r))
        up = sum(c["upload_bits"] for c in res.communication().values())
        row = {"f1": f1_at_k(truth, res.heavy_hitters), "ncr": ncr(truth, res.heavy_hitters),
               "local_recall": local_recall(truth, [p.heavy_hitters for p in res.parties]),
               "seconds": res.seconds, "upload_bits": up, "run": r}
        if journal is not None:
            journal.record(list(key) + [r], row)
        rows.append(row)
        if say is not None:
            say(f"  {name} {' '.join(str(x) for x in key[1:])} run {r + 1}/{runs} "
                f"F1={row['f1']:.3f} ({res.seconds:.1f} s)")
    return rows


def _mean(rows, key):  # noqa: ANN001, ANN202
    return sum(r[key] for r in rows) / len(rows)


def _ci(rows, key):  # noqa: ANN001, ANN202
    from protocol.studies.evaluation import ci_text, mean_ci

    return ci_text(mean_ci([r[key] for r in rows])[1], 4)


def _write(path: pathlib.Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _plot(path: pathlib.Path, eps: list[float], series: dict[str, list[float]], ylabel: str,
          title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    marks = {"taps": "o-", "tap": "s--", "fedpem": "^-.", "gtf": "v:"}
    for name, ys in series.items():
        ax.plot(eps, ys, marks.get(name, "o-"), label=name.upper() if name != "fedpem" else "FedPEM",
                linewidth=1.8, markersize=6)
    ax.set_xlabel("privacy budget epsilon")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(eps)
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def experiments(out_dir: str | pathlib.Path, *, experiment: str = "figures",
                dataset: str = "syn", epsilons: Sequence[float] = (1, 2, 3, 4, 5),
                epsilon: float = 4.0, k: int = 10, oracle: str = "grr", runs: int = 10,
                seed: int = 0, data_seed: int = 0, scale: float = 1.0,
                say: Callable[[str], None] = lambda _msg: None,
                resume: bool = False, verbose: bool = True,
                ks: Sequence[int] = (10, 20), owns: Sequence[float] | None = None,
                rules: Sequence[str] = ("adaptive", "floor", "k"),
                tap_rules: Sequence[str] = ("adaptive", "floor"),
                jobs: int = 1, extension: str | int | None = None) -> pathlib.Path:
    """Run the experiment(s) above and write their files into ``out_dir`` (created if
    missing); ``say`` receives one line per cell (and per run with ``verbose``).
    ``extension`` is the extension rule of the TAP and TAPS runs (default: the
    mechanisms' default; the ``extension`` and ``regime`` experiments set their own).
    Returns the directory.

    Every finished run is appended to ``OUT/runs.jsonl`` at once
    (:class:`protocol.studies.evaluation.Journal`); with ``resume`` the runs found there
    (same options) are kept and only the others run. On an interrupt of the
    ``figures`` experiment its CSV files and plots are drawn from the epsilons whose
    runs all finished before the ``KeyboardInterrupt`` propagates. The summary files
    carry the 95% confidence half-widths (``n/a`` for one run).

    Raises:
        StudyError: ``runs < 1``, an output directory that cannot be created, a bad
            configuration, a journal written with other options, or ``beta`` on
            another dataset than ``syn``.
    """
    from dataclasses import replace

    from mechanisms.federated import FederatedConfig, FederatedError
    from mechanisms.federated.common import EXTENSION_RULES
    from protocol.studies.datasets_federated import REGIME_OWN, load_population
    from protocol.studies.evaluation import JOURNAL, Journal, output_dir

    if runs < 1:
        raise StudyError("--runs must be >= 1")
    if jobs < 1:
        raise StudyError("--jobs must be >= 1")
    eps = list(epsilons)
    owns = list(REGIME_OWN if owns is None else owns)
    ks, rules, tap_rules = [int(x) for x in ks], list(rules), list(tap_rules)
    if experiment == "regime":
        if not (ks and owns and rules and eps) or min(ks) < 1:
            raise StudyError("the regime map needs at least one k >= 1, knob value, rule "
                             "and epsilon")
        bad = [r for r in rules + tap_rules if r not in EXTENSION_RULES]
        if bad:
            raise StudyError(f"unknown extension rules {bad}; choose from {EXTENSION_RULES}")
        if dataset != "syn":
            raise StudyError("the regime map runs on its own generator; leave --dataset out")
    out = output_dir(out_dir)
    try:
        defaults = FederatedConfig(extension=(FederatedConfig().extension if extension is None
                                              else extension_rule(extension)))
    except FederatedError as exc:
        raise StudyError(str(exc)) from None
    # the readings the mechanisms default to are part of the options: a journal written
    # under other defaults (before 2026-11-25: drift "printed") is not resumed
    config = {"evaluation": "federated", "experiment": experiment, "dataset": dataset,
              "epsilons": eps, "epsilon": epsilon, "k": k, "oracle": oracle, "runs": runs,
              "seed": seed, "data_seed": data_seed, "scale": scale,
              "drift": defaults.drift, "fedpem_upload": defaults.fedpem_upload,
              "extension": defaults.extension}
    if experiment == "regime":
        # a run is named by its journal key (knob, k, epsilon, mechanism, rule, run), so
        # the grid may change between resumptions; what else decides a run may not
        from protocol.studies.datasets_federated import RegimeParams

        config = {"evaluation": "federated", "experiment": "regime", "oracle": oracle,
                  "seed": seed, "data_seed": data_seed, "scale": scale,
                  "drift": defaults.drift, "fedpem_upload": defaults.fedpem_upload,
                  "generator": {k_: v for k_, v in RegimeParams().__dict__.items()
                                if k_ != "own"}}
    journal = Journal(out / JOURNAL, config, resume=resume, say=say)
    per_run = say if verbose else None

    def evaluate(pop_, m_, cfg_, key_):  # noqa: ANN001, ANN202
        return _evaluate(pop_, m_, cfg_, runs, seed, journal, key_, per_run)

    try:
        base = FederatedConfig(epsilon=epsilon, k=k, oracle=oracle,
                               extension=defaults.extension)
        if experiment == "regime":
            regime_map(out, journal, owns=owns, ks=ks, epsilons=eps, rules=rules,
                       tap_rules=tap_rules, runs=runs,
                       seed=seed, data_seed=data_seed, scale=scale, oracle=oracle, jobs=jobs,
                       say=say, verbose=verbose)
            return out
        pop = load_population(dataset, seed=data_seed, scale=scale)
        exps = (["figures", "extension", "shared", "beta", "readings"] if experiment == "all"
                else [experiment])
        tag = f"{dataset if dataset in ('syn', 'words') else pathlib.Path(dataset).stem}"
        for exp in exps:
            if exp == "figures":
                runs_rows, summary = [], []
                f1s = {m: [] for m in MECHS}
                ncrs = {m: [] for m in MECHS}
                done_eps: list[float] = []

                def write_figures() -> None:
                    _write(out / "federated_runs.csv", ["mechanism", "epsilon", "run", "f1",
                                                        "ncr", "local_recall", "seconds",
                                                        "upload_bits"], runs_rows)
                    _write(out / "federated_summary.csv",
                           ["mechanism", "epsilon", "f1", "f1_ci95", "ncr", "ncr_ci95",
                            "local_recall", "seconds", "upload_bits"], summary)
                    if done_eps:
                        title = f"{tag}, k={k}, {oracle.upper()}, mean of {runs} runs"
                        series_f1 = {m: v[:len(done_eps)] for m, v in f1s.items()}
                        series_ncr = {m: v[:len(done_eps)] for m, v in ncrs.items()}
                        _plot(out / "federated_f1.png", done_eps, series_f1, "F1", title)
                        _plot(out / "federated_ncr.png", done_eps, series_ncr, "NCR", title)

                try:
                    for e in eps:
                        cfg = replace(base, epsilon=e)
                        for m in MECHS:
                            rows = evaluate(pop, m, cfg, ["figures", m, e])
                            for r in rows:
                                runs_rows.append([m, e, r["run"], r["f1"], r["ncr"],
                                                  r["local_recall"], r["seconds"],
                                                  r["upload_bits"]])
                            f1s[m].append(_mean(rows, "f1"))
                            ncrs[m].append(_mean(rows, "ncr"))
                            summary.append([m, e, _mean(rows, "f1"), _ci(rows, "f1"),
                                            _mean(rows, "ncr"), _ci(rows, "ncr"),
                                            _mean(rows, "local_recall"), _mean(rows, "seconds"),
                                            _mean(rows, "upload_bits")])
                            say(f"{m:>7} eps={e:g}: F1={f1s[m][-1]:.3f} +- {_ci(rows, 'f1')} "
                                f"NCR={ncrs[m][-1]:.3f} +- {_ci(rows, 'ncr')}")
                        done_eps.append(e)
                except KeyboardInterrupt:
                    write_figures()
                    say(f"interrupted: {len(journal)} finished runs are in {journal.path}; "
                        f"the figures cover epsilon {done_eps or 'none'}; continue with "
                        "--resume and the same options")
                    raise
                write_figures()
            elif exp == "extension":
                k = k
                rows = []
                for label, ext in [("k/2", max(1, k // 2)), ("k", k), ("2k", 2 * k), ("3k", 3 * k),
                                   ("adaptive", "adaptive"), ("floor", "floor")]:
                    r = evaluate(pop, "taps", replace(base, extension=ext),
                                 ["extension", "taps", label])
                    rows.append([label, ext, _mean(r, "f1"), _mean(r, "ncr")])
                    say(f"TAPS extension {label:>8}: F1={rows[-1][2]:.3f}")
                _write(out / "federated_extension.csv", ["extension", "t", "f1", "ncr"], rows)
            elif exp == "shared":
                rows = []
                for label, flag in [("without shared trie", False), ("with shared trie", True)]:
                    for m in ("taps", "tap"):
                        r = evaluate(pop, m, replace(base, shared_trie=flag), ["shared", m, label])
                        rows.append([m, label, _mean(r, "f1"), _mean(r, "ncr")])
                        say(f"{m:>5} {label}: F1={rows[-1][2]:.3f}")
                _write(out / "federated_shared.csv", ["mechanism", "variant", "f1", "ncr"], rows)
            elif exp == "readings":
                # where the paper is ambiguous, every reading side by side: equation 3's
                # E[x] (TAP and TAPS) and TAPS's pruning (validation split, negative score)
                from mechanisms.federated.adaptive import DRIFT_READINGS

                variants = [(m, d, "each", True) for d in DRIFT_READINGS for m in ("taps", "tap")]
                variants += [("taps", d, v, neg) for d in ("printed", "counts", "variance")
                             for v, neg in (("split", True), ("each", False), ("split", False))]
                rows = []
                for e in eps:
                    for m, d, v, neg in variants:
                        cfg = replace(base, epsilon=e, drift=d, validation=v, prune_negative=neg)
                        r = evaluate(pop, m, cfg, ["readings", m, e, d, v, neg])
                        rows.append([m, e, d, v, neg, "-", _mean(r, "f1"), _ci(r, "f1"),
                                     _mean(r, "ncr"), _ci(r, "ncr")])
                        say(f"{m:>4} eps={e:g} drift={d:<10} validation={v:<5} "
                            f"prune_negative={neg!s:<5} F1={rows[-1][6]:.3f} +- {rows[-1][7]}")
                    # FedPEM: counts (section 7.1) or frequencies (Algorithm 1's text)
                    for up in ("counts", "frequencies"):
                        cfg = replace(base, epsilon=e, fedpem_upload=up)
                        r = evaluate(pop, "fedpem", cfg, ["readings", "fedpem", e, up])
                        rows.append(["fedpem", e, "-", "-", "-", up, _mean(r, "f1"),
                                     _ci(r, "f1"), _mean(r, "ncr"), _ci(r, "ncr")])
                        say(f"fedpem eps={e:g} upload={up:<11} F1={rows[-1][6]:.3f} "
                            f"+- {rows[-1][7]}")
                _write(out / "federated_readings.csv",
                       ["mechanism", "epsilon", "drift", "validation", "prune_negative",
                        "fedpem_upload", "f1", "f1_ci95", "ncr", "ncr_ci95"], rows)
            elif exp == "beta":
                if dataset != "syn":
                    raise StudyError("the beta experiment needs --dataset syn")
                rows = []
                for b in (0.2, 0.5, 0.8):
                    pb = load_population("syn", seed=data_seed, beta=b, scale=scale)
                    for m in MECHS:
                        r = evaluate(pb, m, base, ["beta", m, b])
                        rows.append([b, m, _mean(r, "f1"), _mean(r, "ncr"), _mean(r, "local_recall")])
                        say(f"beta={b}: {m:>7} F1={rows[-1][2]:.3f}")
                _write(out / "federated_beta.csv", ["beta", "mechanism", "f1", "ncr", "local_recall"], rows)
    except FederatedError as exc:
        raise StudyError(str(exc)) from None
    finally:
        journal.close()
    return out


# ---------------------------------------------------------------- the regime map
#: the map's series: (mechanism, extension rule); FedPEM and GTF share one pass
#: (:func:`mechanisms.federated.fedpem.fedpem_and_gtf`) and always extend t = k
REGIME_UNITS = ("taps", "tap", "fedpem+gtf")
_REGIME_POPS: dict[tuple, Any] = {}


def _regime_pop(own: float, data_seed: int, scale: float):  # noqa: ANN202
    """The regime population of one knob value, generated once per process."""
    from protocol.studies.datasets_federated import regime_population

    key = (own, data_seed, scale)
    if key not in _REGIME_POPS:
        _REGIME_POPS.clear()  # one knob value at a time is enough
        pop = regime_population(own, seed=data_seed, scale=scale)
        _REGIME_POPS[key] = (pop, {})
    return _REGIME_POPS[key]


def _regime_row(res, truth, r: int) -> dict[str, Any]:  # noqa: ANN001
    from mechanisms.federated import f1_at_k, local_recall, ncr

    return {"f1": f1_at_k(truth, res.heavy_hitters), "ncr": ncr(truth, res.heavy_hitters),
            "local_recall": local_recall(truth, [p.heavy_hitters for p in res.parties]),
            "uploaded_per_party": sum(p.heavy_hitters.size for p in res.parties)
            / len(res.parties),
            "seconds": res.seconds, "run": r}


def _regime_task(task: tuple) -> list[tuple[list, dict[str, Any]]]:
    """One run of one unit of the map: ``[(journal key, row)...]`` (two rows for
    FedPEM and GTF). Runs in a worker process with ``jobs > 1``."""
    import numpy as np

    from mechanisms.federated import FederatedConfig
    from mechanisms.federated import run as run_mechanism
    from mechanisms.federated.fedpem import fedpem_and_gtf

    own, data_seed, scale, k, eps, oracle, unit, rule, seed, r = task
    pop, truths = _regime_pop(own, data_seed, scale)
    if k not in truths:
        truths[k] = pop.true_top_k(k)
    truth = truths[k]
    rng = np.random.default_rng(seed + r)
    if unit == "fedpem+gtf":
        cfg = FederatedConfig(epsilon=eps, k=k, oracle=oracle, extension="k")
        res_f, res_g = fedpem_and_gtf(pop, cfg, rng)
        return [(["regime", own, k, eps, "fedpem", "k", r], _regime_row(res_f, truth, r)),
                (["regime", own, k, eps, "gtf", "k", r], _regime_row(res_g, truth, r))]
    cfg = FederatedConfig(epsilon=eps, k=k, oracle=oracle, extension=rule)
    res = run_mechanism(unit, pop, cfg, rng)
    return [(["regime", own, k, eps, unit, rule, r], _regime_row(res, truth, r))]


def _series_label(mech: str, rule: str) -> str:
    name = {"taps": "TAPS", "tap": "TAP", "fedpem": "FedPEM", "gtf": "GTF"}[mech]
    if mech in ("fedpem", "gtf"):
        return name
    return f"{name} {'t=k' if rule == 'k' else rule}"


def regime_map(out: pathlib.Path, journal, *, owns: Sequence[float], ks: Sequence[int],  # noqa: ANN001
               epsilons: Sequence[float], rules: Sequence[str], runs: int, seed: int,
               tap_rules: Sequence[str] | None = None,
               data_seed: int, scale: float, oracle: str, jobs: int,
               say: Callable[[str], None], verbose: bool) -> dict[str, Any]:
    """The regime map (``fedhh eval federated --experiment regime``): TAPS under each
    extension rule in ``rules``, TAP under each in ``tap_rules`` (default: ``rules``),
    FedPEM and GTF, over the knob values ``owns`` of
    :func:`protocol.studies.datasets_federated.regime_population`, at every epsilon and
    k, ``runs`` runs each (seeds ``seed ..``). Writes ``federated_regime.csv``,
    ``federated_regime.json``, ``federated_regime.md`` and one plot per k,
    ``federated_regime_k{k}.png`` (F1 against the exact local recall, one panel per
    epsilon, 95% confidence bars). Returns the JSON document.

    With ``jobs > 1`` the runs go to that many worker processes; every run's seed is
    fixed, so the result does not depend on ``jobs``. Every finished run is journaled.
    """
    import time

    tap_rules = list(rules if tap_rules is None else tap_rules)
    units = ([("taps", rule) for rule in rules] + [("tap", rule) for rule in tap_rules]
             + [("fedpem+gtf", "k")])
    # k by k, the largest epsilon first, every knob value before the next epsilon: an
    # interrupted map has whole curves, the least informative (k last, epsilon 1) missing
    tasks, todo = [], []
    for k in ks:
        for eps in sorted(epsilons, reverse=True):
            for own in owns:
                for unit, rule in units:
                    for r in range(runs):
                        task = (own, data_seed, scale, k, eps, oracle, unit, rule, seed, r)
                        tasks.append(task)
                        names = ["fedpem", "gtf"] if unit == "fedpem+gtf" else [unit]
                        if any(journal.get(["regime", own, k, eps, m, rule, r]) is None
                               for m in names):
                            todo.append(task)
    say(f"regime map: {len(tasks)} runs ({len(tasks) - len(todo)} already journaled), "
        f"{len(owns)} knob values x k {list(ks)} x epsilon {list(epsilons)} x "
        f"{len(units)} series units x {runs} runs, {jobs} job(s)")
    t0 = time.monotonic()
    done = 0

    def record(results: list, task: tuple) -> None:
        nonlocal done
        done += 1
        for key, row in results:
            journal.record(key, row)
        if verbose:
            el = time.monotonic() - t0
            left = el / done * (len(todo) - done)
            own, _, _, k, eps, _, unit, rule, _, r = task
            f1s = " ".join(f"{key[4]}={row['f1']:.2f}" for key, row in results)
            say(f"  [{done}/{len(todo)}] own={own:g} k={k} eps={eps:g} {unit} {rule} run "
                f"{r + 1}/{runs}: {f1s} ({el:.0f} s elapsed, ~{left:.0f} s left)")

    try:
        if jobs <= 1:
            for task in todo:
                record(_regime_task(task), task)
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed

            with ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = {pool.submit(_regime_task, t): t for t in todo}
                try:
                    for fut in as_completed(futures):
                        record(fut.result(), futures[fut])
                except BaseException:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
    except KeyboardInterrupt:
        doc = _summarise_regime(out, journal, units, owns=owns, ks=ks, epsilons=epsilons,
                                rules=rules, tap_rules=tap_rules, runs=runs, seed=seed,
                                data_seed=data_seed, scale=scale, oracle=oracle,
                                seconds=time.monotonic() - t0)
        say(f"interrupted: {len(journal)} finished runs are in {journal.path}; the map's "
            f"files hold the {len(doc['cells'])} cells whose runs all finished; continue "
            "with --resume and the same options")
        raise
    return _summarise_regime(out, journal, units, owns=owns, ks=ks, epsilons=epsilons,
                             rules=rules, tap_rules=tap_rules, runs=runs, seed=seed,
                             data_seed=data_seed, scale=scale, oracle=oracle,
                             seconds=time.monotonic() - t0)


def _summarise_regime(out: pathlib.Path, journal, units: list, *, owns, ks, epsilons,  # noqa: ANN001
                      rules, tap_rules, runs: int, seed: int, data_seed: int, scale: float,
                      oracle: str, seconds: float) -> dict[str, Any]:
    """The map's files from the journal; a cell with a missing run is left out."""
    from protocol.studies.datasets_federated import local_topk_stats
    from protocol.studies.evaluation import mean_ci

    knob = []
    for own in owns:
        pop, _ = _regime_pop(own, data_seed, scale)
        for k in ks:
            st = local_topk_stats(pop, k)
            knob.append({"own": own, "k": k, "local_recall": st["local_recall"],
                         "sum_of_local_top_k_f1": st["sum_of_local_top_k_f1"]})
    recall = {(e["own"], e["k"]): e["local_recall"] for e in knob}
    series = [(u, rule) for u, rule in units if u != "fedpem+gtf"] + [("fedpem", "k"),
                                                                      ("gtf", "k")]
    cells = []
    for own in owns:
        for k in ks:
            for eps in epsilons:
                for m, rule in series:
                    rows = [journal.get(["regime", own, k, eps, m, rule, r]) for r in range(runs)]
                    if any(x is None for x in rows):
                        continue
                    f1, f1_ci = mean_ci([x["f1"] for x in rows])
                    nc, nc_ci = mean_ci([x["ncr"] for x in rows])
                    cells.append({
                        "own": own, "k": k, "epsilon": eps, "local_recall": recall[(own, k)],
                        "mechanism": m, "rule": rule, "series": _series_label(m, rule),
                        "f1": f1, "f1_ci95": f1_ci, "ncr": nc, "ncr_ci95": nc_ci,
                        "mechanism_local_recall": _mean(rows, "local_recall"),
                        "uploaded_per_party": _mean(rows, "uploaded_per_party"),
                        "seconds": _mean(rows, "seconds"), "runs": runs})
    by = {(c["own"], c["k"], c["epsilon"], c["mechanism"], c["rule"]): c for c in cells}
    orderings = []
    for own in owns:
        for k in ks:
            for eps in epsilons:
                fp, tp_rows = by.get((own, k, eps, "fedpem", "k")), {}
                for rule in [r for r in rules if r in tap_rules]:
                    ts, ta = by.get((own, k, eps, "taps", rule)), by.get((own, k, eps, "tap", rule))
                    if fp is None or ts is None or ta is None:
                        continue
                    lo = ts["f1"] - (ts["f1_ci95"] or 0.0)
                    tp_rows[rule] = {
                        "taps": round(ts["f1"], 4), "tap": round(ta["f1"], 4),
                        "taps_above_fedpem": ts["f1"] > fp["f1"],
                        "taps_above_tap": ts["f1"] > ta["f1"],
                        "taps_above_fedpem_beyond_ci": lo > fp["f1"] + (fp["f1_ci95"] or 0.0),
                        "taps_above_tap_beyond_ci": lo > ta["f1"] + (ta["f1_ci95"] or 0.0)}
                if tp_rows:
                    orderings.append({"own": own, "k": k, "epsilon": eps,
                                      "local_recall": recall[(own, k)],
                                      "fedpem": round(fp["f1"], 4), "rules": tp_rows})
    doc = {"experiment": "regime", "runs": runs, "seed": seed, "data_seed": data_seed,
           "scale": scale, "oracle": oracle, "owns": list(owns), "ks": list(ks),
           "epsilons": list(epsilons), "rules": list(rules), "tap_rules": list(tap_rules),
           "knob": knob, "cells": cells, "orderings": orderings, "seconds": round(seconds, 1)}
    _write_regime(out, doc, series)
    return doc


def _write_regime(out: pathlib.Path, doc: dict[str, Any], series: list[tuple[str, str]]) -> None:
    import json

    from protocol.studies.evaluation import ci_text

    cols = ["own", "k", "epsilon", "local_recall", "mechanism", "rule", "f1", "f1_ci95", "ncr",
            "ncr_ci95", "mechanism_local_recall", "uploaded_per_party", "seconds", "runs"]
    _write(out / "federated_regime.csv", cols,
           [[c[x] if c[x] is not None else "n/a" for x in cols] for c in doc["cells"]])
    (out / "federated_regime.json").write_text(json.dumps(doc, indent=1) + "\n")
    by = {(c["own"], c["k"], c["epsilon"], c["mechanism"], c["rule"]): c for c in doc["cells"]}
    labels = [_series_label(m, r) for m, r in series]
    lines = [f"Regime map: F1 (mean +- 95% half-width of {doc['runs']} runs, seeds "
             f"{doc['seed']}..{doc['seed'] + doc['runs'] - 1}), data seed {doc['data_seed']}, "
             f"scale {doc['scale']}, {doc['oracle'].upper()}; local recall: the exact "
             "local top-k's.", ""]
    for k in doc["ks"]:
        for eps in doc["epsilons"]:
            lines.append(f"k = {k}, epsilon = {eps:g}")
            lines.append("")
            lines.append("| own | local recall | " + " | ".join(labels) + " |")
            lines.append("|---" * (2 + len(labels)) + "|")
            recall = {(e["own"], e["k"]): e["local_recall"] for e in doc["knob"]}
            for own in doc["owns"]:
                cells = [by.get((own, k, eps, m, r)) for m, r in series]
                best = max([c["f1"] for c in cells if c is not None], default=None)
                txt = ["-" if c is None else
                       (f"**{c['f1']:.2f}**" if c["f1"] == best else f"{c['f1']:.2f}")
                       + f" +- {ci_text(c['f1_ci95'], 2)}" for c in cells]
                lines.append(f"| {own:g} | {recall[(own, k)]:.2f} | "
                             + " | ".join(txt) + " |")
            lines.append("")
    (out / "federated_regime.md").write_text("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"TAPS": "o-", "TAP": "s--", "FedPEM": "^-.", "GTF": "v:"}
    for k in doc["ks"]:
        eps_list = doc["epsilons"]
        fig, axes = plt.subplots(1, len(eps_list), figsize=(4.2 * len(eps_list), 4), dpi=110,
                                 squeeze=False, sharey=True)
        for ax, eps in zip(axes[0], eps_list):
            for (m, r), label in zip(series, labels):
                pts = sorted(((by[(o, k, eps, m, r)]["local_recall"], by[(o, k, eps, m, r)])
                              for o in doc["owns"] if (o, k, eps, m, r) in by),
                             key=lambda p: p[0])
                if not pts:
                    continue
                xs = [p[0] for p in pts]
                ys = [p[1]["f1"] for p in pts]
                err = [p[1]["f1_ci95"] or 0.0 for p in pts]
                ax.errorbar(xs, ys, yerr=err, fmt=styles[label.split()[0]], label=label,
                            capsize=2, linewidth=1.4, markersize=4, alpha=0.9)
            ax.set_title(f"k = {k}, epsilon = {eps:g}", fontsize=10)
            ax.set_xlabel("local recall of the global top-k (exact local top-k)")
            ax.set_ylim(0, 1.02)
            ax.set_xlim(0, 1.02)
            ax.grid(True, alpha=0.3)
        axes[0][0].set_ylabel("F1")
        axes[0][-1].legend(loc="best", fontsize=7)
        fig.suptitle(f"regime map, mean of {doc['runs']} runs, {doc['oracle'].upper()}",
                     fontsize=10)
        fig.tight_layout()
        fig.savefig(out / f"federated_regime_k{k}.png")
        plt.close(fig)
