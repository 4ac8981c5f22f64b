"""A whole TrieHH over the network: clients that vote themselves, the job server, the
clients' policy against a deviating server, and the loopback launcher with real
processes."""
from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from mechanisms.triehh import ClientVoter, TrieHH, TrieHHError
from protocol.core import codec
from protocol.core.contract import (
    AtClients, ContractError, Kind, RoundSpec, Transport, Votes, plaintext_transport,
)
from protocol.core.net import tls
from protocol.core.net.frames import FrameError, frame, read_message
from protocol.core.net.job import (
    JobPolicy, NetJobServer, NetworkTransport, round_context, run_job_client,
    run_job_clients, server_transcript, serving_job,
)
from protocol.core.net.messages import (
    PROTOCOL_VERSION, Bye, Hello, Task, hello_limits, task_limits,
)
from protocol.core.transports.secagg_transport import SecAggTransport
from protocol.studies.runners.triehh import TrieHHOptions, prepare

POP = 40


def _prep(**kw):
    base = dict(dataset="zipf", users=POP, seed=5, theta=2, gamma=3.0, max_length=4)
    base.update(kw)
    return lambda: prepare(TrieHHOptions(**base))


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobkeys")
    tls.make_keys(root, POP)
    return root


# ---------------------------------------------------------------- votes at the clients
class _Recording(Transport):
    """Plaintext, recording each round's choices."""

    name = "recording"
    kinds = frozenset({Kind.VOTE})

    def __init__(self) -> None:
        self.inner = plaintext_transport()
        self.choices: list[np.ndarray] = []

    def run_round(self, spec, contributions, rng):  # noqa: ANN001, ANN201
        self.choices.append(np.asarray(contributions.choice).copy())
        return self.inner.run_round(spec, contributions, rng)


class _ClientSide(_Recording):
    """Votes computed by ClientVoter from who was sampled, then plaintext."""

    name = "client-side"
    contributions_at_clients = True

    def __init__(self, voter: ClientVoter, population: int) -> None:
        super().__init__()
        self.voter, self.population = voter, population

    def run_round(self, spec, contributions, rng):  # noqa: ANN001, ANN201
        users = contributions.validate(spec, self.population)
        choice = self.voter.votes(users, spec.round, spec.candidates)
        return super().run_round(spec, Votes(choice), rng)


@pytest.mark.parametrize("kw", [
    dict(dataset="en", users=3000, theta=4, gamma=4.0, max_length=5),
    dict(dataset="en", users=3000, theta=3, gamma=4.0, max_length=6, unit_size=2),
    dict(dataset="zipf", users=2000, theta=3, gamma=3.0, max_length=3),
])
def test_client_votes_are_the_simulations_votes(kw):
    """ClientVoter (a device's label lookup) gives, round by round, exactly the choices
    the simulation finds through its node pointers, so the releases are identical;
    short L makes the end-of-word step at level L happen."""
    prep, rng = _prep(**kw)()
    local = _Recording()
    ref = TrieHH(prep.data, prep.alphabet, prep.config, local, rng).result()
    prep2, rng2 = _prep(**kw)()
    voter = ClientVoter(prep2.data, np.arange(prep2.n), prep2.alphabet, prep2.config.max_levels)
    remote = _ClientSide(voter, prep2.n)
    got = TrieHH.at_server(prep2.n, prep2.alphabet, prep2.config, remote, rng2).result()
    assert len(local.choices) == len(remote.choices) >= 2
    for a, b in zip(local.choices, remote.choices):
        np.testing.assert_array_equal(a, b)
    assert got.heavy_hitters == ref.heavy_hitters and got.prefixes == ref.prefixes
    assert sum((c >= 0).sum() for c in local.choices) > 0


