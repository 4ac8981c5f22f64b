"""SecAggSimulation driven a phase at a time gives what run_secagg gives in one call."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Dropout, SecAggSimulation, make_config, run_secagg
from secagg.errors import SecAggError
from secagg.state import ServerState


@pytest.mark.parametrize("malicious", [False, True])
def test_phases_match_run_secagg(malicious: bool) -> None:
    cfg = make_config(8, 5, malicious=malicious)
    x = np.random.default_rng(1).integers(0, cfg.modulus, (cfg.n, cfg.dim), dtype=np.uint64)
    dropout = Dropout({2: {3}})
    whole = run_secagg(cfg, x, rand=insecure_deterministic_randomness(4), dropout=dropout)

    seen: list[tuple[int, str, int]] = []

    def hook(round_no, direction, envs):  # noqa: ANN001, ANN202  (passes everything on)
        seen.append((round_no, direction, len(envs)))
        return envs

    sim = SecAggSimulation(cfg, x, rand=insecure_deterministic_randomness(4), dropout=dropout,
                           adversary=hook)
    sim.start()
    assert not sim.finished and sim.server.state is ServerState.COLLECT_KEYS
    assert len(sim.pending) == cfg.n  # round 0 held for the hook until the round closes
    states = []
    while not sim.finished:
        sim.step()
        states.append(sim.server.state)
    assert states[-1] is ServerState.COMPLETED
    assert len(states) == (5 if malicious else 4)  # one step per server round
    with pytest.raises(SecAggError, match="over"):
        sim.step()
    stepped = sim.result()
    assert whole.completed and stepped.completed
    assert np.array_equal(whole.result, stepped.result)
    assert whole.survivors == stepped.survivors == frozenset(range(8)) - {3}
    # the same envelopes (streamed without a hook, batched per round with one)
    assert sorted((e.sender, e.recipient, e.round, e.kind, e.size)
                  for e in whole.transcript.envelopes) == sorted(
        (e.sender, e.recipient, e.round, e.kind, e.size) for e in stepped.transcript.envelopes)
    assert np.array_equal(whole.bytes_up, stepped.bytes_up)
    # the hook saw every round in both directions (no round 3 without the consistency check)
    rounds = [0, 1, 2, 3, 4] if malicious else [0, 1, 2, 4]
    assert [r for r, d, _ in seen if d == "up"] == rounds
    assert [r for r, d, _ in seen if d == "down"] == rounds


def test_the_envelope_log_keeps_records_in_columns() -> None:
    """The transcript's envelope log reads back what was recorded: iteration, indexing
    (negative too), slices and length as a list of EnvelopeRecord would."""
    from protocol.core.secagg_transcript import EnvelopeLog, EnvelopeRecord

    recs = [EnvelopeRecord(-1, 3, 1, "KeyList", 500), EnvelopeRecord(3, -1, 1, "ShareKeys", 2900),
            EnvelopeRecord(70000, -1, 2, "MaskedInput", 1 << 40)]
    log = EnvelopeLog(recs)
    assert list(log) == recs and len(log) == 3
    assert log[1] == recs[1] and log[-1] == recs[-1] and log[0:2] == recs[:2] and log[::-1] == recs[::-1]
    with pytest.raises(IndexError):
        log[3]
    with pytest.raises(IndexError):
        log[-4]
    log.add(5, -1, 4, "KeyList", 7)
    assert log[3] == EnvelopeRecord(5, -1, 4, "KeyList", 7) and len(log._kinds) == 3
