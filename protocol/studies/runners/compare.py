"""TrieHH against Apple's SFP, in the style of Zhu et al. (2020), Table 2 and Figure 5
(``fedhh eval compare``).

Both mechanisms run on the same population (drawn once from the seed) at each
central target ``(epsilon, delta = 1/n^2)``:

* TrieHH (:mod:`protocol.studies.runners.triehh`): ``theta`` and ``gamma`` from
  Corollary 1, plain transport, membership-only release; its guarantee is central.
* SFP (:mod:`protocol.studies.runners.sfp`) with ``T = 20`` and ``T = 80``: every user
  sends one Count-Mean-Sketch fragment report at the local epsilon that amplification by
  shuffling turns into the central target, by the closed form the TrieHH authors used
  (:func:`shuffler.amplification.triehh_blanket_epsilon0`). The local epsilon that the
  stronger, fully verified FMT23 numerical bound would allow is reported beside it (it is
  *not* used, to stay comparable with the paper). The two T values share each run's
  reports (a paired comparison: only the server's threshold differs). SFP assembles as
  Appendix C of the TrieHH paper describes; with ``hash_filter`` the same reports are
  also decoded with the word-hash filter (rows ``sfp_T<T>_filter``, not in the paper).

Metrics (:mod:`protocol.studies.evaluation`): recall at ``k`` (default 50) of the true top-K,
precision = fraction of discovered words that occur in the population (Table 2), and
F1 at K for K = 1..``kmax`` (Figure 5). SFP words are truncated to its ``L = 10``
characters, so its truth is the truncated vocabulary. Means over ``runs`` runs with
95% confidence intervals (Student t).

Writes into the output directory: ``runs.csv`` (one row per run, mechanism and epsilon),
``f1_at_k.csv``, ``table.md`` (the Table 2 analogue), ``summary.json``,
``f1_at_k.png`` and ``runs.jsonl`` (each run as it finishes; ``resume`` continues
from it).

With ``mechanisms = ("triehh", "poplar1")`` it runs instead TrieHH and Poplar1 side by
side on one population (:func:`protocol.studies.runners.poplar1.side_by_side`: recall
and precision at K, client upload bytes, server CPU and bytes, rounds, what each party
learns) at the first epsilon, and writes ``table.md`` and ``summary.json``.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from protocol.studies.errors import StudyError
from protocol.studies.evaluation import JOURNAL, Journal, mean_ci

__all__ = ["PAPER_TABLE2", "CompareOptions", "mean_ci", "compare", "equal_privacy",
           "equal_privacy_table", "tradeoff_plot"]

PAPER_TABLE2 = {  # Zhu et al. 2020, Table 2, OOV, n ~ 6e6: (recall@50, precision)
    ("triehh", 1.0): (0.65, 1.0), ("triehh", 4.0): (0.76, 1.0),
    ("sfp_T20", 1.0): (0.17, 0.853), ("sfp_T20", 4.0): (0.19, 0.867),
    ("sfp_T80", 1.0): (0.25, 0.494), ("sfp_T80", 4.0): (0.325, 0.456),
}


@dataclass(frozen=True)
class CompareOptions:
    """One comparison (``fedhh eval compare`` options of the same names)."""

    out: str
    dataset: str = "en-oov"
    users: int | Sequence[int] = 200_000
    epsilons: Sequence[float] = (1.0, 4.0)
    runs: int | None = None
    Ts: Sequence[float] = (20, 80)
    k: int = 50
    kmax: int = 100
    max_length: int = 10
    hash_filter: bool = False
    alphabet: str | None = None
    drop_unencodable: bool = False
    seed: int | None = None
    resume: bool = False
    mechanisms: Sequence[str] | None = None
    threshold: int | None = None
    poplar1_mode: str = "sampled"


def _half(ci: float | None) -> str:
    return "n/a" if ci is None else f"{ci:.3f}"


def compare(opts: CompareOptions, say: Callable[[str], None] = lambda _msg: None,
            estimate: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Run the comparison, write the files and return ``(summary, table lines)``.
    ``say`` receives progress messages (one per run, with the runs done and the time
    left at the measured pace) and failed FMT23 inversions. With ``estimate``, when at
    least six SFP discoveries remain, one TrieHH run and one SFP discovery are timed
    first (a probe whose results are discarded) and ``say`` receives a one-line
    estimate of the whole evaluation if it exceeds a minute.

    Every finished run is appended to ``OUT/runs.jsonl`` at once (a first line holds
    the options); with ``resume`` the runs found there are kept and only the others
    run. On an interrupt the tables and plots are drawn from the finished runs before
    the ``KeyboardInterrupt`` propagates.

    Raises:
        StudyError: bad counts, an output directory that cannot be created, a journal
            written with other options, ``resume`` without a seed, or as the TrieHH
            and SFP runners.
    """
    import numpy as np

    from protocol.studies.evaluation import output_dir
    from protocol.studies.runners import default_transport
    from protocol.studies.runners.hh import load_population
    from protocol.studies.runners.sfp import users_words

    if opts.mechanisms is not None:
        if sorted(opts.mechanisms) != ["poplar1", "triehh"]:
            raise StudyError("--mechanisms takes triehh,poplar1")
        if opts.resume:
            raise StudyError("--resume applies to the TrieHH/SFP comparison only")
        if opts.poplar1_mode == "plain":
            return _side_by_side(opts, say)
        if opts.poplar1_mode != "sampled":
            raise StudyError("--poplar1-mode is plain or sampled")
        if opts.threshold is not None:
            raise StudyError("--threshold applies to --poplar1-mode plain only (the sampled "
                             "mode takes TrieHH's theta for the target)")
        return equal_privacy(opts, say)
    if opts.threshold is not None:
        raise StudyError("--threshold applies to --mechanisms triehh,poplar1 only")
    if opts.poplar1_mode != "sampled":
        raise StudyError("--poplar1-mode applies to --mechanisms triehh,poplar1 only")
    if not isinstance(opts.users, int):
        if len(opts.users) != 1:
            raise StudyError("one --users value for the TrieHH/SFP comparison")
        opts = dataclasses.replace(opts, users=int(opts.users[0]))
    if opts.runs is None:
        opts = dataclasses.replace(opts, runs=10)

    epsilons = list(opts.epsilons)
    Ts = [int(t) for t in opts.Ts]
    if opts.runs < 1 or opts.k < 1 or opts.kmax < 1 or opts.users < 2:
        raise StudyError("--runs, --k and --kmax must be >= 1 and --users >= 2")
    out_dir = output_dir(opts.out)

    t_start = time.perf_counter()
    root = np.random.default_rng(opts.seed)
    data_rng, run_root = root.spawn(2)
    pop = load_population(opts.dataset, opts.users, data_rng, alphabet=opts.alphabet,
                          drop_unencodable=opts.drop_unencodable)
    word_of_user = users_words(pop)
    n = pop.n
    delta = 1.0 / float(n) ** 2
    truth = pop.top(len(pop.vocabulary))
    words_in_pop = set(truth)
    trunc_truth = list(dict.fromkeys(w[:10] for w in truth))
    trunc_set = set(trunc_truth)
    kmax = opts.kmax
    transport = default_transport("plain")

    # every finished run is appended to runs.jsonl at once; --resume continues from it
    config = {"dataset": opts.dataset, "users": opts.users, "epsilons": epsilons, "Ts": Ts,
              "runs": opts.runs, "k": opts.k, "kmax": kmax, "max_length": opts.max_length,
              "seed": opts.seed, "alphabet": opts.alphabet,
              "drop_unencodable": opts.drop_unencodable}
    journal_path = out_dir / JOURNAL
    if opts.resume and opts.seed is None:
        raise StudyError("--resume needs --seed: the remaining runs must continue the "
                         "same population and random streams")
    journal = Journal(journal_path, config, resume=opts.resume, say=say)
    rows: list[dict[str, Any]] = []
    f1_rows: list[dict[str, Any]] = []
    privacy: dict[str, Any] = {}
    total_runs = len(epsilons) * opts.runs
    remaining = total_runs - len(journal)
    sfp_per_run = len(Ts) * (2 if opts.hash_filter else 1)
    if estimate and remaining * sfp_per_run >= 6:
        predicted = remaining * _probe_run_seconds(opts, pop, word_of_user, n, delta,
                                                   epsilons[0], Ts[0], sfp_per_run)
        if predicted > 60:
            say(f"estimate: about {predicted / 60:.0f} min for {remaining} runs "
                f"({sfp_per_run} SFP discoveries and one TrieHH run each, timed on one "
                "probe run)")
    try:
        _loop(opts, epsilons, Ts, pop, word_of_user, n, delta, truth, words_in_pop,
              trunc_truth, trunc_set, transport, run_root, journal, rows, f1_rows,
              privacy, say, t_start, total_runs)
    except KeyboardInterrupt:
        journal.close()
        if rows:
            _write(opts, out_dir, pop, n, delta, epsilons, Ts, rows, f1_rows, privacy,
                   time.perf_counter() - t_start)
        say(f"interrupted: {len({(r['epsilon'], r['run']) for r in rows})} finished runs "
            f"are in {journal_path} (tables and plots drawn from them); continue with "
            "--resume and the same options")
        raise
    journal.close()
    return _write(opts, out_dir, pop, n, delta, epsilons, Ts, rows, f1_rows, privacy,
                  time.perf_counter() - t_start)


