"""Transports fulfilling :class:`protocol.core.contract.Transport`."""
from __future__ import annotations

from protocol.core.contract import Transport


def get_transport(name: str, *, corrupt: object = None, **options: object) -> Transport:
    """Look up a transport by name: ``plain``, ``secagg``, ``shuffler`` or
    ``threshold``; ``corrupt`` (a :class:`protocol.core.corruption.CorruptClients`)
    makes some of its clients corrupted in a simulation.

    Raises:
        ValueError: for an unknown name, or a ``corrupt`` that is not a
            ``CorruptClients``.
    """
    transport = _make(name, **options)
    if corrupt is not None:
        from protocol.core.corruption import CorruptClients

        if not isinstance(corrupt, CorruptClients):
            raise ValueError("corrupt must be a CorruptClients")
        transport.corrupt = corrupt
    return transport


def _make(name: str, **options: object) -> Transport:
    if name == "plain":
        from protocol.core.transports.plain import PlainTransport

        return PlainTransport(**options)  # type: ignore[arg-type]
    if name == "secagg":
        from protocol.core.transports.secagg_transport import SecAggTransport

        return SecAggTransport(**options)  # type: ignore[arg-type]
    if name == "shuffler":
        from protocol.core.transports.shuffler_transport import ShufflerTransport

        return ShufflerTransport(**options)  # type: ignore[arg-type]
    if name == "threshold":
        from protocol.core.transports.threshold import ThresholdTransport

        return ThresholdTransport(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown transport {name!r} (expected plain, secagg, shuffler or threshold)")
