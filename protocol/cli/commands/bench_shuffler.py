"""``fedhh bench shuffler``: throughput of the ESA pipeline against its bare primitives.

In one run it times (wall clock and process CPU) the three pipeline stages on
``--reports`` reports of ``--payload-bytes`` bytes -- encode (two seals per report),
shuffle (open the outer layer, check, dedupe, threshold, shuffle, forward) and analyze
(open the inner layer, strip padding, dedupe, build the multiset) -- and the *bare*
primitives: the same number of seal and open operations on plaintexts of the same
sizes (per report: seal of ``P + 2`` bytes, seal of ``P + 66`` bytes, open of both),
with no framing, parsing, padding, deduplication, thresholding or shuffling. Each
pipeline stage runs between the two halves of its bare counterpart (seals around
encode, outer opens around shuffle, inner opens around analyze), so drift of a shared
machine affects both alike.

    overhead_ratio = bare_seconds / pipeline_seconds
                   = (time of 2 seals + 2 opens per report) / (encode + shuffle + analyze)

The acceptance bar is ``overhead_ratio >= 0.75``. The same ratio over process CPU
time (``overhead_ratio_cpu``) is printed too: on a shared machine it is less disturbed
by other processes than wall time. The run is
:func:`protocol.studies.runners.benchmarks.bench_shuffler`.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "shuffler",
                       "throughput of encode/shuffle/analyze vs. bare seal/open primitives", run)
    p.add_argument("--reports", type=int, default=10000, help="number of reports (default 10000)")
    p.add_argument("--payload-bytes", type=int, default=32,
                   help="fixed payload size P in bytes (default 32)")
    p.add_argument("--crowds", type=int, default=100,
                   help="number of distinct crowd ids (default 100); threshold T=1 so all pass")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic randomness seed (default: OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli.output import print_json
    from protocol.studies.measure import peak_rss_mb
    from protocol.studies.runners.benchmarks import bench_shuffler

    result = bench_shuffler(args.reports, args.payload_bytes, args.crowds, args.seed)
    if args.json:
        print_json(result)
    else:
        for k in ("reports", "payload_bytes", "envelope_bytes", "encode_reports_per_s",
                  "shuffle_reports_per_s", "analyze_reports_per_s", "pipeline_reports_per_s",
                  "bare_reports_per_s", "overhead_ratio", "overhead_ratio_cpu",
                  "acceptance_met", "seconds"):
            print(f"{k:>24}: {result[k]}")
        print(f"{'peak_rss_mb':>24}: {peak_rss_mb():.1f}")
    return 0