def test_a_word_of_exactly_L_characters_is_voted_at_level_L():
    from mechanisms.prefix_tree import UnitAlphabet
    from mechanisms.triehh import encode_population

    alphabet = UnitAlphabet("abc")
    data = encode_population(["abc", "ab", "abca"], np.array([0, 1, 2, 3]),
                             np.array([0, 1, 2]), np.array([1, 1, 1]), alphabet, 3)
    voter = ClientVoter(data, [0, 1, 2], alphabet, 3)
    # level 3 is "abc"'s end-of-word step; "ab" votes "ab$" there; "abca" abstains
    assert voter.votes([0, 1, 2], 3, ("abc", "ab$", "abb")).tolist() == [0, 1, -1]
    assert voter.votes([0, 1, 2], 1, ("a", "b")).tolist() == [0, 0, 0]
    with pytest.raises(TrieHHError, match="not held"):
        ClientVoter(data, [0], alphabet, 3).votes([1], 1, ("a",))
    with pytest.raises(TrieHHError, match="level"):
        voter.votes([0], 4, ("a",))


def test_the_server_side_needs_a_transport_whose_clients_vote():
    prep, rng = _prep()()
    with pytest.raises(TrieHHError, match="needs the votes"):
        TrieHH.at_server(prep.n, prep.alphabet, prep.config, plaintext_transport(), rng)


def test_client_votes_are_validated():
    spec = RoundSpec("t", 1, Kind.VOTE, candidates=("a", "b"))
    assert AtClients(np.array([3, 1])).validate(spec, 5).tolist() == [3, 1]
    for bad, match in (([5], "outside"), ([1, 1], "distinct"), ([[1]], "1-d"),
                       ([-1], "outside")):
        with pytest.raises(ContractError, match=match):
            AtClients(np.array(bad)).validate(spec, 5)
    assert AtClients(np.array([1])).validate(RoundSpec("t", 1, Kind.VECTOR, dim=2), 5).size == 1
    with pytest.raises(ContractError, match="not reports"):
        AtClients(np.array([1])).validate(RoundSpec("t", 1, Kind.REPORT, report_size=2), 5)


# ---------------------------------------------------------------- the Task message
def test_task_is_bounded_by_the_population_and_candidate_cap():
    limits = task_limits(10, 4, max_dim=64)

    def task(**kw):
        fields = dict(job="t", round=1, candidates=("a",), theta=1, reveal_counts=False,
                      min_participants=1, dim=0, modulus_minus_one=0, sample=(0,))
        fields.update(kw)
        return Task(**fields)

    for ok in (task(candidates=("a", "b"), sample=(0, 5, 9)),
               task(candidates=(), dim=64, modulus_minus_one=255)):
        assert codec.decode(codec.encode(ok), limits=limits) == ok
    for refused in (task(candidates=tuple("abcde")), task(sample=(0, 10)),
                    task(candidates=(), dim=65, modulus_minus_one=255)):
        with pytest.raises(codec.CodecError):
            codec.decode(codec.encode(refused), limits=limits)
    for bad in (dict(sample=(3, 1)), dict(sample=(1, 1)), dict(candidates=("a", "a")),
                dict(candidates=()), dict(job=""), dict(dim=4, modulus_minus_one=1),
                dict(candidates=(), dim=4, modulus_minus_one=0)):
        with pytest.raises(ValueError):
            task(**bad)


def test_round_context_binds_spec_and_sample():
    spec = RoundSpec("t", 1, Kind.VOTE, candidates=("a", "b"), theta=2)
    base = round_context(spec, [1, 2, 3])
    assert base != round_context(spec, [1, 2, 4])
    assert base != round_context(RoundSpec("t", 2, Kind.VOTE, candidates=("a", "b"), theta=2),
                                 [1, 2, 3])
    assert base != round_context(RoundSpec("t", 1, Kind.VOTE, candidates=("a", "c"), theta=2),
                                 [1, 2, 3])
    assert len(base) == 32


