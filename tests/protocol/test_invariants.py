"""Each transcript invariant holds on honest runs (with dropouts, both variants) and
catches a hand-corrupted transcript, so the checks can fail."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from protocol.studies.attacks.secagg_attacks import Eavesdropper, _rewrite_unmask
from protocol.core.invariants import (
    InvariantViolation, check_no_double_reveal, check_no_send_after_abort,
    check_no_unmaskable_peer, check_release_matches_reference, check_secagg_transcript,
)
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import SERVER, Dropout, EnvelopeRecord, make_config, run_secagg
from secagg.state import ClientState


def _clone(run):
    """A deep copy of the run's data (the party objects are not copyable)."""
    return dataclasses.replace(
        run, transcript=copy.deepcopy(run.transcript), sets=dict(run.sets),
        result=None if run.result is None else run.result.copy(),
        client_states=list(run.client_states),
        client_abort_reasons=dict(run.client_abort_reasons), clients=[], server=None)


def _run(seed=0, malicious=False, graph="complete", dropout=None, adversary=None, n=8):
    cfg = make_config(n, 4, graph=graph, degree=None if graph == "complete" else 6,
                      threshold=3, malicious=malicious)
    x = np.random.default_rng(seed).integers(0, cfg.modulus, (n, 4), dtype=np.uint64)
    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(seed), dropout=dropout,
                     adversary=adversary)
    return run, x


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("graph", ["complete", "harary"])
def test_honest_runs_with_dropouts_satisfy_every_invariant(malicious, graph):
    drop = Dropout({1: {1}, 2: {2}, 4: {5}} if not malicious else {1: {1}, 3: {2}})
    run, x = _run(1, malicious, graph, drop, n=12)
    assert run.completed
    check_secagg_transcript(run, x)


def test_double_reveal_is_caught():
    run, x = _run(2)
    check_no_double_reveal(run)
    bad = _clone(run)
    c = next(iter(bad.transcript.reveals))
    b, s = bad.transcript.reveals[c]
    peer = next(iter(b))
    bad.transcript.reveals[c] = (b, s + (peer,))
    with pytest.raises(InvariantViolation) as e:
        check_secagg_transcript(bad, x, collective=False)
    assert e.value.invariant == "no_double_reveal"


def test_send_after_abort_is_caught():
    run, _ = _run(3, adversary=Eavesdropper(_rewrite_unmask(lambda r, a, d: (a, d | {3}))))
    assert all(s is ClientState.ABORTED for s in run.client_states)
    check_no_send_after_abort(run)
    bad = _clone(run)
    bad.transcript.envelopes.append(EnvelopeRecord(0, SERVER, 4, "UnmaskShares", 100))
    with pytest.raises(InvariantViolation, match="after sending its round-4 shares"):
        check_no_send_after_abort(bad)


def test_abort_reason_bounds_the_rounds_sent():
    """A client that aborted on its key list (round 0) cannot have sent round 1."""
    from secagg.state import AbortReason
    run, _ = _run(4, adversary=Eavesdropper(_rewrite_unmask(lambda r, a, d: (a, d | {3}))))
    bad = _clone(run)
    bad.client_abort_reasons[0] = AbortReason.TOO_FEW_KEYS
    with pytest.raises(InvariantViolation, match="too_few_keys"):
        check_no_send_after_abort(bad)


def test_skipped_or_repeated_round_is_caught():
    run, _ = _run(5)
    bad = _clone(run)
    bad.transcript.envelopes = [e for e in bad.transcript.envelopes
                                if not (e.sender == 2 and e.round == 1)]
    with pytest.raises(InvariantViolation, match="not a prefix"):
        check_no_send_after_abort(bad)
    bad = _clone(run)
    bad.transcript.envelopes.append(EnvelopeRecord(1, SERVER, 2, "MaskedInput", 10))
    with pytest.raises(InvariantViolation):
        check_no_send_after_abort(bad)


def test_wrong_release_is_caught():
    run, x = _run(6, dropout=Dropout({2: {4}}))
    check_release_matches_reference(run, x)
    bad = _clone(run)
    bad.result = bad.result.copy()
    bad.result[1] = (int(bad.result[1]) + 1) % run.config.modulus
    with pytest.raises(InvariantViolation, match="coordinate 1"):
        check_release_matches_reference(bad, x)
    # the reference is over U3: including the dropped client must also fail
    bad2 = _clone(run)
    bad2.sets["U3"] = frozenset(range(run.config.n))
    with pytest.raises(InvariantViolation):
        check_release_matches_reference(bad2, x)


def test_split_view_leak_is_caught_by_the_collective_check():
    group_b = {4, 5, 6}

    def split(r, alive, dropped):
        return (alive - {3}, dropped | {3}) if r in group_b else (alive, dropped)

    run, x = _run(7, n=7, adversary=Eavesdropper(_rewrite_unmask(split)))
    check_secagg_transcript(run, x, collective=False)   # per-client invariants hold
    with pytest.raises(InvariantViolation) as e:
        check_no_unmaskable_peer(run)
    assert e.value.invariant == "no_unmaskable_peer" and "peer 3" in e.value.details


def test_run_secagg_checks_the_client_invariants(monkeypatch):
    """A client that forgets the one-share-per-peer rule is caught by the run itself."""
    from secagg import client as client_mod

    orig = client_mod.SecAggClient._on_unmask

    def leaky(self, msg):
        # one message cannot carry both shares of a peer (UnmaskShares refuses it), so
        # this client sends a second one with the b-shares of the peers it reported dropped
        held_b = dict(self._held_b)  # the honest handler forgets the shares it held
        (out,) = orig(self, msg)
        extra = tuple(v for v in out.s_owners if v in held_b)
        return [out, dataclasses.replace(out, b_owners=extra, s_owners=(), s_shares=(),
                                         b_shares=tuple(held_b[v] for v in extra))]

    cfg = make_config(8, 4, threshold=3)
    x = np.ones((8, 4), dtype=np.uint64)
    drop = Dropout({2: {4}})  # client 4 shared its keys, then dropped: its s key is rebuilt
    assert run_secagg(cfg, x, rand=insecure_deterministic_randomness(5), dropout=drop).completed
    monkeypatch.setattr(client_mod.SecAggClient, "_on_unmask", leaky)
    with pytest.raises(InvariantViolation) as e:
        run_secagg(cfg, x, rand=insecure_deterministic_randomness(5), dropout=drop)
    assert e.value.invariant == "no_double_reveal"
    # the check can be turned off (attack demonstrations inspect such runs themselves)
    run = run_secagg(cfg, x, rand=insecure_deterministic_randomness(5), dropout=drop,
                     check_invariants=False)
    assert run.transcript.revealed_both(0, 4)
