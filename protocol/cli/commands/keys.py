"""``fedhh keys``: the key material of a networked session.

Writes into ``--out``: the server's TLS identity (``server.crt``, an ECDSA P-256
self-signed certificate for ``fedhh-server`` and 127.0.0.1; ``server.key``, mode 0600)
and the clients' Ed25519 PKI (``roster.json``: verification keys; ``signing.keys``:
signing keys, mode 0600). Clients pin ``server.crt``. With ``--shuffler`` also the
shuffler's and the analyzer's X25519 keys (``shuffler.x25519``, ``analyzer.x25519``,
each mode 0600 and for its own process), the clients' crowd key (``crowd.key``, mode
0600, never given to the shuffler) and both public keys (``shuffle-public.json``). See
docs/network.md. With ``--committee``: a roster of ``--clients`` + 2 positions (the
committee's helpers last) and the helpers' TLS identities (``helper1.crt``/``.key``,
``helper2.crt``/``.key``) for their mutually authenticated link.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli import count

    p = cli.command("keys", "make a server TLS identity and a client Ed25519 PKI", run)
    p.add_argument("--out", required=True, help="directory to write the keys into")
    p.add_argument("--clients", type=count, required=True, help="roster size n")
    p.add_argument("--days", type=int, default=30, help="certificate validity (default 30)")
    p.add_argument("--force", action="store_true", help="replace keys already in --out")
    p.add_argument("--shuffler", action="store_true",
                   help="also the shuffler's, the analyzer's and the crowd keys")
    p.add_argument("--committee", action="store_true",
                   help="a roster of --clients + 2 (the thresholding committee's two "
                        "helpers last) and the helpers' TLS identities")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.core.net import tls

    try:
        roster = args.clients + (2 if args.committee else 0)
        paths = tls.make_keys(args.out, roster, days=args.days, overwrite=args.force)
        if args.committee:
            tls.make_helper_keys(args.out, days=args.days, overwrite=args.force)
        if args.shuffler:
            from protocol.core.net.shuffle import make_shuffle_keys

            shuffle = make_shuffle_keys(args.out, overwrite=args.force)
    except (FileExistsError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    pin = tls.fingerprint(paths.cert.read_bytes()).hex()
    print(f"wrote {paths.cert}, {paths.key}, {paths.roster}, {paths.signing}")
    if args.committee:
        print(f"wrote helper1.crt/.key and helper2.crt/.key; the roster has {roster} "
              f"positions, the helpers at {args.clients} and {args.clients + 1}")
    if args.shuffler:
        print(f"wrote {shuffle.shuffler}, {shuffle.analyzer}, {shuffle.crowd}, {shuffle.public}")
    print(f"server certificate SHA-256 (clients pin it): {pin}")
    return 0