# ---------------------------------------------------------------- a job in one process
def _run_job(keys, prep_fn, threat="malicious", clients=None, wait=20.0, join=10.0,
             dropout=0.0):
    """The job server in a thread, the clients in another; returns
    (TrieHH result, outcomes, transport)."""
    prep, rng = prep_fn()
    policy = JobPolicy(prep.config.task, prep.n, threat=threat, dropout=dropout)
    verify, signing = tls.load_pki(keys)
    server = NetJobServer(policy, tls.server_context(keys), verify_keys=verify,
                          stage_seconds=5, join_seconds=join)
    voter = ClientVoter(prep.data, np.arange(prep.n), prep.alphabet, prep.config.max_levels)
    ctx, pin = tls.client_context(keys)
    outcomes: list = []
    members = list(range(prep.n)) if clients is None else clients

    def start(port: int) -> None:
        def go() -> None:
            outcomes.extend(asyncio.run(run_job_clients(
                members, "127.0.0.1", port, policy, ctx, pin,
                lambda m, t: int(voter.votes([m], t.round, t.candidates)[0]),
                signing_keys=signing, verify_keys=verify, wait_seconds=wait)))
        th = threading.Thread(target=go)
        th.start()
        start.thread = th

    with serving_job(server, start) as transport:
        result = TrieHH.at_server(prep.n, prep.alphabet, prep.config, transport, rng).result()
    start.thread.join(30)
    assert not start.thread.is_alive()
    return result, outcomes, transport


def test_triehh_over_the_network_releases_what_the_simulation_releases(keys):
    result, outcomes, transport = _run_job(keys, _prep())
    prep, rng = _prep()()
    ref = TrieHH(prep.data, prep.alphabet, prep.config,
                 SecAggTransport(simulate=True, workers=1), rng).result()
    assert result.heavy_hitters == ref.heavy_hitters and result.prefixes == ref.prefixes
    assert ref.heavy_hitters, "the setting must find something"
    assert {o.status for o in outcomes} == {"finished"}
    m = result.m
    assert sum(o.sessions["completed"] for o in outcomes) == m * len(result.rounds)
    assert all(r.status == "completed" and r.threat == "malicious" for r in transport.reports)
    # the server's view: per round, exactly the sampled clients' vote counts
    voter = ClientVoter(prep.data, np.arange(prep.n), prep.alphabet, prep.config.max_levels)
    for r in server_transcript(transport):
        votes = voter.votes(r["in_sum"], r["round"], r["candidates"])
        assert r["sum"] == np.bincount(votes[votes >= 0],
                                       minlength=len(r["candidates"])).tolist()
        assert sorted(r["in_sum"]) == r["sample"]


def test_absent_clients_are_dropouts_and_the_sums_stay_exact(keys):
    # 3 of 40 never connect: every round they are sampled in, they are round-0
    # dropouts (parameters for up to 25% dropouts, as both sides' policy says)
    absent = {5, 17, 33}
    result, outcomes, transport = _run_job(keys, _prep(gamma=4.0),
                                           clients=[c for c in range(POP) if c not in absent],
                                           join=2.0, dropout=0.25)
    assert {o.status for o in outcomes} == {"finished"}
    prep, _ = _prep(gamma=4.0)()
    voter = ClientVoter(prep.data, np.arange(prep.n), prep.alphabet, prep.config.max_levels)
    rounds = server_transcript(transport)
    assert any(set(r["sample"]) & absent for r in rounds)
    for r in rounds:
        assert r["status"] == "completed"
        assert not set(r["in_sum"]) & absent
        votes = voter.votes(r["in_sum"], r["round"], r["candidates"])
        assert r["sum"] == np.bincount(votes[votes >= 0],
                                       minlength=len(r["candidates"])).tolist()


