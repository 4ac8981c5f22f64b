"""``fedhh bench readme``: re-measure every timing the README quotes and rewrite its
table (:mod:`protocol.studies.runners.readme_timings`).

Each command runs in its own process with stderr on a pseudo-terminal; the table gets
its wall time, peak memory and longest silence (the most seconds without a line on the
terminal). Prints one JSON object with every measurement; ``--write README.md``
rewrites the table between its markers. The long rows (10 to 30 minutes each) run only
with ``--all``.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "readme", "re-measure the README's timing table", run)
    p.add_argument("--write", default=None, metavar="README",
                   help="rewrite the timing table of this README (default: print only)")
    p.add_argument("--all", action="store_true", dest="include_long",
                   help="also the long rows (one million users over secure aggregation)")
    p.add_argument("--only", default=None,
                   help="only the commands that contain this text (several: separated by commas)")
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="give up on a command after this many seconds (default 3600)")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    import pathlib

    from protocol.cli import UsageError
    from protocol.cli.output import print_json, say
    from protocol.studies.runners import readme_timings as rt

    readme = None
    if args.write is not None:
        try:
            readme = pathlib.Path(args.write).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {args.write}: {exc}") from None
        rt.rewrite(readme, [])  # refuse a README without the table before measuring
    results = rt.measure_rows(rt.ROWS, include_long=args.include_long, only=args.only,
                              timeout=args.timeout, say=say(not args.quiet))
    if readme is not None:  # read again: the file may have changed during the runs
        path = pathlib.Path(args.write)
        path.write_text(rt.rewrite(path.read_text(encoding="utf-8"), results),
                        encoding="utf-8")
    print_json({"rows": results})
    return 0
