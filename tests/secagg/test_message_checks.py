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


def _key_entry(i: int, sig: bytes = bytes(64)) -> list:  # type: ignore[type-arg]
    return [i, bytes([i % 256]) * 32, bytes([1 + i % 200]) * 32, bytes(32), sig]


@pytest.mark.parametrize("bad", [
    None,                                               # all well formed
    (2, [True] + _key_entry(2)[1:]),                    # a bool sender
    (2, [-1] + _key_entry(2)[1:]),
    (2, [MAX_PARTICIPANTS] + _key_entry(2)[1:]),
    (2, _key_entry(2)[:1] + [bytes(31)] + _key_entry(2)[2:]),   # short c_pk
    (2, _key_entry(2)[:2] + [bytearray(32)] + _key_entry(2)[3:]),  # not bytes
    (2, _key_entry(2)[:3] + [bytes(33)] + _key_entry(2)[4:]),   # long nonce
    (2, _key_entry(2, bytes(63))),                      # a 63-byte signature
    (2, _key_entry(2)[:4]),                             # four fields
    (2, tuple(_key_entry(2))),                          # not a list
    (1, _key_entry(0)),                                 # senders not increasing
])
def test_a_key_list_is_decoded_column_by_column_with_the_same_verdict(bad) -> None:  # type: ignore[no-untyped-def]
    """A key list's entries are checked as columns, then built; the result equals the
    entry-by-entry decode, and any malformed entry is refused with the error that decode
    gives."""
    from secagg import messages

    raw = [_key_entry(i, sig=bytes(64) if i % 2 else b"") for i in range(5)]
    if bad is not None:
        raw[bad[0]] = bad[1]
    fields = [raw, bytes(32), [bytes(32)] * 3]

    def entry_by_entry():  # type: ignore[no-untyped-def]
        return messages.KeyList(tuple(messages.AdvertiseKeys.from_wire(e) for e in raw),
                                bytes(32), [bytes(32)] * 3)

    if bad is None:
        got = messages.KeyList.from_wire(fields)
        assert got == entry_by_entry()
        assert all(type(e) is messages.AdvertiseKeys for e in got.entries)
        return
    assert messages._advertised_columns(raw) is None or bad[0] == 1
    with pytest.raises((TypeError, ValueError)) as want:
        entry_by_entry()
    with pytest.raises(type(want.value)) as got_exc:
        messages.KeyList.from_wire(fields)
    assert str(got_exc.value) == str(want.value)
