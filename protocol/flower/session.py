"""What a Flower ServerApp and ClientApp agree on before a secure-aggregation session,
without importing Flower (docs/flower.md).

* :class:`Policy`: the threat model a side holds, from which the SecAgg+ degree and
  threshold follow (:func:`secagg.params.find_params`, malicious server by default).
  The ClientApp recomputes the parameters for the announced number of nodes from its
  own policy and refuses an offer with any other parameters, so a server cannot lower
  the threshold or the degree it runs with.
* :class:`Quantiser`: float updates to integers modulo ``R`` with Flower's options and
  their meaning (``SecAggPlusWorkflow``: ``clipping_range``, ``quantization_range``,
  ``modulus_range``, ``max_weight``): each node sends ``[q_w, q(w x / W)]`` with
  ``q_w = round(w / W * Q)`` and ``q(v) = stochastic rounding of (clip(v, -c, c) + c)
  Q / (2c)``; the server recovers ``sum w x / sum w`` from the sums. Unlike Flower, a
  session whose sums could wrap the modulus (``n Q >= R``) is refused, and so is a
  weight above ``max_weight``: the sums are exact.
* :class:`Offer`: the session the server proposes (roster of Flower node ids, the PKI
  identity of each position, parameters, vector length, modulus, the server's fresh
  nonce, and the application's description). Its canonical encoding is hashed into the
  session's context (:meth:`Offer.context`), so every session id, signature and
  ciphertext is bound to it.
* The PKI of the malicious-server variant (:func:`write_pki`, :func:`load_roster`,
  :func:`load_signing_key`): one Ed25519 key pair per PKI identity; the roster of
  verification keys is public and every node holds its own copy, so the server cannot
  substitute keys.

Every check raises :class:`FlowerSecAggError` (a ``ValueError``): inside a ClientApp
that makes Flower reply with an error, which the server counts as the node's failure.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import pathlib
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from protocol.core.net import tls
from secagg import crypto
from secagg.errors import ParameterError
from secagg.messages import MAX_DIM
from secagg.params import (
    DEFAULT_CORRUPT_FRACTION, DEFAULT_DROPOUT_RATE, GRAPHS, SecAggParams,
    default_grinding_bits, find_params, threat_of,
)
from secagg.randomness import OsRandom
from secagg.state import MAX_PARTICIPANTS, SessionConfig

__all__ = ["RECORD", "FlowerSecAggError", "Policy", "Quantiser", "Offer", "write_pki",
           "load_roster", "load_signing_key", "PKI_ENV", "identity_of", "pki_dir_of",
           "PARTICIPATION_KEY", "load_participation_key", "device_layout", "devices_for"]

#: the name of the ConfigRecord that carries our protocol in Flower messages
RECORD = "fedhh.secagg"
#: environment variable naming the PKI directory when neither the node config nor the
#: caller does
PKI_ENV = "FEDHH_FLOWER_PKI"
_OFFER_FORMAT = "fedhh-flower-offer/1"
_LIMIT_INT = (1 << 64) - 1  # Flower node ids are unsigned 64-bit integers


class FlowerSecAggError(ValueError):
    """An offer, policy, PKI or update that the protocol refuses."""


def _int(v: Any, name: str, lo: int = 0, hi: int = _LIMIT_INT) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise FlowerSecAggError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
    return v


@dataclass(frozen=True)
class Policy:
    """The threat model one side holds (the defaults: a malicious server colluding with
    5 % of the nodes, 5 % dropouts, failure bounds ``2^-40`` and ``2^-20``).

    Raises:
        FlowerSecAggError: an unknown threat model or graph, or bad fractions.
    """

    threat: str = "malicious"
    corrupt_fraction: float = DEFAULT_CORRUPT_FRACTION
    dropout_rate: float = DEFAULT_DROPOUT_RATE
    graph: str = "harary"
    sigma: int = 40
    eta: int = 20

    def __post_init__(self) -> None:
        try:
            threat_of(self.threat)
        except ParameterError as exc:
            raise FlowerSecAggError(str(exc)) from None
        if self.graph not in GRAPHS:
            raise FlowerSecAggError(f"graph must be one of {GRAPHS}, got {self.graph!r}")
        for name in ("corrupt_fraction", "dropout_rate"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
                raise FlowerSecAggError(f"{name} must be in [0, 1), got {v!r}")

    @property
    def malicious(self) -> bool:
        return threat_of(self.threat) == "malicious"

    def params(self, n: int) -> SecAggParams:
        """The SecAgg+ parameters for ``n`` nodes under this policy (computed once per
        policy and ``n`` in a process).

        Raises:
            FlowerSecAggError: no parameters meet the bounds for ``n``.
        """
        return _params_for(self, n)


@functools.lru_cache(maxsize=256)
def _params_for(policy: Policy, n: int) -> SecAggParams:
    """:meth:`Policy.params`, cached (a node checks every offer against it)."""
    try:
        grind = default_grinding_bits(n, policy.dropout_rate, graph=policy.graph,
                                      malicious=policy.malicious,
                                      corrupt_fraction=policy.corrupt_fraction)
        return find_params(n, corrupt_fraction=policy.corrupt_fraction,
                           dropout_rate=policy.dropout_rate, sigma=policy.sigma,
                           eta=policy.eta, graph=policy.graph, threat=policy.threat,
                           grinding_bits=grind)
    except ParameterError as exc:
        raise FlowerSecAggError(f"no secure-aggregation parameters for {n} nodes: "
                                f"{exc}") from None


@dataclass(frozen=True)
class Quantiser:
    """Flower's quantisation options, with the meaning ``SecAggPlusWorkflow`` gives
    them (Flower 1.42.0): parameters clipped to ``[-clipping_range, clipping_range]``,
    mapped to integers in ``[0, quantization_range]``, summed modulo
    ``modulus_range`` (a power of two, here up to ``2^64``); node weights (FedAvg's
    ``num_examples``) at most ``max_weight``.

    Raises:
        FlowerSecAggError: a non-positive range or weight, a modulus that is not a power
            of two or not above the quantisation range.
    """

    clipping_range: float = 8.0
    quantization_range: int = 1 << 22
    modulus_range: int = 1 << 32
    max_weight: float = 1000.0

    def __post_init__(self) -> None:
        c, q, r, w = (self.clipping_range, self.quantization_range, self.modulus_range,
                      self.max_weight)
        if not isinstance(c, (int, float)) or isinstance(c, bool) or not 0 < c < math.inf:
            raise FlowerSecAggError(f"clipping_range must be a positive number, got {c!r}")
        if not isinstance(w, (int, float)) or isinstance(w, bool) or not 0 < w < math.inf:
            raise FlowerSecAggError(f"max_weight must be a positive number, got {w!r}")
        if type(q) is not int or q < 1:
            raise FlowerSecAggError(f"quantization_range must be a positive int, got {q!r}")
        if type(r) is not int or r <= q or r > 1 << 64 or r & (r - 1):
            raise FlowerSecAggError("modulus_range must be a power of two above "
                                    f"quantization_range and at most 2^64, got {r!r}")

    def check_nodes(self, n: int) -> None:
        """Refuse ``n`` nodes whose sums could wrap the modulus (``n Q >= R``).

        Raises:
            FlowerSecAggError: the sums would not be exact.
        """
        if n * self.quantization_range >= self.modulus_range:
            raise FlowerSecAggError(
                f"{n} nodes times quantization_range {self.quantization_range} reach "
                f"modulus_range {self.modulus_range}: the sums could wrap; raise "
                f"modulus_range (up to 2**64) or lower quantization_range")

    def encode(self, arrays: Sequence[np.ndarray], weight: float,
               rng: np.random.Generator | None = None) -> np.ndarray:
        """One node's vector ``[q_w, q(w x / W) ...]`` (``uint64``, ``1 + size``
        entries), stochastically rounded with ``rng`` (default: OS-seeded).

        Raises:
            FlowerSecAggError: a weight outside ``[0, max_weight]`` or a non-finite
                parameter.
        """
        if not isinstance(weight, (int, float)) or not 0 <= weight <= self.max_weight:
            raise FlowerSecAggError(f"the node's weight {weight!r} is outside "
                                    f"[0, max_weight = {self.max_weight}]")
        rng = rng if rng is not None else np.random.default_rng()
        q = self.quantization_range
        q_w = round(weight / self.max_weight * q)
        flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays]
                              ) if arrays else np.zeros(0)
        if not np.all(np.isfinite(flat)):
            raise FlowerSecAggError("a parameter is not finite")
        c = float(self.clipping_range)
        scaled = (np.clip(flat * (q_w / q), -c, c) + c) * (q / (2.0 * c))
        low = np.floor(scaled)
        up = rng.random(scaled.shape) < (scaled - low)
        ints = np.minimum(low + up, q).astype(np.uint64)
        return np.concatenate([np.array([q_w], dtype=np.uint64), ints])

    def decode(self, total: np.ndarray, shapes: Sequence[tuple[int, ...]],
               nodes: int) -> list[np.ndarray]:
        """The weighted mean ``sum w x / sum w`` from the sum over ``nodes`` vectors.

        Raises:
            FlowerSecAggError: the sum's length does not fit ``shapes``, or the weights
                sum to zero.
        """
        size = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
        total = np.asarray(total)
        if total.shape != (1 + size,):
            raise FlowerSecAggError(f"the sum has {total.size} entries, the shapes {1 + size}")
        q_total = int(total[0])
        if q_total == 0:
            raise FlowerSecAggError("the weights of the summed nodes round to zero")
        q, c = self.quantization_range, float(self.clipping_range)
        flat = (total[1:].astype(np.float64) * (2.0 * c / q) - nodes * c) * (q / q_total)
        out, pos = [], 0
        for s in shapes:
            k = int(np.prod(s, dtype=np.int64))
            out.append(flat[pos:pos + k].reshape(s))
            pos += k
        return out

    def to_json(self) -> dict[str, Any]:
        return {"clipping_range": float(self.clipping_range),
                "quantization_range": self.quantization_range,
                "modulus_range": self.modulus_range, "max_weight": float(self.max_weight)}

    @classmethod
    def from_json(cls, doc: Any) -> "Quantiser":
        """Raises: FlowerSecAggError: not a quantiser description."""
        keys = {"clipping_range", "quantization_range", "modulus_range", "max_weight"}
        if not isinstance(doc, dict) or set(doc) != keys:
            raise FlowerSecAggError("the offer's quantiser must have exactly the keys "
                                    f"{sorted(keys)}")
        return cls(**doc)


@dataclass(frozen=True)
class Offer:
    """One secure-aggregation session as the ServerApp proposes it.

    Attributes:
        label: what the session is for (``"fit round 3"``, ``"triehh level 2"``).
        node_ids: the Flower node ids of the roster, by position.
        identities: the PKI identity of each position (malicious variant), else ``()``.
        degree, threshold, graph, malicious: the SecAgg+ parameters.
        dim, modulus: the vectors summed.
        server_nonce: the server's fresh 32 bytes for this attempt.
        app: the application's description (JSON text: shapes and quantiser for
            FedAvg, the level's candidates for TrieHH), checked by the application.
    """

    label: str
    node_ids: tuple[int, ...]
    identities: tuple[int, ...]
    degree: int
    threshold: int
    graph: str
    malicious: bool
    dim: int
    modulus: int
    server_nonce: bytes
    app: str = "{}"
    _context: bytes = field(init=False, repr=False, default=b"")
    _hosts: tuple[int, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        n = len(self.node_ids)
        if not isinstance(self.label, str) or len(self.label) > 256:
            raise FlowerSecAggError("the label must be a string of at most 256 characters")
        if not 2 <= n <= MAX_PARTICIPANTS:
            raise FlowerSecAggError(f"a session needs 2 to {MAX_PARTICIPANTS} nodes, got {n}")
        for i in self.node_ids:
            _int(i, "a node id")
        hosts = tuple(dict.fromkeys(self.node_ids))
        m = len(hosts)
        if m < 2:
            raise FlowerSecAggError(f"a session needs at least 2 distinct nodes, got {m}")
        if self.node_ids != tuple(hosts[h] for h in device_layout(m, n)):
            raise FlowerSecAggError("the roster names a node twice outside the device "
                                    "layout (device j on the (j mod nodes)-th node)")
        object.__setattr__(self, "_hosts", hosts)
        if self.malicious:
            if len(self.identities) != n:
                raise FlowerSecAggError("the malicious variant needs one PKI identity per device")
            for i in self.identities:
                _int(i, "a PKI identity")
            if len(set(self.identities)) != n:
                raise FlowerSecAggError("the roster names a PKI identity twice")
            if any(self.identities[j] != self.identities[j % m] + (j // m) * m
                   for j in range(m, n)):
                raise FlowerSecAggError("a hosted device's PKI identity must be its node's "
                                        "plus a multiple of the number of nodes")
        elif self.identities:
            raise FlowerSecAggError("PKI identities belong to the malicious variant only")
        _int(self.degree, "degree", 1, n - 1)
        _int(self.threshold, "threshold", 1, self.degree)
        if self.graph not in GRAPHS:
            raise FlowerSecAggError(f"graph must be one of {GRAPHS}")
        if type(self.malicious) is not bool:
            raise FlowerSecAggError("malicious must be a bool")
        _int(self.dim, "dim", 1, MAX_DIM)
        if type(self.modulus) is not int or not 2 <= self.modulus <= 1 << 64:
            raise FlowerSecAggError("the modulus must be an int in [2, 2^64]")
        if type(self.server_nonce) is not bytes or len(self.server_nonce) != crypto.FRESH_NONCE_BYTES:
            raise FlowerSecAggError(f"the server nonce must be {crypto.FRESH_NONCE_BYTES} bytes")
        if not isinstance(self.app, str) or len(self.app) > 1 << 20:
            raise FlowerSecAggError("the application description must be text of at most 1 MiB")
        object.__setattr__(self, "_context", self._digest())

    def _digest(self) -> bytes:
        h = hashlib.sha256(_OFFER_FORMAT.encode() + b"\0")
        for part in (self.label.encode(), self.graph.encode(), self.app.encode(),
                     self.server_nonce):
            h.update(struct.pack(">Q", len(part)) + part)
        h.update(struct.pack(">QQQQ?", len(self.node_ids), self.degree, self.threshold,
                             self.dim, self.malicious))
        h.update((self.modulus - 1).to_bytes(8, "big"))
        h.update(np.asarray(self.node_ids, dtype=">u8").tobytes())
        h.update(np.asarray(self.identities, dtype=">u8").tobytes())
        return h.digest()

    def context(self) -> bytes:
        """The session's context: ``SHA-256`` of the offer's canonical encoding."""
        return b"fedhh flower session\0" + self._context

    @property
    def n(self) -> int:
        """The number of devices in the session (positions of the roster)."""
        return len(self.node_ids)

    @property
    def hosts(self) -> tuple[int, ...]:
        """The distinct Flower nodes, in the order of their first device."""
        return self._hosts

    @property
    def hosted(self) -> bool:
        """Whether some node hosts more than one device."""
        return len(self._hosts) < len(self.node_ids)

    def session_config(self) -> SessionConfig:
        """The :class:`secagg.state.SessionConfig` of this offer."""
        params = SecAggParams(n=self.n, degree=self.degree, threshold=self.threshold,
                              graph=self.graph, malicious=self.malicious)
        # devices have no Flower node id of their own: their positions name them
        ids = tuple(range(self.n)) if self.hosted else self.node_ids
        return SessionConfig(params, ids, self.context(), self.dim, self.modulus,
                             malicious=self.malicious, server_nonce=self.server_nonce)

    def to_record(self) -> dict[str, Any]:
        """The offer as ConfigRecord values (the modulus as 8 bytes: ``2^64`` does not
        fit Flower's 64-bit integers; the roster's ids as big-endian 64-bit words, one
        bytes value rather than a list Flower checks entry by entry)."""
        return {"label": self.label, "node_ids": _pack_ids(self.node_ids),
                "identities": _pack_ids(self.identities), "degree": self.degree,
                "threshold": self.threshold, "graph": self.graph,
                "malicious": self.malicious, "dim": self.dim,
                "modulus_minus_one": (self.modulus - 1).to_bytes(8, "big"),
                "server_nonce": self.server_nonce, "app": self.app}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> "Offer":
        """Parse an offer, every field checked.

        Raises:
            FlowerSecAggError: a missing, extra or malformed field.
        """
        keys = {"label", "node_ids", "identities", "degree", "threshold", "graph",
                "malicious", "dim", "modulus_minus_one", "server_nonce", "app"}
        got = set(rec) - {"stage"}
        if got != keys:
            raise FlowerSecAggError(f"the offer's fields are {sorted(got)}, expected "
                                    f"{sorted(keys)}")
        m1 = rec["modulus_minus_one"]
        if type(m1) is not bytes or len(m1) != 8:
            raise FlowerSecAggError("modulus_minus_one must be 8 bytes")
        return cls(label=rec["label"], node_ids=_unpack_ids(rec["node_ids"], "node_ids"),
                   identities=_unpack_ids(rec["identities"], "identities"),
                   degree=rec["degree"],
                   threshold=rec["threshold"], graph=rec["graph"],
                   malicious=rec["malicious"], dim=rec["dim"],
                   modulus=int.from_bytes(m1, "big") + 1, server_nonce=rec["server_nonce"],
                   app=rec["app"])

    def check_policy(self, policy: Policy) -> None:
        """Refuse an offer whose parameters are not the ones ``policy`` gives for its
        number of nodes.

        Raises:
            FlowerSecAggError: another threat model, degree, threshold or graph.
        """
        devices = devices_for(policy, len(self.hosts))
        if self.n != devices:
            raise FlowerSecAggError(f"the server offers {self.n} devices on "
                                    f"{len(self.hosts)} nodes; this node's policy gives "
                                    f"{devices}")
        want = policy.params(self.n)
        got = (self.malicious, self.graph, self.degree, self.threshold)
        expect = (want.malicious, want.graph, want.degree, want.threshold)
        if got != expect:
            raise FlowerSecAggError(
                f"the server offers (malicious, graph, k, t) = {got}; this node's policy "
                f"gives {expect} for {self.n} nodes")

    def position_of(self, node_id: int, identity: int | None) -> int:
        """This node's roster position (its first device's).

        Raises:
            FlowerSecAggError: the node is not in the roster, or the roster names it
                with another PKI identity.
        """
        return self.positions_of(node_id, identity)[0]

    def positions_of(self, node_id: int, identity: int | None) -> tuple[int, ...]:
        """The positions of the devices this node hosts (:func:`device_layout`); with
        the malicious variant the first device's PKI identity is the node's own (the
        others' follow from it, checked when the offer was built).

        Raises:
            FlowerSecAggError: the node is not in the roster, or the roster names it
                with another PKI identity.
        """
        try:
            first = self.node_ids.index(node_id)
        except ValueError:
            raise FlowerSecAggError(f"node {node_id} is not in the offered roster") from None
        if self.malicious and self.identities[first] != identity:
            raise FlowerSecAggError(f"the roster gives node {node_id} the PKI identity "
                                    f"{self.identities[first]}, not its own {identity}")
        return tuple(range(first, self.n, len(self._hosts)))

    def app_json(self) -> Any:
        """The application description, parsed.

        Raises:
            FlowerSecAggError: not JSON.
        """
        try:
            return json.loads(self.app)
        except ValueError as exc:
            raise FlowerSecAggError(f"the application description is not JSON: {exc}") from None


def device_layout(nodes: int, devices: int) -> tuple[int, ...]:
    """Which node hosts each device of a session: device ``j`` on node ``j mod nodes``
    (node ``i`` hosts devices ``i, i + nodes, i + 2 nodes, ...``). With ``devices ==
    nodes`` every node is one device.

    Raises:
        FlowerSecAggError: ``nodes`` below 1, ``devices`` below ``nodes`` or above
            the protocol's participant limit, or not ints.
    """
    if type(nodes) is not int or type(devices) is not int:
        raise FlowerSecAggError(f"nodes and devices must be ints, got {nodes!r}, {devices!r}")
    if nodes < 1:
        raise FlowerSecAggError(f"a device layout needs at least 1 node, got {nodes}")
    if not nodes <= devices <= MAX_PARTICIPANTS:
        raise FlowerSecAggError(f"{devices} devices on {nodes} nodes: a layout needs "
                                f"{nodes} to {MAX_PARTICIPANTS} devices")
    return tuple(j % nodes for j in range(devices))


def devices_for(policy: Policy, nodes: int) -> int:
    """The number of devices a session among ``nodes`` nodes runs with under
    ``policy``: ``nodes`` when the policy has parameters for them, else the fewest
    devices above it that it has parameters for (each node then hosts several,
    :func:`device_layout`). Both sides compute it; a node refuses an offer with
    another number.

    Raises:
        FlowerSecAggError: fewer than 2 nodes, or no device count up to the limit.
    """
    if type(nodes) is not int or nodes < 2:
        raise FlowerSecAggError(f"a session needs at least 2 nodes, got {nodes!r}")
    return _devices_for(policy, nodes)


@functools.lru_cache(maxsize=256)
def _devices_for(policy: Policy, nodes: int) -> int:
    for d in range(nodes, min(MAX_PARTICIPANTS, nodes + 1000) + 1):
        try:
            policy.params(d)
            return d
        except FlowerSecAggError:
            continue
    raise FlowerSecAggError(f"no secure-aggregation parameters for {nodes} nodes or any "
                            f"device count up to {nodes + 1000}")


def _pack_ids(ids: Sequence[int]) -> bytes:
    return np.asarray(ids, dtype=">u8").tobytes()


def _unpack_ids(data: Any, name: str) -> tuple[int, ...]:
    """Raises: FlowerSecAggError: not a whole number of 8-byte words, or too many."""
    if type(data) is not bytes or len(data) % 8 or len(data) > 8 * MAX_PARTICIPANTS:
        raise FlowerSecAggError(f"{name} must be 8-byte big-endian words, at most "
                                f"{MAX_PARTICIPANTS}")
    return tuple(int(v) for v in np.frombuffer(data, dtype=">u8"))


# -- the PKI of the malicious-server variant -------------------------------------------

def write_pki(directory: str | os.PathLike[str], nodes: int, *,
              rand: Any = None, overwrite: bool = False) -> pathlib.Path:
    """Write a PKI for ``nodes`` identities: ``roster.json`` (the public verification
    keys, the format of :mod:`protocol.core.net.tls`), one ``node-<i>.key`` per
    identity (its 32-byte Ed25519 seed, mode 0600; a deployment gives each node only
    its own) and ``participation.key`` (32 random bytes, mode 0600: the secret the
    nodes share and the server must not hold, from which TrieHH++'s nodes decide who
    takes part, :func:`mechanisms.triehhpp.keyed_participation`).

    Raises:
        FlowerSecAggError: ``nodes`` below 2, or keys exist and ``overwrite`` is false.
    """
    if type(nodes) is not int or not 2 <= nodes <= MAX_PARTICIPANTS:
        raise FlowerSecAggError(f"a PKI needs 2 to {MAX_PARTICIPANTS} nodes, got {nodes!r}")
    root = pathlib.Path(directory)
    roster = root / "roster.json"
    if roster.exists() and not overwrite:
        raise FlowerSecAggError(f"{roster} exists (pass overwrite to replace the PKI)")
    root.mkdir(parents=True, exist_ok=True)
    rand = rand if rand is not None else OsRandom()
    pairs = [crypto.ed25519_keypair(rand) for _ in range(nodes)]
    for i, (sk, _) in enumerate(pairs):
        path = root / f"node-{i}.key"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(sk)
    fd = os.open(root / PARTICIPATION_KEY, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(rand.token_bytes(32))
    roster.write_text(json.dumps({"format": "fedhh-roster/1", "clients": nodes,
                                  "verify_keys": [pk.hex() for _, pk in pairs]}))
    return root


#: the file of a PKI directory holding the nodes' shared participation secret
PARTICIPATION_KEY = "participation.key"


def load_participation_key(directory: str | os.PathLike[str]) -> bytes:
    """The nodes' shared participation secret (:func:`write_pki`).

    Raises:
        FlowerSecAggError: missing or not 32 bytes.
    """
    path = pathlib.Path(directory) / PARTICIPATION_KEY
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise FlowerSecAggError(f"no participation key: {exc}") from None
    if len(key) != 32:
        raise FlowerSecAggError(f"{path}: the participation key is 32 bytes, got {len(key)}")
    return key


_ROSTERS: dict[tuple[str, float], tuple[bytes, ...]] = {}


def load_roster(directory: str | os.PathLike[str]) -> tuple[bytes, ...]:
    """The public verification keys of a PKI directory, by identity (cached per file
    and modification time).

    Raises:
        FlowerSecAggError: a missing or malformed roster.
    """
    path = pathlib.Path(directory) / "roster.json"
    try:
        key = (str(path.resolve()), path.stat().st_mtime)
    except OSError as exc:
        raise FlowerSecAggError(f"no PKI roster at {path}: {exc}") from None
    if key not in _ROSTERS:
        try:
            verify, _ = tls.load_pki(directory, signing=False)
        except (OSError, ValueError) as exc:
            raise FlowerSecAggError(f"{path}: {exc}") from None
        _ROSTERS[key] = tuple(verify)
    return _ROSTERS[key]


def load_signing_key(directory: str | os.PathLike[str], identity: int) -> bytes:
    """Identity ``identity``'s Ed25519 seed.

    Raises:
        FlowerSecAggError: missing or not 32 bytes.
    """
    path = pathlib.Path(directory) / f"node-{int(identity)}.key"
    try:
        sk = path.read_bytes()
    except OSError as exc:
        raise FlowerSecAggError(f"no signing key for identity {identity}: {exc}") from None
    if len(sk) != 32:
        raise FlowerSecAggError(f"{path}: a signing key is 32 bytes, got {len(sk)}")
    return sk


def pki_dir_of(node_config: Mapping[str, Any], default: str | None = None) -> str | None:
    """Where a node's PKI is: its node config's ``fedhh-pki``, else ``default``, else
    the environment variable :data:`PKI_ENV`."""
    v = node_config.get("fedhh-pki")
    if isinstance(v, str) and v:
        return v
    return default or os.environ.get(PKI_ENV) or None


def identity_of(node_config: Mapping[str, Any]) -> int:
    """A node's PKI identity: its node config's ``fedhh-identity``, else (Flower's
    simulation engine) its ``partition-id``.

    Raises:
        FlowerSecAggError: neither is a non-negative int.
    """
    for key in ("fedhh-identity", "partition-id"):
        v = node_config.get(key)
        if type(v) is int and v >= 0:
            return v
    raise FlowerSecAggError("the node config names no PKI identity (fedhh-identity or "
                            "partition-id)")
