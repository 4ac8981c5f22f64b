"""A round's sample from randomness no single party chooses: commit-then-reveal.

Theory of operation
-------------------
TrieHH's privacy statement (Zhu, Kairouz, McMahan, Sun and Li, "Federated Heavy
Hitters Discovery with Differential Privacy", AISTATS 2020) needs each round's ``m``
users to be a uniform ``m``-subset of the ``n``. A server that picks the sample itself
can put a chosen device in every round (the catalogue's ``triehh.targeted_sampling``
measures what that costs). With a committee of three -- the server and two helpers, at
most one of them corrupted -- the sample can come from randomness none of them picks:

1. **Commit.** Each member draws a 32-byte value ``v`` and publishes
   ``c = SHA-256(label, context, member, v)`` (:func:`commitment`); the ``context``
   binds the task, the round, the population ``n`` and the sample size ``m``
   (:func:`beacon_context`), so no commitment or value of another round fits.
2. **Reveal.** Once every commitment is in, each member reveals ``v``; every member
   (and every device) checks every value against its commitment with a constant-time
   comparison and refuses the round otherwise (:func:`check_transcript`).
3. **Seed and sample.** ``seed = SHA-256(label, context, v_server, v_helper1,
   v_helper2)``; the sample is the ``m`` users whose 64-bit ChaCha20 keystream word
   under that seed is smallest (ties, which have probability about ``n^2 / 2^65``, go
   to the lower index; :func:`sample_users`). The keystream words are i.i.d. uniform,
   so the ``m`` smallest are a uniform ``m``-subset: exactly TrieHH's sampling. Every
   device recomputes the sample from the revealed values in ``O(n)`` (25 ms of CPU for
   ``n = 10^6``) and refuses a round that names another sample.

Why one honest member suffices: a member commits before it sees any other value, so
the honest member's uniform ``v`` makes the seed uniform whatever the others chose
(they committed first); a member who changes its value after seeing the others' is
caught by its commitment. A member can still refuse to reveal, which aborts the round:
it can stop a round (as it can anyway) but not choose between samples without that
abort being visible -- the abort does not depend on the data, as it happens before any
device contributes.

Transports without a committee (plaintext, secure aggregation, the shuffler) have no
second party to commit: there the server draws all three values itself
(:func:`server_drawn`), which is exactly "the server picks the sample". The simulation
derives the three values from the mechanism's sampling generator in the same order in
every transport, so the same seed gives the same sample, and the same release,
everywhere.
"""
from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from secagg.crypto import ed25519_verify
from secagg.errors import CryptoError

__all__ = ["MEMBERS", "VALUE_BYTES", "SampleRejected", "BeaconTranscript", "Sample",
           "beacon_context", "commitment", "beacon_seed", "sample_users", "run_beacon",
           "check_transcript", "check_sample", "server_drawn", "endorsement",
           "check_endorsed_sample"]

#: the committee members who contribute, in the order their values enter the seed
MEMBERS = ("server", "helper1", "helper2")
#: bytes of one member's value
VALUE_BYTES = 32

_COMMIT = b"fedhh/sample-beacon/commit/v1\x00"
_SEED = b"fedhh/sample-beacon/sample-seed-v1\x00"
_CONTEXT = b"fedhh/sample-beacon/context/v1\x00"
_ENDORSE = b"fedhh/sample-beacon/endorsement/v1\x00"