def test_the_network_transport_takes_only_client_votes(keys):
    policy = JobPolicy("triehh", POP)
    server = NetJobServer(policy, tls.server_context(keys),
                          verify_keys=tls.load_pki(keys, signing=False)[0])
    tr = NetworkTransport(server, asyncio.new_event_loop())
    spec = RoundSpec("triehh", 1, Kind.VOTE, candidates=("a", "b"))
    with pytest.raises(ContractError, match="AtClients"):
        tr.run_round(spec, Votes(np.array([0, 1, 1])), np.random.default_rng(0))
    from protocol.core.contract import AggregationAborted

    with pytest.raises(AggregationAborted, match="too_few_participants"):
        tr.run_round(spec, AtClients(np.array([0, 1])), np.random.default_rng(0))
    tr.loop.close()


# ---------------------------------------------------------------- a deviating server
def _fake_server(keys, frames_after_hello, linger: float = 5):
    """A TLS server that answers one client's Hello with the given frames, then
    waits ``linger`` seconds and closes; returns the client's outcome and the Hellos."""
    policy = JobPolicy("triehh", POP)

    async def main():
        got: list = []

        async def handle(reader, writer):
            hello, _ = await read_message(reader, hello_limits())
            got.append(hello)
            for f in frames_after_hello:
                writer.write(f)
            await writer.drain()
            await asyncio.sleep(linger)
            writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0,
                                         ssl=tls.server_context(keys))
        port = srv.sockets[0].getsockname()[1]
        ctx, pin = tls.client_context(keys)
        verify, signing = tls.load_pki(keys)
        out = await run_job_client(7, "127.0.0.1", port, policy, ctx, pin, lambda t: 0,
                                   signing_key=signing[7], verify_keys=verify,
                                   wait_seconds=3)
        srv.close()
        return out, got

    return asyncio.run(main())


def _task(**kw):
    fields = dict(job="triehh", round=1, candidates=("a", "b"), theta=2,
                  reveal_counts=False, min_participants=1, dim=0, modulus_minus_one=0,
                  sample=tuple(range(0, 12)))
    fields.update(kw)
    return frame(Task(**fields))


def test_a_client_refuses_another_jobs_task(keys):
    out, got = _fake_server(keys, [_task(job="other")])
    assert got == [Hello(PROTOCOL_VERSION, 7)]
    assert out.status == "aborted" and out.reason.startswith("job_mismatch")


def test_a_client_does_not_answer_an_old_round_again(keys):
    # sampled out in round 2, then offered round 1 again
    out, _ = _fake_server(keys, [_task(round=2, sample=(0, 1, 2)), _task(round=1)])
    assert out.status == "aborted" and out.reason.startswith("stale_round")


def test_a_client_refuses_a_tiny_sample(keys):
    out, _ = _fake_server(keys, [_task(sample=(6, 7))])
    assert out.status == "aborted" and out.reason.startswith("sample_too_small")


def test_a_client_refuses_a_welcome_with_weaker_parameters(keys):
    from protocol.core.net.session import NetSessionSpec

    spec = RoundSpec("triehh", 1, Kind.VOTE, candidates=("a", "b"), theta=2)
    sample = tuple(range(12))
    weak = JobPolicy("triehh", POP, threat="semi-honest").session(spec, sample)
    assert isinstance(weak, NetSessionSpec)
    welcome = frame(weak.welcome(b"\1" * 32, 5.0))
    out, _ = _fake_server(keys, [_task(), welcome])
    assert out.status == "refused" and "session_parameters_rejected" in out.reason


def test_a_client_refuses_a_welcome_for_another_round(keys):
    spec = RoundSpec("triehh", 1, Kind.VOTE, candidates=("a", "c"), theta=2)
    other = JobPolicy("triehh", POP).session(spec, tuple(range(12)))
    out, _ = _fake_server(keys, [_task(), frame(other.welcome(b"\1" * 32, 5.0))])
    assert out.status == "refused" and "context" in out.reason


def test_a_task_over_the_candidate_cap_is_refused_at_framing(keys):
    policy_cap = JobPolicy("triehh", POP).max_candidates
    big = _task(candidates=tuple(f"w{i}" for i in range(policy_cap + 1)))
    out, _ = _fake_server(keys, [big])
    assert out.status == "aborted" and "refused frame" in out.reason


