"""Transports fulfilling :class:`protocol.aggregation.Transport`."""
from __future__ import annotations

from protocol.aggregation import Transport


def get_transport(name: str, **options: object) -> Transport:
    """Look up a transport by name: ``plain``, ``secagg`` or ``shuffler``.

    Raises:
        ValueError: for an unknown name.
    """
    if name == "plain":
        from protocol.transports.plain import PlainTransport

        return PlainTransport(**options)  # type: ignore[arg-type]
    if name == "secagg":
        from protocol.transports.secagg_transport import SecAggTransport

        return SecAggTransport(**options)  # type: ignore[arg-type]
    if name == "shuffler":
        from protocol.transports.shuffler_transport import ShufflerTransport

        return ShufflerTransport(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown transport {name!r} (expected plain, secagg or shuffler)")