class SampleRejected(RuntimeError):
    """A member or a device refuses the round's sample; ``reason`` names the check
    (``sample_commitment_mismatch``, ``sample_not_from_seed``, ``sample_wrong_round``,
    ``sample_malformed``)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def beacon_context(task: str, round_no: int, population: int, size: int) -> bytes:
    """The 32 bytes every commitment and the seed are bound to.

    Raises:
        ValueError: ``size`` not in ``1..population``, or a round, population or size
            that 64 bits cannot hold.
    """
    if not 0 < size <= population:
        raise ValueError(f"cannot sample {size} of {population} users")
    if not 0 <= int(round_no) < 1 << 63 or int(population) >= 1 << 64:
        raise ValueError(f"round {round_no} or population {population} out of range")
    t = task.encode()
    return hashlib.sha256(_CONTEXT + struct.pack(">I", len(t)) + t
                          + struct.pack(">qQQ", int(round_no), int(population), int(size))
                          ).digest()


def commitment(context: bytes, member: str, value: bytes) -> bytes:
    """``SHA-256(label, context, member, value)``: hiding (the value is 32 uniform
    bytes) and binding (collision resistance)."""
    if len(value) != VALUE_BYTES:
        raise SampleRejected("sample_malformed", f"{member}'s value is not {VALUE_BYTES} bytes")
    return hashlib.sha256(_COMMIT + context + member.encode() + b"\x00" + value).digest()


def beacon_seed(context: bytes, values: Mapping[str, bytes]) -> bytes:
    """The round's 32-byte sample seed from every member's revealed value."""
    h = hashlib.sha256(_SEED + context)
    for m in MEMBERS:
        v = values[m]
        if len(v) != VALUE_BYTES:
            raise SampleRejected("sample_malformed", f"{m}'s value is not {VALUE_BYTES} bytes")
        h.update(v)
    return h.digest()


def sample_users(seed: bytes, population: int, size: int) -> np.ndarray:
    """The ``size`` users (ascending ``int64``) whose keystream words under ``seed``
    are smallest: a uniform ``size``-subset of ``range(population)``."""
    if len(seed) != 32:
        raise ValueError("a sample seed is 32 bytes")
    if not 0 < size <= population:
        raise ValueError(f"cannot sample {size} of {population} users")
    if size == population:
        return np.arange(population, dtype=np.int64)
    enc = Cipher(algorithms.ChaCha20(seed, b"\x00" * 16), mode=None).encryptor()
    words = np.frombuffer(enc.update(bytes(8 * population)), dtype="<u8")
    kth = np.partition(words, size - 1)[size - 1]
    below = np.flatnonzero(words < kth)
    ties = np.flatnonzero(words == kth)[:size - below.size]
    return np.sort(np.concatenate([below, ties])).astype(np.int64)


@dataclass(frozen=True)
class BeaconTranscript:
    """What every member and device sees of one beacon run: the context, each
    member's commitment and revealed value, and the resulting seed."""

    context: bytes
    commitments: tuple[bytes, ...]
    values: tuple[bytes, ...]
    seed: bytes

    def as_dict(self) -> dict[str, str]:
        out = {"context": self.context.hex(), "seed": self.seed.hex()}
        for m, c, v in zip(MEMBERS, self.commitments, self.values):
            out[f"{m}_commitment"] = c.hex()
            out[f"{m}_value"] = v.hex()
        return out


@dataclass(frozen=True)
class Sample:
    """One round's sample: the users (ascending population indices) and the beacon run
    they are claimed to come from; ``committee`` says whether the values were
    committed by three parties (:func:`run_beacon`) or all drawn by the server
    (:func:`server_drawn`)."""

    users: np.ndarray
    beacon: BeaconTranscript
    population: int
    committee: bool


#: an attack's hook on the reveal step: (member, value) -> the value it reveals
RevealHook = Callable[[str, bytes], bytes]


def run_beacon(context: bytes, values: Mapping[str, bytes],
               reveal_hook: RevealHook | None = None) -> BeaconTranscript:
    """Commit, reveal and check, as the three members do.

    ``values`` are what each member drew and committed to; ``reveal_hook`` lets an
    attack change what a member reveals after every commitment is in.

    Raises:
        SampleRejected: ``sample_commitment_mismatch`` (a revealed value does not open
            its commitment) or ``sample_malformed``.
    """
    commitments = tuple(commitment(context, m, values[m]) for m in MEMBERS)
    revealed = tuple((reveal_hook(m, values[m]) if reveal_hook else values[m]) for m in MEMBERS)
    t = BeaconTranscript(context, commitments, revealed,
                         beacon_seed(context, dict(zip(MEMBERS, revealed))))
    check_transcript(t, context)
    return t


