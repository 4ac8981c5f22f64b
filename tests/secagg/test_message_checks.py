"""The messages' field checks, done as whole-sequence passes, refuse exactly what the
entry-by-entry checks refused (every message is checked before any party acts on it)."""
from __future__ import annotations

import pytest

from secagg.client import SHARE_CIPHERTEXT_BYTES
from secagg.messages import RoutedShares, UnmaskShares
from secagg.shamir import SHARE_WIRE_BYTES
from secagg.state import MAX_PARTICIPANTS

CT = bytes(SHARE_CIPHERTEXT_BYTES)


def _routed(senders, cts):  # type: ignore[no-untyped-def]
    return RoutedShares(senders, cts)


def test_routed_shares_accept_a_well_formed_round() -> None:
    msg = _routed((1, 4, 9), (CT, CT, CT))
    assert msg.senders == (1, 4, 9) and msg.ciphertexts == (CT, CT, CT)
    assert _routed([], []).senders == ()


@pytest.mark.parametrize("senders", [
    (1, True, 9),             # a bool is no position
    (1, 4.0, 9),              # nor a float
    (-1, 4, 9),
    (1, 4, MAX_PARTICIPANTS),
    (1, 9, 4),                # not increasing
    (1, 4, 4),                # repeated
    (1, "4", 9),
])
def test_positions_refused(senders) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, TypeError)):
        _routed(senders, (CT, CT, CT))


@pytest.mark.parametrize("cts, error", [
    ((CT, bytearray(CT), CT), TypeError),     # bytes only
    ((CT, CT.decode("latin1"), CT), TypeError),
    ((CT, b"", CT), ValueError),               # below the ciphertext's minimum
    ((CT, bytes(257), CT), ValueError),        # above the bound
    ((CT, CT), ValueError),                    # one per sender
])
def test_ciphertexts_refused(cts, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error):
        _routed((1, 4, 9), cts)


def test_unmask_shares_check_every_share_length() -> None:
    share = bytes(SHARE_WIRE_BYTES)
    ok = UnmaskShares(3, (1, 2), (share, share), (5,), (share,))
    assert ok.b_shares == (share, share)
    for bad in (share[:-1], share + b"\0", bytearray(share)):
        with pytest.raises((ValueError, TypeError)):
            UnmaskShares(3, (1, 2), (share, bad), (5,), (share,))
        with pytest.raises((ValueError, TypeError)):
            UnmaskShares(3, (1, 2), (share, share), (5,), (bad,))