def _side_by_side(opts: CompareOptions,
                  say: Callable[[str], None]) -> tuple[dict[str, Any], list[str]]:
    """``--mechanisms triehh,poplar1``: the side-by-side table, written to ``out``."""
    from protocol.studies.evaluation import output_dir
    from protocol.studies.runners.poplar1 import SideBySideOptions, side_by_side

    users = [opts.users] if isinstance(opts.users, int) else list(opts.users)
    if len(users) != 1:
        raise StudyError("--poplar1-mode plain takes one --users value")
    out_dir = output_dir(opts.out)
    t0 = time.perf_counter()
    summary, lines = side_by_side(SideBySideOptions(
        dataset=opts.dataset, users=int(users[0]), k=opts.k, epsilon=float(list(opts.epsilons)[0]),
        max_length=opts.max_length, threshold=opts.threshold, alphabet=opts.alphabet,
        drop_unencodable=opts.drop_unencodable, seed=opts.seed), say)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    summary["files"] = ["table.md", "summary.json"]
    (out_dir / "table.md").write_text("\n".join(lines) + "\n")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary, lines


def _probe_run_seconds(opts, pop, word_of_user, n, delta, eps, T, sfp_per_run) -> float:  # noqa: ANN001
    """Seconds of one repetition, measured on a probe: one TrieHH run and one SFP
    discovery (whose cost hardly depends on the number of users) at ``eps`` and ``T``."""
    import numpy as np

    from protocol.studies.runners import default_transport
    from protocol.studies.runners.sfp import discover_words, fragment_epsilon
    from protocol.studies.runners.triehh import plain_options, prepare, run_once

    t0 = time.perf_counter()
    prep, _ = prepare(plain_options(opts.dataset, n, eps, delta, opts.max_length),
                      population=pop)
    run_once(prep, default_transport("plain"), np.random.default_rng(0))
    t1 = time.perf_counter()
    eps0, _ = fragment_epsilon(n, eps, delta, None)
    discover_words(pop, word_of_user, eps0, np.random.default_rng(0), T=T)
    return (t1 - t0) + sfp_per_run * (time.perf_counter() - t1)


