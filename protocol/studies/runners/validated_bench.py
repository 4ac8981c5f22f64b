"""``fedhh bench validated``: TrieHH over the committee's validated reports (the default)
against the committee fed by secure aggregation and against secure aggregation alone.

Each configuration is one ``fedhh triehh ... --json --quiet`` child process (the same
population, seed and sampling, so the same samples), run interleaved ``repeats`` times:
reports, secagg-fed committee, secagg, reports, ... Per run: wall time, the child's own
CPU and peak resident memory (``os.wait4``), the CPU of each party summed over the
rounds (as the transport charges it), bytes per sampled device (what the devices send
up) and between the committee's members, and the heavy hitters. The summary gives
medians and, per repeat, the ratio of each configuration to the validated one (so
the machine's drift between repeats cancels), with their median.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from protocol.studies.errors import StudyError

__all__ = ["CONFIGS", "bench_validated"]

#: name -> the transport options of ``fedhh triehh``
CONFIGS = {
    "validated": ["--transport", "threshold"],
    "secagg_fed_committee": ["--transport", "threshold", "--committee-input", "secagg"],
    "secagg": ["--transport", "secagg"],
}


def _one(args: list[str]) -> dict[str, Any]:
    """One child run: its JSON, wall time, CPU and peak RSS."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "protocol.cli", "triehh", *args,
                                 "--json", "--quiet"], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if proc.returncode != 0:
        last = errors.strip().splitlines()[-1] if errors.strip() else f"exit {proc.returncode}"
        raise StudyError(f"fedhh triehh {' '.join(args)} failed: {last}")
    data = json.loads(text)
    parties: dict[str, float] = {}
    sent: dict[str, int] = {}
    sampled = bytes_up = bytes_members = 0
    for r in data.get("rounds", []):
        for k, v in (r.get("cpu_seconds") or {}).items():
            parties[k] = parties.get(k, 0.0) + float(v)
        for k, b in (r.get("bytes_sent") or {}).items():
            sent[k] = sent.get(k, 0) + int(b)
        sampled += int(r.get("sampled", 0))
        bytes_up += int(r.get("bytes_up", 0))
        bytes_members += int(r.get("bytes_members", 0))
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024.0,
            "cpu_by_party": {k: round(v, 3) for k, v in sorted(parties.items())},
            "bytes_per_device": bytes_up / max(1, sampled),
            "bytes_between_members": bytes_members,
            "bytes_sent_by_member": dict(sorted(sent.items())),
            "heavy_hitters": sorted(h["word"] if isinstance(h, dict) else str(h)
                                    for h in data.get("heavy_hitters", []))}


def bench_validated(users: int, seed: int, repeats: int, dataset: str = "en",
                    configs: list[str] | None = None,
                    say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the comparison (see the module docstring) and return a JSON-ready dict.

    Raises:
        StudyError: bad arguments, or a run that failed.
    """
    names = configs or list(CONFIGS)
    unknown = [c for c in names if c not in CONFIGS]
    if unknown or "validated" not in names:
        raise StudyError(f"configurations are {', '.join(CONFIGS)} (validated among them); "
                         f"got {', '.join(names)}")
    if users < 1 or repeats < 1:
        raise StudyError("--users and --repeats must be >= 1")
    base = ["--users", str(users), "--seed", str(seed), "--dataset", dataset]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in names}
    for rep in range(repeats):
        for c in names:
            if say is not None:
                say(f"bench validated: repeat {rep + 1}/{repeats}, {c} ...")
            r = _one(base + CONFIGS[c])
            runs[c].append(r)
            if say is not None:
                say(f"bench validated: repeat {rep + 1}/{repeats}, {c}: {r['wall_s']:.1f} s "
                    f"wall, {r['cpu_s']:.1f} s CPU, {r['peak_rss_mb']:.0f} MB")
    out: dict[str, Any] = {"users": users, "seed": seed, "dataset": dataset,
                           "repeats": repeats, "configs": {}, "ratios_to_validated": {}}
    reference = runs["validated"][0]["heavy_hitters"]
    for c, rs in runs.items():
        parties = sorted({k for r in rs for k in r["cpu_by_party"]})
        out["configs"][c] = {
            "options": " ".join(CONFIGS[c]),
            "wall_s": round(statistics.median(r["wall_s"] for r in rs), 2),
            "cpu_s": round(statistics.median(r["cpu_s"] for r in rs), 2),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in rs), 1),
            "cpu_by_party": {k: round(statistics.median(r["cpu_by_party"].get(k, 0.0)
                                                         for r in rs), 3) for k in parties},
            "bytes_per_device": round(statistics.median(r["bytes_per_device"] for r in rs)),
            "bytes_between_members": int(statistics.median(r["bytes_between_members"]
                                                           for r in rs)),
            "bytes_sent_by_member": rs[0]["bytes_sent_by_member"],
            "heavy_hitters": len(rs[0]["heavy_hitters"]),
            "same_heavy_hitters_as_validated": all(r["heavy_hitters"] == reference
                                                   for r in rs),
            "runs": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()
                      if k != "heavy_hitters"} for r in rs],
        }
        if c != "validated":
            per = [(runs[c][i]["cpu_s"] / runs["validated"][i]["cpu_s"],
                    runs[c][i]["wall_s"] / runs["validated"][i]["wall_s"])
                   for i in range(repeats)]
            out["ratios_to_validated"][c] = {
                "cpu": round(statistics.median(p[0] for p in per), 2),
                "wall": round(statistics.median(p[1] for p in per), 2),
                "cpu_per_repeat": [round(p[0], 2) for p in per]}
    return out