def check_transcript(t: BeaconTranscript, context: bytes) -> None:
    """What a member or a device checks of a transcript before it takes part: the
    round's context, every value against its commitment, the seed from the values.

    Raises:
        SampleRejected: the first check that fails.
    """
    if not hmac.compare_digest(t.context, context):
        raise SampleRejected("sample_wrong_round", "the beacon is bound to another round")
    if len(t.commitments) != len(MEMBERS) or len(t.values) != len(MEMBERS):
        raise SampleRejected("sample_malformed", "a member's commitment or value is missing")
    for m, c, v in zip(MEMBERS, t.commitments, t.values):
        if len(c) != 32 or not hmac.compare_digest(c, commitment(context, m, v)):
            raise SampleRejected("sample_commitment_mismatch",
                                 f"{m}'s revealed value does not open its commitment")
    if not hmac.compare_digest(t.seed, beacon_seed(context, dict(zip(MEMBERS, t.values)))):
        raise SampleRejected("sample_not_from_seed", "the seed is not the values' hash")


def check_sample(sample: Sample, task: str, round_no: int, size: int) -> None:
    """A device's (and a helper's) check of a round's sample: the transcript is this
    round's and opens, and the users are exactly those the seed selects.

    Raises:
        SampleRejected: the first check that fails.
    """
    check_transcript(sample.beacon, beacon_context(task, round_no, sample.population, size))
    users = np.asarray(sample.users)
    if users.shape != (size,) or not np.array_equal(
            users, sample_users(sample.beacon.seed, sample.population, size)):
        raise SampleRejected("sample_not_from_seed",
                             "the round's users are not the ones its seed selects")


def server_drawn(rng: np.random.Generator) -> dict[str, bytes]:
    """The three values as the simulation draws them from the mechanism's sampling
    generator, in :data:`MEMBERS` order; a transport without a committee uses them as
    they are (the server picks the sample), the committee's simulate mode lets each
    member commit to its own."""
    return {m: rng.bytes(VALUE_BYTES) for m in MEMBERS}


def endorsement(context: bytes, seed: bytes, instance: bytes) -> bytes:
    """What a helper signs (Ed25519) once it has taken part in a beacon run and checked
    its transcript: the round's context, the seed and the job instance (16 bytes: the
    job the helper joined, :mod:`protocol.core.job_ledger`). Over the network a device
    gets the seed and both helpers' signatures instead of the whole transcript: with at
    most one member corrupted, at least one signing helper is honest, and an honest
    helper signs one seed per round and job (its ledger keeps one beacon per task and
    round), only after its own uniform value went into it."""
    if len(context) != 32 or len(seed) != 32 or len(instance) != 16:
        raise ValueError("a context and a seed are 32 bytes each, a job instance 16")
    return _ENDORSE + context + seed + instance


def check_endorsed_sample(seed: bytes, signatures: tuple[bytes, ...],
                          helper_keys: tuple[bytes, ...], task: str, round_no: int,
                          population: int, users: np.ndarray, instance: bytes) -> None:
    """A device's check of a round's sample over the network: both helpers signed this
    round's seed for job ``instance`` (:func:`endorsement`), and the round's users are
    exactly the ones the seed selects.

    Raises:
        SampleRejected: ``sample_not_endorsed`` (a signature missing or not valid),
            ``sample_not_from_seed``, ``sample_malformed``.
    """
    users = np.asarray(users)
    size = int(users.size)
    if (type(seed) is not bytes or len(seed) != 32 or type(instance) is not bytes
            or len(instance) != 16 or not 0 < size <= population
            or type(round_no) is not int or not 0 <= round_no < 1 << 63
            or not 0 < population < 1 << 63):
        raise SampleRejected("sample_malformed", "a seed of 32 bytes, a job instance of "
                             "16, a round below 2^63 and 1..n users")
    if len(signatures) != len(helper_keys) or not helper_keys:
        raise SampleRejected("sample_not_endorsed", "a helper's signature is missing")
    statement = endorsement(beacon_context(task, round_no, population, size), seed,
                            instance)
    for i, (key, sig) in enumerate(zip(helper_keys, signatures), start=1):
        try:
            ed25519_verify(key, statement, sig)
        except (CryptoError, ValueError):
            raise SampleRejected("sample_not_endorsed",
                                 f"helper {i}'s signature on the seed does not verify"
                                 ) from None
    if users.ndim != 1 or not np.array_equal(users, sample_users(seed, population, size)):
        raise SampleRejected("sample_not_from_seed",
                             "the round's users are not the ones its seed selects")