def test_a_client_between_rounds_is_ended_by_the_servers_bye(keys):
    out, _ = _fake_server(keys, [_task(sample=(0, 1, 2)), frame(Bye("finished", ""))])
    assert out.status == "finished" and out.rounds_seen == 1


# ---------------------------------------------------------------- the job server's rules
def test_the_job_server_refuses_unknown_positions_and_messages_outside_a_session(keys):
    policy = JobPolicy("triehh", POP, threat="semi-honest")

    async def main():
        server = NetJobServer(policy, tls.server_context(keys), stage_seconds=2,
                              join_seconds=1)
        await server.start()
        ctx, _ = tls.client_context(keys)

        async def connect(position):
            r, w = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx,
                                                 server_hostname=tls.SERVER_NAME)
            w.write(frame(Hello(PROTOCOL_VERSION, position)))
            await w.drain()
            return r, w

        r1, w1 = await connect(POP + 3)  # not in the population
        bye, _ = await read_message(r1, task_limits(POP, 4))
        r2, w2 = await connect(4)
        await asyncio.sleep(0.2)
        # speaks while no session is open: the server closes it
        w2.write(frame(Hello(PROTOCOL_VERSION, 4)))
        await w2.drain()
        closed = await asyncio.wait_for(r2.read(), 5)
        await server.admit()
        await server.close()
        for w in (w1, w2):
            w.close()
        return bye, closed, server.refused

    bye, closed, refused = asyncio.run(main())
    assert isinstance(bye, Bye) and bye.status == "refused" and "population" in bye.reason
    assert closed == b""
    assert any(who == 4 and "refused frame" in why for who, why in refused)


def test_job_policy_values():
    with pytest.raises(ValueError):
        JobPolicy("t", 2)
    with pytest.raises(ValueError):
        JobPolicy("t", 10, min_clients=2)
    with pytest.raises(ValueError):
        JobPolicy("t", 10, threat="trusting")
    with pytest.raises(FrameError):
        # what a client accepts between rounds is a Task or a Bye, nothing else
        from protocol.core.net.frames import parse_header, HEADER

        parse_header(HEADER.pack(10, Hello.TAG), task_limits(10, 4))


# ---------------------------------------------------------------- real processes
def test_net_run_job_triehh_with_a_killed_client_process():
    from protocol.studies.runners.net_jobs import JobLoopbackOptions, run_job_loopback

    out = run_job_loopback(JobLoopbackOptions(
        dataset="zipf", users=200, processes=8, seed=3, theta=3, gamma=3.0, max_length=4,
        dropout_rate=0.25, kill=1, kill_round=2, compare=True, stage_seconds=10,
        # the join window closes as soon as everyone is there; 90 s lets eight processes
        # start on a loaded machine
        join_seconds=90, timeout=300))
    assert out["server_error"] is None, out["server_error"]
    assert out["left_behind"] == 0 and out["killed_processes"]
    rounds = out["result"]["network"]["rounds"]
    assert len(rounds) >= 2 and all(r["status"] == "completed" for r in rounds)
    assert out["rounds_exact"] == [True] * len(rounds) and out["wrong_results"] == 0
    # round 1 lost nobody, so it is exactly the simulation's first round
    assert rounds[0]["in_sum"] == rounds[0]["sampled"]
    assert out["simulation"]["released_per_round"][0] == out["result"]["rounds"][0]["released"]
    # from round 2 on the killed process's sampled clients are out of the sum
    assert any(r["in_sum"] < r["sampled"] for r in rounds[1:])