def _loop(opts, epsilons, Ts, pop, word_of_user, n, delta, truth, words_in_pop,  # noqa: ANN001, PLR0913
          trunc_truth, trunc_set, transport, run_root, journal, rows, f1_rows,
          privacy, say, t_start, total_runs) -> None:
    import numpy as np

    from mechanisms.metrics import precision, topk_metrics
    from protocol.studies.runners.sfp import discover_words, fragment_epsilon
    from protocol.studies.runners.triehh import plain_options, prepare, run_once
    from shuffler.amplification import local_epsilon

    kmax = opts.kmax
    new_runs, new_seconds, finished = 0, 0.0, len(journal)
    for eps in epsilons:
        prep, _ = prepare(plain_options(opts.dataset, n, eps, delta, opts.max_length),
                          population=pop)
        eps0, conversion = fragment_epsilon(n, eps, delta, None)
        try:
            eps0_fmt23 = local_epsilon(n, eps, delta, "fmt23_numerical")
        except ValueError as exc:  # outside the bound: report, do not fail
            eps0_fmt23 = None
            say(f"FMT23 inverse failed at epsilon {eps}: {exc}")
        g = prep.params
        privacy[f"{eps:g}"] = {
            "central_epsilon": eps, "delta": delta,
            "triehh": {"theta": int(prep.config.theta), "gamma": float(prep.config.gamma),
                       "epsilon": g.guarantee.epsilon if g else None,
                       "delta": g.guarantee.delta if g else None,
                       "theorem": "Zhu et al. 2020, Corollary 1 / Theorem 1",
                       "guarantee": g.guarantee.to_json() if g else None},
            "sfp_local_epsilon": eps0, "sfp_conversion": conversion,
            "sfp_local_epsilon_fmt23": eps0_fmt23,
        }
        run_rngs = run_root.spawn(opts.runs)
        for r, rng in enumerate(run_rngs):
            kept = journal.get([float(eps), r])
            if kept is not None:
                old_rows, old_f1 = kept
                rows.extend(old_rows)
                f1_rows.extend(old_f1)
                continue
            t_run = time.perf_counter()
            run_rows: list[dict[str, Any]] = []
            run_f1: list[dict[str, Any]] = []
            t_rng, s_rng = rng.spawn(2)
            t0 = time.perf_counter()
            result = run_once(prep, transport, t_rng)
            found = dict(result.heavy_hitters)
            sec = time.perf_counter() - t0
            per_mech = [("triehh", found, truth, words_in_pop, sec)]
            # SFP: the same reports (same seed) at every T -- a paired comparison
            sfp_seed = int(s_rng.integers(0, 1 << 63))
            for T in Ts:
                for filt in ((False, True) if opts.hash_filter else (False,)):
                    t0 = time.perf_counter()
                    _, res, _, _, _ = discover_words(pop, word_of_user, eps0,
                                                  np.random.default_rng(sfp_seed), T=T,
                                                  hash_filter=filt)
                    sec = time.perf_counter() - t0
                    disc = {w: float(c) for w, c in zip(res.words, res.counts)}
                    per_mech.append((f"sfp_T{T}" + ("_filter" if filt else ""), disc,
                                     trunc_truth, trunc_set, sec))
            for mech, disc, tr, tset, sec in per_mech:
                m = topk_metrics(disc, tr, opts.k)
                run_rows.append({"epsilon": eps, "mechanism": mech, "run": r,
                             "discovered": len(disc), f"recall_at_{opts.k}": m.recall,
                             f"f1_at_{opts.k}": m.f1, "precision": precision(disc, tset),
                             "seconds": round(sec, 3)})
                for K in range(1, kmax + 1):
                    run_f1.append({"epsilon": eps, "mechanism": mech, "run": r, "k": K,
                                   "f1": topk_metrics(disc, tr, K).f1})
            journal.record([float(eps), r], [run_rows, run_f1])
            rows.extend(run_rows)
            f1_rows.extend(run_f1)
            new_runs += 1
            finished += 1
            new_seconds += time.perf_counter() - t_run
            left = (total_runs - finished) * new_seconds / new_runs
            say(f"epsilon {eps:g} run {r + 1}/{opts.runs} done "
                f"({finished}/{total_runs} runs, {time.perf_counter() - t_start:.0f} s, "
                f"~{left:.0f} s left)")



