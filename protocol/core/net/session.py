"""What server and clients of a networked session agree on before they connect.

A :class:`NetSessionSpec` names the session (``n``, vector length, modulus, threat
model, graph, a context label) and derives everything else the way the in-process
transport does (:class:`protocol.core.transports.secagg_transport.SecAggSessionOptions`):
the threshold and degree for the threat model, the context bytes. The server turns it
into a :class:`~protocol.core.net.messages.Welcome` with a fresh nonce; a client derives
the same parameters on its own and refuses a Welcome that differs in anything
(:meth:`NetSessionSpec.accept`), so a server cannot lower the threshold, change the
graph, switch off the malicious-server variant or replay an old attempt's nonce
unnoticed (the nonce is fresh per attempt; every session id depends on it).

:func:`demo_input` gives client ``i`` of a seeded experiment its input vector, so that a
launcher can check the release exactly without ever holding the inputs in the server.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from protocol.core.net.messages import PROTOCOL_VERSION, Welcome
from protocol.core.transports.secagg_transport import SecAggSessionOptions
from secagg.params import SecAggParams
from secagg.state import SessionConfig

__all__ = ["NetSessionSpec", "SessionRejected", "demo_input"]


class SessionRejected(Exception):
    """A Welcome that does not match what this client requires; ``reason`` names it."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class NetSessionSpec:
    """One networked secure-aggregation session, as both sides configure it.

    Raises:
        ValueError: bad values (checked on construction).
    """

    n: int
    dim: int = 1000
    modulus: int = 1 << 32
    threat: str = "malicious"
    graph: str = "harary"
    label: str = "fedhh network session"
    #: the dropout rate the parameters must tolerate (``delta``; at least the default)
    dropout: float = 0.0
    #: the session's context, when it is not SHA-256 of ``label`` (a job's round binds
    #: its specification and sample: :func:`protocol.core.net.job.round_context`)
    context_digest: bytes | None = None
    #: the last ``required`` positions must be in every survivor set (the thresholding
    #: committee's two helpers: a client refuses to unmask a sum without them)
    required: int = 0

    def __post_init__(self) -> None:
        if type(self.n) is not int or self.n < 3:
            raise ValueError("a networked session needs n >= 3 clients")
        if type(self.dim) is not int or self.dim < 1:
            raise ValueError("dim must be a positive int")
        if type(self.modulus) is not int or not 2 <= self.modulus <= 1 << 64:
            raise ValueError("modulus must be in [2, 2**64]")
        if self.context_digest is not None and (type(self.context_digest) is not bytes
                                                or len(self.context_digest) != 32):
            raise ValueError("context_digest must be 32 bytes")
        if type(self.required) is not int or not 0 <= self.required < self.n:
            raise ValueError("required must be an int in [0, n)")
        # validates threat, graph and dropout
        SecAggSessionOptions(graph=self.graph, threat=self.threat, dropout=self.dropout)

    @property
    def options(self) -> SecAggSessionOptions:
        return SecAggSessionOptions(graph=self.graph, threat=self.threat, dropout=self.dropout)

    @property
    def malicious(self) -> bool:
        return self.threat == "malicious"

    def params(self) -> SecAggParams:
        """The parameters the threat model requires for ``n``.

        Raises:
            protocol.core.contract.AggregationAborted: ``no_secagg_parameters``.
        """
        return self.options.session_params(self.n)

    def context(self) -> bytes:
        if self.context_digest is not None:
            return self.context_digest
        return hashlib.sha256(b"fedhh/net/session/v1\x00" + self.label.encode()).digest()

    def config(self, server_nonce: bytes, params: SecAggParams | None = None) -> SessionConfig:
        return SessionConfig(params or self.params(), tuple(range(self.n)), self.context(),
                             self.dim, self.modulus, malicious=self.malicious,
                             required=frozenset(range(self.n - self.required, self.n)),
                             server_nonce=server_nonce)

    def welcome(self, server_nonce: bytes, stage_seconds: float,
                params: SecAggParams | None = None) -> Welcome:
        p = params or self.params()
        return Welcome(PROTOCOL_VERSION, self.n, p.degree, p.threshold, p.graph,
                       self.malicious, self.dim, self.modulus - 1, self.context(),
                       server_nonce, max(1, int(stage_seconds * 1000)))

    def accept(self, welcome: Welcome, params: SecAggParams | None = None) -> SessionConfig:
        """The session a Welcome offers, if it is exactly the one this spec requires.

        Raises:
            SessionRejected: ``version_mismatch`` or ``session_parameters_rejected``
                (naming the first field that differs).
        """
        if welcome.version != PROTOCOL_VERSION:
            raise SessionRejected("version_mismatch",
                                  f"server speaks {welcome.version}, client {PROTOCOL_VERSION}")
        p = params or self.params()
        mine = {"n": self.n, "degree": p.degree, "threshold": p.threshold, "graph": p.graph,
                "malicious": self.malicious, "dim": self.dim,
                "modulus_minus_one": self.modulus - 1, "context": self.context()}
        for name, value in mine.items():
            theirs = getattr(welcome, name)
            if theirs != value:
                raise SessionRejected("session_parameters_rejected",
                                      f"{name} is {theirs!r}, this client requires {value!r}")
        return self.config(welcome.server_nonce, p)


def demo_input(seed: int, client: int, dim: int, modulus: int) -> np.ndarray:
    """Client ``client``'s input in a seeded experiment: ``dim`` integers uniform in
    ``[0, modulus)``, from its own stream (so each process computes only its clients')."""
    from protocol.core.secagg_shards import SeededRows

    return SeededRows(seed, dim, modulus)(int(client))
