"""Attacks on the ESA shuffler (Bittau et al., "Prochlo", SOSP 2017, sections 3.3-3.5).

Theory of operation
-------------------
A small population of clients encodes one-item reports with the honest
:class:`shuffler.encoder.Encoder` (crowd id = keyed PRF of the item,
:mod:`shuffler.crowd`). The adversary controls the network between clients and the
shuffler: it hands the honest :class:`shuffler.shuffler.Shuffler` tampered, replayed,
re-wrapped or cross-task envelope bytes, or too few envelopes. The shuffler's checks
(``submit``: header, length, duplicate outer ciphertext, outer AEAD tag, duplicate
inner ciphertext; ``close_batch``: minimum batch size and crowd threshold) and the
analyzer's inner AEAD (bound to task and epoch) must refuse each, with the
:class:`shuffler.errors.RejectReason` stated in the expectation.

The non-collusion assumption (shuffler and analyzer are different parties) is outside
what code can enforce; :func:`collusion` *measures* what a colluding pair learns: the
shuffler records which sender submitted which envelope, opens the outer layer with its
key, and the analyzer opens the inner layer, so every report is linked to its sender
(accuracy 1 against the 1/n of an analyzer that sees only the shuffled batch), and the
analyzer's crowd key names the item of every sub-threshold crowd the shuffler counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from protocol.studies.attacks import Outcome, attack
from protocol.core.randomness import insecure_deterministic_randomness
from shuffler.analyzer import Analyzer
from shuffler.crowd import CrowdKey
from shuffler.encoder import Encoder
from shuffler.errors import BatchTooSmall, EnvelopeRejected
from shuffler.keys import KEY_BYTES, KeyPair, open_sealed, seal
from shuffler.messages import CROWD_ID_BYTES, LABEL_OUTER
from shuffler.shuffler import HardThreshold, Shuffler

__all__ = ["ShufflerSetup", "make_setup"]

TASK = "attack-task"
PAYLOAD = 16


@dataclass
class ShufflerSetup:
    """Keys, an encoder per epoch, the crowd key, the clients' items and envelopes."""

    s_keys: KeyPair
    a_keys: KeyPair
    rand: Any
    items: list[bytes]
    crowd: CrowdKey
    encoder: Encoder
    envelopes: list[bytes]

    def shuffler(self, min_batch: int = 1, T: int = 1) -> Shuffler:
        sh = Shuffler(self.s_keys, self.rand.child("shuffler"), min_batch, HardThreshold(T))
        sh.open_batch(self.encoder.context)
        return sh

    def encoder_for(self, task: str, epoch: int) -> Encoder:
        return Encoder(self.s_keys.public_key, self.a_keys.public_key, task, epoch, PAYLOAD,
                       self.rand.child(f"enc-{task}-{epoch}"))


def make_setup(seed: int, items: list[bytes], epoch: int = 1) -> ShufflerSetup:
    """Encode one report per item (client ``i`` holds ``items[i]``)."""
    rand = insecure_deterministic_randomness(seed, "shuffler-attacks")
    s_keys, a_keys = KeyPair.generate(rand.child("s")), KeyPair.generate(rand.child("a"))
    crowd = CrowdKey(rand.child("crowd").token_bytes(32), TASK, epoch)
    enc = Encoder(s_keys.public_key, a_keys.public_key, TASK, epoch, PAYLOAD,
                  rand.child("clients"))
    envs = enc.encode_batch(items, crowd.crowd_ids(items))
    return ShufflerSetup(s_keys, a_keys, rand, items, crowd, enc, envs)


