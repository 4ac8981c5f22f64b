"""Progress that tells the truth: clients served inside a secure-aggregation session,
and the estimate printed before a long TrieHH run."""
from __future__ import annotations

import io

import numpy as np
import pytest

from protocol.cli import main
from protocol.cli.output import ClientProgress
from protocol.core.contract import Kind, RoundSpec, Votes
from protocol.core.transports.secagg_transport import SecAggTransport


def test_the_transport_reports_every_client_of_every_step() -> None:
    calls: list[tuple[int, int, int]] = []
    tr = SecAggTransport(simulate=True)
    tr.client_progress = lambda s, d, t: calls.append((s, d, t))
    spec = RoundSpec("p", 1, Kind.VOTE, candidates=("a", "b", "c"), theta=1)
    res = tr.run_round(spec, Votes(np.array([0, 1, 1, 2, 0, 0, 1, 2])), np.random.default_rng(1))
    assert dict(res.release.counts or {}) == {"a": 3, "b": 3, "c": 2}
    steps = sorted({s for s, _, _ in calls})
    assert steps[0] == 0 and len(steps) >= 4
    for step in steps:
        seen = [(d, t) for s, d, t in calls if s == step]
        assert [d for d, _ in seen] == list(range(1, len(seen) + 1))  # one call per client
        assert seen[-1][0] == seen[-1][1] == 8  # every step ends with all clients served


def test_client_progress_lines_carry_rate_and_time_left() -> None:
    out = io.StringIO()
    p = ClientProgress(stream=out, log_interval=0.0)
    clock = iter([0.0, 2.0, 4.0])
    p._clock = lambda: next(clock)  # type: ignore[method-assign]
    p._last = -1.0
    p(1, 1, 100)   # the step starts at t = 0: no line yet (no rate to give)
    p(1, 50, 100)  # 50 clients in 2 s
    p(1, 100, 100)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0] == "secure aggregation step 1: 50/100 clients, 25 clients/s, ~2 s left in this step"
    assert lines[1].endswith("~0 s left in this step")
    # a new round's clients (the count starts again) restart the rate
    clock2 = iter([10.0, 12.0])
    p._clock = lambda: next(clock2)  # type: ignore[method-assign]
    p(1, 10, 100)
    p(1, 60, 100)
    assert out.getvalue().splitlines()[-1] == \
        "secure aggregation step 1: 60/100 clients, 30 clients/s, ~1 s left in this step"
    quiet = io.StringIO()
    q = ClientProgress(enabled=False, stream=quiet, log_interval=0.0)
    q(1, 1, 2)
    assert quiet.getvalue() == ""


def test_the_estimate_grows_with_the_population() -> None:
    from protocol.studies.runners import triehh

    tr = SecAggTransport(simulate=True)
    small, _ = triehh.prepare(triehh.TrieHHOptions(dataset="zipf", users=2_000, seed=1))
    large, _ = triehh.prepare(triehh.TrieHHOptions(dataset="zipf", users=200_000, seed=1))
    a, b = triehh.estimate_seconds(small, tr), triehh.estimate_seconds(large, tr)
    assert a is not None and b is not None and 0 < a < b
    assert triehh.estimate_seconds(small, __import__(
        "protocol.core.transports.plain", fromlist=["PlainTransport"]).PlainTransport()) is None


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_silences_stderr(quiet: bool, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["triehh", "--dataset", "zipf", "--users", "1000", "--transport", "secagg",
            "--seed", "1", "--max-length", "3"] + (["--quiet"] if quiet else [])
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "heavy hitters discovered" in out
    if quiet:
        assert err == ""


def test_a_session_predicted_long_is_announced_first() -> None:
    said: list[str] = []
    tr = SecAggTransport(simulate=True, threat="semi-honest")
    tr.estimate_say = said.append
    tr.PROBE_MIN_CLIENTS = 1  # type: ignore[misc] - probe even a small session
    tr.estimate_after = 0.0
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=1)
    tr.run_round(spec, Votes(np.array([0, 1, 1, 0, -1, 1])), np.random.default_rng(0))
    assert len(said) == 1 and said[0].startswith("estimate: this secure-aggregation session")
    a0, a1, b = tr._cost_model  # type: ignore[misc]
    assert a0 >= 0 and a1 > 0 and b >= 0
    # the prediction grows with the clients and with the vector length
    assert tr.predict_session_seconds(1000, 10) < tr.predict_session_seconds(5000, 10)
    assert tr.predict_session_seconds(1000, 10) <= tr.predict_session_seconds(1000, 10**6)
    # an estimate under the bar, or no listener, says nothing
    tr.estimate_after = 1e9
    tr.run_round(spec, Votes(np.array([0, 1, 1, 0, -1, 1])), np.random.default_rng(0))
    assert len(said) == 1