def _write(opts, out_dir, pop, n, delta, epsilons, Ts, rows, f1_rows, privacy,  # noqa: ANN001
           seconds) -> tuple[dict[str, Any], list[str]]:
    import numpy as np

    from protocol.studies.evaluation import pyplot

    k = opts.k
    with open(out_dir / "runs.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(out_dir / "f1_at_k.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(f1_rows[0]))
        w.writeheader()
        w.writerows(f1_rows)
    mechs = ["triehh"] + [f"sfp_T{T}{sfx}" for T in Ts
                          for sfx in (("", "_filter") if opts.hash_filter else ("",))]
    table: list[dict[str, Any]] = []
    for eps in epsilons:
        for mech in mechs:
            sel = [r for r in rows if r["epsilon"] == eps and r["mechanism"] == mech]
            if not sel:  # an interrupted evaluation: only what exists
                continue
            rec, rec_ci = mean_ci([r[f"recall_at_{k}"] for r in sel])
            pre, pre_ci = mean_ci([r["precision"] for r in sel])
            f1, f1_ci = mean_ci([r[f"f1_at_{k}"] for r in sel])
            paper = PAPER_TABLE2.get((mech, eps))
            table.append({"epsilon": eps, "mechanism": mech, "runs": len(sel),
                          "recall": rec, "recall_ci95": rec_ci, "precision": pre,
                          "precision_ci95": pre_ci, "f1": f1, "f1_ci95": f1_ci,
                          "discovered": float(np.mean([r["discovered"] for r in sel])),
                          "paper_recall": paper[0] if paper else None,
                          "paper_precision": paper[1] if paper else None})
    lines = [f"Dataset {pop.name}, n = {n:,} users, delta = 1/n^2 = {delta:.3g}, "
             f"{opts.runs} runs, seed {opts.seed}; mean +- 95% CI.", "",
             f"| central eps | mechanism | recall@{k} | precision | F1@{k} | discovered "
             "| paper recall / precision (n ~ 6e6) |",
             "|---|---|---|---|---|---|---|"]
    for t in table:
        paper = ("-" if t["paper_recall"] is None
                 else f"{t['paper_recall']:.2f} / {t['paper_precision']:.3f}")
        lines.append(f"| {t['epsilon']:g} | {t['mechanism']} | {t['recall']:.3f} +- "
                     f"{_half(t['recall_ci95'])} | {t['precision']:.3f} +- "
                     f"{_half(t['precision_ci95'])} | {t['f1']:.3f} +- {_half(t['f1_ci95'])}"
                     f" | {t['discovered']:.1f} | {paper} |")
    lines.append("")
    for eps in epsilons:
        pv = privacy[f"{eps:g}"]
        fmt = pv["sfp_local_epsilon_fmt23"]
        lines.append(f"- eps {eps:g}: TrieHH theta = {pv['triehh']['theta']}, gamma = "
                     f"{pv['triehh']['gamma']:.3f}; SFP local epsilon {pv['sfp_local_epsilon']:.3f} "
                     f"(TrieHH authors' closed form), FMT23 numerical would allow "
                     f"{'-' if fmt is None else format(fmt, '.3f')}")
    (out_dir / "table.md").write_text("\n".join(lines) + "\n")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(epsilons), figsize=(6 * len(epsilons), 4.2), dpi=110,
                             squeeze=False)
    ks = np.arange(1, opts.kmax + 1)
    for ax, eps in zip(axes[0], epsilons):
        for mech in mechs:
            runs = sorted({r["run"] for r in f1_rows if r["mechanism"] == mech
                           and r["epsilon"] == eps})
            arr = np.array([[r["f1"] for r in f1_rows if r["mechanism"] == mech
                             and r["epsilon"] == eps and r["run"] == run] for run in runs])
            if not runs:
                continue
            mean = arr.mean(axis=0)
            ax.plot(ks, mean, label=mech.replace("_", " "))
            ax.fill_between(ks, arr.min(axis=0), arr.max(axis=0), alpha=0.2)
        ax.set_title(f"{pop.name}, n = {n:,}, central epsilon = {eps:g}", fontsize=10)
        ax.set_xlabel("K")
        ax.set_ylabel("F1 at K (mean, min-max band)")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out_dir / "f1_at_k.png")
    plt.close(fig)
    summary = {"dataset": pop.name, "n": n, "delta": delta, "runs": opts.runs,
               "runs_finished": len({(r["epsilon"], r["run"]) for r in rows}),
               "seed": opts.seed, "k": k, "table": table, "privacy": privacy,
               "seconds": round(seconds, 1),
               "files": ["runs.csv", "f1_at_k.csv", "table.md", "summary.json", "f1_at_k.png",
                         JOURNAL]}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary, lines


