"""The committee's validity check: is each secret-shared vote one-hot or zero?

Theory of operation
-------------------
A batch of ``B`` reports (:mod:`protocol.core.committee.reports`), each a replicated
sharing over ``F_p`` (``p = 2^61 - 1``) of a vote ``x`` in ``F_p^d``, member ``P_j``
holding ``(c_j, c_{j+1})`` of every report. The check is the sketch of Boneh, Boyle,
Corrigan-Gibbs, Gilboa and Ishai ("Lightweight Techniques for Private Heavy Hitters",
IEEE S&P 2021), run on the verified multiplications of Chida, Genkin, Hamada,
Ikarashi, Kikuchi, Lindell and Nof (CRYPTO 2018) that the comparison uses
(:mod:`protocol.core.committee.verified`):

1. **Keys** (one message round the ring, fresh for every batch).
2. **The sketch vector, after the batch is fixed.** The members open a random sharing
   (``open-sketch``, checked as every opening is) and expand it into ``r`` in
   ``F_p^d``, uniform; the caller opens it only after all three members agreed on the
   batch's reports (:mod:`protocol.core.committee.intake`), so no device -- nor a
   server colluding with one and holding its report back -- knows ``r`` when the
   report is fixed.
3. **Linear sketch, locally.** Each member computes, for each of its components,
   ``z = <r, c>`` and ``z* = <r o r, c>`` (one exact ``F_p`` matrix product over the
   batch, :func:`protocol.core.committee.field.matmul`): replicated shares of
   ``z = <r, x>`` and ``z* = <r o r, x>``.
4. **One verified multiplication per report.** With the secret MAC key ``[R]``:
   ``[R z]``, ``[R z*]`` (input checks), then ``[z^2]`` and ``[R z^2]``; locally
   ``[t] = [z^2] - [z*]``; finally ``[rho t]`` with a fresh random ``[rho]`` per report.
   Then Chida et al.'s check over every wire, opened only as ``beta V`` (zero or
   uniform), and only after it passed, ``rho t`` is opened: **zero exactly when the
   report is valid, a uniform non-zero element otherwise** -- valid or invalid, and
   nothing about where the one is.

Why ``t = 0`` tests validity: ``t = (sum r_k x_k)^2 - sum r_k^2 x_k
= sum_k r_k^2 (x_k^2 - x_k) + 2 sum_{k<l} r_k r_l x_k x_l``. For ``x = 0`` or
``x = e_k`` every coefficient is zero. Otherwise the polynomial in ``r`` is non-zero
(an entry outside ``{0, 1}`` gives a non-zero ``r_k^2`` coefficient; two entries equal
to 1 give ``2 r_k r_l``) of total degree 2, so by Schwartz-Zippel a uniform ``r``
makes it vanish with probability at most ``2/p``; and ``rho = 0`` hides a non-zero
``t`` with probability ``1/p``. **An invalid report is accepted with probability at
most 3/p < 2^-59** (:data:`SOUNDNESS_BITS`), whatever the device chose, since it chose
before ``r`` and ``rho`` existed. A cheating member passes Chida et al.'s check with
probability at most ``3/p`` as in the comparison; its errors are fixed before the
check's randomness, and everything opened (``r``, the coins, ``beta V``, the bits) is
independent of the votes, so an abort never depends on them.

Cost per report: the two inner products of each member's two components (``4 d``
multiply-adds), and ``6`` field elements sent per member in the multiplication layers.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core.committee import field as F
from protocol.core.committee.rss import COMMITTEE, CommitteeAborted
from protocol.core.committee.verified import (
    CommitteeMessage, InProcessRouter, MessageHook, VerifiedParty,
)

__all__ = ["ValidityParty", "ValidityOutcome", "run_validity_check", "sketch_vectors",
           "sketch_shares", "SOUNDNESS_BITS", "SKETCH_WORDS"]

#: ``floor(-log2)`` of the probability that an invalid report passes (``3/p``)
SOUNDNESS_BITS = 59
#: field elements opened for the sketch vector's seed
SKETCH_WORDS = 4

Pair = tuple[np.ndarray, np.ndarray]
_EMPTY = np.zeros(0, dtype=np.uint64)


def sketch_vectors(context: bytes, coins: np.ndarray, d: int) -> np.ndarray:
    """The sketch's public vectors from the opened coins: a ``(d, 2)`` matrix whose
    columns are ``r`` and ``r o r``."""
    seed = hashlib.sha256(b"fedhh validity sketch\x00" + context
                          + np.asarray(coins, dtype="<u8").tobytes()).digest()
    r = F.uniform(seed, "sketch r", d)
    return np.stack([r, F.mul(r, r)], axis=1)


def sketch_shares(components: Pair, rr: np.ndarray) -> tuple[Pair, Pair]:
    """A member's shares ``(z_j, z_{j+1})`` and ``(z*_j, z*_{j+1})`` from its two
    components (``(B, d)`` matrices) and :func:`sketch_vectors`."""
    right = F.Right(rr)
    a = F.matmul(components[0], right, threads=1)
    b = F.matmul(components[1], right, threads=1)
    return (a[:, 0].copy(), b[:, 0].copy()), (a[:, 1].copy(), b[:, 1].copy())


class ValidityParty(VerifiedParty):
    """One member of the validity check of one batch of ``rows`` reports.

    The steps (each member in turn, messages routed by the caller): :meth:`key_message`
    / :meth:`receive_key`; :meth:`sketch_pair` opened (``open-sketch``) and handed to
    :meth:`set_sketch`; the caller computes the member's shares with
    :func:`sketch_shares` and gives them to :meth:`set_inputs`; then the inherited
    multiplication layers, :meth:`coin_pair`, zero test and :meth:`accept_check` as in
    the comparison; :meth:`result_pair` opened (``open-valid``) is zero exactly at the
    valid reports.

    Raises:
        ValueError: bad index, context or row count.
    """

    def __init__(self, index: int, context: bytes, rows: int, rand: Any = None) -> None:
        super().__init__(index, context, _EMPTY, _EMPTY, rand)
        if type(rows) is not int or rows < 1:
            raise ValueError("a validity check needs at least one report")
        self.rows = rows
        self.view.update({"components": None, "opened_sketch": None,
                          "opened_valid": None})
        self._inputs: tuple[Pair, Pair] | None = None

    # ------------------------------------------------------------- set-up

    def key_message(self) -> CommitteeMessage:
        """``K_i``, for party ``i+1``."""
        return self._msg("key", self.next, self._own_key)

    def receive_key(self, key: Any) -> None:
        """Take ``K_{i-1}``.

        Raises:
            CommitteeAborted: a malformed or misrouted message.
        """
        self._prev_key = self._take(key, "key", self.prev, nbytes=32)
        self.view["keys_received"].append((self.prev, self._prev_key))

    def sketch_pair(self) -> Pair:
        """The random sharing opened for the sketch's seed."""
        return self._random("sketch", 4)

    def set_sketch(self, coins: np.ndarray, d: int) -> np.ndarray:
        """The sketch vectors (:func:`sketch_vectors`) from the opened coins."""
        self.view["opened_sketch"] = coins.copy()
        return sketch_vectors(self.context, coins, d)

    def set_inputs(self, z: Pair, zs: Pair) -> None:
        """This member's shares of ``z`` and ``z*`` (``(rows,)`` field vectors each).

        Raises:
            CommitteeAborted: ``bad_arguments`` (wrong shapes or entries).
        """
        for v in (*z, *zs):
            if not F.check(v, (self.rows,)):
                raise self._abort("bad_arguments", "sketch shares are (rows,) field vectors")
        self._inputs = (z, zs)
        self.view["components"] = (z[0].copy(), z[1].copy(), zs[0].copy(), zs[1].copy())

    # ------------------------------------------------------------- the circuit

    def begin(self, theta: int = 1) -> None:  # noqa: ARG002 - the circuit has no theta
        """Plan the circuit: ``[R z]``, ``[R z*]``; ``[z^2]``, ``[R z^2]``;
        ``[rho (z^2 - z*)]``, ``[R rho (z^2 - z*)]``."""
        if self._inputs is None:
            raise self._abort("bad_arguments", "the sketch shares are not set")
        z, zs = self._inputs
        rows = self.rows
        self._r = self._random("r", 1)
        r_full = (np.broadcast_to(self._r[0], (rows,)).copy(),
                  np.broadcast_to(self._r[1], (rows,)).copy())
        self._layer = 0
        self._pending = [(r_full, z, "in"), (r_full, zs, "in")]

    def receive_layer(self, msg: Any) -> bool:
        """Complete a layer with party ``i+1``'s products; whether more follow.

        Raises:
            CommitteeAborted: a malformed or misrouted message.
        """
        sizes = [z.size for z in self._own_z]
        incoming = self._take(msg, f"mult-{self._layer}", self.next, (sum(sizes),))
        parts = np.split(incoming, np.cumsum(sizes)[:-1])
        results = [(own, theirs) for own, theirs in zip(self._own_z, parts)]
        del self._own_z
        tag = self._pending[0][2]
        self._layer += 1
        assert self._inputs is not None
        z, zs = self._inputs
        if tag == "in":
            rz, rzs = results
            self._checked += [(rz, z), (rzs, zs)]
            self._rz, self._rzs = rz, rzs
            self._pending = [(z, z, "sq"), (rz, z, "sq")]
            return True
        if tag == "sq":
            w, rw = results
            self._checked.append((rw, w))
            t = (F.sub(w[0], zs[0]), F.sub(w[1], zs[1]))
            rt = (F.sub(rw[0], self._rzs[0]), F.sub(rw[1], self._rzs[1]))
            rho = self._random("rho", self.rows)
            self._pending = [(t, rho, "final"), (rt, rho, "final")]
            return True
        out, rout = results
        self._checked.append((rout, out))
        self._out = out
        self._pending = []
        return False

    def accept_valid(self, opened: np.ndarray) -> np.ndarray:
        """The valid reports (``rho t == 0``) from the opened ``rho t``."""
        valid = np.asarray(opened) == 0
        self.view["opened_valid"] = valid.astype(np.uint8)
        return valid


