"""A party that dies between processes: real ``fedhh`` processes on loopback, signals
and SIGKILL, and what each survivor prints and exits with (docs/network.md, "When a
party dies").

* SIGINT / SIGTERM end a process with one line, ``fedhh: interrupted (Ctrl-C)`` (130)
  or ``fedhh: terminated (SIGTERM)`` (143), and nothing else on stderr (no asyncio
  ``Task was destroyed but it is pending!``).
* A peer that leaves: exit 1 and one ``fedhh: failed:`` line naming who left and where.
* Devices and helpers tell a committee member that left (``a committee member left``)
  from the analyst's own stop (``the analyst stopped the job``).
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.core.net import tls

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           PYTHONUNBUFFERED="1")
USERS = 200
DATA = ["--dataset", "zipf", "--users", str(USERS), "--seed", "3", "--theta", "3",
        "--gamma", "3", "--max-length", "4"]
NOISE = ("Traceback", "Task was destroyed", "Exception ignored", "RuntimeWarning")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Party:
    """One ``fedhh`` process, its stderr and stdout in files."""

    def __init__(self, tmp: Path, name: str, args: list[str]) -> None:
        self.name = name
        self.err_path, self.out_path = tmp / f"{name}.err", tmp / f"{name}.out"
        with open(self.err_path, "w") as err, open(self.out_path, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "protocol.cli", *args],
                                         stdout=out, stderr=err, env=ENV, cwd=tmp)

    def text(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 90) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.text() or needle in self.out_path.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{self.name} never printed {needle!r}:\n{self.text()[-2000:]}")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 90) -> tuple[int, list[str]]:
        """The exit status and the lines on stderr that are not JSON events."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not end:\n{self.text()[-2000:]}")
        lines = [ln for ln in self.text().splitlines() if ln and not ln.startswith("{")]
        return self.proc.returncode, lines


