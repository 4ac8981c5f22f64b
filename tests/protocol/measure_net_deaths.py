"""What each process of the TrieHH job over the committee prints, exits with and how
long it takes to exit when a party dies or is stopped, at N users (docs/network.md,
"When a party dies or is stopped"). Not a test (pytest does not collect it): it starts
real processes and needs keys made first.

    fedhh keys --out /tmp/deaths/keys --clients 5000 --committee
    python tests/protocol/measure_net_deaths.py CASE [N]

CASE: ``server-int`` / ``server-term`` (SIGINT / SIGTERM to the server when N/2 device
TCP connections are up, ``AT=K`` for K), ``helper1-int`` (SIGINT to helper 1, the same
moment), ``device-kill`` (SIGKILL to the device process of ``0:N/2`` when the server
starts round 1's reports), ``secagg-helper1`` (``--committee-input secagg`` given to
every process, SIGINT to helper 1 when the server starts round 1, during the round's
secure-aggregation session), ``cluster`` (``--cluster tcp://127.0.0.1:1``). The server,
helper 2, helper 1 and two device processes (``--ids 0:N/2``, ``N/2:N``) run with the
commands of docs/network.md, each helper and device process on a fresh
``--state-dir``; their stderr and stdout go to ``/tmp/deaths/CASE-N/``, and one JSON
object per case on stdout gives, per process, the exit status, the seconds from the
signal to its exit, its stderr lines (JSON events and others), stdout lines, its last
non-JSON line and whether any asyncio noise or traceback appeared. ``KEYS`` and
``OUT`` (directories) override the defaults.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

WT = os.environ.get("WT", str(Path(__file__).resolve().parents[2]))
PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=WT, PYTHONUNBUFFERED="1")
case = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
KEYS = Path(os.environ.get("KEYS", "/tmp/deaths/keys"))
OUT = Path(os.environ.get("OUT", "/tmp/deaths")) / f"{case}-{N}{os.environ.get('TAG', '')}"
shutil.rmtree(OUT, ignore_errors=True)
OUT.mkdir(parents=True)
DATA = ["--users", str(N), "--seed", "1"]
STATE = ["--state-dir", str(OUT / "state")]
INPUT = ["--committee-input", "secagg"] if case == "secagg-helper1" else []


def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


procs = {}
t_end = {}


def start(name, args):
    err = open(OUT / f"{name}.err", "w")
    out = open(OUT / f"{name}.out", "w")
    procs[name] = subprocess.Popen([PY, "-m", "protocol.cli", *args], stdout=out, stderr=err,
                                   env=ENV, cwd=OUT)
    return procs[name]


def text(name):
    return (OUT / f"{name}.err").read_text(errors="replace") + \
        (OUT / f"{name}.out").read_text(errors="replace")


def wait_for(name, needle, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if needle in text(name):
            return time.monotonic()
        if procs[name].poll() is not None:
            raise SystemExit(f"{name} ended before {needle!r}: {text(name)[-1500:]}")
        time.sleep(0.05)
    raise SystemExit(f"{name} never printed {needle!r}")


def watch(t0, timeout=600):
    end = time.monotonic() + timeout
    while time.monotonic() < end and any(name not in t_end for name in procs):
        for name, p in procs.items():
            if name not in t_end and p.poll() is not None:
                t_end[name] = time.monotonic()
        time.sleep(0.05)
    for name, p in procs.items():
        if p.poll() is None:
            p.kill()
            p.wait()
            t_end[name] = None


def report(t0, what):
    rows = []
    for name, p in procs.items():
        err = (OUT / f"{name}.err").read_text(errors="replace")
        out = (OUT / f"{name}.out").read_text(errors="replace")
        lines = err.splitlines()
        js = [ln for ln in lines if ln.startswith("{")]
        other = [ln for ln in lines if ln and not ln.startswith("{")]
        rows.append({"process": name, "exit": p.returncode,
                     "seconds_after_signal": None if t_end[name] is None
                     else round(t_end[name] - t0, 1),
                     "stderr_lines": len(lines), "json_event_lines": len(js),
                     "other_stderr_lines": len(other), "stdout_lines": len(out.splitlines()),
                     "last_line": other[-1] if other else "",
                     "noise": any(n in err for n in ("Traceback", "Task was destroyed",
                                                    "Exception ignored"))})
    print(json.dumps({"case": case, "users": N, "trigger": what, "rows": rows}, indent=1))


if case == "cluster":
    t0 = time.monotonic()
    start("server", ["triehh", "--transport", "secagg", "--cluster", "tcp://127.0.0.1:1",
                     *DATA])
    watch(t0)
    report(t0, "start")
    sys.exit()

P, L = port(), port()
start("server", ["triehh", "--transport", "threshold", "--network", f"127.0.0.1:{P}",
                 "--keys", str(KEYS / "server"), *DATA, *INPUT])
wait_for("server", '"listening"')
for i in (2, 1):
    start(f"helper{i}", ["helper", "--index", str(i), "--job", "triehh", "--keys",
                         str(KEYS / f"helper{i}"), "--connect", f"127.0.0.1:{P}", "--link",
                         f"127.0.0.1:{L}", *DATA, *STATE, *INPUT])
wait_for("server", '"helper": 1, "phase": "joined"')
wait_for("server", '"helper": 2, "phase": "joined"')
half = N // 2
for k, ids in enumerate((f"0:{half}", f"{half}:{N}")):
    start(f"devices{k}", ["client", "--job", "triehh", "--transport", "threshold", "--keys",
                          str(KEYS / "clients"), "--connect", f"127.0.0.1:{P}", "--ids", ids,
                          *DATA, *STATE, *INPUT])
t_dev = time.monotonic()
def established():
    r = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{P} )"],
                       capture_output=True, text=True).stdout
    return len(r.splitlines())


if case in ("server-int", "server-term", "helper1-int"):
    want = int(os.environ.get("AT", str(N // 2)))  # TCP connections established
    while established() < want + 2 and time.monotonic() - t_dev < 300:
        time.sleep(0.1)
    delay = time.monotonic() - t_dev
    who = "helper1" if case == "helper1-int" else "server"
    sig = signal.SIGTERM if case == "server-term" else signal.SIGINT
    t0 = time.monotonic()
    procs[who].send_signal(sig)
    what = (f"{sig.name} to {who} when {want} device TCP connections were established, "
            f"{delay:.1f} s after the device processes started")
elif case == "device-kill":
    t0 = wait_for("server", os.environ.get("KILL_AT", "\"phase\": \"reports\""))
    procs["devices0"].kill()
    what = (f"SIGKILL to devices0 (0:{half}) when the server printed "
            f"{os.environ.get('KILL_AT', 'round 1 reports')}, "
            f"{t0 - t_dev:.1f} s after the device processes started")
elif case == "secagg-helper1":
    t0 = wait_for("server", '"phase": "round"')
    procs["helper1"].send_signal(signal.SIGINT)
    what = (f"SIGINT to helper1 when the server started round 1, "
            f"{t0 - t_dev:.1f} s after the device processes started")
else:
    raise SystemExit(case)
watch(t0)
report(t0, what)
