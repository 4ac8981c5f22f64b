"""Validated votes: each sampled device secret-shares its vote among the committee.

Theory of operation
-------------------
A vote round of the thresholding committee (the server ``P0`` and two helpers ``P1``,
``P2``) over ``d`` candidates. Device ``u`` holds a vote ``x`` in ``F_p^d``
(``p = 2^61 - 1``): the one-hot vector of its candidate, or zero (an abstention). It
splits ``x`` into the replicated sharing the committee computes on
(:mod:`protocol.core.committee.verified`), ``x = c0 + c1 + c2``, member ``P_j`` holding
``(c_j, c_{j+1})``:

* ``c1 = G(s1)`` and ``c2 = G(s2)`` from two fresh 32-byte seeds (``G``: the ChaCha20
  keystream of :func:`protocol.core.committee.field.uniform`, exactly uniform field
  elements), and ``c0 = x - c1 - c2`` written out (``8 d`` bytes) **once**, as
  ``ct0``: ChaCha20-Poly1305 under a fresh 32-byte key ``K0`` that both holders of
  ``c0`` (the server and helper 2) are given, so the two decrypt the very same bytes;
* **commitments** ``comK = H(ctx, u, K0)``, ``com1 = H(ctx, u, s1)``,
  ``com2 = H(ctx, u, s2)`` (SHA-256 with a label each; every committed value is 32
  random bytes, so a commitment hides it). ``comK`` makes the encryption of ``c0``
  key-committing: ChaCha20-Poly1305 alone is not (a device could make ``ct0`` open to
  two plaintexts under two keys), and a holder accepts only the committed ``K0``;
* **parts**: ``P0`` gets ``(s1, K0)`` in the clear over its own channel; ``P1`` gets
  ``(s1, s2)`` and ``P2`` gets ``(s2, K0)``, each encrypted to that helper's X25519 key
  (an ephemeral key per report, HKDF-SHA256, ChaCha20-Poly1305) with the report's
  binding as associated data; the server relays ``ct0`` to helper 2. The server can
  neither read nor change what it relays;
* the **binding** ``ctx`` is the round's :class:`ReportContext` digest (task, job
  instance, round, the candidates' digest and ``d``), and the report names the
  device; the device signs ``(ctx, u, ephemeral key, commitments, H(ct0), H(ct1),
  H(ct2))`` with its Ed25519 key from the roster. A device sends ``8 d`` bytes and
  about 450 more.

Each member checks what it can (:func:`public_verdicts`, :func:`open_part`):

* **public checks**, which every member computes from the same relayed bytes and so
  must agree on: the report's context is this round's (``replayed_report``
  otherwise), its device is in the round's sample (``not_in_sample``), its signature
  verifies under that device's roster key (``bad_signature``), and it is the device's
  first signed report of the round (``duplicate_report``: a forged report naming a
  device cannot make that device's own a duplicate). A server that relays a part
  other than the one the device signed holds another batch than the helpers: the
  batch digests differ and the round aborts (``committee_report_set_mismatch``,
  :mod:`protocol.core.committee.intake`), so no client can cause that abort.
* **private checks** of a member's own parts: its ciphertext decrypts
  (``undecryptable_part``), the plaintext has the round's shape with every entry below
  ``p`` (``malformed_part``), and each component opens the device's signed commitment
  (``inconsistent_part``). The commitments bind every holder of a seed (and of
  ``K0``, hence of ``c0``) to the same value, so two honest holders either hold
  identical copies or one of them accuses the report. A private accusation cannot be checked by the others: it drops
  the report and is recorded, with the accusing member, in every member's view.

A report that passes every check goes to the validity check
(:mod:`protocol.core.committee.validity`), which tests on shares that ``x`` is one-hot
or zero.

Everything here is sans-I/O; randomness is injected (``token_bytes``). The one clock
read is a simulation's account of work done once for two parties (:class:`SharedWork`).
"""
from __future__ import annotations

import hashlib
import hmac
import struct
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from protocol.core.committee import field as F
from secagg import crypto
from secagg.errors import CryptoError

