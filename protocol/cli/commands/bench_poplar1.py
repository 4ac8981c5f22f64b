"""``fedhh bench poplar1``: Poplar1's cost per report against the draft's own reference
implementation, and heavy hitters at scale (:mod:`protocol.studies.runners.poplar1`).

* ``--reference DIR`` (the ``poc/`` directory of cfrg/draft-irtf-cfrg-vdaf at tag
  ``draft-irtf-cfrg-vdaf-20``, imported at run time; Python >= 3.12): client sharding and
  one level's preparation per report, ours batched against the reference one report at a
  time, interleaved ``--repeats`` times, medians and ratios of this process's CPU time
  (``time.process_time``), outputs checked equal; ``--bits`` any length the draft
  allows (1 to 65535);
* ``--hh``: heavy hitters on Zipf populations of random printable strings
  (``--users`` and ``--chars`` lists; 8 bits a character, so the string length sets
  ``BITS``: ``--bits`` is refused there, with the reason): wall and CPU seconds;
* ``--field``: Field255 arithmetic per element, this package's numpy limbs against the
  alternatives (Python integers, numpy object arrays), beside Field64's
  (docs/dependencies.md; ``docs/results/poplar1/field255_alternatives.py`` adds gmpy2
  and galois);
* ``--levels``: CPU per report and aggregator of the last inner level and of the leaf
  in a prefix search (node cache on) over ``--reports`` reports of ``--bits`` bits with
  ``--candidates`` prefixes a level, median of ``--repeats`` fresh runs;
* ``--table FILES``: the Markdown table of earlier outputs (docs/poplar1.md).

Prints one JSON object (with the peak memory).
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "poplar1", "Poplar1: cost per report against the draft's "
                       "reference, and heavy hitters at scale", run)
    p.add_argument("--reference", default=None,
                   help="the draft's poc/ directory (cfrg/draft-irtf-cfrg-vdaf, tag "
                        "draft-irtf-cfrg-vdaf-20) to measure against")
    # its own dest: the shared rule for an option named "bits" (at most 64) is another
    # command's; Poplar1 measures 256-bit strings
    p.add_argument("--bits", default=None, dest="vdaf_bits", metavar="BITS",
                   help="bits of a measurement, 1 to 65535 as the draft allows (default 32; "
                        "not with --hh, whose lengths are --chars)")
    p.add_argument("--reports", type=int, default=1000,
                   help="reports ours processes in one batch (default 1000)")
    p.add_argument("--ref-reports", type=int, default=6, dest="ref_reports",
                   help="reports the reference processes (default 6)")
    p.add_argument("--candidates", type=int, default=16,
                   help="candidate prefixes of the measured levels (default 16)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    p.add_argument("--hh", action="store_true", help="benchmark heavy hitters instead")
    p.add_argument("--state", action="store_true",
                   help="measure instead what an aggregator keeps per report between levels "
                        "(AES keys or contexts, IDPF nodes, sponge) under each AES backend "
                        "(--reports reports of --bits bits, --candidates a level), and each "
                        "backend's CPU per report for one call over 64 blocks")
    p.add_argument("--users", default="1000", dest="users_list",
                   help="--hh: comma-separated n (default 1000; 1e5 accepted)")
    p.add_argument("--chars", default="32",
                   help="--hh: comma-separated string lengths (default 32: 256 bits)")
    p.add_argument("--support", type=int, default=10_000,
                   help="--hh: distinct strings (default 10000)")
    p.add_argument("--zipf-s", type=float, default=1.1, dest="zipf_s",
                   help="--hh: Zipf exponent (default 1.1)")
    p.add_argument("--threshold", type=int, default=None,
                   help="--hh: threshold (default max(2, ceil(n / 200)))")
    p.add_argument("--out-of-core", default="auto", choices=("auto", "yes", "no"),
                   dest="out_of_core",
                   help="--hh: keep the uploads in np.memmap files in a temporary directory "
                        "(auto: from 20000 reports on)")
    p.add_argument("--park", action=argparse.BooleanOptionalAction, default=None,
                   help="--hh: also keep the aggregators' per-report state between levels in "
                        "those files (memory bounded by the batch; default from 200000 "
                        "reports on)")
    p.add_argument("--processes", default="auto", choices=("auto", "yes", "no"),
                   help="--hh: each aggregator in its own process (auto: from 20000 reports "
                        "on), or both in this one")
    p.add_argument("--aes", default=None, choices=("openssl", "contexts", "numpy"),
                   help="the IDPF's per-report AES: openssl (one context keyed again per "
                        "report, 32 bytes a report; the default where libcrypto loads), "
                        "contexts (one cryptography context per report and key, kept) or "
                        "numpy (AES-128 in numpy across reports; slower, measured by --state)")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="--hh: append one JSON line per level to FILE as the search runs "
                        "(level, peak memory so far, CPU seconds): how far a long run got")
    p.add_argument("--field", action="store_true",
                   help="measure Field255 products and dot products per element (--reports "
                        "elements, default 100000 here), limbs against the alternatives")
    p.add_argument("--levels", action="store_true",
                   help="CPU per report of the last inner level and of the leaf in a prefix "
                        "search (--reports, --bits, --candidates; median of --repeats)")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    p.add_argument("--table", default=None, metavar="FILES",
                   help="print the Markdown table of earlier outputs (comma-separated JSON "
                        "files, all --hh or all --reference) instead of running")


def _ints(text: str, name: str) -> list[int]:
    from protocol.cli import UsageError, count

    try:
        vals = [count(x.strip()) for x in text.split(",") if x.strip()]
    except (ValueError, argparse.ArgumentTypeError):
        raise UsageError(f"{name} must be a comma-separated list of integers") from None
    if not vals:
        raise UsageError(f"{name} is empty")
    return vals


def _bits(value: str | None, hh: bool) -> int:
    """``--bits``: an integer in the draft's range ``[1, 2^16)``; with ``--hh`` refused
    (the measured strings are ``--chars`` characters of 8 bits each)."""
    from protocol.cli import UsageError

    if value is None:
        return 32
    if hh:
        raise UsageError("--bits does not apply to --hh: its strings are --chars characters "
                         "of 8 bits each (--chars 4 is 32 bits)")
    try:
        bits = int(value)
    except ValueError:
        raise UsageError(f"--bits must be an integer from 1 to 65535, not {value!r}") from None
    if not 1 <= bits < (1 << 16):
        raise UsageError(f"--bits must be from 1 to 65535 (the draft's BITS), not {bits}")
    return bits


def bench_field(n: int, repeats: int, seed: int, extra=None) -> dict:  # noqa: ANN001
    """Nanoseconds of process CPU per Field255 product (and per pair of a dot product of
    44 pairs, the sketch's shape at 44 candidates) over ``n`` random elements, median of
    ``repeats``: this package's limbs against Python integers and numpy object arrays;
    Field64's ``uint64`` arithmetic beside them. Every result is checked equal to
    Python's. ``extra(a, b, want, clock, out)`` may time more representations the same
    way (``docs/results/poplar1/field255_alternatives.py`` adds gmpy2 and galois, which
    the package does not depend on)."""
    import random
    import time

    import numpy as np

    from protocol.core.poplar1 import field as F

    p = F.P255
    rnd = random.Random(seed)
    a = [rnd.randrange(p) for _ in range(n)]
    b = [rnd.randrange(p) for _ in range(n)]
    want = [(x * y) % p for x, y in zip(a, b)]
    rows = n // 44
    want_dot = [sum(x * y for x, y in zip(a[44 * r:44 * r + 44], b[44 * r:44 * r + 44])) % p
                for r in range(rows)]
    out: dict = {"elements": n, "repeats": repeats, "clock": "process_time",
                 "ns_per_product": {}, "ns_per_dot_pair": {}}

    def clock(table: str, name: str, fn, check, count: int) -> None:  # noqa: ANN001
        ts = []
        for _ in range(repeats):
            t = time.process_time()
            got = fn()
            ts.append(time.process_time() - t)
        if check(got) is not True:
            raise RuntimeError(f"bench --field: {name} disagrees with Python's integers")
        out[table][name] = round(1e9 * float(np.median(ts)) / count, 1)

    clock("ns_per_product", "python ints", lambda: [(x * y) % p for x, y in zip(a, b)],
          lambda g: g == want, n)
    ao, bo = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    clock("ns_per_product", "numpy object arrays", lambda: (ao * bo) % p,
          lambda g: g.tolist() == want, n)
    A, B = F.limbs_from_ints(a, (n,)), F.limbs_from_ints(b, (n,))
    clock("ns_per_product", "fedhh limbs", lambda: F.mul255(A, B),
          lambda g: F.limbs_to_ints(g) == want, n)
    a64 = np.asarray([x % F.P64 for x in a], dtype=np.uint64)
    b64 = np.asarray([x % F.P64 for x in b], dtype=np.uint64)
    w64 = [(int(x) * int(y)) % F.P64 for x, y in zip(a64, b64)]
    clock("ns_per_product", "Field64 (uint64)", lambda: F.mul64(a64, b64),
          lambda g: [int(v) for v in g] == w64, n)
    ar, br = ao[:44 * rows].reshape(rows, 44), bo[:44 * rows].reshape(rows, 44)
    clock("ns_per_dot_pair", "python ints",
          lambda: [sum(x * y for x, y in zip(u, v)) % p for u, v in zip(ar.tolist(), br.tolist())],
          lambda g: g == want_dot, 44 * rows)
    clock("ns_per_dot_pair", "numpy object arrays", lambda: (ar * br).sum(axis=1) % p,
          lambda g: g.tolist() == want_dot, 44 * rows)
    Ar, Br = A[:, :44 * rows].reshape(F.LIMBS, rows, 44), B[:, :44 * rows].reshape(F.LIMBS, rows, 44)
    clock("ns_per_dot_pair", "fedhh limbs", lambda: F.dot255(Ar, Br),
          lambda g: F.limbs_to_ints(g) == want_dot, 44 * rows)
    a64r, b64r = a64[:44 * rows].reshape(rows, 44), b64[:44 * rows].reshape(rows, 44)
    w64d = [sum(int(x) * int(y) for x, y in zip(u, v)) % F.P64 for u, v in zip(a64r, b64r)]
    clock("ns_per_dot_pair", "Field64 (uint64)", lambda: F.dot64(a64r, b64r),
          lambda g: [int(v) for v in g] == w64d, 44 * rows)
    if extra is not None:
        extra(a, b, want, clock, out)
    out["numpy"] = np.__version__
    return out


def bench_levels(n: int, bits: int, candidates: int, repeats: int, seed: int) -> dict:
    """Process CPU per report and aggregator of level ``bits - 2`` (the last inner one)
    and of the leaf in a prefix search whose every level has ``candidates`` prefixes
    (the children of ``candidates / 2`` strings every report holds one of), both
    aggregators and both rounds, the node cache on, median of ``repeats`` runs with fresh
    aggregators. Every report must be accepted and every count right."""
    import time

    import numpy as np

    from protocol.core.poplar1 import Aggregator, Poplar1, jit, sketch_accepts, sketch_message
    from protocol.core.poplar1 import field as F

    rng = np.random.default_rng(seed)
    pop = rng.integers(0, 2, size=(max(1, candidates // 2), bits)).astype(bool)
    who = rng.integers(0, pop.shape[0], size=n)
    meas = pop[who]
    v = Poplar1(bits, b"fedhh bench")
    rep = v.shard_batch(meas, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                        rng.integers(0, 256, (n, v.RAND_SIZE), dtype=np.uint8))
    key = rng.integers(0, 256, 32, dtype=np.uint8).tobytes()
    times: dict[str, list[float]] = {"inner": [], "leaf": []}
    count = 0
    for _ in range(repeats):
        aggs = [Aggregator(v, j, key, rep.nonces, rep.public, rep.shares[j]) for j in (0, 1)]
        for lv in range(bits):
            pref = tuple(sorted({tuple(bool(b) for b in row[:lv]) + (c,)
                                 for row in pop for c in (False, True)}))
            t = time.process_time()
            r1 = [a.verify_init((lv, pref)) for a in aggs]
            r2 = [a.verify_next(sketch_message(lv, bits, *r1)) for a in aggs]
            ok = sketch_accepts(lv, bits, *r2)
            shares = [a.aggregate(ok) for a in aggs]
            dt = (time.process_time() - t) / n / 2
            mod = F.P64 if lv < bits - 1 else F.P255
            counts = [(int(x) + int(y)) % mod for x, y in zip(*shares)]
            truth = [int(sum(1 for row in meas[:, :lv + 1] if tuple(row) == p)) for p in pref] \
                if lv >= bits - 2 else counts
            if not ok.all() or counts != truth:
                raise RuntimeError("bench --levels: a report was rejected or a count is wrong")
            if lv == bits - 2:
                times["inner"].append(dt)
            if lv == bits - 1:
                times["leaf"].append(dt)
                count = len(pref)
    return {"reports": n, "bits": bits, "leaf_candidates": count, "repeats": repeats,
            "clock": "process_time", "kernels": jit.kernels(),
            "us_per_report_and_aggregator": {
                k: round(1e6 * float(np.median(x)), 1) for k, x in times.items() if x}}


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.output import print_json
    from protocol.studies.runners import poplar1

    if args.table is not None:
        import json

        docs = []
        for name in [x.strip() for x in args.table.split(",") if x.strip()]:
            try:
                with open(name, encoding="utf-8") as fh:
                    docs.append(json.load(fh))
            except (OSError, ValueError) as exc:
                raise UsageError(f"--table {name}: {exc}") from None
        if not docs:
            raise UsageError("--table needs at least one file")
        print("\n".join(poplar1.bench_table(docs)))
        return 0
    bits = _bits(args.vdaf_bits, args.hh)
    if args.field:
        n = 100_000 if args.reports == 1000 else args.reports
        if n < 44 or args.repeats < 1:
            raise UsageError("--field needs --reports >= 44 and --repeats >= 1")
        print_json(bench_field(n, args.repeats, args.seed))
        return 0
    if args.levels:
        if bits < 2 or args.reports < 1 or args.candidates < 2 or args.repeats < 1:
            raise UsageError("--levels needs --bits >= 2, --reports >= 1, --candidates >= 2")
        print_json(bench_levels(args.reports, bits, args.candidates, args.repeats, args.seed))
        return 0
    if args.aes is not None:
        from protocol.core.poplar1.xof import set_aes_backend

        try:
            set_aes_backend(args.aes)
        except ValueError as exc:
            raise UsageError(f"--aes: {exc}") from None
    if args.state:
        print_json(poplar1.bench_state(args.reports, bits, args.candidates,
                                       seed=args.seed, repeats=args.repeats))
        return 0
    if args.hh:
        trace = None
        if args.trace is not None:
            import json

            try:
                fh = open(args.trace, "a", encoding="utf-8")  # noqa: SIM115 - closed below
            except OSError as exc:
                raise UsageError(f"--trace {args.trace}: {exc}") from None

            def write_row(row: dict) -> None:
                fh.write(json.dumps(row) + "\n")
                fh.flush()
            trace = write_row
        try:
            out = poplar1.bench_hh(_ints(args.users_list, "--users"),
                                   _ints(args.chars, "--chars"),
                                   support=args.support, zipf_s=args.zipf_s,
                                   threshold=args.threshold, seed=args.seed,
                                   out_of_core={"auto": None, "yes": True,
                                                "no": False}[args.out_of_core],
                                   park=args.park, trace=trace,
                                   processes={"auto": None, "yes": True,
                                              "no": False}[args.processes])
        finally:
            if trace is not None:
                fh.close()
    else:
        if args.reference is None:
            raise UsageError("give --reference DIR (the draft's poc/ directory) or --hh")
        out = poplar1.bench_vs_reference(args.reference, bits=bits, reports=args.reports,
                                         ref_reports=args.ref_reports,
                                         candidates=args.candidates, repeats=args.repeats,
                                         seed=args.seed)
    print_json(out)
    return 0