# ------------------------------------------------------------------ equal privacy
_TRIEHH_SERVER_LEARNS = "every sampled client's vote ({votes:,} votes in {rounds} rounds)"
_POPLAR1_AGG_LEARNS = ("which clients each round sampled, and the count over the sample of "
                       "every candidate bit-prefix: {counts:,} counts, {below:,} of them "
                       "below theta")
_ANALYST_LEARNS = "the released trie (membership only): {released:,} prefixes, {words:,} words"


#: what one corrupted client achieves against each system: attacks of the catalogue
#: (protocol.studies.attacks) that :func:`equal_privacy` runs and its table reports
_CLIENT_ATTACKS = (
    ("TrieHH, each transport", "client.on_every_transport"),
    ("TrieHH, plaintext and the validated committee", "client.sybils_count_once"),
    ("Poplar1", "poplar1.client_two_votes"),
    ("Poplar1", "poplar1.client_wrong_weight"),
)


def _client_attacks(seed: int) -> list[dict[str, Any]]:
    """Run :data:`_CLIENT_ATTACKS` (a few seconds): per attack the system, its name,
    the expectation, what was observed and whether it matched."""
    from protocol.studies.attacks import run_attack

    out = []
    for system, name in _CLIENT_ATTACKS:
        o = run_attack(name, seed)
        out.append({"system": system, "attack": name, "expected": o.expected,
                    "observed": o.observed, "passed": bool(o.passed)})
    return out


def _recall_release(found: Sequence[str], truth: Sequence[str]) -> float | None:
    """The fraction of the ``|R|`` most frequent (reachable) words that the release ``R``
    holds: recall and precision at ``K = |R|`` (``None`` for an empty release)."""
    if not found:
        return None
    top = set(truth[:len(found)])
    return sum(1 for w in found if w in top) / len(found)


def _row_seed(seed: int | None, *parts: int) -> list[int] | None:
    return None if seed is None else [int(seed), *[int(p) for p in parts]]


