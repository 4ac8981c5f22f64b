"""``fedhh net run``: a loopback experiment with real processes.

Starts ``fedhh serve`` and ``--processes`` ``fedhh client`` processes on 127.0.0.1,
runs ``--sessions`` secure-aggregation sessions, and prints per session the outcome,
whether the release is exact (the sum of the seeded inputs of exactly the clients in
the sum), latency and bytes per stage. Faults: ``--kill K --kill-at R`` (kill -9 of K
client processes during round R), ``--stall C --stall-at R`` (C clients hang).
``--compare`` also runs the same session in this process and gives the ratios.
The experiment is :func:`protocol.core.net.launcher.run_loopback`.

``--job triehh`` runs a whole TrieHH instead: ``fedhh triehh --network`` as the server,
``--processes`` ``fedhh client --job triehh`` processes holding the seeded population's
words (the dataset options), one secure-aggregation session per round; every completed
round's sum is checked against the votes of exactly the clients in it; ``--kill K
--kill-round R`` kills K client processes when round R starts; ``--compare`` runs the
same TrieHH in this process and says whether the heavy hitters are the same
(:func:`protocol.studies.runners.net_jobs.run_job_loopback`). With ``--transport
threshold`` the job runs over the committee (two ``fedhh helper --job triehh``
processes): each sampled device sends a validated report (``--committee-input secagg``:
a secure-aggregation session instead), and the run prints per round the reports dropped
by reason; the corrupted-client options (``--corrupt-clients K --corrupt-strategy S``,
...) make that many devices per round send their strategy's input, and ``--compare``
then checks the release against plaintext TrieHH over the honest devices' votes.
``--job ldp`` runs one
frequency-oracle round the same way (``fedhh ldp --network``, devices with seeded noise
so the sum can be checked; :func:`protocol.studies.runners.net_jobs.run_ldp_loopback`).
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli import count
    from protocol.cli.args import add_quiet_arg
    from protocol.cli.net_args import add_server_args, add_session_args, add_shuffle_round_args

    p = cli.subcommand("net", "run", "secure aggregation over TLS with real processes "
                       "on loopback", run)
    p.add_argument("--processes", type=int, default=4, help="client processes (default 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs and the faults")
    add_server_args(p)
    p.add_argument("--kill", type=int, default=0,
                   help="client processes killed (SIGKILL) per session")
    p.add_argument("--kill-at", choices=("0", "1", "2", "3", "4", "random"), default="2",
                   dest="kill_at", help="the round during which they are killed (default 2; "
                                        "random: a random round per session)")
    p.add_argument("--stall", type=count, default=0, help="clients that hang, per session")
    p.add_argument("--stall-at", type=int, choices=range(5), default=2, dest="stall_at",
                   help="the round before which they hang (default 2)")
    p.add_argument("--compare", action="store_true",
                   help="also run the session in-process and report the ratios")
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="time limit of the whole experiment in seconds")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_arg(p)
    p.add_argument("--transport", choices=("secagg", "shuffler", "threshold"), default="secagg",
                   help="secagg (default), one shuffled vote round (fedhh serve "
                        "--transport shuffler, fedhh analyze, clients) or one vote round into "
                        "the thresholding committee (fedhh serve --transport threshold, two "
                        "fedhh helper processes, clients)")
    p.add_argument("--batch-seconds", type=float, default=60.0, dest="batch_seconds",
                   help="shuffler: how long the batch stays open (default 60)")
    add_session_args(p)
    add_shuffle_round_args(p)
    from protocol.cli.net_args import add_job_args

    add_job_args(p, "run a whole mechanism over the network instead of sessions",
                 mechanism="grr", domain=50)
    p.add_argument("--fault", default=None, metavar="MEMBER:WHAT",
                   help="--transport threshold (malicious model): one committee member "
                        "deviates and the round must end in its named abort: "
                        "server:shift-sum, helper1:shift-blind, helper2:other-blind, "
                        "helper1:other-seed, ... (docs/network.md)")
    p.add_argument("--kill-round", type=int, default=None, dest="kill_round",
                   help="--job: the mechanism round when --kill processes die (default: "
                        "triehh 2, ldp its only round 0)")
    from protocol.cli.net_args import add_committee_input_arg
    from protocol.cli.transport_options import add_corrupt_args

    add_committee_input_arg(p)
    add_corrupt_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.output import print_json, say
    from protocol.cli.net_args import resolve_job_session_args, resolve_session_args
    from protocol.core.net.launcher import LoopbackOptions, run_loopback

    if args.fault is not None and args.transport != "threshold":
        raise UsageError("--fault applies to --transport threshold")
    if args.transport == "shuffler":
        return _run_shuffler(args)
    if args.transport == "threshold" and args.job is None:
        return _run_threshold(args)
    if args.job is not None:
        resolve_job_session_args(args)
        return _run_job(args)
    resolve_session_args(args)

    try:
        opts = LoopbackOptions(
            clients=args.clients, dim=args.dim, processes=args.processes,
            sessions=args.sessions, seed=args.seed, threat=args.threat, graph=args.graph,
            modulus=args.modulus, dropout_rate=args.dropout_rate, stage_seconds=args.stage_seconds,
            join_seconds=args.join_seconds, kill=args.kill,
            kill_at=None if args.kill_at == "random" else int(args.kill_at),
            stall=args.stall, stall_at=args.stall_at, compare=args.compare,
            timeout=args.timeout)
        opts.spec()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        out = run_loopback(opts, say=say(not args.quiet))
    except RuntimeError as exc:  # a process failed to start, or the time limit passed
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
    else:
        _print(out)
    return 0 if out["wrong_results"] == 0 and out["left_behind"] == 0 else 1


def _print(out: dict) -> None:  # noqa: ANN001
    for i, s in enumerate(out["sessions"], 1):
        print(f"session {i}: {s['status']}{' (' + s['reason'] + ')' if s['reason'] else ''}"
              f"  threat {s['threat']}, k = {s['degree']}, t = {s['threshold']}, "
              f"{s['in_sum']} of {s['n']} clients in the sum, exact: {s['exact']}")
        print(f"  wall {s['wall_seconds']:.2f} s, server CPU {s['server_cpu_seconds']:.2f} s, "
              f"client processes CPU {s['client_processes_cpu_seconds']:.2f} s, "
              f"server peak {s['server_peak_rss_mb']:.0f} MB")
        print(f"  {'stage':<16}{'expected':>9}{'received':>9}{'seconds':>9}"
              f"{'bytes up':>12}{'bytes down':>12}")
        for st in s["stages"]:
            print(f"  {st['name']:<16}{st['expected']:>9}{st['received']:>9}"
                  f"{st['seconds']:>9.3f}{st['bytes_up']:>12,}{st['bytes_down']:>12,}")
        print(f"  per client: {s['bytes_up_per_client']:,.0f} B up, "
              f"{s['bytes_down_per_client']:,.0f} B down; outcomes {s['client_outcomes']}")
        if s["killed_processes"]:
            print(f"  killed client processes {s['killed_processes']} in round {s['kill_at']}")
    sim = out.get("simulation")
    if sim:
        print(f"in-process simulation: {sim['status']}, release equal: {sim['release_equal']}, "
              f"wall {sim['wall_seconds']:.2f} s, CPU {sim['cpu_seconds']:.2f} s; network/"
              f"simulation: wall {sim['wall_ratio']:.2f}x, CPU {sim['cpu_ratio']:.2f}x; "
              f"bytes per client up {sim['bytes_up_per_client']:,.0f}, down "
              f"{sim['bytes_down_per_client']:,.0f}")
    print(f"wrong results: {out['wrong_results']}, processes left behind: {out['left_behind']}")


def _run_job(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.output import print_json, say
    from protocol.studies.errors import StudyError
    from protocol.studies.runners import net_jobs

    common = dict(users=args.users, processes=args.processes, seed=args.seed,
                  threat=args.threat, graph=args.graph, dropout_rate=args.dropout_rate,
                  stage_seconds=args.stage_seconds, join_seconds=args.join_seconds,
                  kill=args.kill, compare=args.compare, timeout=args.timeout)
    if args.kill_round is not None:
        common["kill_round"] = args.kill_round
    from protocol.cli.net_args import committee_input_from_args, job_corrupt_from_args

    try:
        if args.job == "triehh":
            committee = args.transport == "threshold"
            committee_input = committee_input_from_args(args, committee, args.threat)
            corrupt = job_corrupt_from_args(args, committee, committee_input, args.threat)
            fault = _fault(args.fault, args.threat == "malicious", job=True) \
                if committee else None
            from protocol.core.net.committee_job import SECAGG_ONLY_FAULTS

            if fault is not None and fault[1] in SECAGG_ONLY_FAULTS \
                    and committee_input != "secagg":
                raise UsageError(f"--fault {args.fault} deviates in the secure-"
                                 "aggregation-fed committee: add --committee-input secagg")
            opts = net_jobs.JobLoopbackOptions(
                dataset=args.dataset or "en", epsilon=4.0 if args.epsilon is None
                else args.epsilon, max_length=args.max_length, unit_size=args.unit_size,
                theta=args.theta, gamma=args.gamma, alphabet=args.alphabet,
                transport=args.transport,
                fault=fault, committee_input=committee_input,
                corrupt=corrupt, **common)
            out = net_jobs.run_job_loopback(opts, say=say(not args.quiet))
        else:
            if args.transport != "secagg":
                raise UsageError("--job ldp runs over --transport secagg (the committee "
                                 "thresholds vote rounds)")
            committee_input_from_args(args, False, args.threat)  # refuses them here
            job_corrupt_from_args(args, False, "secagg", args.threat)
            if args.dataset not in (None, "zipf"):
                raise UsageError("--job ldp runs on the zipf population")
            opts = net_jobs.LDPLoopbackOptions(
                mechanism=args.mechanism, domain=args.domain,
                epsilon=2.0 if args.epsilon is None else args.epsilon, zipf_s=args.zipf_s,
                g=args.g, B=args.B, **common)
            out = net_jobs.run_ldp_loopback(opts, say=say(not args.quiet))
    except (ValueError, StudyError, RuntimeError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
    elif args.job == "triehh":
        _print_job(out)
    else:
        _print_ldp(out)
    ok = out["result"] is not None and out["wrong_results"] == 0 and out["left_behind"] == 0
    return 0 if ok else 1


def _run_shuffler(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import resolve_shuffler_session_args
    from protocol.cli.output import print_json, say
    from protocol.core.net.launcher import ShuffleLoopbackOptions, run_shuffle_loopback

    resolve_shuffler_session_args(args)
    if args.job is not None or args.stall or args.sessions != 1:
        raise UsageError("--job, --stall and --sessions apply to secure aggregation")
    try:
        opts = ShuffleLoopbackOptions(
            clients=args.clients, processes=args.processes, seed=args.seed,
            candidates=args.candidates, theta=args.shuffle_threshold,
            membership_only=args.membership_only, min_batch=args.min_batch,
            batch_seconds=args.batch_seconds, stage_seconds=args.stage_seconds,
            kill=args.kill, timeout=args.timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        out = run_shuffle_loopback(opts, say=say(not args.quiet))
    except RuntimeError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
    else:
        sh, an = out["shuffler"], out["analyzer"] or {}
        print(f"shuffler: {sh['status']}{' (' + sh['reason'] + ')' if sh['reason'] else ''}, "
              f"{len(sh['accepted'])} of {args.clients} envelopes accepted, receipt "
              f"{sh['receipt']}, {sh['bytes_up']:,} B in, {sh['bytes_to_analyzer']:,} B to "
              f"the analyzer")
        print(f"analyzer: {an.get('status')}{' (' + an['reason'] + ')' if an.get('reason') else ''}"
              f", passed {an.get('passed')}, counts {an.get('release')}")
        if out["killed_processes"]:
            print(f"  killed client processes {out['killed_processes']} at start")
        print(f"exact: {out['exact']}; wall {out['wall_seconds']:.1f} s; processes left "
              f"behind: {out['left_behind']}")
    return 0 if out["wrong_results"] == 0 and out["left_behind"] == 0 else 1


def _fault(text: str | None, verified: bool, job: bool = False) -> tuple[str, str] | None:
    """``--fault MEMBER:WHAT`` as ``(member, what)``; ``job``: a committee job's faults
    (:data:`~protocol.core.net.committee_job.JOB_FAULTS`), else one round's.

    Raises:
        UsageError: an unknown member or fault, or a fault without the malicious model.
    """
    from protocol.cli import UsageError
    from protocol.core.net.committee_job import JOB_FAULTS
    from protocol.core.net.threshold_net import FAULTS as ROUND_FAULTS

    FAULTS = JOB_FAULTS if job else ROUND_FAULTS  # noqa: N806
    if text is None:
        return None
    member, _, what = text.partition(":")
    kinds = FAULTS["server"] if member == "server" else (
        FAULTS["helper"] if member in ("helper1", "helper2") else None)
    if kinds is None or what not in kinds:
        choices = [f"server:{f}" for f in FAULTS["server"]] + [
            f"{h}:{f}" for h in ("helper1", "helper2") for f in FAULTS["helper"]]
        raise UsageError(f"--fault {text!r}: choose one of {', '.join(choices)}")
    if not verified:
        raise UsageError("--fault needs the malicious model (--threat malicious, the "
                         "default): the semi-honest committee assumes members follow it")
    return member, what


def _run_threshold(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import threshold_round_from_args
    from protocol.cli.output import print_json, say
    from protocol.core.net.launcher import ThresholdLoopbackOptions, run_threshold_loopback

    rnd = threshold_round_from_args(args)  # refuses options that do not apply
    if args.job is not None or args.stall or args.sessions != 1:
        raise UsageError("--job, --stall and --sessions apply to --transport secagg")
    fault = _fault(args.fault, rnd.verified)
    try:
        opts = ThresholdLoopbackOptions(
            clients=rnd.vote.n, processes=args.processes, seed=args.seed,
            candidates=rnd.vote.candidates, theta=rnd.vote.theta,
            membership_only=not rnd.vote.reveal_counts, threat=rnd.threat, graph=rnd.graph,
            dropout_rate=rnd.dropout, stage_seconds=args.stage_seconds,
            join_seconds=args.join_seconds, kill=args.kill, timeout=args.timeout,
            fault=fault)
        out = run_threshold_loopback(opts, say=say(not args.quiet))
    except (ValueError, RuntimeError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
    else:
        sv = out["server"]
        print(f"committee round: {sv['status']}"
              f"{' (' + sv['reason'] + ')' if sv['reason'] else ''}; threat {sv['threat']}, "
              f"k = {sv['degree']}, t = {sv['threshold']}; {len(sv.get('in_sum') or [])} of "
              f"{args.clients} clients in the sum")
        print(f"  released: passed {sv.get('passed')}, counts {sv.get('release')}")
        print(f"  helpers: {[h.get('status') for h in out['helpers']]}; committee "
              f"{sv.get('committee')}")
        print(f"  {'stage':<16}{'expected':>9}{'received':>9}{'seconds':>9}")
        for st in sv["stages"]:
            print(f"  {st['name']:<16}{st['expected']:>9}{st['received']:>9}"
                  f"{st['seconds']:>9.3f}")
        if out["killed_processes"]:
            print(f"  killed client processes {out['killed_processes']} at start")
        print(f"exact: {out['exact']}; wall {out['wall_seconds']:.1f} s; processes left "
              f"behind: {out['left_behind']}")
    return 0 if out["wrong_results"] == 0 and out["left_behind"] == 0 else 1


def _print_ldp(out: dict) -> None:  # noqa: ANN001
    res = out["result"]
    if res is None:
        print(f"the oracle round over the network did not complete: {out['server_error']}")
    else:
        net = res["network"]
        r = net["rounds"][0]
        print(f"{res['mechanism'].upper()} over the network: {out['n']} clients "
              f"({net['joined']} connected) in {out['options']['processes']} processes, "
              f"epsilon {res['epsilon']:g}, {r['in_sum']} in the sum, k = {r['degree']}, "
              f"t = {r['threshold']}, exact: {out['rounds_exact']}")
        print(f"  round {r['wall_seconds']:.2f} s ("
              + ", ".join(f"{s['name']} {s['seconds']:.2f}" for s in r["stages"])
              + f"); {r['bytes_up']:,} B up, {r['bytes_down']:,} B down; "
              f"MSE {res['mse']:.3e} (analytical {res['mean_analytical_variance']:.3e})")
    if out["killed_processes"]:
        print(f"  killed client processes {out['killed_processes']}")
    sim = out.get("simulation")
    if sim:
        print(f"in-process, its own noise: MSE {sim['mse']:.3e}, wall {sim['wall_seconds']:.1f} s")
    print(f"wrong results: {out['wrong_results']}, processes left behind: {out['left_behind']}")


def _why_none(res: dict) -> str:  # noqa: ANN001
    from protocol.studies.runners.triehh import why_none

    pv = res["privacy"]
    return why_none(pv["theta"], pv["m"], res["n"])


def _print_job(out: dict) -> None:  # noqa: ANN001
    res = out["result"]
    if res is None:
        print(f"TrieHH over the network did not complete: {out['server_error']}")
    else:
        net = res["network"]
        print(f"TrieHH over the network: {out['n']} clients ({net['joined']} connected) in "
              f"{out['options']['processes']} processes; {len(net['rounds'])} rounds; "
              f"heavy hitters: {', '.join(h['word'] for h in res['heavy_hitters'][:20])}"
              + ("" if res["heavy_hitters"] else _why_none(res)))
        reports = out.get("committee_input") == "reports"
        counted = "valid" if reports else "in sum"
        print(f"  {'round':>5}{'status':>11}{'sampled':>9}{counted:>8}{'k':>5}{'t':>5}"
              f"{'seconds':>9}{'bytes up':>12}{'bytes down':>12}  exact")
        for i, (r, ok) in enumerate(zip(net["rounds"], out["rounds_exact"] or
                                        [None] * len(net["rounds"])), 1):
            k = "-" if r.get("degree") is None else r["degree"]
            t = "-" if r.get("threshold") is None else r["threshold"]
            print(f"  {i:>5}{r['status']:>11}{r['sampled']:>9}{r['in_sum']:>8}"
                  f"{k:>5}{t:>5}{r['wall_seconds']:>9.2f}"
                  f"{r['bytes_up']:>12,}{r['bytes_down']:>12,}  {ok}")
        if reports:
            print("  input: validated reports (k, t: no secure-aggregation session)")
        print(f"  wall {out['wall_seconds']:.1f} s in all (process start and joining "
              f"included); server peak {net['server_peak_rss_mb']:.0f} MB")
    for a in out.get("aborted_rounds", ()):
        print(f"  round {a['round']} aborted: {a['reason']}")
    for r in out.get("dropped_per_round", ()):
        line = f"  round {r['round']} dropped: " + (", ".join(
            f"{v} {k}" for k, v in sorted(r["dropped"].items())) or "none") \
            if r["validated"] else f"  round {r['round']}: inputs not validated (secagg)"
        if r["corrupted"]:
            line += (f"; corrupted devices {r['corrupted']}: dropped "
                     + (", ".join(f"{v} {k}" for k, v in sorted(
                         r["dropped_corrupted"].items())) or "none")
                     + f", counted {r['corrupted_counted']}")
        print(line)
    for h in out.get("helpers", ()):
        opened = [r.get("passed") for r in h.get("rounds", ())]
        print(f"  helper {h.get('helper')}: {h.get('status')}"
              f"{' (' + h['reason'] + ')' if h.get('reason') else ''}; passed per round "
              f"{opened}")
    if out["killed_processes"]:
        print(f"  killed client processes {out['killed_processes']} at round "
              f"{out['options']['kill_round']}")
    sim = out.get("simulation")
    if sim and "wall_ratio" not in sim:  # a committee job: plaintext on its samples
        over = " over the honest devices' votes" if sim.get("honest_only") else ""
        print(f"plaintext TrieHH on the committee's samples{over}: heavy hitters "
              f"{', '.join(sim['heavy_hitters'][:20]) or '(none)'}; same release: "
              f"{sim['release_equal']}")
    elif sim:
        print(f"in-process TrieHH: heavy hitters "
              f"{', '.join(sim['heavy_hitters'][:20]) or '(none)'}; "
              f"same release: {sim['release_equal']}; wall {sim['wall_seconds']:.1f} s "
              f"(network/in-process {sim['wall_ratio']:.2f}x with process start and "
              f"joining)")
        if sim["run_ratio"] is not None:
            print(f"  the rounds alone: network {res['seconds']['run']:.1f} s, in-process "
                  f"{sim['run_seconds']:.1f} s ({sim['run_ratio']:.2f}x)")
    print(f"wrong results: {out['wrong_results']}, processes left behind: {out['left_behind']}")