def _one_line(party: Party, status: int, *pattern: str, timeout: float = 90) -> str:
    """``party`` ends with ``status`` and exactly one stderr line, matching every regex
    of ``pattern``; no traceback or asyncio noise anywhere. Returns the line."""
    code, lines = party.finish(timeout)
    text = party.text()
    assert not any(n in text for n in NOISE), f"{party.name}:\n{text[-3000:]}"
    assert code == status and len(lines) == 1, (party.name, code, lines)
    for p in pattern:
        assert re.search(p, lines[0]), (party.name, p, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("death-keys")
    tls.make_party_keys(str(d / "committee"), USERS, committee=True)
    tls.make_party_keys(str(d / "plain"), USERS)
    return d


class Committee:
    """The committee job by hand, as docs/network.md has it: the server, helper 2,
    helper 1, device processes."""

    def __init__(self, tmp: Path, keys: Path, join_seconds: int = 60,
                 extra: tuple[str, ...] = ()) -> None:
        self.tmp, self.keys = tmp, keys / "committee"
        self.port, self.link = _free_port(), _free_port()
        self.extra = list(extra)  # given alike to the four commands
        # each test's own ledgers: a round one test abandons after its beacon does not
        # spend the next test's budget (committee_abandon_budget_spent)
        self.state = ["--state-dir", str(tmp / "state")]
        self.parties: dict[str, Party] = {}
        self.add("server", ["triehh", "--transport", "threshold", "--network",
                            f"127.0.0.1:{self.port}", "--keys", str(self.keys / "server"),
                            "--quiet", "--join-seconds", str(join_seconds),
                            "--stage-seconds", "10", *DATA, *self.extra])
        self["server"].wait_for('"listening"')
        for i in (2, 1):
            self.add(f"helper{i}", ["helper", "--index", str(i), "--job", "triehh", "--keys",
                                    str(self.keys / f"helper{i}"), "--connect",
                                    f"127.0.0.1:{self.port}", "--link",
                                    f"127.0.0.1:{self.link}", "--wait-seconds", "60", *DATA,
                                    *self.state, *self.extra])

    def add(self, name: str, args: list[str]) -> Party:
        self.parties[name] = Party(self.tmp, name, args)
        return self.parties[name]

    def devices(self, name: str, ids: str) -> Party:
        return self.add(name, ["client", "--job", "triehh", "--transport", "threshold",
                               "--keys", str(self.keys / "clients"), "--connect",
                               f"127.0.0.1:{self.port}", "--ids", ids,
                               "--wait-seconds", "60", *DATA, *self.state, *self.extra])

    def helpers_joined(self) -> None:
        self["server"].wait_for('"helper": 1, "phase": "joined"')
        self["server"].wait_for('"helper": 2, "phase": "joined"')

    def __getitem__(self, name: str) -> Party:
        return self.parties[name]

    def kill_all(self) -> None:
        for p in self.parties.values():
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()


@pytest.fixture
def committee(tmp_path, keys):
    made: list[Committee] = []

    def make(**kw) -> Committee:
        made.append(Committee(tmp_path, keys, **kw))
        return made[-1]

    yield make
    for c in made:
        c.kill_all()


@pytest.mark.parametrize("sig, status, line", [
    (signal.SIGINT, 130, r"^fedhh: interrupted \(Ctrl-C\)$"),
    pytest.param(signal.SIGTERM, 143, r"^fedhh: terminated \(SIGTERM\)$",
                 marks=pytest.mark.slow),  # SIGTERM fast: test_net_run_interrupted_...
])
def test_the_analyst_stopped_the_committee_job(committee, sig, status, line):
    """Ctrl-C or SIGTERM on the committee job's server while it admits the population:
    one line and 130 / 143; both helpers and the devices are told the analyst stopped
    the job (exit 1, one line each)."""
    c = committee()
    devices = c.devices("devices", "0:100")
    c.helpers_joined()
    time.sleep(1.0)  # the devices connect
    c["server"].signal(sig)
    _one_line(c["server"], status, line)
    why = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    for i in (1, 2):
        _one_line(c[f"helper{i}"], 1, rf"^fedhh: failed: helper {i} of the job",
                  rf"the analyst stopped the job: .*\({why}\)")
    _one_line(devices, 1, r"^fedhh: failed: devices of the job",
              rf"100 the analyst stopped the job: .*\({why}\)")


def test_helper_one_interrupted(committee):
    """Ctrl-C on helper 1: it ends with one line and 130; the server exits 1 naming
    helper 1 and the step (the round's beacon start); helper 2 and the devices are told
    a committee member left, helper 1, not that the analyst stopped the job."""
    c = committee()
    devices = c.devices("devices", "0:100")
    c.helpers_joined()
    time.sleep(1.0)
    c["helper1"].signal(signal.SIGINT)
    _one_line(c["helper1"], 130, r"^fedhh: interrupted \(Ctrl-C\)$")
    # the join window ends when the population is there: the rest of it joins now
    c.devices("rest", "100:200")
    _one_line(c["server"], 1, r"^fedhh: failed: helper 1 left \(its connection closed\) "
              r"at step (b-\w+ of round 1|j-open)")
    _one_line(c["helper2"], 1, r"a committee member left: helper 1 left")
    for d in (devices, c["rest"]):
        line = _one_line(d, 1, r"a committee member left: helper 1 left")
        assert "analyst" not in line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_helper_lost_in_a_secagg_committee_round_is_named(committee, sig):
    """``--committee-input secagg``: helper 1 interrupted (or killed) while the
    round's secure-aggregation session runs. The server exits 1 naming helper 1 and
    the session's step (not a bare ``threshold_helper_missing``); helper 2 and the
    devices are told helper 1 left."""
    c = committee(extra=("--committee-input", "secagg"))
    devices = c.devices("devices", "0:200")
    c.helpers_joined()
    c["server"].wait_for('"phase": "round"')
    c["helper1"].signal(sig)
    if sig == signal.SIGINT:
        _one_line(c["helper1"], 130, r"^fedhh: interrupted \(Ctrl-C\)$")
    else:
        c["helper1"].proc.wait(30)
    _one_line(c["server"], 1, r"^fedhh: failed: helper 1 (left \(its connection closed\)|"
              r"was silent past the deadline) at step \w+ of round 1 "
              r"\(threshold_helper_missing\)$")
    for p in (c["helper2"], devices):
        line = _one_line(p, 1, r"a committee member left: helper 1\b")
        assert "analyst" not in line


def test_a_device_process_killed_is_named_by_its_positions(tmp_path, keys):
    """kill -9 of one of two device processes of a secure-aggregation job when round 1
    starts: too few devices are left and the server exits 1 naming the positions that
    left (the killed process's 0-99, and only those: devices of the other process
    whose state machines then gave up said so with their Bye, and are counted apart by
    reason); the other process's devices are told devices left, not that the analyst
    stopped the job."""
    port = _free_port()
    plain = keys / "plain"
    server = Party(tmp_path, "server", [
        "triehh", "--transport", "secagg", "--network", f"127.0.0.1:{port}", "--keys",
        str(plain / "server"), "--quiet", "--join-seconds", "60", "--stage-seconds", "10",
        *DATA])
    parties = [server]
    try:
        server.wait_for('"listening"')
        devices = [Party(tmp_path, f"devices{k}", [
            "client", "--job", "triehh", "--keys", str(plain / "clients"), "--connect",
            f"127.0.0.1:{port}", "--ids", ids, "--wait-seconds", "60", *DATA])
            for k, ids in enumerate(("0:100", "100:200"))]
        parties += devices
        server.wait_for('"phase": "round"')
        devices[0].proc.kill()
        devices[0].proc.wait()
        said = _one_line(server, 1, r"^fedhh: failed: devices 0-99 left \(100 of 200 "
                         r"device connections closed\) by round 1; ",
                         r"the round aborted: secagg_too_few")
        gave = re.search(r"; (\d+) devices? gave up \(([^)]*)\)", said)
        line = _one_line(devices[1], 1, r"devices the round needed left: 100 of 200 devices "
                         r"left by round 1")
        assert "analyst" not in line
        if gave:  # the give-ups the server counted are those the devices reported
            own = dict((r, int(k)) for k, r in re.findall(r"(\d+) ([a-z_]+)", line))
            for k, r in re.findall(r"(\d+) ([a-z_]+)", gave.group(2)):
                assert own.get(r) == int(k), (r, k, line)
    finally:
        for p in parties:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_net_run_interrupted_leaves_nothing_behind(tmp_path, sig, status):
    """``fedhh net run --job triehh --transport threshold`` interrupted while its
    processes run: one line, 130 / 143, and none of the processes it started is left."""
    launcher = Party(tmp_path, "launcher", ["net", "run", "--job", "triehh", "--transport",
                                            "threshold", "--processes", "2", *DATA])
    try:
        launcher.wait_for("loopback TrieHH")
        end = time.monotonic() + 30
        while len(_children(launcher.proc.pid)) < 5 and time.monotonic() < end:
            time.sleep(0.1)
        started = _children(launcher.proc.pid)
        assert len(started) >= 3, started  # the server, helpers, device processes
        launcher.signal(sig)
        line = r"^fedhh: interrupted \(Ctrl-C\)$" if sig == signal.SIGINT else \
            r"^fedhh: terminated \(SIGTERM\)$"
        code, lines = launcher.finish(60)
        assert code == status and lines[-1:] and re.search(line, lines[-1]), (code, lines)
        assert not any(n in launcher.text() for n in NOISE)
        time.sleep(0.5)
        assert not [p for p in started if _alive(p)]
    finally:
        if launcher.proc.poll() is None:
            launcher.proc.kill()
            launcher.proc.wait()


@pytest.mark.slow
def test_the_only_device_process_killed_before_round_one(committee):
    """kill -9 of the device process (100 devices) before the join window closes: the
    committee's round 1 has no report, and the server exits 1 naming the positions that
    left and how many never connected; both helpers end with the round's abort."""
    c = committee(join_seconds=25)
    devices = c.devices("devices", "0:100")
    c.helpers_joined()
    time.sleep(2.0)
    devices.proc.kill()
    devices.proc.wait()
    _one_line(c["server"], 1, r"^fedhh: failed: devices 0-99 left \(100 of 200 device "
              r"connections closed\) by round 1; 100 of 200 devices never connected; the "
              r"round aborted: too_few_valid_reports")
    for i in (1, 2):
        _one_line(c[f"helper{i}"], 1, r"too_few_valid_reports")


@pytest.mark.slow
def test_serve_and_shuffler_processes_interrupted(tmp_path, keys):
    """``fedhh serve`` (a secure-aggregation session) and ``fedhh serve --transport
    shuffler`` waiting for clients: SIGINT and SIGTERM, one line, 130 / 143."""
    tls.make_keys(str(tmp_path / "s"), 10)
    from protocol.core.net.shuffle import make_shuffle_keys

    make_shuffle_keys(str(tmp_path / "s"))
    for k, (args, sig, status) in enumerate([
            (["serve", "--keys", str(keys / "plain" / "server"), "--clients", str(USERS)],
             signal.SIGINT, 130),
            (["serve", "--transport", "shuffler", "--keys", str(tmp_path / "s"),
              "--clients", "10", "--candidates", "5", "--threshold", "2"],
             signal.SIGTERM, 143)]):
        p = Party(tmp_path, f"serve{k}", [*args, "--port", "0"])
        p.wait_for('"listening"', timeout=120)
        p.signal(sig)
        _one_line(p, status, r"^fedhh: (interrupted|terminated)")


def test_an_unreachable_cluster_is_one_line_at_once(capsys):
    """``--cluster tcp://127.0.0.1:1`` (nothing listens): one ``fedhh: failed:`` line
    and exit 1, without Dask's 30-second connection timeout."""
    pytest.importorskip("distributed")
    from protocol.cli import main

    t0 = time.monotonic()
    code = main(["triehh", "--transport", "secagg", "--cluster", "tcp://127.0.0.1:1",
                 *DATA, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("fedhh: failed: cannot reach the Dask scheduler at "
                             "tcp://127.0.0.1:1: connection refused")
    assert time.monotonic() - t0 < 20


def test_cluster_probe_refuses_malformed_and_unresolvable_addresses():
    from protocol.core.cluster import ClusterUnavailable, _probe

    for address, why in [("tcp://127.0.0.1", "expected tcp://HOST:PORT"),
                         ("tcp://no-such-host.invalid:8786", "does not resolve"),
                         ("127.0.0.1:1", "connection refused")]:
        with pytest.raises(ClusterUnavailable, match=why):
            _probe(address, timeout=2)
    _probe("ucx://somewhere:1")  # another scheme: left to Dask


def test_departures_name_the_party_and_the_step():
    from protocol.cli import Terminated
    from protocol.core.contract import AggregationAborted
    from protocol.core.net.departures import departure, positions, stop_reason

    d = departure("committee_missing_message", "b-start to helper 1: ConnectionResetError", 1)
    assert d.line() == "helper 1 left (its connection closed) at step b-start of round 1"
    assert d.bye().startswith("member_left: helper 1 left")
    d = departure("committee_missing_message",
                  "missing_message (party 0): verdicts from member 2: TimeoutError", 3)
    assert d.line() == "helper 2 was silent past the deadline at step verdicts of round 3"
    # a deviation is no departure
    assert departure("committee_sample_equivocated", "b-start to helper 1: X", 1) is None
    assert departure("committee_missing_message", "b-start to helper 1: CodecError") is None
    assert positions([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"
    assert positions(range(0, 20, 2), limit=3) == "0, 2, 4, ..."
    assert stop_reason(KeyboardInterrupt()).startswith("analyst_stopped:")
    assert "SIGTERM" in stop_reason(Terminated())
    try:
        try:
            raise AggregationAborted("committee_sample_redrawn", "x")
        except AggregationAborted:
            raise RuntimeError("wrapped") from None
    except RuntimeError as exc:
        assert stop_reason(exc) == "round_aborted: committee_sample_redrawn"
    assert stop_reason(None, "3 of 9 devices left", "devices_left") == \
        "devices_left: 3 of 9 devices left"