def test_the_estimate_is_calibrated_on_the_sessions_run() -> None:
    """After a session, predictions are the probes' model scaled by measured over
    predicted CPU of the sessions so far, and the announcement says so."""
    said: list[str] = []
    tr = SecAggTransport(simulate=True, threat="semi-honest")
    tr.estimate_say = said.append
    tr.PROBE_MIN_CLIENTS = 1  # type: ignore[misc]
    tr.estimate_after = 0.0
    tr._cost_model = (1.0, 0.0, 0.0)   # a model that says 1 s per client: far too high
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=1)
    votes = Votes(np.array([0, 1, 1, 0, -1, 1, 0, 1]))
    tr.run_round(spec, votes, np.random.default_rng(0))
    assert "calibrated" not in said[0] and tr.calibrated_sessions
    measured, predicted = tr._calibration
    assert predicted == 8.0 and 0 < measured < 8.0
    assert tr.predict_session_seconds(1000, 2) == pytest.approx(1000 * measured / 8.0)
    tr.run_round(spec, votes, np.random.default_rng(1))
    assert len(said) == 2 and "calibrated on the sessions run so far" in said[1]
    assert tr._calibration[1] == 16.0
    # a model never made (no probe): nothing to calibrate, nothing scaled
    fresh = SecAggTransport(simulate=True, threat="semi-honest")
    fresh.run_round(spec, votes, np.random.default_rng(0))
    assert not fresh.calibrated_sessions


def test_bench_triehh_runs_no_probe_inside_its_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from protocol.cli.commands import bench_triehh

    seen: list[object] = []

    def capture(opts, transport, *rest):  # noqa: ANN001, ANN002, ANN202
        seen.append(transport)
        return {"stop": True}

    from protocol.studies.runners import triehh

    monkeypatch.setattr(triehh, "benchmark", capture)
    monkeypatch.setattr(bench_triehh, "_print_human", lambda out: None)
    p = argparse.ArgumentParser()
    bench_triehh.register(type("Cli", (), {"subcommand": lambda self, *a, **k: p})())
    args = p.parse_args(["--transport", "secagg", "--users", "1000"])
    assert bench_triehh.run(args) == 0
    assert seen and getattr(seen[0], "estimate_say") is None


def test_the_estimate_says_cpu_and_the_wall_time_on_the_planned_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from protocol.core import cluster
    from protocol.studies.runners.triehh import cpu_phrase

    monkeypatch.setattr(cluster, "default_workers", lambda: 4)
    monkeypatch.setattr(cluster, "dask_available", lambda: True)
    one, two = SecAggTransport(workers=1), SecAggTransport(workers=2)
    auto = SecAggTransport()  # workers=None: all cores for sessions of >= 5000 clients
    assert one.planned_workers(10**5) == 1 and two.planned_workers(10) == 2
    assert auto.planned_workers(4999) == 1 and auto.planned_workers(5000) == 4
    assert cpu_phrase(600, one, 10**5) == "10 min of CPU"
    assert cpu_phrase(600, two, 10**5) == \
        "10 min of CPU (at best 5 min of wall time on 2 workers)"
    assert cpu_phrase(600, auto, 10**5).endswith("on 4 workers)")


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_run_in_a_log_says_round_clients_and_time_left_for_the_run() -> None:
    from protocol.studies.progress import RunProgress

    out, clock = io.StringIO(), _Clock()
    run = RunProgress(4, "TrieHH rounds", stream=out, log_interval=10.0, clock=clock)

    def rounds():  # each round takes 20 s of the fake clock, 10 clients inside it
        for r in range(4):
            for done in range(1, 11):
                clock.t += 2.0
                run.client(1, done, 10)
            yield r

    assert list(run(rounds())) == [0, 1, 2, 3]
    lines = out.getvalue().splitlines()
    # one line at most every 10 s of an 80 s run, each naming where the run is
    assert 6 <= len(lines) <= 9
    assert lines[0] == ("TrieHH rounds: 1/4, secure aggregation step 1: 5/10 clients, "
                        "10 s elapsed")
    later = [ln for ln in lines if ln.startswith("TrieHH rounds: 3/4")]
    assert later and "left for the run" in later[0]
    # after two rounds of 20 s, half-way through the third: ~30 s left
    assert any("~30 s left for the run" in ln for ln in later)


