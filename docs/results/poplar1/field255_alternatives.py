"""``fedhh bench poplar1 --field`` plus two representations fedhh does not depend on,
gmpy2 and galois, timed and checked the same way (docs/dependencies.md). Run with both
installed (``pip install gmpy2 galois`` in a scratch environment):

    python docs/results/poplar1/field255_alternatives.py > docs/results/poplar1/field255.json
"""
import json

from protocol.cli.commands.bench_poplar1 import bench_field


def more(a, b, want, clock, out):  # noqa: ANN001, ANN201
    import time

    import galois
    import gmpy2
    import numpy as np

    from protocol.core.poplar1.field import P255

    ga, gb, gp = [gmpy2.mpz(x) for x in a], [gmpy2.mpz(x) for x in b], gmpy2.mpz(P255)
    clock("ns_per_product", "gmpy2", lambda: [(x * y) % gp for x, y in zip(ga, gb)],
          lambda g: [int(v) for v in g] == want, len(a))
    t = time.process_time()
    gf = galois.GF(P255)
    out["galois_field_construction_seconds"] = round(time.process_time() - t, 2)
    xa, xb = gf(np.asarray(a, dtype=object)), gf(np.asarray(b, dtype=object))
    out["galois_dtype"] = str(xa.dtype)
    clock("ns_per_product", "galois", lambda: xa * xb,
          lambda g: [int(v) for v in g] == want, len(a))
    out["gmpy2"], out["galois"] = gmpy2.version(), galois.__version__


if __name__ == "__main__":
    print(json.dumps(bench_field(100_000, 3, 0, more), indent=2))
