"""The network prototype: secure aggregation between real processes over TLS.

* :mod:`~protocol.core.net.messages`: the handshake messages (Hello, Welcome, Bye);
* :mod:`~protocol.core.net.frames`: length-prefixed frames bounded per tag before
  they are read;
* :mod:`~protocol.core.net.tls`: ``fedhh keys`` (server certificate, client PKI), TLS
  1.3 contexts, certificate pinning;
* :mod:`~protocol.core.net.session`: what both sides derive from a session's name;
* :mod:`~protocol.core.net.server`, :mod:`~protocol.core.net.client`: the asyncio
  drivers around the sans-I/O state machines of :mod:`secagg`;
* :mod:`~protocol.core.net.processes`, :mod:`~protocol.core.net.launcher`: ``fedhh
  serve``, ``fedhh client`` and ``fedhh net run``.

See docs/network.md.
"""