# ---------------------------------------------------------------- frequency oracles
def test_a_devices_reporter_checks_the_round_and_its_noise_is_its_own():
    from mechanisms.fo import ClientReporter, make_oracle, vector_modulus

    oracle = make_oracle("grr", 2.0, 10)
    values = np.arange(20) % 10
    seeded = ClientReporter(oracle, values, range(20), ClientReporter.seeded(7))
    v = seeded.vector(3, 0, oracle.vector_dim, vector_modulus(20), 20)
    assert v.shape == (oracle.vector_dim,) and int(v.sum()) == 1
    again = ClientReporter(oracle, values, range(20), ClientReporter.seeded(7))
    np.testing.assert_array_equal(v, again.vector(3, 0, oracle.vector_dim,
                                                  vector_modulus(20), 20))
    for bad in (dict(user=20), dict(dim=oracle.vector_dim + 1),
                dict(modulus=vector_modulus(20) * 2)):
        args = dict(user=3, round=0, dim=oracle.vector_dim, modulus=vector_modulus(20),
                    participants=20)
        args.update(bad)
        with pytest.raises(ValueError):
            seeded.vector(**args)
    # OS entropy: a device's noise is not a function of anything public (60 devices with
    # the same value draw different reports), and a device draws it once per job
    draws = {tuple(ClientReporter(oracle, np.zeros(1, dtype=np.int64), [0],
                                  ClientReporter.os_entropy).vector(
        0, 0, oracle.vector_dim, vector_modulus(1), 1)) for _ in range(60)}
    assert len(draws) > 1
    one = ClientReporter(oracle, np.zeros(1, dtype=np.int64), [0], ClientReporter.os_entropy)
    assert len({tuple(one.vector(0, r, oracle.vector_dim, vector_modulus(1), 1))
                for r in range(60)}) == 1 and one.reports_drawn == 1


def test_an_ldp_job_name_binds_the_oracles_public_parameters():
    from mechanisms.fo import make_oracle
    from protocol.studies.runners.ldp import job_name

    base = job_name(make_oracle("olh", 2.0, 50))
    assert base == job_name(make_oracle("olh", 2.0, 50))
    for other in (make_oracle("olh", 2.5, 50), make_oracle("olh", 2.0, 51),
                  make_oracle("olh", 2.0, 50, g=5), make_oracle("grr", 2.0, 50)):
        assert job_name(other) != base
    assert len(base.encode()) <= 64


def test_oracle_rounds_at_clients_need_a_transport_whose_clients_contribute():
    from mechanisms.fo import make_oracle, run_oracle_round_at_clients
    from protocol.studies.ldp_runner import LDPTransportError, run_ldp

    oracle = make_oracle("grr", 2.0, 10)
    with pytest.raises(ContractError, match="does not take vectors its clients compute"):
        run_oracle_round_at_clients(oracle, 10, plaintext_transport(),
                                    np.random.default_rng(0), task="t")
    with pytest.raises(LDPTransportError, match="needs the reports"):
        run_ldp(oracle, None, plaintext_transport(), np.random.default_rng(0))


def test_net_run_job_ldp_sums_exactly_what_the_devices_sent():
    from protocol.studies.runners.net_jobs import LDPLoopbackOptions, run_ldp_loopback

    out = run_ldp_loopback(LDPLoopbackOptions(
        mechanism="oue", users=120, domain=12, processes=3, seed=4, stage_seconds=20,
        join_seconds=30, timeout=240, compare=True))
    assert out["server_error"] is None, out["server_error"]
    assert out["left_behind"] == 0 and out["rounds_exact"] == [True]
    res = out["result"]
    r = res["network"]["rounds"][0]
    assert r["status"] == "completed" and r["in_sum"] == r["sampled"] == 120
    # unbiased estimates either way: both errors near the analytical variance
    var = res["mean_analytical_variance"]
    assert res["mse"] < 5 * var and out["simulation"]["mse"] < 5 * var