@dataclass
class ValidityOutcome:
    """What one batch's check opened: ``valid`` per report, each member's view, CPU
    seconds and bytes sent."""

    valid: np.ndarray
    views: list[dict[str, Any]]
    seconds: list[float]
    bytes_sent: list[int]


def run_validity_check(shares_of: Sequence[Callable[[np.ndarray], tuple[Pair, Pair]]],
                       rows: int, d: int, *, context: bytes,
                       rands: Sequence[Any] | None = None, hook: MessageHook | None = None,
                       party_classes: Sequence[type] | None = None,
                       seconds: Sequence[float] | None = None) -> ValidityOutcome:
    """The three members' check of one batch in this process, every message routed
    between them.

    Args:
        shares_of: per member, ``shares_of[j](rr) -> (z pair, z* pair)``: its sketch
            shares for the opened sketch vectors (:func:`sketch_shares` on its own
            components); its CPU time is the member's.
        rows, d: reports in the batch, candidates per report.
        context: 32 bytes binding the batch (the round and the agreed set of reports).
        rands: each member's randomness (OS by default).
        hook: as :func:`protocol.core.committee.verified.run_verified_committee`'s.
        party_classes: per member a :class:`ValidityParty` subclass (a deviating one).
        seconds: CPU seconds already charged to each member (added to).

    Raises:
        CommitteeAborted: a lost, malformed, misrouted or replayed message, an opening
            whose copies differ, or a failed verification; nothing is opened then.
    """
    rands = list(rands) if rands is not None else [None] * COMMITTEE
    classes = list(party_classes) if party_classes is not None else [ValidityParty] * 3
    try:
        parties = [classes[i](i, context, rows, rands[i]) for i in range(COMMITTEE)]
    except ValueError as exc:
        raise CommitteeAborted("bad_arguments", 0, str(exc)) from None
    if seconds is not None:
        for p, s in zip(parties, seconds):
            p.seconds = float(s)
    router = InProcessRouter(parties, hook)
    sent, call, post, open_all = router.sent, router.call, router.post, router.open_all

    box = post([call(i, parties[i].key_message) for i in range(COMMITTEE)])
    for i, p in enumerate(parties):
        call(i, lambda p=p: p.receive_key(box[(p.prev, p.index, "key")]))
    coins = open_all("open-sketch", [call(i, parties[i].sketch_pair)
                                     for i in range(COMMITTEE)])
    for i, p in enumerate(parties):
        def local(p: ValidityParty = p, i: int = i) -> None:
            rr = p.set_sketch(coins, d)
            p.set_inputs(*shares_of[i](rr))
            p.begin()
        call(i, local)
    router.multiply_and_check()
    opened = open_all("open-valid", [call(i, parties[i].result_pair)
                                     for i in range(COMMITTEE)])
    valid = [call(i, lambda i=i: parties[i].accept_valid(opened)) for i in range(COMMITTEE)]
    return ValidityOutcome(valid[0], [p.view for p in parties], [p.seconds for p in parties],
                           sent)