def _population(n: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [b"w%d" % int(v) for v in rng.zipf(1.5, n) % 20]


def _submit(sh: Shuffler, data: bytes) -> str:
    try:
        sh.submit(data)
        return "accepted"
    except EnvelopeRejected as exc:
        return exc.reason.value


@attack("shuffler.tampered", system="shuffler",
        target="Prochlo section 3.3: outer layer AEAD over the clear header",
        expected="a flipped ciphertext bit and an edited epoch in the header are refused "
                 "(authentication_failed, unknown_context); the rest of the batch is released")
def tampered(seed: int) -> Outcome:
    """Tampered envelopes: one bit flipped in the sealed part, one in the header's epoch."""
    st = make_setup(seed, _population(20, seed))
    sh = st.shuffler()
    a = bytearray(st.envelopes[0])
    a[-5] ^= 0x01
    b = bytearray(st.envelopes[1])
    hlen = len(st.encoder.context.header)
    b[hlen - 8 - 8 - 4 - 1] ^= 0x01          # last byte of the u64 epoch
    r1, r2 = _submit(sh, bytes(a)), _submit(sh, bytes(b))
    ok_rest = sum(_submit(sh, e) == "accepted" for e in st.envelopes[2:])
    out = sh.close_batch(st.encoder.context)
    ok = (r1 == "authentication_failed" and r2 == "unknown_context" and ok_rest == 18
          and out.receipt.forwarded == 18)
    return Outcome("shuffler.tampered", "authentication_failed, unknown_context",
                   f"flipped ciphertext: {r1}; edited epoch: {r2}; forwarded "
                   f"{out.receipt.forwarded}/18 honest", ok,
                   {"shuffler": dict(out.receipt.rejected)}, {})


@attack("shuffler.replayed", system="shuffler",
        target="Prochlo section 3.3: duplicate outer and inner ciphertexts; inner AD binds "
               "task and epoch",
        expected="a resent envelope is refused (duplicate_envelope); an inner layer re-wrapped "
                 "in a fresh outer layer is refused (duplicate_inner); an inner layer of an "
                 "earlier epoch re-wrapped into this one fails at the analyzer "
                 "(authentication_failed)")
def replayed(seed: int) -> Outcome:
    """Replayed envelopes: verbatim resend; re-wrapped inner layer in the same batch; an
    inner layer from the previous epoch re-wrapped for the current epoch."""
    st = make_setup(seed, _population(20, seed), epoch=2)
    old = make_setup(seed, _population(20, seed), epoch=1)
    sh = st.shuffler()
    for e in st.envelopes:
        sh.submit(e)
    r_dup = _submit(sh, st.envelopes[0])
    ctx = st.encoder.context

    def inner_of(setup: ShufflerSetup, env: bytes, context: Any) -> bytes:
        sealed = env[len(context.header):]
        plain = open_sealed(setup.s_keys, LABEL_OUTER, sealed[:KEY_BYTES], sealed[KEY_BYTES:],
                            context.outer_ad)
        return plain[CROWD_ID_BYTES:]

    def rewrap(inner: bytes, label: str) -> bytes:
        eph = st.rand.child(label).token_bytes(KEY_BYTES)
        epk, ct = seal(st.s_keys.public_key, eph, LABEL_OUTER, bytes(CROWD_ID_BYTES) + inner,
                       ctx.outer_ad)
        return ctx.header + epk + ct

    # the adversary needs the inner layer: a colluding or compromised shuffler log
    r_inner = _submit(sh, rewrap(inner_of(st, st.envelopes[1], ctx), "rw1"))
    r_old = _submit(sh, rewrap(inner_of(old, old.envelopes[0], old.encoder.context), "rw2"))
    out = sh.close_batch(ctx)
    analyzed = Analyzer(st.a_keys).open_batch(out.batch)
    refused_at_analyzer = dict((k.value, v) for k, v in analyzed.rejected.items())
    ok = (r_dup == "duplicate_envelope" and r_inner == "duplicate_inner" and r_old == "accepted"
          and refused_at_analyzer.get("authentication_failed") == 1
          and len(analyzed.reports) == 20)
    return Outcome("shuffler.replayed", "duplicate_envelope, duplicate_inner, "
                   "old-epoch inner refused by the analyzer",
                   f"resend: {r_dup}; re-wrapped inner: {r_inner}; old-epoch inner: shuffler "
                   f"{r_old}, analyzer {refused_at_analyzer}; reports opened "
                   f"{len(analyzed.reports)}/20", ok,
                   {"shuffler": dict(out.receipt.rejected), "analyzer": refused_at_analyzer}, {})


@attack("shuffler.cross_task", system="shuffler",
        target="Prochlo section 3.3: envelopes batched by (task, epoch), header under the AEAD",
        expected="an envelope of another task is refused (unknown_context); with its header "
                 "rewritten to this task it fails the outer tag (authentication_failed)")
def cross_task(seed: int) -> Outcome:
    """Cross-task envelopes: a report made for task B injected into task A's batch, as is
    and with the clear header replaced by task A's."""
    st = make_setup(seed, _population(10, seed))
    other_task = TASK[:-1] + "X"                 # same length: the header length matches
    other = st.encoder_for(other_task, 1)
    env_b = other.encode(b"w1", st.crowd.crowd_id(b"w1"))
    sh = st.shuffler()
    r_as_is = _submit(sh, env_b)
    hb = len(other.context.header)
    r_rewritten = _submit(sh, st.encoder.context.header + env_b[hb:])
    ok = r_as_is == "unknown_context" and r_rewritten == "authentication_failed"
    return Outcome("shuffler.cross_task", "unknown_context, authentication_failed",
                   f"as is: {r_as_is}; header rewritten: {r_rewritten}", ok,
                   {"shuffler_unattributed": {k.value: v for k, v in sh.unattributed.items()}},
                   {})


@attack("shuffler.crowd_of_one", system="shuffler",
        target="Prochlo section 3.5: crowd thresholding",
        expected="a report whose item nobody else holds (a crowd of one) is dropped by the "
                 "threshold T; the analyzer never sees the item")
def crowd_of_one(seed: int) -> Outcome:
    """A crowd of one: a unique item among common ones, threshold T = 5."""
    items = [b"common"] * 12 + [b"rare-unique"] + [b"other"] * 6
    st = make_setup(seed, items)
    sh = st.shuffler(T=5)
    for e in st.envelopes:
        sh.submit(e)
    out = sh.close_batch(st.encoder.context)
    seen = Analyzer(st.a_keys).open_batch(out.batch).multiset()
    ok = b"rare-unique" not in seen and out.receipt.dropped_by_threshold.get(
        "below_threshold") == 1 and seen[b"common"] == 12
    return Outcome("shuffler.crowd_of_one", "unique report dropped, never analysed",
                   f"dropped below threshold: {dict(out.receipt.dropped_by_threshold)}; "
                   f"analyzer saw the unique item: {b'rare-unique' in seen}", ok,
                   {"shuffler": {"crowds": out.receipt.crowds,
                                 "crowds_forwarded": out.receipt.crowds_forwarded}},
                   {"unique_item_released": b"rare-unique" in seen})


@attack("shuffler.small_batch", system="shuffler",
        target="Prochlo section 3.5: minimum batch size",
        expected="a batch below the minimum (9 of 10) is dropped whole (BatchTooSmall with a "
                 "receipt), nothing forwarded; a tenth report cannot revive it")
def small_batch(seed: int) -> Outcome:
    """Small batches: the network delivers only 9 envelopes to a shuffler with a minimum of
    10 (an attempt to make one sender's report stand out)."""
    st = make_setup(seed, _population(10, seed))
    sh = st.shuffler(min_batch=10)
    for e in st.envelopes[:9]:
        sh.submit(e)
    receipt = None
    try:
        sh.close_batch(st.encoder.context)
    except BatchTooSmall as exc:
        receipt = exc.receipt
    try:
        sh.submit(st.envelopes[9])
        late = "accepted"
    except EnvelopeRejected as exc:
        late = exc.reason.value
    dropped = receipt is not None and receipt.forwarded == 0 and dict(
        receipt.dropped_by_threshold) == {"batch_discarded": 9}
    ok = dropped and late == "unknown_context"
    return Outcome("shuffler.small_batch", "dropped whole (BatchTooSmall), nothing forwarded",
                   f"receipt: forwarded {receipt.forwarded if receipt else None}, dropped "
                   f"{dict(receipt.dropped_by_threshold) if receipt else None}; the 10th "
                   f"envelope: {late}", ok, {"shuffler": "dropped" if dropped else "released"},
                   {})


@attack("shuffler.collusion", system="shuffler", kind="measured",
        target="ESA trust model (Prochlo section 3): shuffler and analyzer do not collude",
        expected="documented limit: a colluding shuffler+analyzer link every report to its "
                 "sender (accuracy 1.0 vs 1/n alone) and learn the item of every "
                 "sub-threshold crowd")
def collusion(seed: int) -> Outcome:
    """Shuffler colluding with the analyzer: the shuffler logs (sender, envelope) on arrival
    and hands its key to the analyzer."""
    n, T = 50, 5
    items = _population(n, seed)
    st = make_setup(seed, items)
    sh = st.shuffler(T=T)
    ctx = st.encoder.context
    log = []                                     # what a dishonest shuffler keeps
    for sender, e in enumerate(st.envelopes):
        sh.submit(e)
        log.append((sender, e))
    out = sh.close_batch(ctx)
    analyzer = Analyzer(st.a_keys)
    # colluding: open both layers of each logged envelope
    linked = 0
    sender_of_inner: dict[bytes, int] = {}
    for sender, e in log:
        sealed = e[len(ctx.header):]
        plain = open_sealed(st.s_keys, LABEL_OUTER, sealed[:KEY_BYTES], sealed[KEY_BYTES:],
                            ctx.outer_ad)
        inner = plain[CROWD_ID_BYTES:]
        sender_of_inner[inner] = sender
        linked += analyzer.open_one(ctx, inner) == items[sender]
    # honest analyzer alone sees the shuffled batch only; its best positional guess
    # ("the i-th report came from the i-th forwarded sender") succeeds at rate ~1/n
    forwarded = sorted(sender_of_inner[i] for i in out.batch.inner)
    alone = float(np.mean([sender_of_inner[inner] == forwarded[i]
                           for i, inner in enumerate(out.batch.inner)])) \
        if out.batch.inner else 0.0
    # sub-threshold crowds: the analyzer's crowd key maps ids to candidate items
    candidates = sorted(set(items))
    id_to_item = {st.crowd.crowd_id(c): c for c in candidates}
    small = {cid: c for cid, c in out.crowd_sizes.items() if c < T}
    named = sum(1 for cid in small if cid in id_to_item)
    ok = linked == n and named == len(small)
    return Outcome("shuffler.collusion", "all reports linked; every small crowd named",
                   f"linked {linked}/{n} reports to senders (analyzer alone: {alone:.2f}, "
                   f"chance 1/{len(forwarded)} = {1 / max(len(forwarded), 1):.2f}); named {named}/{len(small)} sub-threshold crowds",
                   ok, {"shuffler": "colluding", "analyzer": "colluding"},
                   {"link_accuracy_colluding": linked / n,
                    "link_accuracy_analyzer_alone": round(alone, 3),
                    "chance": 1 / max(len(forwarded), 1), "subthreshold_crowds": len(small),
                    "subthreshold_crowds_named": named,
                    "subthreshold_reports": int(sum(small.values()))})
