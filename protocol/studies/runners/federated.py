"""Federated heavy hitters under LDP -- TAPS, TAP, FedPEM and GTF
(:mod:`mechanisms.federated`; Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with
Local Differential Privacy", section 7) -- one run (``fedhh federated``) and the
experiments of ``fedhh eval federated``, which repeat runs and write CSV files and plots:

* ``figures``: F1 and NCR against epsilon for TAPS, TAP, FedPEM and GTF (Figures 4, 5
  and 7); writes ``federated_runs.csv``, ``federated_summary.csv``,
  ``federated_f1.png`` and ``federated_ncr.png``;
* ``extension``: TAPS with fixed extension numbers ``floor(k/2), k, 2k, 3k`` and the
  adaptive one at one epsilon (Table 5); ``federated_extension.csv``;
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
* ``all``: everything above.

Each cell is the mean over ``runs`` runs (simulation seeds ``seed .. seed+runs-1``)
on one fixed population (``data_seed``).
"""
from __future__ import annotations

import csv
import pathlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from protocol.studies.errors import StudyError

__all__ = ["MECHS", "FederatedOptions", "config", "run", "experiments"]

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
    extension: str | int = "adaptive"
    no_shared_trie: bool = False
    phase_one_fraction: float | None = None
    drift: str = "variance"
    fedpem_upload: str = "counts"
    beta: float = 0.5
    scale: float = 1.0
    data_seed: int = 0
    seed: int | None = None


def config(opts: FederatedOptions):  # noqa: ANN201
    """The :class:`mechanisms.federated.FederatedConfig` of the options.

    Raises:
        StudyError: a bad extension or configuration.
    """
    from mechanisms.federated import FederatedConfig, FederatedError

    ext: str | int = opts.extension
    if ext != "adaptive":
        try:
            ext = int(ext)
        except ValueError:
            raise StudyError("--extension must be 'adaptive' or an integer") from None
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
        pop = load_population(opts.dataset, seed=opts.data_seed, beta=opts.beta, scale=opts.scale)
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
    every party) and, for SYN, the generator's parameters and Table 2's figures
    (Zhang, Ye, Hu) next to ours, with the relative difference.

    Raises:
        StudyError: a bad dataset.
    """
    from mechanisms.federated import FederatedError
    from protocol.studies import datasets_federated as df

    try:
        pop = df.load_population(opts.dataset, seed=opts.data_seed, beta=opts.beta,
                                 scale=opts.scale)
    except FederatedError as exc:
        raise StudyError(str(exc)) from None
    stats = df.describe(pop)
    out: dict[str, Any] = {"dataset": opts.dataset, **stats}
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
                resume: bool = False, verbose: bool = True) -> pathlib.Path:
    """Run the experiment(s) above and write their files into ``out_dir`` (created if
    missing); ``say`` receives one line per cell (and per run with ``verbose``).
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
    from protocol.studies.datasets_federated import load_population
    from protocol.studies.evaluation import JOURNAL, Journal, output_dir

    if runs < 1:
        raise StudyError("--runs must be >= 1")
    eps = list(epsilons)
    out = output_dir(out_dir)
    defaults = FederatedConfig()
    # the readings the mechanisms default to are part of the options: a journal written
    # under other defaults (before 2026-11-25: drift "printed") is not resumed
    config = {"evaluation": "federated", "experiment": experiment, "dataset": dataset,
              "epsilons": eps, "epsilon": epsilon, "k": k, "oracle": oracle, "runs": runs,
              "seed": seed, "data_seed": data_seed, "scale": scale,
              "drift": defaults.drift, "fedpem_upload": defaults.fedpem_upload}
    journal = Journal(out / JOURNAL, config, resume=resume, say=say)
    per_run = say if verbose else None

    def evaluate(pop_, m_, cfg_, key_):  # noqa: ANN001, ANN202
        return _evaluate(pop_, m_, cfg_, runs, seed, journal, key_, per_run)

    try:
        base = FederatedConfig(epsilon=epsilon, k=k, oracle=oracle)
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
                                   ("adaptive", "adaptive")]:
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
