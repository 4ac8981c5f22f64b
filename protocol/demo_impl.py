"""The demo: what ``fedhh demo`` runs (grows as capabilities land)."""
from __future__ import annotations

import argparse

import numpy as np

from protocol.aggregation import Kind, RoundSpec, Votes
from protocol.transports import get_transport


def run_demo(args: argparse.Namespace) -> int:
    rng = np.random.default_rng(args.seed)
    spec = RoundSpec("demo", 0, Kind.VOTE, candidates=("apple", "banana", "cherry"), theta=10)
    votes = Votes(rng.choice(3, size=100, p=[0.6, 0.35, 0.05]))
    res = get_transport("plain").run_round(spec, votes, rng)
    print("plaintext vote round, theta=10:", dict(res.release.counts))
    return 0
