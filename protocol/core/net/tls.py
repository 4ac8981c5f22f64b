"""Key material for the network prototype: the server's TLS identity and the clients'
Ed25519 PKI, and the TLS contexts that use them.

* **Server identity**: an ECDSA P-256 key and a self-signed certificate (made with
  ``cryptography``) for the name :data:`SERVER_NAME` and ``127.0.0.1``. Clients *pin* it:
  their TLS context trusts that one certificate and nothing else (no system store),
  checks the host name, and after the handshake compares the SHA-256 fingerprint of the
  certificate the server presented with the pinned one in constant time
  (:func:`check_pin` raises :class:`PinError` on a mismatch).
* **TLS 1.3 only**, both sides (``ssl.TLSVersion.TLSv1_3``).
* **Client PKI** (the malicious-server variant's input): one Ed25519 key pair per roster
  position; ``roster.json`` holds the verification keys (public), ``signing.keys`` the
  signing keys (msgpack list of one 32-byte seed or ``nil`` per position, file mode
  0600).
* **One directory per party** (:func:`make_party_keys`, what ``fedhh keys`` writes):
  ``server/`` (its TLS key, the public roster and certificates, no signing key),
  ``clients/`` (the clients' signing keys only), and with a committee ``helper1/`` and
  ``helper2/`` (each its own TLS key, its own signing key and its own X25519 report key
  ``helperN.x25519``, whose public half every roster carries as
  ``helper_report_keys``: the devices encrypt each helper's part of a validated report
  to it, :mod:`protocol.core.committee.reports`). Every process checks
  with :func:`check_own_keys` that its directory holds no other party's secret and
  refuses it otherwise: a server given a directory with signing keys could act as any
  client, and one given a helper's key could run the helper itself.

The channel is authenticated one way (clients know the server). A client names itself
in its Hello; under the malicious-server variant every round-0 key advertisement is
signed with the client's Ed25519 key, so a connection claiming another client's
position cannot produce keys the honest clients accept.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import pathlib
import ssl
from dataclasses import dataclass
from typing import Any, Iterable

import msgpack

from secagg import crypto
from secagg.randomness import OsRandom

__all__ = ["SERVER_NAME", "KeyPaths", "PinError", "make_keys", "load_pki", "fingerprint",
           "server_context", "client_context", "check_pin", "HELPER_NAMES", "make_helper_keys",
           "helper_link_contexts", "make_party_keys", "check_own_keys", "PARTIES",
           "ForeignKeyError", "report_secret_path", "load_report_keys",
           "load_report_secret"]

#: the parties of a networked session, one key directory each (helpers with a committee)
PARTIES = ("server", "clients", "helper1", "helper2")


class ForeignKeyError(ValueError):
    """A key directory holds another party's secret key."""

#: the host name in the server certificate (clients check it whatever address they dial)
SERVER_NAME = "fedhh-server"


class PinError(ssl.SSLError):
    """The server presented a certificate other than the pinned one."""


@dataclass(frozen=True)
class KeyPaths:
    """The files of one key directory."""

    root: pathlib.Path

    @property
    def cert(self) -> pathlib.Path:
        return self.root / "server.crt"

    @property
    def key(self) -> pathlib.Path:
        return self.root / "server.key"

    @property
    def roster(self) -> pathlib.Path:
        return self.root / "roster.json"

    @property
    def signing(self) -> pathlib.Path:
        return self.root / "signing.keys"