def equal_privacy(opts: "CompareOptions", say: Callable[[str], None] = lambda _m: None
                  ) -> tuple[dict[str, Any], list[str]]:
    """TrieHH and Poplar1 in the sampled mode at the same ``(epsilon, delta = 1/n^2)``:
    the same Corollary 1 parameters (theta, m, L), so the same Theorem 1 guarantee, on
    each dataset, population size and epsilon; ``runs`` runs each. Writes ``table.md``
    (:func:`equal_privacy_table`), ``summary.json`` and ``tradeoff.png`` into ``out``.

    Raises:
        StudyError: bad options or datasets.
    """
    import numpy as np

    from mechanisms.metrics import precision, topk_metrics
    from protocol.studies.evaluation import output_dir
    from protocol.studies.runners import default_transport
    from protocol.studies.runners import triehh as triehh_runner
    from protocol.studies.runners.hh import load_population, truncated_truth
    from protocol.studies.runners.poplar1 import run_poplar1_sampled, sampled_parameters

    datasets = [d.strip() for d in str(opts.dataset).split(",") if d.strip()]
    users = list(opts.users) if isinstance(opts.users, (list, tuple)) else [int(opts.users)]
    runs = 1 if opts.runs is None else int(opts.runs)
    if not datasets or any(u < 2 for u in users) or opts.k < 1 or runs < 1:
        raise StudyError("--users must be >= 2, --k and --runs >= 1, and --dataset named")
    out_dir = output_dir(opts.out)
    t_start = time.perf_counter()
    k, L = opts.k, opts.max_length
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    say("what one corrupted client achieves: the client attacks of the catalogue")
    attacks = _client_attacks(0 if opts.seed is None else int(opts.seed))
    for a in attacks:
        if not a["passed"]:
            say(f"warning: the attack {a['attack']} did not go as expected: {a['observed']}")
    for di, ds in enumerate(datasets):
        for ni, n_req in enumerate(users):
            pop = load_population(ds, n_req, np.random.default_rng(_row_seed(opts.seed, di, ni)),
                                  alphabet=opts.alphabet, drop_unencodable=opts.drop_unencodable)
            n = pop.n
            delta = 1.0 / float(n) ** 2
            whole = pop.top(len(pop.vocabulary))
            cut = truncated_truth(pop, L)
            for ei, eps in enumerate(opts.epsilons):
                try:
                    params = sampled_parameters(n, eps, delta, L)
                except StudyError as exc:
                    skipped.append({"dataset": pop.name, "n": n, "epsilon": eps,
                                    "reason": str(exc)})
                    say(f"{pop.name}, n = {n:,}, epsilon {eps:g}: skipped ({exc})")
                    continue
                g = params.guarantee
                prep, _ = triehh_runner.prepare(triehh_runner.plain_options(
                    pop.name, n, eps, delta, L), population=pop)
                for r in range(runs):
                    common = {"dataset": pop.name, "n": n, "epsilon": float(eps), "run": r,
                              "guarantee_epsilon": g.epsilon, "guarantee_delta": g.delta,
                              "theta": params.theta, "m": params.m, "L": L}
                    # TrieHH over the plaintext transport
                    say(f"{pop.name}, n = {n:,}, epsilon {eps:g}, run {r + 1}: TrieHH")
                    w0, c0 = time.perf_counter(), time.process_time()
                    res = triehh_runner.run_once(prep, default_transport("plain"),
                                                 np.random.default_rng(_row_seed(
                                                     opts.seed, di, ni, ei, r, 1)))
                    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                    found = list(res.heavy_hitters)
                    votes = sum(rr.sampled for rr in res.rounds)
                    cost = res.total_cost
                    m_ = topk_metrics(dict.fromkeys(found), whole, k)
                    rows.append({**common, "mechanism": "triehh", "rounds": len(res.rounds),
                                 "released_words": len(found),
                                 "released_prefixes": len(res.trie) - 1,
                                 "recall_at_k": m_.recall,
                                 "precision_at_k": m_.precision if found else None,
                                 "precision": precision(found, set(whole)) if found else None,
                                 "recall_at_release": _recall_release(found, whole),
                                 "clients_contacted": int(votes),
                                 "bytes_per_contacted_client": round(cost.bytes_up / votes, 1)
                                 if votes else 0.0,
                                 "cpu_seconds": {"server (whole simulated run)": round(cpu, 3)},
                                 "learns": {"server": _TRIEHH_SERVER_LEARNS.format(
                                     votes=int(votes), rounds=len(res.rounds)),
                                     "analyst": _ANALYST_LEARNS.format(
                                         released=len(res.trie) - 1, words=len(found))},
                                 "seconds": round(wall, 2)})
                    # Poplar1, sampled
                    say(f"{pop.name}, n = {n:,}, epsilon {eps:g}, run {r + 1}: Poplar1 "
                        f"(sampled, theta {params.theta}, m {params.m:,})")
                    w0 = time.perf_counter()
                    pseed = None if opts.seed is None else (
                        int(opts.seed) * 1_000_003 + ((di * 97 + ni) * 89 + ei) * 83 + r)
                    p = run_poplar1_sampled(
                        pop, k, epsilon=eps, delta=delta, max_length=L, seed=pseed,
                        sample_rng=np.random.default_rng(_row_seed(opts.seed, di, ni, ei, r, 2)),
                        on_level=lambda row: say(
                            f"  Poplar1 round {row['round']}: {row['sampled']:,} sampled, "
                            f"{row['new_uploads']:,} new uploads, {row['released']} released, "
                            f"{row['seconds']:.0f} s"))
                    wall = time.perf_counter() - w0
                    d = p.details
                    pfound = list(p.discovered)
                    m_ = topk_metrics(p.discovered, cut, k)
                    aggs = d["aggregator_cpu_seconds"]
                    rows.append({**common, "mechanism": "poplar1 (sampled)",
                                 "rounds": d["rounds"], "released_words": len(pfound),
                                 "released_prefixes": d["released_prefixes"],
                                 "recall_at_k": m_.recall,
                                 "precision_at_k": m_.precision if pfound else None,
                                 "precision": precision(pfound, set(cut)) if pfound else None,
                                 "recall_at_release": _recall_release(pfound, cut),
                                 "clients_contacted": d["clients_uploaded"],
                                 "bytes_per_contacted_client": d["client_upload_bytes"],
                                 "cpu_seconds": {"clients (all)": d["client_cpu_seconds"],
                                                 "aggregator 0": aggs[0],
                                                 "aggregator 1": aggs[1],
                                                 "collector": d["collector_cpu_seconds"]},
                                 "aggregator_bytes": int(sum(d["aggregator_bytes_sent"])),
                                 "bit_levels": d["levels"],
                                 "learns": {"server": _POPLAR1_AGG_LEARNS.format(
                                     counts=d["aggregators_learn"]["prefix_counts"],
                                     below=d["aggregators_learn"]["below_threshold"]),
                                     "analyst": _ANALYST_LEARNS.format(
                                         released=d["released_prefixes"], words=len(pfound))},
                                 "seconds": round(wall, 2)})
                    _write_equal(opts, out_dir, datasets, users, runs, rows, skipped,
                                 attacks, t_start, final=False)
    return _write_equal(opts, out_dir, datasets, users, runs, rows, skipped, attacks, t_start,
                        final=True)