__all__ = [
    "ReportContext", "DeviceReport", "RelayedReport", "ReportParts", "Verdict",
    "VERDICT_NAMES", "PUBLIC_VERDICTS", "SEED_BYTES", "make_report", "make_reports",
    "report_message", "relay_for", "public_verdicts", "open_part", "component_of",
    "ct_digests",
    "share_votes", "commitments_for", "assemble_report", "SharedWork",
    "component_matrix", "device_part_bytes", "PART_BYTES", "candidates_digest",
]

SEED_BYTES = 32
_U64 = struct.Struct(">Q")
#: bytes of each member's plaintext part: ``s1 || K0``, ``s1 || s2``, ``s2 || K0``
PART_BYTES = 2 * SEED_BYTES
_LABEL = b"fedhh validated report\x00"


class Verdict:
    """A member's verdict on one report (one byte on the wire). Codes below
    :data:`PUBLIC_LIMIT` are public checks every member must agree on; the others are
    one member's accusation about its own parts."""

    OK = 0
    REPLAYED = 2
    NOT_IN_SAMPLE = 3
    DUPLICATE = 4
    BAD_SIGNATURE = 5
    MALFORMED_PART = 10
    UNDECRYPTABLE_PART = 11
    INCONSISTENT_PART = 12
    #: from the validity check (opened to all three)
    INVALID_VOTE = 20
    #: the server could not decode what the device sent (a server-only drop)
    MALFORMED_REPORT = 30
    #: a sampled device whose report never arrived
    MISSING = 31
    PUBLIC_LIMIT = 10


VERDICT_NAMES = {
    Verdict.OK: "ok", Verdict.REPLAYED: "replayed_report",
    Verdict.NOT_IN_SAMPLE: "not_in_sample", Verdict.DUPLICATE: "duplicate_report",
    Verdict.BAD_SIGNATURE: "bad_signature", Verdict.MALFORMED_PART: "malformed_part",
    Verdict.UNDECRYPTABLE_PART: "undecryptable_part",
    Verdict.INCONSISTENT_PART: "inconsistent_part", Verdict.INVALID_VOTE: "invalid_vote",
    Verdict.MALFORMED_REPORT: "malformed_report", Verdict.MISSING: "missing",
}
PUBLIC_VERDICTS = frozenset(c for c in VERDICT_NAMES if 0 < c < Verdict.PUBLIC_LIMIT)


def candidates_digest(candidates: Sequence[str]) -> bytes:
    """SHA-256 of the round's candidate strings, each length-prefixed."""
    h = hashlib.sha256(b"fedhh candidates\x00")
    for c in candidates:
        b = c.encode("utf-8")
        h.update(_U64.pack(len(b)) + b)
    return h.digest()


@dataclass(frozen=True)
class ReportContext:
    """What every report of one round is bound to.

    Attributes:
        task: the mechanism's task name.
        job: the job instance (16 bytes; a new one for every job of the task).
        round: the round number.
        candidates: the candidates' digest (:func:`candidates_digest`).
        d: the number of candidates (the vote's length).
    """

    task: str
    job: bytes
    round: int
    candidates: bytes
    d: int

    def __post_init__(self) -> None:
        if type(self.task) is not str or not self.task:
            raise ValueError("task must be a non-empty string")
        if type(self.job) is not bytes or len(self.job) != 16:
            raise ValueError("job is 16 bytes")
        if type(self.round) is not int or not 0 <= self.round < 1 << 63:
            raise ValueError("round must be an int in [0, 2^63)")
        if type(self.candidates) is not bytes or len(self.candidates) != 32:
            raise ValueError("candidates is a 32-byte digest")
        if type(self.d) is not int or not 1 <= self.d < 1 << 32:
            raise ValueError("d must be an int in [1, 2^32)")

    @property
    def digest(self) -> bytes:
        task = self.task.encode("utf-8")
        return hashlib.sha256(_LABEL + b"context\x00" + _U64.pack(len(task)) + task
                              + self.job + _U64.pack(self.round) + self.candidates
                              + _U64.pack(self.d)).digest()

    @property
    def c0_bytes(self) -> int:
        """Bytes of ``c0`` in the clear (``ct0`` adds the AEAD's nonce and tag)."""
        return 8 * self.d


