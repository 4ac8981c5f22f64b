"""The batch lifecycle table, and its one too-small rule in both shufflers."""
from __future__ import annotations

import itertools

import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from shuffler import (
    BatchTooSmall, Blinder, DecryptorKey, Encoder, EnvelopeRejected, KeyPair, RejectReason, Shuffler,
    ShufflerError, encrypt_crowd,
)
from shuffler.blinded import CrowdShuffler
from shuffler.lifecycle import (
    FINAL_STATES, TRANSITIONS, BatchEvent, BatchRecord, BatchState, close_event, step,
)

from shuffler_support import Setup

# which class holds a batch in each non-final state
_HOLDER = {BatchState.OPEN: Shuffler, BatchState.OPEN_BLINDED: Shuffler,
           BatchState.RECEIVED: CrowdShuffler}


def test_table_names_existing_handlers_and_reads_as_a_diagram() -> None:
    for (state, event), (handler, after) in TRANSITIONS.items():
        assert state not in FINAL_STATES, "a final state has no way out"
        assert callable(getattr(_HOLDER[state], handler)), (state, event, handler)
        assert after in _HOLDER or after in FINAL_STATES
        # the too-small event always drops the whole batch
        if event is BatchEvent.BELOW_MINIMUM:
            assert (handler, after) == ("_drop", BatchState.DROPPED)
    # every open state can be closed below the minimum, and every state is reachable
    for state in _HOLDER:
        assert (state, BatchEvent.BELOW_MINIMUM) in TRANSITIONS
    assert {t.next_state for t in TRANSITIONS.values()} | set(_HOLDER) == set(BatchState)


class _Recorder:
    """A stand-in holder that records which handler ran."""

    def __init__(self, fail: bool = False) -> None:
        self.ran: list[str] = []
        self.final: list[BatchState] = []
        self.fail = fail

    def __getattr__(self, name: str):  # noqa: ANN204
        def handler(batch: BatchRecord, *args: object) -> str:
            self.ran.append(name)
            if self.fail:
                raise ShufflerError("handler refused")
            return name
        return handler

    def _finished(self, batch: BatchRecord) -> None:
        self.final.append(batch.state)


def test_dispatcher_sets_the_state_and_refuses_pairs_not_in_the_table() -> None:
    ctx = Setup().context
    for state, event in itertools.product(BatchState, BatchEvent):
        b = BatchRecord(ctx, state)
        owner = _Recorder()
        entry = TRANSITIONS.get((state, event))
        if entry is None:
            with pytest.raises(ShufflerError, match="no transition"):
                step(owner, b, event)
            assert b.state is state and owner.ran == []
        else:
            assert step(owner, b, event) == entry.handler
            assert b.state is entry.next_state and owner.ran == [entry.handler]
            assert owner.final == ([entry.next_state] if entry.next_state in FINAL_STATES
                                   else [])
            # a handler that raises leaves the state as it was
            b2 = BatchRecord(ctx, state)
            with pytest.raises(ShufflerError, match="handler refused"):
                step(_Recorder(fail=True), b2, event)
            assert b2.state is state


def test_close_event_checks_the_request_before_the_size() -> None:
    b = BatchRecord(Setup().context, BatchState.OPEN)
    assert close_event(b, BatchEvent.CLOSE, 1) is BatchEvent.BELOW_MINIMUM
    b.inner.append(b"x")
    assert close_event(b, BatchEvent.CLOSE, 1) is BatchEvent.CLOSE
    b.inner.clear()
    with pytest.raises(ShufflerError, match="close_blinded"):  # misuse, never a drop
        close_event(b, BatchEvent.CLOSE_BLINDED, 1)


def _blinded_setup(n: int, seed: int = 4):  # noqa: ANN202
    rand = insecure_deterministic_randomness(seed)
    s1, a = KeyPair.generate(rand), KeyPair.generate(rand)
    s2 = DecryptorKey.generate(rand)
    enc = Encoder(s1.public_key, a.public_key, "words", 7, 8, rand, blinded=True)
    items = [b"a"] * n
    crowds = [encrypt_crowd(x, enc.context.header, s2.public, rand) for x in items]
    return rand, s1, s2, enc, enc.encode_batch(items, crowds)