def _write_equal(opts, out_dir, datasets, users, runs, rows, skipped, attacks,  # noqa: ANN001
                 t_start, final: bool) -> tuple[dict[str, Any], list[str]]:
    """Write table.md and summary.json (after every run, so a long comparison that is
    stopped keeps what finished) and, at the end, tradeoff.png."""
    k, L = opts.k, opts.max_length
    summary = {"mode": "equal privacy", "datasets": datasets, "users": users,
               "epsilons": [float(e) for e in opts.epsilons], "k": k, "max_length": L,
               "runs": runs, "seed": opts.seed, "rows": rows, "skipped": skipped,
               "corrupted_client": attacks,
               "seconds": round(time.perf_counter() - t_start, 1),
               "files": ["table.md", "summary.json", "tradeoff.png"], "finished": final}
    lines = equal_privacy_table(summary)
    (out_dir / "table.md").write_text("\n".join(lines) + "\n")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    if rows and final:
        tradeoff_plot(summary, out_dir / "tradeoff.png")
    return summary, lines


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def equal_privacy_table(summary: dict[str, Any]) -> list[str]:
    """The Markdown table of an equal-privacy comparison (``summary.json``): one line
    per dataset, n, epsilon and mechanism (means over the runs)."""
    import numpy as np

    k = summary["k"]
    lines = [f"TrieHH (plaintext transport) and Poplar1 (sampled mode) at the same Corollary 1 "
             f"parameters for (epsilon, delta = 1/n^2), L = {summary['max_length']}, K = {k}, "
             f"up to {summary['runs']} run(s) each, seed {summary['seed']}; means over the runs. "
             "Uploads: TrieHH one vote per sampled client and round, Poplar1 one report per "
             "client, sent the first time it is sampled.", "",
             "| dataset | n | epsilon (guarantee) | theta, m | mechanism | runs | rounds "
             f"| words released | recall@{k} | precision@{k} | precision | recall@\\|R\\| "
             "| bytes per upload | uploads | CPU s per party "
             "| the server(s) learn (first run) | the analyst learns (first run) | wall s |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|"]
    keys: list[tuple[Any, ...]] = []
    for r in summary["rows"]:
        key = (r["dataset"], r["n"], r["epsilon"], r["mechanism"])
        if key not in keys:
            keys.append(key)

    def mean(sel: list[dict[str, Any]], name: str) -> float | None:
        vals = [s[name] for s in sel if s[name] is not None]
        return float(np.mean(vals)) if vals else None

    for key in keys:
        sel = [r for r in summary["rows"]
               if (r["dataset"], r["n"], r["epsilon"], r["mechanism"]) == key]
        r0 = sel[0]
        cpu = ", ".join(f"{p} {np.mean([s['cpu_seconds'][p] for s in sel]):.2f}"
                        for p in r0["cpu_seconds"])
        lines.append(
            f"| {r0['dataset']} | {r0['n']:,} | {r0['epsilon']:g} ({r0['guarantee_epsilon']:.3f}, "
            f"{r0['guarantee_delta']:.2g}) | {r0['theta']}, {r0['m']:,} | {r0['mechanism']} "
            f"| {len(sel)} | {mean(sel, 'rounds'):.1f} | {mean(sel, 'released_words'):.1f} "
            f"| {_f(mean(sel, 'recall_at_k'))} | {_f(mean(sel, 'precision_at_k'))} "
            f"| {_f(mean(sel, 'precision'))} | {_f(mean(sel, 'recall_at_release'))} "
            f"| {mean(sel, 'bytes_per_contacted_client'):,.0f} "
            f"| {mean(sel, 'clients_contacted'):,.0f} | {cpu} | {r0['learns']['server']} "
            f"| {r0['learns']['analyst']} | {mean(sel, 'seconds'):.1f} |")
    lines.append("")
    lines.append("- TrieHH runs over the plaintext transport (its server sees the votes); over "
                 "secure aggregation its server learns each round's vote histogram over the "
                 "candidates, over the thresholding committee only the prefixes at or above "
                 "theta, with the same release. Poplar1's two aggregators are assumed not to "
                 "collude; the clients' CPU is the sharding of every uploading client.")
    for s in summary.get("skipped", []):
        lines.append(f"- {s['dataset']}, n = {s['n']:,}, epsilon {s['epsilon']:g}: neither runs "
                     f"({s['reason']})")
    attacks = summary.get("corrupted_client") or []
    if attacks:
        lines += ["", "What one corrupted client achieves, measured when this table was made "
                  "(attacks of the catalogue, `fedhh attack run NAME`):", "",
                  "| system | attack | expected | observed | as expected |",
                  "|---|---|---|---|---|"]
        for a in attacks:
            lines.append(f"| {a['system']} | {a['attack']} | {a['expected']} | {a['observed']} "
                         f"| {'yes' if a['passed'] else 'NO'} |")
    return lines