def device_part_bytes(ctx: ReportContext, member: int) -> int:
    """The plaintext bytes member ``member`` receives of one report besides ``ct0``:
    ``s1 || K0``, ``s1 || s2``, ``s2 || K0``."""
    if member not in (0, 1, 2):
        raise ValueError("members are 0, 1 and 2")
    return PART_BYTES


# ------------------------------------------------------------------ the messages

@dataclass(frozen=True, slots=True)
class DeviceReport:
    """What a sampled device sends the server (tag 210).

    Attributes:
        user: the device's population index.
        context: the round's :attr:`ReportContext.digest`.
        ephemeral: the X25519 public key the helpers' parts are encrypted under.
        commitments: ``com0 || com1 || com2`` (96 bytes).
        part0: the server's part, ``s1 || K0``.
        ct0: ``c0`` encrypted under ``K0`` (for the server and, relayed, helper 2).
        ct1, ct2: helper 1's and helper 2's parts, encrypted to their keys.
        signature: the device's Ed25519 signature of :func:`report_message`.
    """

    TAG: ClassVar[int] = 210
    user: int
    context: bytes
    ephemeral: bytes
    commitments: bytes
    part0: bytes
    ct0: bytes
    ct1: bytes
    ct2: bytes
    signature: bytes

    def __post_init__(self) -> None:
        _check_common(self.user, self.context, self.ephemeral, self.commitments,
                      self.signature)
        for name in ("part0", "ct0", "ct1", "ct2"):
            if type(getattr(self, name)) is not bytes:
                raise ValueError(f"{name} must be bytes")

    def to_wire(self) -> list[Any]:
        return [self.user, self.context, self.ephemeral, self.commitments, self.part0,
                self.ct0, self.ct1, self.ct2, self.signature]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "DeviceReport":
        if len(fields) != 9:
            raise ValueError("DeviceReport has 9 fields")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class RelayedReport:
    """What the server forwards a helper of one report (inside a batch, tag 211):
    everything the device signed, the helper's own ciphertext in full, ``ct0`` in full
    for helper 2 (empty for helper 1), and the digests ``H(ct0) || H(ct1) || H(ct2)`` as
    the server computed them (a helper uses them only for the ciphertexts it does not
    hold, and recomputes the others)."""

    TAG: ClassVar[int] = 211
    user: int
    context: bytes
    ephemeral: bytes
    commitments: bytes
    own_ct: bytes
    ct0: bytes
    digests: bytes
    signature: bytes

    def __post_init__(self) -> None:
        _check_common(self.user, self.context, self.ephemeral, self.commitments,
                      self.signature)
        if type(self.digests) is not bytes or len(self.digests) != 96:
            raise ValueError("digests is 96 bytes")
        for name in ("own_ct", "ct0"):
            if type(getattr(self, name)) is not bytes:
                raise ValueError(f"{name} must be bytes")

    def to_wire(self) -> list[Any]:
        return [self.user, self.context, self.ephemeral, self.commitments, self.own_ct,
                self.ct0, self.digests, self.signature]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "RelayedReport":
        if len(fields) != 8:
            raise ValueError("RelayedReport has 8 fields")
        return cls(*fields)


def _check_common(user: Any, context: Any, ephemeral: Any, commitments: Any,
                  signature: Any) -> None:
    if type(user) is not int or not 0 <= user < 1 << 63:
        raise ValueError("user must be an int in [0, 2^63)")
    for name, v, n in (("context", context, 32), ("ephemeral", ephemeral, 32),
                       ("commitments", commitments, 96), ("signature", signature, 64)):
        if type(v) is not bytes or len(v) != n:
            raise ValueError(f"{name} is {n} bytes")


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def report_message(context: bytes, user: int, ephemeral: bytes, commitments: bytes,
                   digests: bytes) -> bytes:
    """The bytes a device signs: the binding, its commitments and the digests
    ``H(ct0) || H(ct1) || H(ct2)`` of its three ciphertexts (a helper recomputes it
    from a :class:`RelayedReport`). The server's clear part is bound by the
    commitments it opens."""
    return (_LABEL + b"signed\x00" + context + _U64.pack(user) + ephemeral + commitments
            + digests)


