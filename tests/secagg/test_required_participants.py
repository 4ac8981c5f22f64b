"""SessionConfig.required: clients refuse to unmask a sum without the required positions."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Dropout, make_config, run_secagg
from secagg.errors import ParameterError
from secagg.state import AbortReason, ServerState


NONCE = bytes(range(32))


def _config(required: frozenset[int]):  # noqa: ANN202
    return dataclasses.replace(make_config(8, 3, modulus=1 << 16, server_nonce=NONCE),
                               required=required)


def test_required_is_bound_into_the_session_id() -> None:
    base = make_config(8, 3, modulus=1 << 16, server_nonce=NONCE)
    assert _config(frozenset()).base_session == base.base_session
    assert _config(frozenset()).session == base.session
    assert _config(frozenset({6, 7})).base_session != base.base_session
    assert _config(frozenset({6, 7})).session != base.session
    assert _config(frozenset({6, 7})).base_session != _config(frozenset({6})).base_session
    with pytest.raises(ParameterError):
        _config(frozenset({8}))


@pytest.mark.parametrize("drop_round", [0, 1, 2])
def test_clients_refuse_a_survivor_set_without_a_required_position(drop_round: int) -> None:
    inputs = np.ones((8, 3), dtype=np.uint64)
    rand = insecure_deterministic_randomness(1, "required")
    run = run_secagg(_config(frozenset({6, 7})), inputs, rand=rand,
                     dropout=Dropout({drop_round: {7}}))
    assert run.server_state is ServerState.ABORTED and run.result is None
    reasons = set(run.client_abort_reasons.values())
    if drop_round == 2:  # the masked input never arrived: the survivor set lacks 7
        assert reasons == {AbortReason.REQUIRED_PARTICIPANT_MISSING}
    else:  # earlier: the clients already exclude it, and still refuse
        assert AbortReason.REQUIRED_PARTICIPANT_MISSING in reasons
    # nobody revealed a b-share (the sum was never unmasked)
    assert not any(b for b, _ in run.transcript.reveals.values())


def test_other_dropouts_keep_their_behaviour() -> None:
    inputs = np.ones((8, 3), dtype=np.uint64)
    rand = insecure_deterministic_randomness(2, "required")
    run = run_secagg(_config(frozenset({6, 7})), inputs, rand=rand,
                     dropout=Dropout({2: {0}}))
    assert run.completed and run.result.tolist() == [7, 7, 7]