def test_a_client_refuses_a_round_too_small_for_its_threat_model(keys):
    """A Task whose sample is big enough for the policy but too small for any malicious
    parameters: the client refuses the Welcome instead of failing."""
    from protocol.core.contract import AggregationAborted

    sample = (5, 6, 7)  # the fake server's client is 7
    spec = RoundSpec("triehh", 1, Kind.VOTE, candidates=("a", "b"), theta=2)
    session = JobPolicy("triehh", POP).session(spec, sample)
    try:
        session.params()
    except AggregationAborted:
        pass
    else:
        pytest.skip("parameters exist for 3 clients under this threat model")
    from protocol.core.net.messages import Welcome

    # whatever parameters the server offers (here k = t = 2), the client derives none
    welcome = Welcome(PROTOCOL_VERSION, 3, 2, 2, "complete", True, 2, 255,
                      session.context(), b"\1" * 32, 5000)
    out, _ = _fake_server(keys, [_task(sample=sample), frame(welcome)])
    assert out.status == "refused" and "no_secagg_parameters" in out.reason, out


# ------------------------------------------------------------ the device's ledger
def test_a_device_answers_each_round_once_and_at_most_max_votes_rounds():
    from protocol.core.net.job import _task_problem
    from protocol.core.net.messages import Task

    def task(rnd, sample=(1, 2, 3, 7)):
        return Task("triehh", rnd, ("a", "b"), 2, False, 1, 0, 0, tuple(sample))

    policy = JobPolicy("triehh", POP, max_votes=2)
    assert _task_problem(task(3), policy, last_round=2, member=7, votes=1) is None
    assert _task_problem(task(2), policy, last_round=2, member=7, votes=1).startswith(
        "stale_round")
    assert _task_problem(task(1), policy, last_round=2, member=7, votes=0).startswith(
        "stale_round")
    assert _task_problem(task(3), policy, last_round=2, member=7, votes=2).startswith(
        "budget_spent")
    # a round it is not sampled in costs nothing
    assert _task_problem(task(3, (1, 2, 3)), policy, last_round=2, member=7, votes=2) is None
    assert _task_problem(task(3), JobPolicy("triehh", POP), 2, 7, 10**6) is None
    with pytest.raises(ValueError):
        JobPolicy("triehh", POP, max_votes=0)


def test_a_client_refuses_an_old_round(keys):
    out, _ = _fake_server(keys, [_task(round=2, sample=tuple(range(8, 20))),
                                 _task(round=2, sample=tuple(range(0, 12)))])
    assert out.status == "aborted" and out.reason.startswith("stale_round")
    assert out.votes == 0


def test_a_frequency_oracle_device_randomises_once_per_job():
    """Asked again (another round of the same job), a device sends the support vector of
    the same report: a server cannot average its noise away."""
    from mechanisms.fo import ClientReporter, vector_modulus
    from mechanisms.fo.olh import OLH

    oracle = OLH(epsilon=1.0, domain_size=50)
    values = np.arange(10) % 50
    reporter = ClientReporter(oracle, values, range(10), ClientReporter.os_entropy)
    mod = vector_modulus(10)
    first = [reporter.vector(u, 1, oracle.vector_dim, mod, 10) for u in range(10)]
    again = [reporter.vector(u, r, oracle.vector_dim, mod, 10)
             for r in (2, 3) for u in range(10)]
    assert all(np.array_equal(a, first[i % 10]) for i, a in enumerate(again))
    assert reporter.reports_drawn == 10


@pytest.mark.parametrize("frames, reason", [
    ((), "closed_before_admission"),          # closed before a single frame
    ((_task(),), "IncompleteReadError"),      # closed after it had spoken
])
def test_a_server_that_closes_before_saying_anything_is_told_apart(keys, frames, reason):
    """A server that reads the Hello and closes without a frame (it stopped before
    admitting the device, or died) is ``closed_before_admission`` for the device (the
    one line says so), not a bare IncompleteReadError; once the server has sent a frame
    a closed connection stays what it was."""
    out, _ = _fake_server(keys, frames, linger=0)
    assert out.status in ("disconnected", "aborted"), out
    if reason == "closed_before_admission":
        assert (out.status, out.reason) == ("disconnected", reason)
    else:
        assert out.reason != "closed_before_admission", out