def _binding(context: bytes, user: int, ephemeral: bytes, commitments: bytes,
             member: int) -> bytes:
    """The associated data (and HKDF context) of a member's part (``member`` 0: the
    encryption of ``c0``)."""
    return (_LABEL + b"part\x00" + context + _U64.pack(user) + bytes([member]) + ephemeral
            + commitments)


def _commit(which: int, context: bytes, user: int, secret: bytes) -> bytes:
    """The commitment to a 32-byte secret: ``K0`` (``which`` 0), ``s1`` (1), ``s2`` (2)."""
    return hashlib.sha256(_LABEL + b"commit\x00" + bytes([which]) + context
                          + _U64.pack(user) + secret).digest()


_COMPONENT_LABEL = "validated report component"
_COMPONENT_NONCE = hashlib.sha256(b"fedhh committee stream\x00"
                                  + _COMPONENT_LABEL.encode()).digest()[:16]
_P = np.uint64(F.P)


def component_of(seed: bytes, d: int) -> np.ndarray:
    """A seeded component ``G(seed)``: ``d`` uniform field elements
    (:func:`protocol.core.committee.field.uniform` under this module's label)."""
    return F.uniform(seed, _COMPONENT_LABEL, d)


def component_matrix(seeds: Sequence[bytes], d: int, shared: Any = None) -> np.ndarray:
    """``G(seed)`` for each seed, as the rows of a ``(len(seeds), d)`` matrix: the
    keystreams written straight into the matrix, reduced in one pass (a row with a
    rejected word, probability about ``d 2^-61``, is made again by
    :func:`component_of`).

    ``shared``: a simulation's :class:`SharedWork`: rows another party of this process
    already expanded from the very same seed are copied from it (and charged to
    ``shared.charged``), the others are expanded and recorded.
    """
    if shared is not None and len(seeds) and d:
        view = _memo_view(seeds, d, shared)
        if view is not None:
            return view
    out = np.empty((len(seeds), d), dtype=np.uint64)
    if not len(seeds) or not d:
        return out
    todo = list(range(len(seeds)))
    if shared is not None:
        todo = []
        for i, s in enumerate(seeds):
            hit = shared.expansions.get(s)
            if hit is None or hit[0].shape[1] != d:
                todo.append(i)
            else:
                out[i] = hit[0][hit[1]]
                shared.charged += hit[2]
    t0 = time.thread_time()
    raw = out.view(np.uint8).reshape(len(seeds), 8 * d)
    zeros = bytes(8 * d)
    for i in todo:
        enc = Cipher(algorithms.ChaCha20(seeds[i], _COMPONENT_NONCE), mode=None).encryptor()
        enc.update_into(zeros, raw[i])
    if todo:
        rows = out[todo] if len(todo) < len(seeds) else out
        np.bitwise_and(rows, _P, out=rows)
        if int(rows.max()) == F.P:           # a rejected word: probability d 2^-61 a row
            for k in np.flatnonzero((rows == _P).any(axis=1)):
                rows[k] = component_of(seeds[todo[k]], d)
        if len(todo) < len(seeds):
            out[todo] = rows
    if shared is not None and todo:
        each = (time.thread_time() - t0) / len(todo)
        for i in todo:
            shared.expansions[seeds[i]] = (out, i, each)
    return out


def _memo_view(seeds: Sequence[bytes], d: int, shared: Any) -> np.ndarray | None:
    """The rows of one matrix ``shared`` already expanded, when ``seeds`` are exactly
    its consecutive rows (the members' components of a batch in which every report was
    kept): a read-only view, no copy; ``None`` otherwise."""
    first = shared.expansions.get(seeds[0])
    if first is None or first[0].shape[1] != d:
        return None
    mat, i0, each = first
    if i0 + len(seeds) > mat.shape[0]:
        return None
    for k, s in enumerate(seeds):
        hit = shared.expansions.get(s)
        if hit is None or hit[0] is not mat or hit[1] != i0 + k:
            return None
    shared.charged += each * len(seeds)
    view = mat[i0:i0 + len(seeds)]
    view.flags.writeable = False
    return view


