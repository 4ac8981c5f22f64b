"""The plaintext reference transport: a trusted aggregator that sees everything.

It is the oracle the contract tests compare every other transport with. Its server
view holds every individual contribution, which is exactly what the other transports
exist to hide.
"""
from __future__ import annotations

import time

import numpy as np

from typing import Mapping

from protocol.core.contract import (
    AggregationAborted, Cost, Kind, Release, Reports, RoundResult, RoundSpec, Sample,
    Transport, Vectors, Votes, threshold_counts, Contributions,
)


class PlainTransport(Transport):
    """Args:
        samples: ``(task, round) -> Sample`` to hand out instead of drawing (to rerun,
            in plaintext, the samples another transport's committee drew: the demo's
            comparison with OS randomness).
    """

    name = "plain"
    kinds = frozenset({Kind.VOTE, Kind.VECTOR, Kind.REPORT})

    def __init__(self, samples: Mapping[tuple[str, int], Sample] | None = None) -> None:
        self.samples = samples

    def draw_sample(self, task: str, round_no: int, population: int, size: int,
                    rng: np.random.Generator) -> Sample:
        given = None if self.samples is None else self.samples.get((task, int(round_no)))
        if given is None:
            return super().draw_sample(task, round_no, population, size, rng)
        if given.population != population or len(given.users) != size:
            raise ValueError(f"the recorded sample of round {round_no} has "
                             f"{len(given.users)} of {given.population} users, not "
                             f"{size} of {population}")
        return given

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        t0 = time.process_time()
        if spec.kind is Kind.VOTE:
            if not isinstance(contributions, Votes):
                raise_kind(spec, contributions)
            choice = contributions.validate(spec)
            counted, bad, dropped = self._corrupted_choice(spec, contributions, choice)
            _check_participants(spec, counted.size)
            counts = np.bincount(counted[counted >= 0], minlength=spec.domain_size)
            release = Release(spec, int(counted.size), counts=threshold_counts(spec, counts))
            views = {"server": {"individual_votes": counted, "counts": counts}}
            up = int(choice.size) * 8
            if self.corrupt is not None:
                from protocol.core.corruption import record_round
                from protocol.core.transports.secagg_transport import voters

                rec = record_round(self, spec, choice, voters(contributions), bad, release,
                                   validated=True, dropped=dropped,
                                   dropped_corrupted=dropped,
                                   counted=int(bad.size) - sum(dropped.values()))
                views["corrupted"] = rec.as_dict()
        elif spec.kind is Kind.VECTOR:
            if not isinstance(contributions, Vectors):
                raise_kind(spec, contributions)
            values = contributions.validate(spec)
            _check_participants(spec, values.shape[0])
            total = modular_sum(values, spec.modulus)
            release = Release(spec, int(values.shape[0]), vector=total)
            views = {"server": {"individual_vectors": values, "sum": total}}
            up = values.size * ((spec.modulus - 1).bit_length() + 7) // 8
        else:
            if not isinstance(contributions, Reports):
                raise_kind(spec, contributions)
            payloads = contributions.validate(spec)
            _check_participants(spec, len(payloads))
            order = rng.permutation(len(payloads))
            release = Release(spec, len(payloads), reports=tuple([payloads[i] for i in order.tolist()]))
            views = {"server": {"individual_reports": payloads}}
            up = len(payloads) * spec.report_size
        cost = Cost({"server": time.process_time() - t0}, bytes_up=up, bytes_down=0)
        return RoundResult(release, views, cost)


    def _corrupted_choice(self, spec: RoundSpec, votes: Votes, choice: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
        """The votes the trusted server counts with corrupted clients: it sees each
        client's vector, counts a valid one (one-hot or zero) as that vote and drops
        any other (``invalid_vote``). Returns ``(counted choices, corrupted positions,
        dropped by reason)``.

        Raises:
            ContractError: a strategy that attacks validated reports.
        """
        c = self.corrupt
        if c is None:
            return choice, np.zeros(0, dtype=np.int64), {}
        from protocol.core.contract import ContractError
        from protocol.core.corruption import corrupt_positions, corrupt_vector, is_valid_vote
        from protocol.core.transports.secagg_transport import voters

        if c.on_reports:
            raise ContractError(f"the corrupted-client strategy {c.strategy!r} attacks the "
                                "committee's validated reports; the plaintext transport "
                                "takes votes (use a vector strategy)")
        bad = corrupt_positions(c, spec.task, int(spec.round), voters(votes))
        if bad.size == 0:
            return choice, bad, {}
        vec = corrupt_vector(c, spec.candidates, spec.theta)
        if is_valid_vote(vec):
            nz = np.flatnonzero(vec)
            out = choice.copy()
            out[bad] = int(nz[0]) if nz.size else -1
            return out, bad, {}
        keep = np.ones(choice.size, dtype=bool)
        keep[bad] = False
        return choice[keep], bad, {"invalid_vote": int(bad.size)}


def modular_sum(values: np.ndarray, modulus: int) -> np.ndarray:
    """Exact column sums of a uint64 matrix modulo ``modulus`` (any modulus <= 2**64)."""
    values = np.asarray(values, dtype=np.uint64)
    if modulus == 1 << 64:
        return values.sum(axis=0, dtype=np.uint64)  # wraps mod 2**64 exactly
    if modulus & (modulus - 1) == 0:
        return values.sum(axis=0, dtype=np.uint64) & np.uint64(modulus - 1)
    if modulus > 1 << 62:  # rare: exact big-integer sums
        col = values.astype(object).sum(axis=0) % modulus
        return np.array([int(x) for x in col], dtype=np.uint64)
    # general modulus: sum in chunks small enough not to overflow 64 bits
    m = np.uint64(modulus)
    chunk = max(1, int((2**64 - 1) // modulus) - 1)
    acc = np.zeros(values.shape[1], dtype=np.uint64)
    for start in range(0, values.shape[0], chunk):
        acc = (acc + values[start:start + chunk].sum(axis=0, dtype=np.uint64) % m) % m
    return acc


def _check_participants(spec: RoundSpec, n: int) -> None:
    if n < spec.min_participants:
        raise AggregationAborted("too_few_participants",
                                 f"{n} contributions, {spec.min_participants} required")


def raise_kind(spec: RoundSpec, contributions: object) -> None:
    from protocol.core.contract import ContractError

    raise ContractError(f"a {spec.kind.value} round cannot take {type(contributions).__name__}")
