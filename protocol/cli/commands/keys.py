"""``fedhh keys``: the key material of a networked session, one directory per party.

Writes under ``--out``: ``server/`` (the server's TLS identity: ``server.crt``, an ECDSA
P-256 self-signed certificate for ``fedhh-server`` and 127.0.0.1, and ``server.key``,
mode 0600; the public roster), ``clients/`` (``server.crt`` to pin, the roster, and the
clients' Ed25519 signing keys, mode 0600) and, with ``--committee``, ``helper1/`` and
``helper2/`` (each its own TLS identity and signing key, its own X25519 report key
``helperN.x25519`` for the devices' validated reports, the other's certificate, the
roster of ``--clients`` + 2 positions, the helpers last; every roster also publishes
both helpers' X25519 public keys). ``serve``, ``helper`` and
``client`` refuse a directory that holds another party's secret key. With
``--shuffler`` the shuffler's and the analyzer's X25519 keys (``shuffler.x25519``,
``analyzer.x25519``), the clients' crowd key (``crowd.key``) and both public keys
(``shuffle-public.json``) are written flat into ``--out`` with the single-directory
server identity and roster the shuffler set-up reads. See docs/network.md.
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
                        "helpers last), the helpers' TLS identities and their X25519 "
                        "report keys (the public halves in every roster)")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.core.net import tls

    if args.shuffler and args.committee:
        raise UsageError("--shuffler and --committee are separate set-ups: run fedhh keys "
                         "once for each, with different --out directories")
    try:
        if args.shuffler:
            from protocol.core.net.shuffle import make_shuffle_keys

            paths = tls.make_keys(args.out, args.clients, days=args.days,
                                  overwrite=args.force)
            shuffle = make_shuffle_keys(args.out, overwrite=args.force)
            pin = tls.fingerprint(paths.cert.read_bytes()).hex()
            print(f"wrote {paths.cert}, {paths.key}, {paths.roster}, {paths.signing}")
            print(f"wrote {shuffle.shuffler}, {shuffle.analyzer}, {shuffle.crowd}, "
                  f"{shuffle.public}")
            print(f"server certificate SHA-256 (clients pin it): {pin}")
            return 0
        dirs = tls.make_party_keys(args.out, args.clients, committee=args.committee,
                                   days=args.days, overwrite=args.force)
    except (FileExistsError, ValueError) as exc:
        raise UsageError(str(exc).replace("pass overwrite", "pass --force")) from None
    except OSError as exc:
        raise UsageError(f"cannot write keys into {args.out}: {exc.strerror or exc}") from None
    roster = args.clients + (2 if args.committee else 0)
    for party, d in dirs.items():
        what = {"server": "the server's TLS key, no signing key",
                "clients": f"the signing keys of positions 0..{args.clients - 1}",
                "helper1": f"helper 1's TLS key, X25519 report key and the signing key "
                           f"of position {args.clients}",
                "helper2": f"helper 2's TLS key, X25519 report key and the signing key "
                           f"of position {args.clients + 1}"}[party]
        print(f"wrote {d}/ for the {party} ({what}); give it to that party only")
    pin = tls.fingerprint((dirs["server"] / "server.crt").read_bytes()).hex()
    print(f"the roster has {roster} positions; server certificate SHA-256 (clients pin "
          f"it): {pin}")
    return 0