class SharedWork:
    """Work two parties of one simulated process would each do on the very same
    inputs, done once (a batch's seed expansions, and a component's sketch products
    when both holders hold identical copies); ``charged`` is the CPU time the reuses
    would have cost, which the caller adds to the reusing party's account, so that the
    per-party figures are those of a deployment. Inputs that differ (a deviating
    party) are computed afresh."""

    def __init__(self) -> None:
        self.expansions: dict[bytes, tuple[np.ndarray, int, float]] = {}
        self.products: dict[Any, tuple[np.ndarray, np.ndarray, float]] = {}
        self.charged = 0.0

    def clear(self) -> None:
        self.expansions.clear()
        self.products.clear()


# ------------------------------------------------------------------ the device

def make_report(ctx: ReportContext, user: int, vote: np.ndarray, signing_key: bytes,
                helper_keys: tuple[bytes, bytes], rand: Any) -> DeviceReport:
    """One device's report of ``vote`` (a ``(d,)`` vector of field elements).

    Raises:
        ValueError: a vote of the wrong length or outside the field.
    """
    vote = np.asarray(vote)
    if vote.dtype.kind not in "ui" or vote.shape != (ctx.d,) or (
            vote.size and (int(vote.min()) < 0 or int(vote.max()) >= F.P)):
        raise ValueError(f"a vote is {ctx.d} field elements (integers in [0, p))")
    return make_reports(ctx, [user], vote.reshape(1, -1).astype(np.uint64), [signing_key],
                        helper_keys, rand)[0]


def make_reports(ctx: ReportContext, users: Sequence[int], votes: np.ndarray,
                 signing_keys: Sequence[bytes], helper_keys: tuple[bytes, bytes],
                 rand: Any, shared: Any = None) -> list[DeviceReport]:
    """The reports of a batch of devices (row ``i`` of ``votes``, a ``(B, d)`` matrix of
    field elements, is device ``users[i]``'s vote); the field arithmetic is vectorised
    over the batch."""
    b, d = votes.shape
    secrets = rand.token_bytes(3 * SEED_BYTES * b)
    seeds = [(secrets[96 * i:96 * i + 32], secrets[96 * i + 32:96 * i + 64],
              secrets[96 * i + 64:96 * i + 96]) for i in range(b)]
    c0 = share_votes(votes, [s[0] for s in seeds], [s[1] for s in seeds], shared)
    return [assemble_report(ctx, int(users[i]), c0[i], *seeds[i], signing_keys[i],
                            helper_keys, rand) for i in range(b)]


def share_votes(votes: np.ndarray, s1: Sequence[bytes], s2: Sequence[bytes],
                shared: Any = None) -> np.ndarray:
    """``c0 = x - G(s1) - G(s2)`` for each row ``x`` of ``votes`` (field elements below
    ``p``), in place on one matrix."""
    b, d = votes.shape
    # a new matrix: the expansions may be kept for the members (``shared``)
    t = np.add(component_matrix(s1, d, shared), component_matrix(s2, d, shared))  # < 2p
    np.subtract(np.uint64(2 * F.P), t, out=t)         # 2p - (c1 + c2), in (0, 2p]
    t += votes.astype(np.uint64, copy=False)          # < 3p < 2^63
    hi = t >> np.uint64(61)
    t &= _P
    t += hi                                           # <= p + 2
    np.subtract(t, _P, out=t, where=t >= _P)
    return t


def commitments_for(context: bytes, user: int, key0: bytes, s1: bytes, s2: bytes) -> bytes:
    """``comK || com1 || com2`` of a report."""
    return (_commit(0, context, user, key0) + _commit(1, context, user, s1)
            + _commit(2, context, user, s2))