def test_a_short_run_in_a_log_prints_nothing_and_quiet_prints_nothing() -> None:
    from protocol.studies.progress import RunProgress

    out = io.StringIO()
    run = RunProgress(3, "levels", stream=out)
    assert list(run(iter(range(3)))) == [0, 1, 2]
    run.client(0, 1, 2)
    off = RunProgress(3, "levels", enabled=False, stream=out, log_interval=0.0)
    assert list(off(iter(range(3)))) == [0, 1, 2]
    off.client(0, 1, 1)
    assert out.getvalue() == ""


def test_client_progress_joins_the_run_line_while_rounds_run() -> None:
    from protocol.studies.progress import RunProgress

    out, clock = io.StringIO(), _Clock()
    run = RunProgress(2, "TrieHH rounds", stream=out, log_interval=1.0, clock=clock)
    own = io.StringIO()
    client = ClientProgress(stream=own, log_interval=0.0, label="shuffler")
    for _ in run(iter(range(2))):
        clock.t += 5.0
        client(2, 7, 9)
    assert own.getvalue() == ""  # nothing printed on its own while the run is active
    assert "TrieHH rounds: 2/2, shuffler step 2: 7/9 clients" in out.getvalue()


def test_the_shuffler_reports_its_clients_inside_a_round() -> None:
    from protocol.core.transports.shuffler_transport import ShufflerTransport

    calls: list[tuple[int, int, int]] = []
    tr = ShufflerTransport(simulate=True, client_chunk=3)
    tr.client_progress = lambda s, d, t: calls.append((s, d, t))
    spec = RoundSpec("p", 1, Kind.VOTE, candidates=("a", "b"), theta=1)
    tr.run_round(spec, Votes(np.array([0, 1, 1, 0, 1, 1, 0])), np.random.default_rng(1))
    encode = [d for s, d, _ in calls if s == 0]
    assert encode == [3, 6, 7]  # one call per chunk of encoded reports
    assert (1, 7, 7) in calls and calls[-1] == (2, 7, 7)
    assert {t for _, _, t in calls} == {7}


def test_the_api_shows_progress_on_a_terminal_and_not_when_told(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from protocol.studies import api

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    words = ["hello"] * 600 + ["world"] * 400
    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    api.triehh(words, seed=1, epsilon=4, delta=1e-4, max_length=3)
    assert "TrieHH rounds" in err.getvalue()
    err.seek(0)
    err.truncate()
    api.triehh(words, seed=1, epsilon=4, delta=1e-4, max_length=3, progress=False)
    assert err.getvalue() == ""


def test_a_run_that_stops_early_completes_and_states_the_time_left_as_a_bound() -> None:
    """TrieHH ends when the trie stops growing: 3 of at most 10 rounds here. The
    bar completes (3/3), the log ends with a line saying so, and no line printed a
    time left as if all 10 rounds would run."""
    from protocol.studies.progress import RunProgress

    out, clock = io.StringIO(), _Clock()
    run = RunProgress(10, "TrieHH rounds", stream=out, log_interval=5.0, clock=clock)

    def rounds():
        for r in range(3):
            clock.t += 20.0
            run.client(1, 5, 10)
            yield r

    assert list(run(rounds())) == [0, 1, 2]
    lines = out.getvalue().splitlines()
    assert lines[-1] == ("TrieHH rounds: 3/3 done (stopped after 3 of at most 10: nothing "
                         "left to extend), 60 s elapsed")
    timed = [ln for ln in lines if "left for the run" in ln]
    assert timed and all("at most ~" in ln for ln in timed)
    assert run.total == 3

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    bar_out = Tty()
    bar = RunProgress(10, "TrieHH rounds", stream=bar_out)
    seen = []
    for _ in bar(iter(range(4))):
        seen.append(bar._bar.total)
    assert seen == [10] * 4 and bar.total == 4
    text = bar_out.getvalue()
    assert "4/4" in text and "stopped early: 4 of at most 10" in text and "at most" in text
    assert "10/10" not in text


def test_a_run_that_uses_every_round_ends_its_log_with_one_done_line() -> None:
    from protocol.studies.progress import RunProgress

    out, clock = io.StringIO(), _Clock()
    run = RunProgress(2, "levels", stream=out, log_interval=5.0, clock=clock)

    def rounds():
        for r in range(2):
            clock.t += 10.0
            run.client(1, 1, 2)
            yield r

    list(run(rounds()))
    assert out.getvalue().splitlines()[-1] == "levels: 2/2 done, 20 s elapsed"
