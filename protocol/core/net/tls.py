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
  signing keys (msgpack list of 32-byte seeds, file mode 0600). In a deployment each
  device would hold only its own signing key; the loopback launcher keeps them in one
  file for convenience.

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
from typing import Any

import msgpack

from secagg import crypto
from secagg.randomness import OsRandom

__all__ = ["SERVER_NAME", "KeyPaths", "PinError", "make_keys", "load_pki", "fingerprint",
           "server_context", "client_context", "check_pin", "HELPER_NAMES", "make_helper_keys",
           "helper_link_contexts"]

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
    paths.roster.write_text(json.dumps({"format": "fedhh-roster/1", "clients": clients,
                                        "verify_keys": [pk.hex() for _, pk in pairs]}))
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
    data = paths.signing.read_bytes()
    if len(data) > 64 * (len(verify) + 8):
        raise ValueError(f"{paths.signing}: larger than {len(verify)} signing keys")
    try:
        keys = msgpack.unpackb(data, raw=False, strict_map_key=True,
                               max_bin_len=32, max_array_len=len(verify))
    except (ValueError, msgpack.UnpackException) as exc:
        raise ValueError(f"{paths.signing}: not a signing-key file ({exc})") from None
    if (not isinstance(keys, list) or len(keys) != len(verify)
            or any(type(k) is not bytes or len(k) != 32 for k in keys)):
        raise ValueError(f"{paths.signing}: expected {len(verify)} 32-byte keys")
    return verify, keys


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