def assemble_report(ctx: ReportContext, user: int, c0: np.ndarray | bytes, s1: bytes,
                    s2: bytes, key0: bytes, signing_key: bytes,
                    helper_keys: tuple[bytes, bytes], rand: Any, *,
                    parts: Mapping[int, bytes] | None = None,
                    commitments: bytes | None = None,
                    encrypt_to: tuple[bytes, bytes] | None = None,
                    context: bytes | None = None, sign: bool = True) -> DeviceReport:
    """One report from its secrets: the commitments, ``c0`` encrypted under ``key0``,
    the parts (helpers' encrypted to ``helper_keys``) and the signature.

    The keyword arguments exist for the attack catalogue's corrupted devices: other
    plaintext ``parts`` for some members (``{member: bytes}``), other ``commitments``,
    helper parts encrypted to other keys (``encrypt_to``), another ``context`` digest,
    or no signature (``sign=False``: 64 zero bytes). An honest device passes none.
    """
    context = ctx.digest if context is None else context
    body = c0 if isinstance(c0, bytes) else c0.astype("<u8", copy=False).tobytes()
    coms = commitments if commitments is not None else \
        commitments_for(context, user, key0, s1, s2)
    plain = {0: s1 + key0, 1: s1 + s2, 2: s2 + key0}
    plain.update(parts or {})
    e_secret, e_public = crypto.x25519_keypair(rand)
    ct0 = crypto.aead_encrypt(key0, body, _binding(context, user, e_public, coms, 0), rand)
    cts = []
    for member, pk in zip((1, 2), encrypt_to or helper_keys):
        ad = _binding(context, user, e_public, coms, member)
        key = crypto.hkdf(crypto.x25519_shared(e_secret, pk), label=b"report-part",
                          context=ad)
        cts.append(crypto.aead_encrypt(key, plain[member], ad, rand))
    msg = report_message(context, user, e_public, coms,
                         _digest(ct0) + _digest(cts[0]) + _digest(cts[1]))
    if not sign:
        sig = bytes(64)
    elif len(signing_key) == 64:
        sig = crypto.ed25519_sign_expanded(signing_key, msg)
    else:
        sig = crypto.ed25519_sign(signing_key, msg)
    return DeviceReport(user, context, e_public, coms, plain[0], ct0, cts[0], cts[1], sig)


# ------------------------------------------------------------------ the members

def relay_for(report: DeviceReport, helper: int, digests: bytes | None = None
              ) -> RelayedReport:
    """What the server forwards helper ``helper`` (1 or 2) of ``report``
    (``digests``: :func:`ct_digests` of the report, when already made)."""
    digests = digests if digests is not None else ct_digests(report, 0)
    own, ct0 = (report.ct1, b"") if helper == 1 else (report.ct2, report.ct0)
    return RelayedReport(report.user, report.context, report.ephemeral, report.commitments,
                         own, ct0, digests, report.signature)


def ct_digests(report: DeviceReport | RelayedReport, member: int) -> bytes:
    """``H(ct0) || H(ct1) || H(ct2)`` of a report as member ``member`` holds it: each
    member hashes the ciphertexts it holds (once per report) and takes the relayed
    digests of the others."""
    if isinstance(report, DeviceReport):
        return _digest(report.ct0) + _digest(report.ct1) + _digest(report.ct2)
    d = report.digests
    if member == 1:
        return d[:32] + _digest(report.own_ct) + d[64:]
    return _digest(report.ct0) + d[32:64] + _digest(report.own_ct)


