"""Transports fulfilling :class:`protocol.core.contract.Transport`."""
from __future__ import annotations

from protocol.core.contract import Transport


def get_transport(name: str, **options: object) -> Transport:
    """Look up a transport by name: ``plain``, ``secagg``, ``shuffler`` or
    ``threshold``.

    Raises:
        ValueError: for an unknown name.
    """
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