def tradeoff_plot(summary: dict[str, Any], path) -> None:  # noqa: ANN001
    """One PNG: recall at K, precision of the whole release, CPU seconds (all parties)
    and bytes per population client against n, per mechanism and epsilon."""
    import numpy as np

    from protocol.studies.evaluation import pyplot

    plt = pyplot()
    rows = summary["rows"]
    k = summary["k"]
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.4), dpi=100)
    styles = {"triehh": ("o", "-"), "poplar1 (sampled)": ("s", "--")}
    groups = sorted({(r["dataset"], r["mechanism"], r["epsilon"]) for r in rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    eps_c = {e: colours[i % len(colours)] for i, e in enumerate(sorted({g[2] for g in groups}))}
    ds_list = sorted({g[0] for g in groups})
    for ds, mech, eps in groups:
        sel = [r for r in rows if (r["dataset"], r["mechanism"], r["epsilon"]) == (ds, mech, eps)]
        ns = sorted({r["n"] for r in sel})

        def ys(f):  # noqa: ANN001, ANN202
            out = []
            for n in ns:
                vals = [f(r) for r in sel if r["n"] == n and f(r) is not None]
                out.append(float(np.mean(vals)) if vals else np.nan)
            return out

        marker, line = styles.get(mech, ("^", ":"))
        label = f"{mech}, eps {eps:g}" + (f", {ds}" if len(ds_list) > 1 else "")
        kw = {"marker": marker, "linestyle": line, "color": eps_c[eps], "label": label,
              "alpha": 0.9 if len(ds_list) == 1 else 0.5 + 0.5 * (ds == ds_list[0])}
        axes[0].plot(ns, ys(lambda r: r["recall_at_k"]), **kw)
        axes[1].plot(ns, ys(lambda r: r["precision"]), **kw)
        axes[2].plot(ns, ys(lambda r: sum(r["cpu_seconds"].values())), **kw)
        axes[3].plot(ns, ys(lambda r: r["bytes_per_contacted_client"] * r["clients_contacted"]
                            / r["n"]), **kw)
    titles = [f"recall@{k}", "precision (whole release)", "CPU seconds, all parties",
              "bytes uploaded per population client"]
    for ax, t in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_xlabel("n (users)")
        ax.set_title(t, fontsize=10)
        ax.grid(True, alpha=0.3)
    for ax in axes[:2]:
        ax.set_ylim(-0.03, 1.03)
    axes[2].set_yscale("log")
    axes[3].set_yscale("log")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"TrieHH and Poplar1 (sampled) at the same (epsilon, delta = 1/n^2): "
                 f"{', '.join(ds_list)}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