def public_verdicts(reports: Sequence[DeviceReport | RelayedReport], member: int,
                    context: bytes, sample: frozenset[int] | set[int],
                    roster: Mapping[int, bytes] | Any, seen: set[int],
                    verified: dict[bytes, bool] | None = None,
                    digests: Sequence[bytes] | None = None) -> np.ndarray:
    """The public verdict on each report of a batch, in order (``uint8`` codes of
    :class:`Verdict`): every member computes the same codes from the same bytes.

    Args:
        reports: the batch as this member holds it (device reports at the server,
            relayed ones at a helper).
        member: this member (0, 1, 2).
        context: the round's context digest.
        sample: the round's devices.
        roster: ``user -> Ed25519 public key`` (``__getitem__``; a missing user counts
            as outside the sample).
        seen: devices already counted this round (updated).
        verified: a cache of signature checks keyed by the signed bytes and signature
            (a simulation shares it between members in one process: the very same
            bytes, checked once; altered bytes are checked afresh).
        digests: each report's :func:`ct_digests` (made here when not given).
    """
    codes = np.zeros(len(reports), dtype=np.uint8)
    for i, r in enumerate(reports):
        if not hmac.compare_digest(r.context, context):
            codes[i] = Verdict.REPLAYED
            continue
        if r.user not in sample:
            codes[i] = Verdict.NOT_IN_SAMPLE
            continue
        dg = digests[i] if digests is not None else ct_digests(r, member)
        signed = report_message(r.context, r.user, r.ephemeral, r.commitments, dg)
        key = signed + r.signature
        ok = verified.get(key) if verified is not None else None
        if ok is None:
            try:
                crypto.ed25519_verify(roster[r.user], signed, r.signature)
                ok = True
            except (CryptoError, KeyError):
                ok = False
            if verified is not None:
                verified[key] = ok
        if not ok:
            codes[i] = Verdict.BAD_SIGNATURE
            continue
        # only a report the device signed counts against it: a forged one that names
        # a device cannot make that device's own report a duplicate
        if r.user in seen:
            codes[i] = Verdict.DUPLICATE
            continue
        seen.add(r.user)
    return codes


@dataclass(frozen=True)
class ReportParts:
    """A member's parts of one report, opened and checked: the seeds it holds and, for
    the two holders of ``c0`` (decrypted from ``ct0``), the explicit component (its
    ``8 d`` little-endian bytes, every entry below ``p``)."""

    s1: bytes | None = None
    s2: bytes | None = None
    c0: bytes | None = None


def open_part(report: DeviceReport | RelayedReport, member: int, d: int,
              secret_key: bytes | None) -> tuple[int, ReportParts | None]:
    """Member ``member``'s private checks of its own part of ``report``: decrypt (a
    helper, with its X25519 ``secret_key``), parse, and open the signed commitments.

    Returns:
        ``(Verdict.OK, parts)`` or ``(code, None)`` with the accusation's code.
    """
    context, u, coms = report.context, report.user, report.commitments
    if member == 0:
        assert isinstance(report, DeviceReport)
        plain, ct0 = report.part0, report.ct0
    else:
        assert isinstance(report, RelayedReport) and secret_key is not None
        ct0 = report.ct0
        ad = _binding(context, u, report.ephemeral, coms, member)
        try:
            key = crypto.hkdf(crypto.x25519_shared(secret_key, report.ephemeral),
                              label=b"report-part", context=ad)
            plain = crypto.aead_decrypt(key, report.own_ct, ad)
        except CryptoError:
            return Verdict.UNDECRYPTABLE_PART, None
    if len(plain) != PART_BYTES:
        return Verdict.MALFORMED_PART, None
    first, second = plain[:32], plain[32:64]
    # which secrets this member's part holds: (s1, K0), (s1, s2), (s2, K0)
    which = ((1, 0), (1, 2), (2, 0))[member]
    ok = (hmac.compare_digest(_commit(which[0], context, u, first),
                              coms[32 * which[0]:32 * which[0] + 32])
          & hmac.compare_digest(_commit(which[1], context, u, second),
                                coms[32 * which[1]:32 * which[1] + 32]))
    if not ok:
        return Verdict.INCONSISTENT_PART, None
    if member == 1:
        return Verdict.OK, ReportParts(s1=first, s2=second)
    # the committed K0 opens ct0: both holders decrypt the same bytes under one key
    try:
        body = crypto.aead_decrypt(second, ct0,
                                   _binding(context, u, report.ephemeral, coms, 0))
    except CryptoError:
        return Verdict.UNDECRYPTABLE_PART, None
    c0 = np.frombuffer(body, dtype="<u8") if len(body) % 8 == 0 else None
    if c0 is None or c0.size != d or (c0.size and int(c0.max()) >= F.P):
        return Verdict.MALFORMED_PART, None
    return Verdict.OK, (ReportParts(s1=first, c0=body) if member == 0
                        else ReportParts(s2=first, c0=body))