def _write_private(path: pathlib.Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _identity(cert_path: pathlib.Path, key_path: pathlib.Path, name: str, days: int,
              rand: Any) -> None:
    """An ECDSA P-256 key (mode 0600) and a self-signed certificate for ``name`` and
    127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(int.from_bytes(rand.token_bytes(16), "big") >> 1)
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    _write_private(key_path, key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


#: the host names of the committee helpers' certificates
HELPER_NAMES = ("fedhh-helper1", "fedhh-helper2")


def make_helper_keys(root: str | os.PathLike[str], *, days: int = 30,
                     rand: object | None = None, overwrite: bool = False) -> None:
    """Write the two committee helpers' TLS identities (``helper1.crt``/``.key``,
    ``helper2.crt``/``.key``): the link between the helpers is mutually authenticated
    with them (:func:`helper_link_contexts`).

    Raises:
        FileExistsError: the files exist and ``overwrite`` is false.
    """
    root = pathlib.Path(root)
    root.mkdir(parents=True, exist_ok=True)
    files = [root / f"helper{i}.{ext}" for i in (1, 2) for ext in ("crt", "key")]
    existing = [p for p in files if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{existing[0]} exists (pass overwrite to replace the keys)")
    rand = rand if rand is not None else OsRandom()
    for i, name in enumerate(HELPER_NAMES, 1):
        _identity(root / f"helper{i}.crt", root / f"helper{i}.key", name, days, rand)


def helper_link_contexts(root: str | os.PathLike[str], index: int) -> ssl.SSLContext:
    """The TLS 1.3 context of helper ``index``'s end of the helpers' link: helper 2
    listens and requires helper 1's certificate; helper 1 connects with its certificate
    and trusts only helper 2's. Each side trusts exactly the other's certificate."""
    root = pathlib.Path(root)
    if index not in (1, 2):
        raise ValueError("helpers are 1 and 2")
    other = 3 - index
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if index == 2 else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(root / f"helper{index}.crt", root / f"helper{index}.key")
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cafile=str(root / f"helper{other}.crt"))
    if index == 1:
        ctx.check_hostname = True
    return ctx


def _roster_json(pairs: list[tuple[bytes, bytes]],
                 report_keys: list[bytes] | None = None) -> str:
    """The public roster: one verification key per position and, for a committee, the
    two helpers' X25519 report keys."""
    doc: dict[str, Any] = {"format": "fedhh-roster/1", "clients": len(pairs),
                           "verify_keys": [pk.hex() for _, pk in pairs]}
    if report_keys is not None:
        doc["helper_report_keys"] = [pk.hex() for pk in report_keys]
    return json.dumps(doc)


def report_secret_path(root: str | os.PathLike[str], index: int) -> pathlib.Path:
    """Helper ``index``'s X25519 report secret (32 raw bytes, mode 0600): only that
    helper's directory holds it."""
    if index not in (1, 2):
        raise ValueError("helpers are 1 and 2")
    return pathlib.Path(root) / f"helper{index}.x25519"


def load_report_keys(root: str | os.PathLike[str]) -> tuple[bytes, bytes]:
    """The two helpers' X25519 public report keys from a committee roster.

    Raises:
        ValueError: the roster carries none (keys made before validated reports: make
            them again with ``fedhh keys --committee``) or malformed ones.
        FileNotFoundError: no roster.
    """
    path = KeyPaths(pathlib.Path(root)).roster
    try:
        keys = json.loads(path.read_text())["helper_report_keys"]
        out = tuple(bytes.fromhex(h) for h in keys)
    except KeyError:
        raise ValueError(f"{path}: the roster holds no helper report keys (make the "
                         "committee's keys again with 'fedhh keys --committee')") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: malformed helper report keys ({exc})") from None
    if len(out) != 2 or any(len(k) != 32 for k in out):
        raise ValueError(f"{path}: helper report keys are two 32-byte X25519 keys")
    return out[0], out[1]


def load_report_secret(root: str | os.PathLike[str], index: int) -> bytes:
    """Helper ``index``'s X25519 report secret, checked against the public key the
    roster publishes for it.

    Raises:
        ValueError: no such file (the directory is not that helper's), a file that is
            not 32 bytes, or a secret whose public key is not the roster's.
    """
    path = report_secret_path(root, index)
    if not path.exists():
        raise ValueError(f"{path} is missing: helper {index}'s directory holds no X25519 "
                         "report key (make the committee's keys again with 'fedhh keys "
                         "--committee')")
    secret = path.read_bytes()
    if len(secret) != 32:
        raise ValueError(f"{path}: an X25519 secret is 32 bytes")
    public = load_report_keys(root)[index - 1]
    if not hmac.compare_digest(crypto.x25519_public(secret), public):
        raise ValueError(f"{path}: its public key is not helper {index}'s in the roster")
    return secret


