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
by other processes than wall time.
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
    import time

    from protocol.cli.benchutil import peak_rss_mb, print_json
    from protocol.cli import UsageError
    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
    from shuffler import (
        Analyzer, CrowdKey, Encoder, HardThreshold, KeyPair, Shuffler,
    )
    from shuffler.keys import KEY_BYTES, open_sealed, seal
    from shuffler.messages import CROWD_ID_BYTES, LABEL_INNER, LABEL_OUTER, MAX_PAYLOAD

    n, psize = args.reports, args.payload_bytes
    if n < 1:
        raise UsageError("--reports must be >= 1")
    if not 0 <= psize <= MAX_PAYLOAD:
        raise UsageError(f"--payload-bytes must be in [0, {MAX_PAYLOAD}]")
    if args.crowds < 1:
        raise UsageError("--crowds must be >= 1")
    rand = (insecure_deterministic_randomness(args.seed, "bench-shuffler")
            if args.seed is not None else OsRandom())

    s_keys, a_keys = KeyPair.generate(rand), KeyPair.generate(rand)
    blob = rand.token_bytes(n * psize)
    reports = [blob[i * psize:(i + 1) * psize] for i in range(n)]
    ck = CrowdKey(rand.token_bytes(32), "bench", 0)
    crowd_of = [ck.crowd_id(i.to_bytes(4, "big")) for i in range(args.crowds)]
    crowd_ids = [crowd_of[i % args.crowds] for i in range(n)]

    # ---- bare primitives: same count and sizes, no framing -------------------------
    inner_pt = bytes(psize + 2)
    outer_pt = bytes(CROWD_ID_BYTES + KEY_BYTES + psize + 2 + 16)
    ad_i, ad_o = b"a" * 40, b"b" * 40  # associated data of header-like size
    bare_t = {"seal": 0.0, "open_outer": 0.0, "open_inner": 0.0}
    cpu = {"bare": 0.0, "pipeline": 0.0}
    sealed: list[tuple[bytes, bytes, bytes, bytes]] = []

    def bare_seal(count: int) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        secrets = rand.token_bytes(2 * KEY_BYTES * count)
        for j in range(count):
            o = 2 * KEY_BYTES * j
            ei, ci = seal(a_keys.public_key, secrets[o:o + KEY_BYTES], LABEL_INNER, inner_pt, ad_i)
            eo, co = seal(s_keys.public_key, secrets[o + KEY_BYTES:o + 2 * KEY_BYTES],
                          LABEL_OUTER, outer_pt, ad_o)
            sealed.append((ei, ci, eo, co))
        bare_t["seal"] += time.perf_counter() - t0
        cpu["bare"] += time.process_time() - c0

    def bare_open(part: slice, outer: bool) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        if outer:
            for _, _, eo, co in sealed[part]:
                open_sealed(s_keys, LABEL_OUTER, eo, co, ad_o)
        else:
            for ei, ci, _, _ in sealed[part]:
                open_sealed(a_keys, LABEL_INNER, ei, ci, ad_i)
        bare_t["open_outer" if outer else "open_inner"] += time.perf_counter() - t0
        cpu["bare"] += time.process_time() - c0

    def stage(fn):  # noqa: ANN001, ANN202
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu["pipeline"] += time.process_time() - c0
        return out, time.perf_counter() - t0

    first = n // 2
    lo, hi = slice(0, first), slice(first, n)
    # each pipeline stage runs between the two halves of its bare counterpart
    encoder = Encoder(s_keys.public_key, a_keys.public_key, "bench", 0, psize, rand)
    bare_seal(first)
    envelopes, enc_s = stage(lambda: encoder.encode_batch(reports, crowd_ids))
    bare_seal(n - first)

    shuffler = Shuffler(s_keys, rand, min_batch_size=1, threshold=HardThreshold(1))
    shuffler.open_batch(encoder.context)
    bare_open(lo, outer=True)
    (accepted, out), shuf_s = stage(
        lambda: (shuffler.submit_many(envelopes), shuffler.close_batch(encoder.context)))
    bare_open(hi, outer=True)

    analyzer = Analyzer(a_keys)
    bare_open(lo, outer=False)
    multiset, an_s = stage(lambda: analyzer.open_batch(out.batch).multiset())
    bare_open(hi, outer=False)

    if accepted != n or out.receipt.forwarded != n or sum(multiset.values()) != n:
        raise RuntimeError("benchmark pipeline lost reports")  # pragma: no cover

    pipe_s = enc_s + shuf_s + an_s
    bare_seal_s = bare_t["seal"]
    bare_open_s = bare_t["open_outer"] + bare_t["open_inner"]
    bare_s = bare_seal_s + bare_open_s
    ratio = bare_s / pipe_s
    result = {
        "benchmark": "shuffler",
        "reports": n,
        "payload_bytes": psize,
        "envelope_bytes": len(envelopes[0]),
        "crowds": args.crowds,
        "seed": args.seed,
        "encode_seconds": round(enc_s, 4),
        "shuffle_seconds": round(shuf_s, 4),
        "analyze_seconds": round(an_s, 4),
        "pipeline_seconds": round(pipe_s, 4),
        "bare_seal_seconds": round(bare_seal_s, 4),
        "bare_open_outer_seconds": round(bare_t["open_outer"], 4),
        "bare_open_inner_seconds": round(bare_t["open_inner"], 4),
        "bare_open_seconds": round(bare_open_s, 4),
        "bare_seconds": round(bare_s, 4),
        "encode_reports_per_s": round(n / enc_s, 1),
        "shuffle_reports_per_s": round(n / shuf_s, 1),
        "analyze_reports_per_s": round(n / an_s, 1),
        "pipeline_reports_per_s": round(n / pipe_s, 1),
        "bare_seals_per_s": round(2 * n / bare_seal_s, 1),
        "bare_opens_per_s": round(2 * n / bare_open_s, 1),
        "bare_reports_per_s": round(n / bare_s, 1),
        "overhead_ratio": round(ratio, 4),
        "overhead_ratio_definition": "bare (2 seals + 2 opens per report) seconds / "
                                     "pipeline (encode + shuffle + analyze) seconds",
        "pipeline_cpu_seconds": round(cpu["pipeline"], 4),
        "bare_cpu_seconds": round(cpu["bare"], 4),
        "overhead_ratio_cpu": round(cpu["bare"] / cpu["pipeline"], 4),
        "acceptance_min_ratio": 0.75,
        "acceptance_met": ratio >= 0.75,
        "seconds": round(pipe_s + bare_s, 4),
    }
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