def test_too_small_keyed_batch_is_dropped_with_a_receipt() -> None:
    st = Setup()
    s = Shuffler(st.s_keys, st.rand, min_batch_size=4)
    s.open_batch(st.context)
    envs = st.encoder.encode_batch([b"a", b"b", b"b"], [st.crowd.crowd_id(x) for x in
                                                       (b"a", b"b", b"b")])
    s.submit_many(envs + [b"garbage"])
    with pytest.raises(BatchTooSmall) as e:
        s.close_batch(st.context)
    r = e.value.receipt
    assert (r.received, r.forwarded, r.crowds, r.crowds_forwarded) == (3, 0, 2, 0)
    assert r.dropped_by_threshold == {"batch_discarded": 3}
    assert s.state(st.context) is BatchState.DROPPED


def test_too_small_blinded_batch_is_dropped_at_shuffler_1() -> None:
    rand, s1, s2, enc, envs = _blinded_setup(3)
    first = Shuffler(s1, rand, min_batch_size=5)
    first.open_batch(enc.context)
    first.submit_many(envs)
    # a keyed close of a blinded batch is a misuse: refused, nothing changes
    with pytest.raises(ShufflerError, match="no transition for 'close'"):
        first.close_batch(enc.context)
    assert first.state(enc.context) is BatchState.OPEN_BLINDED
    assert first.pending(enc.context) == 3
    with pytest.raises(BatchTooSmall) as e:
        first.close_blinded_batch(enc.context, Blinder(s2.public, rand))
    r = e.value.receipt
    assert r.forwarded == 0 and r.dropped_by_threshold == {"batch_discarded": 3}
    assert r.crowds == 0  # shuffler 1 cannot tell blinded crowds apart
    assert first.state(enc.context) is BatchState.DROPPED
    with pytest.raises(EnvelopeRejected) as rej:  # the batch cannot be revived
        first.submit(envs[0])
    assert rej.value.reason is RejectReason.UNKNOWN_CONTEXT


def test_too_small_batch_is_dropped_at_shuffler_2_the_same_way() -> None:
    rand, s1, s2, enc, envs = _blinded_setup(4)
    first = Shuffler(s1, rand)
    first.open_batch(enc.context)
    first.submit_many(envs)
    out1 = first.close_blinded_batch(enc.context, Blinder(s2.public, rand))
    assert first.state(enc.context) is BatchState.FORWARDED
    second = CrowdShuffler(s2, rand, min_batch_size=5)
    with pytest.raises(BatchTooSmall) as e:
        second.process(out1.batch)
    r = e.value.receipt
    assert (e.value.accepted, e.value.minimum) == (4, 5)
    assert (r.received, r.forwarded, r.crowds, r.crowds_forwarded) == (4, 0, 1, 0)
    assert r.dropped_by_threshold == {"batch_discarded": 4}
    assert second.state(enc.context) is BatchState.DROPPED
    # dropped is final: the same batch cannot be resubmitted
    with pytest.raises(ShufflerError, match="already processed \\(dropped\\)"):
        second.process(out1.batch)


def test_shuffler_2_counts_refusals_in_a_dropped_batch() -> None:
    from shuffler.messages import BlindedBatch

    rand, s1, s2, enc, envs = _blinded_setup(3)
    first = Shuffler(s1, rand)
    first.open_batch(enc.context)
    first.submit_many(envs)
    b = first.close_blinded_batch(enc.context, Blinder(s2.public, rand)).batch
    # a repeated inner layer is refused; the rest is below the minimum
    replayed = BlindedBatch(b.context, b.crowds + b.crowds[:1], b.inner + b.inner[:1])
    with pytest.raises(BatchTooSmall) as e:
        CrowdShuffler(s2, rand, min_batch_size=4).process(replayed)
    r = e.value.receipt
    assert r.rejected == {RejectReason.DUPLICATE_INNER.value: 1}
    assert r.received == 4 and r.dropped_by_threshold == {"batch_discarded": 3}