def make_keys(root: str | os.PathLike[str], clients: int, *, days: int = 30,
              rand: object | None = None, overwrite: bool = False) -> KeyPaths:
    """Write a server identity and a client PKI of ``clients`` positions into ``root``.

    Raises:
        FileExistsError: ``root`` already holds key files and ``overwrite`` is false.
        ValueError: ``clients`` or ``days`` not positive.
    """
    if clients < 1 or days < 1:
        raise ValueError("clients and days must be positive")
    paths = KeyPaths(pathlib.Path(root))
    paths.root.mkdir(parents=True, exist_ok=True)
    existing = [p for p in (paths.cert, paths.key, paths.roster, paths.signing) if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{existing[0]} exists (pass overwrite to replace the keys)")
    rand = rand if rand is not None else OsRandom()
    _identity(paths.cert, paths.key, SERVER_NAME, days, rand)
    pairs = [crypto.ed25519_keypair(rand) for _ in range(clients)]
    paths.roster.write_text(_roster_json(pairs))
    _write_private(paths.signing, msgpack.packb([sk for sk, _ in pairs], use_bin_type=True))
    return paths


def load_pki(root: str | os.PathLike[str], *, signing: bool = True
             ) -> tuple[list[bytes], list[bytes] | None]:
    """``(verify_keys, signing_keys)`` of a key directory (signing ``None`` unless asked).

    Raises:
        ValueError: a malformed roster or signing-key file.
        FileNotFoundError: a missing file.
    """
    paths = KeyPaths(pathlib.Path(root))
    try:
        doc = json.loads(paths.roster.read_text())
        verify = [bytes.fromhex(h) for h in doc["verify_keys"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{paths.roster}: not a fedhh roster ({exc})") from None
    if not verify or any(len(k) != 32 for k in verify):
        raise ValueError(f"{paths.roster}: verification keys must be 32 bytes each")
    if not signing:
        return verify, None
    return verify, _signing_keys(paths, len(verify))


def _signing_keys(paths: KeyPaths, n: int) -> list[bytes | None]:
    """The signing-key file: one 32-byte seed or ``None`` (not this party's) per
    position; a missing file holds none.

    Raises:
        ValueError: a malformed file.
    """
    if not paths.signing.exists():
        return [None] * n
    data = paths.signing.read_bytes()
    if len(data) > 64 * (n + 8):
        raise ValueError(f"{paths.signing}: larger than {n} signing keys")
    try:
        keys = msgpack.unpackb(data, raw=False, strict_map_key=True,
                               max_bin_len=32, max_array_len=n)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ValueError(f"{paths.signing}: not a signing-key file ({exc})") from None
    if (not isinstance(keys, list) or len(keys) != n
            or any(k is not None and (type(k) is not bytes or len(k) != 32) for k in keys)):
        raise ValueError(f"{paths.signing}: expected {n} entries, each a 32-byte key or nil")
    return keys


def make_party_keys(root: str | os.PathLike[str], clients: int, *, committee: bool = False,
                    days: int = 30, rand: object | None = None,
                    overwrite: bool = False) -> dict[str, pathlib.Path]:
    """Write one key directory per party under ``root``: ``server``, ``clients`` and,
    with ``committee``, ``helper1`` and ``helper2`` (roster positions ``clients`` and
    ``clients + 1``). Each holds the public roster and certificates and only its own
    secrets.

    Returns:
        party name -> its directory.

    Raises:
        FileExistsError: a party directory already holds keys and ``overwrite`` is false.
        ValueError: ``clients`` or ``days`` not positive.
    """
    if clients < 1 or days < 1:
        raise ValueError("clients and days must be positive")
    root = pathlib.Path(root)
    parties = list(PARTIES if committee else PARTIES[:2])
    dirs = {p: root / p for p in parties}
    for d in dirs.values():
        if d.exists() and any(d.iterdir()) and not overwrite:
            raise FileExistsError(f"{d} holds keys (pass overwrite to replace them)")
    root.mkdir(parents=True, exist_ok=True)
    for d in dirs.values():
        d.mkdir(exist_ok=True)
    rand = rand if rand is not None else OsRandom()
    n = clients + (2 if committee else 0)
    server = KeyPaths(dirs["server"])
    _identity(server.cert, server.key, SERVER_NAME, days, rand)
    if committee:
        for i, name in enumerate(HELPER_NAMES, 1):
            h = dirs[f"helper{i}"]
            _identity(h / f"helper{i}.crt", h / f"helper{i}.key", name, days, rand)
    pairs = [crypto.ed25519_keypair(rand) for _ in range(n)]
    report = [crypto.x25519_keypair(rand) for _ in (1, 2)] if committee else []
    roster = _roster_json(pairs, [pk for _, pk in report] if committee else None)
    for i, (sk, _) in enumerate(report, 1):
        _write_private(report_secret_path(dirs[f"helper{i}"], i), sk)
    owned = {"server": set(), "clients": set(range(clients)),
             "helper1": {clients}, "helper2": {clients + 1}}
    for party, d in dirs.items():
        paths = KeyPaths(d)
        paths.roster.write_text(roster)
        if party != "server":
            paths.cert.write_bytes(server.cert.read_bytes())
        if committee:
            for i in (1, 2):
                if party != f"helper{i}":
                    (d / f"helper{i}.crt").write_bytes(
                        (dirs[f"helper{i}"] / f"helper{i}.crt").read_bytes())
        if owned[party]:
            _write_private(paths.signing, msgpack.packb(
                [sk if i in owned[party] else None for i, (sk, _) in enumerate(pairs)],
                use_bin_type=True))
    return dirs


def check_own_keys(root: str | os.PathLike[str], party: str,
                   positions: Iterable[int] = ()) -> None:
    """Refuse a key directory that holds another party's secret: the server's TLS key
    (unless ``party`` is ``"server"``), a helper's TLS key or X25519 report secret
    (unless it is that helper), or a signing key of a roster position outside
    ``positions``.

    Raises:
        ForeignKeyError: such a key is there (the message names the file).
        ValueError: an unknown party or a malformed signing-key file.
    """
    if party not in PARTIES:
        raise ValueError(f"unknown party {party!r}")
    root = pathlib.Path(root)
    paths = KeyPaths(root)
    hint = (f"give {party} only its own directory (`fedhh keys` writes one per party: "
            f"{', '.join(PARTIES)})")
    if party != "server" and paths.key.exists():
        raise ForeignKeyError(f"{paths.key} is the server's secret key; {hint}")
    for i in (1, 2):
        for key, what in ((root / f"helper{i}.key", "secret key"),
                          (report_secret_path(root, i), "X25519 report secret")):
            if party != f"helper{i}" and key.exists():
                raise ForeignKeyError(f"{key} is helper {i}'s {what}; {hint}")
    if paths.signing.exists():
        try:
            n = len(load_pki(root, signing=False)[0])
        except FileNotFoundError:
            raise ForeignKeyError(f"{paths.signing} holds signing keys; {hint}") from None
        allowed = set(positions)
        foreign = [i for i, k in enumerate(_signing_keys(paths, n))
                   if k is not None and i not in allowed]
        if foreign:
            raise ForeignKeyError(f"{paths.signing} holds the signing keys of "
                                  f"{len(foreign)} position(s) not {party}'s (first: "
                                  f"{foreign[0]}); {hint}")


def fingerprint(cert_pem: bytes) -> bytes:
    """SHA-256 of a PEM certificate's DER encoding."""
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii"))).digest()


def server_context(root: str | os.PathLike[str]) -> ssl.SSLContext:
    """TLS 1.3 server context with the directory's certificate and key."""
    paths = KeyPaths(pathlib.Path(root))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(paths.cert, paths.key)
    return ctx


def client_context(cert: str | os.PathLike[str]) -> tuple[ssl.SSLContext, bytes]:
    """A TLS 1.3 client context that trusts exactly the pinned certificate, and the pin
    (its SHA-256 fingerprint) for :func:`check_pin`."""
    path = pathlib.Path(cert)
    if path.is_dir():
        path = KeyPaths(path).cert
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cafile=str(path))
    return ctx, fingerprint(path.read_bytes())


def check_pin(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, pin: bytes) -> None:
    """Compare the peer certificate's fingerprint with the pin (constant time).

    Raises:
        PinError: no certificate, or a different one.
    """
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der or not hmac.compare_digest(hashlib.sha256(der).digest(), pin):
        raise PinError("the server's certificate is not the pinned one")
