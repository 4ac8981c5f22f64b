"""Attacks on secure aggregation (Bonawitz et al., CCS 2017; SecAgg+, Bell et al., CCS 2020).

Theory of operation
-------------------
Every attack runs the honest clients of :mod:`secagg.client` through
:func:`protocol.core.secagg_engine.run_secagg` and plays the server (or the network)
through the engine's envelope hook ``hook(round, direction, envelopes)``. The hook
here is a :class:`Eavesdropper`: it records what a real server sees (advertised keys,
masked inputs ``y_u``, round-4 shares) and applies the attack's rewrite of the
server's messages. From what it recorded, :func:`unmask_subset` and
:func:`recover_input` compute exactly what a curious server can unmask:

* ``y_u = x_u + PRG(b_u) + sum_{v in P(u), u<v} PRG(s_uv) - sum_{v in P(u), v<u} PRG(s_uv)``
  with ``P(u)`` the peers whose shares ``u`` received (Fig. 4, round 2);
* the server strips ``PRG(b_u)`` for every ``u`` whose ``b_u`` it rebuilt from ``t``
  shares, and the pairwise masks with every ``w`` whose ``s_w^SK`` it rebuilt;
* the sum of ``y_u`` over a set ``S`` is unmasked iff every pairwise mask that crosses
  the boundary of ``S`` has a rebuilt key -- i.e. ``S`` is a union of connected
  components of the survivors' graph (SecAgg+ leaks exactly such partial sums).

Each attack returns an :class:`protocol.studies.attacks.Outcome` and every run is checked with
:func:`protocol.core.invariants.check_secagg_transcript`.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from protocol.studies.attacks import Outcome, attack
from protocol.core.invariants import check_secagg_transcript
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import SERVER, Dropout, Envelope, make_config, run_secagg
from secagg import crypto, prg, shamir
from secagg.client import self_mask_seed
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.graph import ring_order
from secagg.params import DEFAULT_CORRUPT_FRACTION, find_params
from secagg.messages import (
    AdvertiseKeys, ConsistencyRequest, ConsistencySignature, KeyList, MaskedInput,
    RoutedShares, UnmaskRequest, UnmaskShares,
)
from secagg.state import AbortReason as R, ClientState, SessionConfig, bitmap_to_mask, \
    set_to_bitmap

__all__ = ["Eavesdropper", "unmask_subset", "recover_input", "closed_set_around",
           "run_checked", "isolation_study", "colluders_decrypt", "split_view_study",
           "drop_window_study", "pooled_shares_study"]

DIM = 6
VICTIM = 3

Rewrite = Callable[[int, str, list[Envelope]], list[Envelope]]


@dataclass
class Eavesdropper:
    """Envelope hook that records the server's view and applies ``rewrite``.

    Attributes:
        rewrite: the attack's change to each batch (after recording).
        keys: sender -> AdvertiseKeys; masked: sender -> y_u; routed: recipient ->
            senders of its RoutedShares; b_shares / s_shares: owner -> revealed shares.
    """

    rewrite: Rewrite | None = None
    keys: dict[int, AdvertiseKeys] = field(default_factory=dict)
    masked: dict[int, np.ndarray] = field(default_factory=dict)
    routed: dict[int, tuple[int, ...]] = field(default_factory=dict)
    b_shares: dict[int, list[shamir.Share]] = field(default_factory=dict)
    s_shares: dict[int, list[shamir.Share]] = field(default_factory=dict)
    signatures: dict[int, bytes] = field(default_factory=dict)
    #: root of the round-0 transcript tree (from the key lists)
    transcript: bytes = b""

    def __call__(self, round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        for e in envs:
            try:
                m = e.message()
            except Exception:  # noqa: BLE001 - a malformed envelope carries nothing to record
                continue
            if isinstance(m, AdvertiseKeys):
                self.keys[m.sender] = m
            elif isinstance(m, KeyList):
                self.transcript = m.transcript
            elif isinstance(m, MaskedInput):
                self.masked[m.sender] = m.vector().copy()
            elif isinstance(m, RoutedShares):
                self.routed[e.recipient] = m.senders
            elif isinstance(m, ConsistencySignature):
                self.signatures[m.sender] = m.signature
            elif isinstance(m, UnmaskShares):
                for v, sh in zip(m.b_owners, m.b_shares):
                    self.b_shares.setdefault(v, []).append(shamir.Share.from_bytes(sh))
                for v, sh in zip(m.s_owners, m.s_shares):
                    self.s_shares.setdefault(v, []).append(shamir.Share.from_bytes(sh))
        return self.rewrite(round_no, direction, envs) if self.rewrite else envs

    # ---------------------------------------------------------------- what the server learns
    def self_mask(self, cfg: SessionConfig, u: int) -> np.ndarray | None:
        shares = self.b_shares.get(u, [])
        if len(shares) < cfg.threshold:
            return None
        b = shamir.combine(shares, cfg.threshold)
        return prg.expand_mask(self_mask_seed(self.session(cfg), b), cfg.dim, cfg.modulus)

    def session(self, cfg: SessionConfig) -> bytes:
        """The transcript-bound session id every round-1+ key derivation uses."""
        return cfg.transcript_session(self.transcript)

    def mask_key(self, cfg: SessionConfig, u: int) -> bytes | None:
        shares = self.s_shares.get(u, [])
        if len(shares) < cfg.threshold:
            return None
        return shamir.combine(shares, cfg.threshold)

    def pair_mask(self, cfg: SessionConfig, secret: bytes, owner: int, peer: int) -> np.ndarray:
        seed = crypto.hkdf(crypto.x25519_shared(secret, self.keys[peer].s_pk),
                           label=crypto.LABEL_MASK_SEED,
                           context=cfg.pair_context(self.session(cfg), owner, peer))
        return prg.expand_mask(seed, cfg.dim, cfg.modulus)


def _sub(cfg: SessionConfig, acc: list[int], vec: np.ndarray, sign: int) -> None:
    for i, v in enumerate(vec.tolist()):
        acc[i] = (acc[i] - sign * int(v)) % cfg.modulus


def unmask_subset(eve: Eavesdropper, cfg: SessionConfig, subset: set[int]) -> np.ndarray | None:
    """The sum of the inputs of ``subset`` as a curious server computes it, or ``None``.

    Returns ``None`` when some pairwise mask crossing the boundary of ``subset`` cannot
    be removed (no rebuilt key on either side) or a self mask is unknown.
    """
    acc = [0] * cfg.dim
    keys: dict[int, bytes | None] = {}
    for u in subset:
        if u not in eve.masked:
            return None
        _sub(cfg, acc, eve.masked[u], -1)
        bm = eve.self_mask(cfg, u)
        if bm is None:
            return None
        _sub(cfg, acc, bm, +1)
        for w in eve.routed.get(u, ()):
            if w in subset:
                continue        # cancels inside the subset
            if w not in keys:
                keys[w] = eve.mask_key(cfg, w)
            if keys[w] is None:
                return None     # a mask with an unrevealed peer remains
            mask = eve.pair_mask(cfg, keys[w], w, u)
            _sub(cfg, acc, mask, +1 if u < w else -1)
    return np.array(acc, dtype=np.uint64)


def recover_input(eve: Eavesdropper, cfg: SessionConfig, v: int) -> np.ndarray | None:
    """``x_v`` if the server holds ``t`` shares of both ``b_v`` and ``s_v^SK``, else ``None``."""
    if v not in eve.masked:
        return None
    bm, key = eve.self_mask(cfg, v), eve.mask_key(cfg, v)
    if bm is None or key is None:
        return None
    acc = [int(a) for a in eve.masked[v].tolist()]
    _sub(cfg, acc, bm, +1)
    for w in eve.routed.get(v, ()):
        _sub(cfg, acc, eve.pair_mask(cfg, key, v, w), +1 if v < w else -1)
    return np.array(acc, dtype=np.uint64)


def run_checked(cfg: SessionConfig, inputs: np.ndarray, seed: int, *, collective: bool = True,
                **kw: Any) -> Any:
    """``run_secagg`` followed by every transcript invariant.

    Raises:
        InvariantViolation: a broken invariant.
    """
    run = run_secagg(cfg, inputs, rand=insecure_deterministic_randomness(seed), **kw)
    check_secagg_transcript(run, inputs, collective=collective)
    return run


def _inputs(cfg: SessionConfig, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, cfg.modulus, (cfg.n, cfg.dim),
                                                dtype=np.uint64)


def _members(bitmap: bytes, n: int) -> set[int]:
    return set(np.flatnonzero(bitmap_to_mask(bitmap, n)).tolist())


def _reasons(run: Any) -> dict[str, str]:
    out = {}
    for c, st in enumerate(run.client_states):
        r = run.client_abort_reasons.get(c)
        out[f"client {c}"] = r.value if r is not None else st.value
    out["server"] = (run.server_abort_reason.value if run.server_abort_reason
                     else run.server_state.value)
    return out


def _rewrite_unmask(fn: Callable[[int, set[int], set[int]], tuple[set[int], set[int]]]
                    ) -> Rewrite:
    def hook(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        out = []
        for e in envs:
            m = e.message() if direction == "down" else None
            if isinstance(m, UnmaskRequest):
                alive, dropped = fn(e.recipient, _members(m.alive, m.n),
                                    _members(m.dropped, m.n))
                m = UnmaskRequest(m.session, m.n, set_to_bitmap(sorted(alive), m.n),
                                  set_to_bitmap(sorted(dropped), m.n), m.signers, m.signatures)
                e = Envelope.of(SERVER, e.recipient, e.round, m)
            out.append(e)
        return out
    return hook


def _all_abort(run: Any, reason: R, clients: Any = None) -> bool:
    cs = range(run.config.n) if clients is None else clients
    return all(run.client_abort_reasons.get(c) is reason for c in cs)


# ------------------------------------------------------------------------ attacks
@attack("secagg.double_unmask", system="secagg",
        target="Bonawitz et al. Fig. 4 round 4 (Unmasking): U3 and U2-U3 must be disjoint",
        expected="every honest client aborts with alive_and_dropped; no share revealed")
def double_unmask(seed: int) -> Outcome:
    """Double-unmask: the server lists the victim as both surviving and dropped, hoping
    each client reveals the victim's self-mask share *and* its mask-key share."""
    cfg = make_config(8, DIM, graph="complete", threshold=3)
    x = _inputs(cfg, seed)
    eve = Eavesdropper(_rewrite_unmask(lambda r, a, d: (a, d | {VICTIM})))
    run = run_checked(cfg, x, seed, adversary=eve)
    learned = recover_input(eve, cfg, VICTIM)
    ok = _all_abort(run, R.ALIVE_AND_DROPPED) and not run.transcript.reveals and learned is None
    return Outcome("secagg.double_unmask", "all clients abort alive_and_dropped",
                   f"aborts: {sorted({r.value for r in run.client_abort_reasons.values()})}; "
                   f"shares revealed: {len(run.transcript.reveals)}", ok, _reasons(run),
                   {"victim_input_recovered": learned is not None})


@attack("secagg.split_views_malicious", system="secagg",
        target="Bonawitz et al. section 6 / Fig. 4 round 3 (ConsistencyCheck)",
        expected="different survivor sets to two groups: every client aborts with "
                 "too_few_signatures; nothing revealed")
def split_views_malicious(seed: int) -> Outcome:
    """Split views, malicious-server variant: U3 with the victim to group A and without it
    to group B; each group gets the signatures collected on its own set."""
    cfg = make_config(7, DIM, graph="complete", threshold=4, malicious=True)
    n = cfg.n
    group_b = {4, 5, 6}
    everyone = set(range(n))
    s1 = set_to_bitmap(sorted(everyone), n)
    s2 = set_to_bitmap(sorted(everyone - {VICTIM}), n)
    d2 = set_to_bitmap([VICTIM], n)
    empty = set_to_bitmap([], n)
    eve = Eavesdropper()

    def rewrite(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        if direction == "down" and round_no == 2:
            sid = eve.session(cfg)
            return [Envelope.of(SERVER, e.recipient, 2,
                                ConsistencyRequest(sid, n, s2 if e.recipient in group_b else s1))
                    for e in envs]
        if direction == "down" and round_no == 3:
            out = []
            for c in sorted(everyone):
                group = group_b if c in group_b else everyone - group_b
                signers = tuple(sorted(w for w in group if w in eve.signatures))
                sigs = tuple(eve.signatures[w] for w in signers)
                sid = eve.session(cfg)
                req = (UnmaskRequest(sid, n, s2, d2, signers, sigs) if c in group_b
                       else UnmaskRequest(sid, n, s1, empty, signers, sigs))
                out.append(Envelope.of(SERVER, c, 3, req))
            return out
        return envs

    eve.rewrite = rewrite
    run = run_checked(cfg, _inputs(cfg, seed), seed, adversary=eve)
    learned = recover_input(eve, cfg, VICTIM)
    ok = _all_abort(run, R.TOO_FEW_SIGNATURES) and not run.transcript.reveals and learned is None
    return Outcome("secagg.split_views_malicious", "all abort too_few_signatures",
                   f"aborts: {sorted({r.value for r in run.client_abort_reasons.values()})}",
                   ok, _reasons(run), {"victim_input_recovered": learned is not None})


@attack("secagg.split_views_semi_honest", system="secagg", kind="measured",
        target="Bonawitz et al. section 6: the semi-honest variant has no ConsistencyCheck",
        expected="documented limit: no client reveals both shares, yet the server rebuilds "
                 "b_v and s_v^SK from two groups and recovers x_v exactly")
def split_views_semi_honest(seed: int) -> Outcome:
    """Split views, semi-honest variant: group B is told the victim dropped, group A that
    it survived; together they reveal t shares of both of the victim's secrets."""
    cfg = make_config(7, DIM, graph="complete", threshold=3)
    x = _inputs(cfg, seed)
    group_b = {4, 5, 6}

    def split(r: int, alive: set[int], dropped: set[int]) -> tuple[set[int], set[int]]:
        return (alive - {VICTIM}, dropped | {VICTIM}) if r in group_b else (alive, dropped)

    eve = Eavesdropper(_rewrite_unmask(split))
    run = run_checked(cfg, x, seed, adversary=eve, collective=False)
    learned = recover_input(eve, cfg, VICTIM)
    exact = learned is not None and bool((learned == x[VICTIM]).all())
    per_client = not any(run.transcript.revealed_both(c, VICTIM) for c in range(cfg.n))
    return Outcome("secagg.split_views_semi_honest",
                   "limit: victim input recovered, no per-client double reveal",
                   f"victim input recovered exactly: {exact}; per-client invariant held: "
                   f"{per_client}", exact and per_client, _reasons(run),
                   {"victim_input_recovered": exact, "victim_input_bits": 32 * cfg.dim})


@attack("secagg.key_substitution", system="secagg",
        target="Bonawitz et al. section 6 / Fig. 4 round 1: signed AdvertiseKeys",
        expected="equivocating key lists (server keys in place of the victim's for group "
                 "B): group B aborts with invalid_key_signature; victim never unmasked")
def key_substitution(seed: int) -> Outcome:
    """Equivocating public-key lists: group B is shown the server's own keys under the
    victim's name (a man in the middle on the victim's shares), group A the real keys."""
    cfg = make_config(8, DIM, graph="complete", threshold=3, malicious=True)
    x = _inputs(cfg, seed)
    group_b = {5, 6, 7}
    rand = insecure_deterministic_randomness(seed + 1000)
    fake_c = crypto.x25519_keypair(rand)[1]
    fake_s = crypto.x25519_keypair(rand)[1]

    def rewrite(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        if not (direction == "down" and round_no == 0):
            return envs
        out = []
        for e in envs:
            m = e.message()
            if e.recipient in group_b and isinstance(m, KeyList):
                ents = tuple(AdvertiseKeys(a.sender, fake_c, fake_s, a.nonce, a.signature)
                             if a.sender == VICTIM else a for a in m.entries)
                e = Envelope.of(SERVER, e.recipient, 0, KeyList(ents, m.transcript, m.path))
            out.append(e)
        return out

    eve = Eavesdropper(rewrite)
    run = run_checked(cfg, x, seed, adversary=eve)
    ok = (_all_abort(run, R.INVALID_KEY_SIGNATURE, group_b)
          and recover_input(eve, cfg, VICTIM) is None)
    return Outcome("secagg.key_substitution", "group B aborts invalid_key_signature",
                   f"group B: {sorted({run.client_abort_reasons.get(c, R.SERVER_ABORTED).value for c in group_b})}; "
                   f"session {run.server_state.value}", ok, _reasons(run),
                   {"victim_input_recovered": False if ok else None})


@attack("secagg.too_few_survivors", system="secagg",
        target="Bonawitz et al. Fig. 4 round 4: |U3| >= t",
        expected="server claims t-1 survivors: every client aborts with too_few_survivors")
def too_few_survivors(seed: int) -> Outcome:
    """Fewer survivors than the threshold: a U3 with only t-1 of each recipient's peers,
    which would let t shares reveal a secret held by a too-small set."""
    cfg = make_config(8, DIM, graph="complete", threshold=4)
    t = cfg.threshold

    def shrink(r: int, alive: set[int], dropped: set[int]) -> tuple[set[int], set[int]]:
        keep = {r} | set(sorted(alive - {r})[:t - 1])
        return keep, dropped

    eve = Eavesdropper(_rewrite_unmask(shrink))
    run = run_checked(cfg, _inputs(cfg, seed), seed, adversary=eve)
    ok = _all_abort(run, R.TOO_FEW_SURVIVORS) and not run.transcript.reveals
    return Outcome("secagg.too_few_survivors", "all abort too_few_survivors",
                   f"aborts: {sorted({r.value for r in run.client_abort_reasons.values()})}",
                   ok, _reasons(run), {"shares_revealed": len(run.transcript.reveals)})


def _victim_envelope(kind: type, change: Callable[[Envelope], Envelope | list[Envelope]]
                     ) -> Rewrite:
    def hook(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        out: list[Envelope] = []
        for e in envs:
            if direction == "down" and e.recipient == VICTIM and isinstance(e.message(), kind):
                r = change(e)
                out.extend(r if isinstance(r, list) else [r])
            else:
                out.append(e)
        return out
    return hook


def _victim_dropped_outcome(name: str, run: Any, reason_ok: bool, expected: str,
                            observed: str) -> Outcome:
    ok = (reason_ok and run.completed and VICTIM not in run.survivors)
    return Outcome(name, expected, observed + f"; session {run.server_state.value}, victim "
                   f"{'not ' if VICTIM not in run.survivors else ''}in U3", ok, _reasons(run),
                   {"release_equals_reference_on_U3": run.completed})


@attack("secagg.forged_shares", system="secagg",
        target="Bonawitz et al. Fig. 4 round 2: authenticated encryption of shares",
        expected="forged ciphertexts: victim aborts with decryption_failed; the others "
                 "complete and the release equals the plaintext sum over U3")
def forged_shares(seed: int) -> Outcome:
    """Forged messages: the victim's routed share ciphertexts are replaced by random bytes
    of the same length (a server trying to plant chosen shares)."""
    cfg = make_config(8, DIM, graph="complete", threshold=3)
    rng = np.random.default_rng(seed)

    def forge(e: Envelope) -> Envelope:
        m = e.message()
        cts = tuple(rng.bytes(len(c)) for c in m.ciphertexts)
        return Envelope.of(SERVER, e.recipient, e.round, RoutedShares(m.senders, cts))

    run = run_checked(cfg, _inputs(cfg, seed), seed,
                      adversary=Eavesdropper(_victim_envelope(RoutedShares, forge)))
    r = run.client_abort_reasons.get(VICTIM)
    return _victim_dropped_outcome("secagg.forged_shares", run, r is R.DECRYPTION_FAILED,
                                   "victim decryption_failed, session completes",
                                   f"victim: {r.value if r else None}")


@attack("secagg.replayed_shares", system="secagg",
        target="session binding: sid = H(params, roster, context) in every key and AD",
        expected="shares of an earlier session replayed: victim aborts with "
                 "decryption_failed; session completes without it")
def replayed_shares(seed: int) -> Outcome:
    """Replayed messages: the victim's RoutedShares from an earlier session (same roster,
    other context) are replayed in a new session."""
    old_cfg = make_config(8, DIM, graph="complete", threshold=3, context=b"earlier round")
    captured: dict[int, Envelope] = {}

    def capture(e: Envelope) -> Envelope:
        captured[e.recipient] = e
        return e

    run_checked(old_cfg, _inputs(old_cfg, seed), seed + 1,
                adversary=Eavesdropper(_victim_envelope(RoutedShares, capture)))
    cfg = make_config(8, DIM, graph="complete", threshold=3, context=b"current round")
    run = run_checked(cfg, _inputs(cfg, seed), seed,
                      adversary=Eavesdropper(_victim_envelope(
                          RoutedShares, lambda e: captured[VICTIM].replace(round=e.round))))
    r = run.client_abort_reasons.get(VICTIM)
    return _victim_dropped_outcome("secagg.replayed_shares", run, r is R.DECRYPTION_FAILED,
                                   "victim decryption_failed", f"victim: {r.value if r else None}")


@attack("secagg.replayed_masked_input", system="secagg",
        target="server round 2: one message per client and round",
        expected="a client's masked input delivered twice: the copy is rejected, the sum "
                 "counts it once (equals the plaintext reference)")
def replayed_masked_input(seed: int) -> Outcome:
    """Replayed messages towards the server: the network duplicates one masked input."""
    cfg = make_config(8, DIM, graph="complete", threshold=3)

    def dup(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        if direction == "up" and round_no == 2:
            return envs + [e for e in envs if e.sender == VICTIM]
        return envs

    run = run_checked(cfg, _inputs(cfg, seed), seed, adversary=Eavesdropper(dup))
    rejected = [r for r in run.transcript.rejected if r[0] == SERVER]
    ok = run.completed and len(rejected) == 1 and VICTIM in run.survivors
    return Outcome("secagg.replayed_masked_input", "duplicate rejected, sum correct",
                   f"server rejected {len(rejected)} message(s): "
                   f"{rejected[0][2] if rejected else ''}; session {run.server_state.value}",
                   ok, _reasons(run), {"double_counted": not ok})


@attack("secagg.reordered", system="secagg",
        target="client transition table (state x event): out-of-order events",
        expected="an unmasking request delivered before the routed shares is refused as "
                 "an unexpected event with no state change; the session completes")
def reordered(seed: int) -> Outcome:
    """Reordered messages: the victim receives a round-4 UnmaskRequest while it waits for
    its round-1 shares, then the real shares."""
    cfg = make_config(8, DIM, graph="complete", threshold=3)
    n = cfg.n
    early = Envelope.of(SERVER, VICTIM, 1, UnmaskRequest(bytes(32), n,
                                                         set_to_bitmap(range(n), n),
                                                         set_to_bitmap([], n)))
    run = run_checked(cfg, _inputs(cfg, seed), seed, adversary=Eavesdropper(
        _victim_envelope(RoutedShares, lambda e: [early, e])))
    refused = [r for r in run.transcript.rejected if r[0] == VICTIM]
    ok = (run.completed and run.client_states[VICTIM] is ClientState.COMPLETED
          and len(refused) == 1 and "UnexpectedEvent" in refused[0][2])
    return Outcome("secagg.reordered", "unexpected event refused, session completes",
                   f"victim refused: {refused[0][2][:60] if refused else None}; victim "
                   f"{run.client_states[VICTIM].value}", ok, _reasons(run), {})


@attack("secagg.truncated", system="secagg",
        target="protocol.core.codec: strict decoding of every envelope",
        expected="the victim's key list truncated in flight: codec error at the victim, "
                 "which stalls (dropped); the session completes without it")
def truncated(seed: int) -> Outcome:
    """Truncated messages: the victim's KeyList envelope loses its last 40 bytes."""
    cfg = make_config(8, DIM, graph="complete", threshold=3)
    run = run_checked(cfg, _inputs(cfg, seed), seed, adversary=Eavesdropper(
        _victim_envelope(KeyList, lambda e: e.replace(data=e.data[:-40]))))
    refused = [r for r in run.transcript.rejected if r[0] == VICTIM]
    ok = bool(refused) and "CodecError" in refused[0][2]
    return _victim_dropped_outcome("secagg.truncated", run, ok, "codec error, victim dropped",
                                   f"victim refused: {refused[0][2][:50] if refused else None}")


def closed_set_around(neigh: list[tuple[int, ...]], v: int, t: int) -> set[int]:
    """A small set ``C`` containing ``v`` in which every member has ``t`` neighbours.

    Greedy: start from ``v`` and its first ``t`` neighbours, then repeatedly add the
    outside vertex with the most neighbours in ``C`` until every member of ``C`` has at
    least ``t`` neighbours inside. (Every honest client needs ``t`` surviving
    neighbours, so a set the server can unmask alone must have this property.)
    """
    nb = [set(x) for x in neigh]
    c = {v} | set(sorted(nb[v])[:t])
    while True:
        short = [u for u in c if len(nb[u] & c) < t]
        if not short:
            return c
        outside = set().union(*(nb[u] for u in short)) - c
        best = max(sorted(outside), key=lambda w: len(nb[w] & c))
        c.add(best)


@attack("secagg.isolate_victim", system="secagg", kind="measured",
        target="SecAgg+ (Bell et al. section 3): partial sums over components of the "
               "survivor graph",
        expected="dropping the boundary of a small set C around the victim reveals exactly "
                 "sum_{u in C} x_u; |C| >= t+1 since every client demands t live neighbours")
def isolate_victim(seed: int) -> Outcome:
    """Dropping honest clients to isolate a victim: the server discards the masked inputs
    of every neighbour of a small closed set C around the victim, then unmasks C's sum."""
    r = isolation_study(40, 10, 4, seed)
    ok = r["partial_sum_recovered"] and not r["victim_input_recovered"] \
        and r["set_size"] >= r["threshold"] + 1
    return Outcome("secagg.isolate_victim", "sum over C (|C| >= t+1) learned, x_v alone not",
                   f"|C| = {r['set_size']}, {r['dropped']} clients dropped, partial sum exact: "
                   f"{r['partial_sum_recovered']}, victim alone unmaskable: "
                   f"{r['victim_input_recovered']}", ok,
                   {"server": r.pop("server_state"), "aborted_clients": r.pop("aborted")}, r)


def isolation_study(n: int, k: int, t: int, seed: int = 0) -> dict[str, Any]:
    """Run the isolation attack on a Harary graph ``(n, k)`` with threshold ``t``.

    The server drops (ignores the masked inputs of) the boundary of
    :func:`closed_set_around` the victim, lets the honest protocol finish, and unmasks
    the partial sum over the set from what it recorded.

    Returns:
        Set size, clients dropped, the fraction of the victim's neighbours dropped, and
        whether the partial sum (and the victim's input alone) were recovered.
    """
    cfg = make_config(n, DIM, graph="harary", degree=k, threshold=t)
    x = _inputs(cfg, seed)
    found: dict[str, Any] = {}

    def boundary_of(neigh: Any) -> set[int]:
        """The graph exists once round 0 closed (its seed is the transcript's)."""
        found["neigh"] = neigh
        found["c"] = c = closed_set_around(neigh, VICTIM, t)
        return set().union(*(set(neigh[u]) for u in c)) - c

    eve = Eavesdropper()
    run = run_checked(cfg, x, seed, adversary=eve, dropout=Dropout({2: boundary_of}))
    neigh, c = found["neigh"], found["c"]
    boundary = set().union(*(set(neigh[u]) for u in c)) - c
    partial = unmask_subset(eve, cfg, c) if run.completed else None
    ref = np.array([int(s) % cfg.modulus for s in x[sorted(c)].astype(object).sum(axis=0)],
                   dtype=np.uint64)
    exact = partial is not None and bool((partial == ref).all())
    alone = unmask_subset(eve, cfg, {VICTIM}) if run.completed else None
    return {"n": n, "degree": k, "threshold": t, "set_size": len(c),
            "dropped": len(boundary),
            "fraction_of_victim_neighbours_dropped": round(
                len(set(neigh[VICTIM]) - c) / len(neigh[VICTIM]), 3),
            "victim_hidden_among": len(c) - 1, "completed": run.completed,
            "partial_sum_recovered": exact, "victim_input_recovered": alone is not None,
            # complete graph (plain SecAgg): C must be all of U3, so a set of the same
            # size needs n - |C| of the victim's n - 1 neighbours dropped
            "complete_graph_fraction_needed_for_same_set_size":
                round((n - len(c)) / (n - 1), 3),
            "server_state": run.server_state.value, "aborted": len(run.client_abort_reasons)}


@attack("secagg.key_substitution_semi_honest", system="secagg", kind="measured",
        target="Bonawitz et al. section 4: the semi-honest variant trusts the server to relay "
               "public keys (no PKI)",
        expected="documented limit: a server that substitutes its own share-encryption keys "
                 "between the victim and t neighbours (man in the middle) recovers x_v "
                 "exactly while every client completes; the malicious variant stops it "
                 "(secagg.key_substitution)")
def key_substitution_semi_honest(seed: int) -> Outcome:
    """Man in the middle on the share exchange: the victim is shown server keys for t of
    its neighbours and they are shown a server key for the victim; the server decrypts,
    keeps and re-encrypts the victim's shares, so nobody notices."""
    cfg = make_config(8, DIM, graph="complete", threshold=3)
    x = _inputs(cfg, seed)
    t, v = cfg.threshold, VICTIM
    middle = [w for w in range(cfg.n) if w != v][:t]   # complete graph: N(v)
    rand = insecure_deterministic_randomness(seed + 7, "mitm")
    fake = {w: crypto.x25519_keypair(rand) for w in [v] + middle}   # name -> (sk, pk)
    real_c: dict[int, bytes] = {}
    root: list[bytes] = []   # the round-0 transcript root, seen in the key lists
    stolen: list[shamir.Share] = []
    stolen_s: list[shamir.Share] = []

    def key(fake_of: int, peer: int, u: int, w: int) -> bytes:
        """The key ``peer`` derived against the fake key published under ``fake_of``."""
        return crypto.hkdf(crypto.x25519_shared(fake[fake_of][0], real_c[peer]),
                           label=crypto.LABEL_SHARE_KEY,
                           context=cfg.pair_context(cfg.transcript_session(root[0]), u, w))

    def rewrite(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        out = []
        for e in envs:
            m = e.message()
            if direction == "up" and isinstance(m, AdvertiseKeys):
                real_c[m.sender] = m.c_pk
            if direction == "down" and isinstance(m, KeyList) and (
                    e.recipient == v or e.recipient in middle):
                swap = middle if e.recipient == v else [v]
                root[:] = [m.transcript]
                ents = tuple(AdvertiseKeys(a.sender, fake[a.sender][1], a.s_pk, a.nonce,
                                           a.signature)
                             if a.sender in swap else a for a in m.entries)
                e = Envelope.of(SERVER, e.recipient, e.round,
                                KeyList(ents, m.transcript, m.path))
            elif direction == "down" and isinstance(m, RoutedShares) and (
                    e.recipient == v or e.recipient in middle):
                r = e.recipient
                cts = list(m.ciphertexts)
                for i, s in enumerate(m.senders):
                    if not ((r == v and s in middle) or (r in middle and s == v)):
                        continue
                    ad = crypto.routing_ad(cfg.transcript_session(root[0]), 1, s, r)
                    # s encrypted under the fake key of r; r decrypts with the fake key of s
                    pt = crypto.aead_decrypt(key(r, s, s, r), cts[i], ad)
                    if s == v:
                        stolen.append(shamir.Share.from_bytes(pt[:shamir.SHARE_WIRE_BYTES]))
                        stolen_s.append(shamir.Share.from_bytes(pt[shamir.SHARE_WIRE_BYTES:]))
                    cts[i] = crypto.aead_encrypt(key(s, r, s, r), pt, ad, rand)
                e = Envelope.of(SERVER, r, e.round, RoutedShares(m.senders, tuple(cts)))
            out.append(e)
        return out

    eve = Eavesdropper(rewrite)
    run = run_checked(cfg, x, seed, adversary=eve)
    eve.b_shares[v] = stolen
    eve.s_shares[v] = stolen_s
    learned = recover_input(eve, cfg, v)
    exact = learned is not None and bool((learned == x[v]).all())
    ok = exact and run.completed and not run.client_abort_reasons
    return Outcome("secagg.key_substitution_semi_honest",
                   "limit: x_v recovered, every client completes",
                   f"victim input recovered exactly: {exact}; session {run.server_state.value}, "
                   f"{len(run.client_abort_reasons)} aborts", ok, _reasons(run),
                   {"victim_input_recovered": exact, "substituted_keys": len(middle) + 1})


# ------------------------------------------------------- both threat models, by name
# Each study below builds its session with the parameters secagg.params.find_params
# chooses for a named threat model (the defaults every transport and command use), so
# the catalogue shows what each model's own parameters stop and what they do not.

@contextmanager
def colluders_decrypt(cfg: SessionConfig, colluders: set[int]
                      ) -> Iterator[dict[int, dict[int, tuple[shamir.Share, shamir.Share]]]]:
    """Colluding clients hand the server every share they decrypt.

    Within the block, every routed share ciphertext a client in ``colluders`` opens is
    recorded (the colluders run the honest client code and give away what it
    decrypts). Yields ``colluder -> {owner: (b share, s^SK share)}``. Not thread-safe.
    """
    # routing_ad ends with u32(round) || u64(sender) || u64(recipient) (secagg.crypto);
    # the session id before it is the client's own, so it is not matched here
    prefix_len = len(crypto.routing_ad(bytes(32), 1, 0, 0)) - 20

    def route(ad: bytes) -> tuple[int, int] | None:
        if len(ad) != prefix_len + 20 or int.from_bytes(ad[-20:-16], "big") != 1:
            return None
        s, r = int.from_bytes(ad[-16:-8], "big"), int.from_bytes(ad[-8:], "big")
        return (s, r) if r in colluders else None

    held: dict[int, dict[int, tuple[shamir.Share, shamir.Share]]] = {r: {} for r in colluders}
    orig, orig_many = crypto.aead_decrypt, crypto.aead_decrypt_many
    width = shamir.SHARE_WIRE_BYTES

    def record(pt: bytes, associated_data: bytes) -> None:
        who = route(bytes(associated_data))
        if who is not None and len(pt) == 2 * width:
            held.setdefault(who[1], {})[who[0]] = (shamir.Share.from_bytes(pt[:width]),
                                    shamir.Share.from_bytes(pt[width:]))

    def spy(key: bytes, blob: bytes, associated_data: bytes) -> bytes:
        pt = orig(key, blob, associated_data)
        record(pt, associated_data)
        return pt

    def spy_many(keys: Any, blobs: Any, ads: Any) -> list[bytes]:
        # a client opens its round-2 ciphertexts in one call: what it opened before a
        # failure is given away too
        try:
            pts = orig_many(keys, blobs, ads)
        except crypto.AeadBatchError as exc:
            for pt, ad in zip(exc.done, ads):
                record(pt, ad)
            raise
        for pt, ad in zip(pts, ads):
            record(pt, ad)
        return pts

    crypto.aead_decrypt = spy  # type: ignore[assignment]
    crypto.aead_decrypt_many = spy_many  # type: ignore[assignment]
    try:
        yield held
    finally:
        crypto.aead_decrypt = orig  # type: ignore[assignment]
        crypto.aead_decrypt_many = orig_many  # type: ignore[assignment]


def _pool(eve: Eavesdropper, held: dict[int, dict[int, tuple[shamir.Share, shamir.Share]]],
          owners: Any = None) -> None:
    """Add the colluders' shares to what the server recorded (one share per point)."""
    for per_owner in held.values():
        for owner, (b, s) in per_owner.items():
            if owners is not None and owner not in owners:
                continue
            for store, sh in ((eve.b_shares, b), (eve.s_shares, s)):
                lst = store.setdefault(owner, [])
                if all(o.x != sh.x for o in lst):
                    lst.append(sh)


def _threat_config(n: int, threat: str, graph: str, context: bytes,
                   seed: int = 0) -> SessionConfig:
    """A session with the parameters ``find_params`` gives the named threat model (the
    server nonce from the seed: a reproducible simulation)."""
    params = find_params(n, graph=graph, threat=threat)
    nonce = insecure_deterministic_randomness(seed, "attack-server-nonce").token_bytes(
        FRESH_NONCE_BYTES)
    return SessionConfig(params, tuple(range(n)), context, DIM, 1 << 32,
                         malicious=params.malicious, server_nonce=nonce)


def _pki(cfg: SessionConfig, seed: int) -> tuple[list[bytes], list[bytes]]:
    rand = insecure_deterministic_randomness(seed + 31, "attack-pki")
    pairs = [crypto.ed25519_keypair(rand) for _ in range(cfg.n)]
    return [sk for sk, _ in pairs], [pk for _, pk in pairs]


def _abort_counts(run: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in run.client_abort_reasons.values():
        out[r.value] = out.get(r.value, 0) + 1
    return dict(sorted(out.items()))


def split_view_study(n: int, threat: str, colluders: int, seed: int = 0,
                     graph: str = "harary") -> dict[str, Any]:
    """A server that equivocates about whether the victim dropped.

    Half of the victim's honest neighbours (group B) are told the victim dropped (they
    reveal shares of its mask key ``s_v^SK``), the other half that it survived (they
    reveal shares of its self-mask seed ``b_v``); ``colluders`` of the victim's
    neighbours (the worst placement for the victim) hand over both of their shares. In
    the malicious-server variant the server also shows group B the survivor set
    without the victim in the consistency round, forwards group B's signatures on it,
    and forges the colluders' signatures on both sets (it holds their signing keys).

    Returns:
        The parameters, the groups, every client's abort reason (counted), and whether
        the server recovered ``x_v`` exactly.
    """
    cfg = _threat_config(n, threat, graph, b"fedhh attack: split view", seed)
    t, v = cfg.threshold, VICTIM
    x = _inputs(cfg, seed)
    # the graph is seeded by the round-0 transcript, so the victim's neighbourhood (and
    # with it the colluders and the two groups) is known once the key lists go out;
    # the sets are filled in place then (colluders_decrypt reads ``corrupt`` lazily)
    corrupt: set[int] = set()
    group_b: set[int] = set()
    groups: dict[str, int] = {}
    sks, pks = _pki(cfg, seed)
    eve = Eavesdropper()
    full_u3: dict[str, bytes] = {}

    def place_groups() -> None:
        if groups or not eve.transcript:
            return
        nb = sorted(cfg.neighbours(v, eve.transcript))
        corrupt.update(nb[:colluders])
        honest_nb = [w for w in nb if w not in corrupt]
        groups["half"] = half = -(-len(honest_nb) // 2)
        group_b.update(honest_nb[half:])

    def b_view(alive: bytes) -> bytes:
        return set_to_bitmap(sorted(_members(alive, n) - {v}), n)

    def signed_request(c: int, alive: set[int], dropped: set[int]) -> UnmaskRequest:
        """The unmasking request for ``c`` in the view ``alive``, with every signature
        the server holds or can forge on that view from ``c``'s alive neighbours."""
        bits = set_to_bitmap(sorted(alive), n)
        sid = full_u3["session"]
        msg = cfg.consistency_message(sid, bits)
        in_b_view = v not in alive
        signers, sigs = [], []
        for w in sorted(set(cfg.neighbours(c, eve.transcript)) & alive):
            if w in corrupt:
                signers.append(w)
                sigs.append(crypto.ed25519_sign(sks[w], msg))
            elif w in eve.signatures and (w in group_b) == in_b_view:
                signers.append(w)
                sigs.append(eve.signatures[w])
        return UnmaskRequest(sid, n, bits, set_to_bitmap(sorted(dropped), n),
                             tuple(signers), tuple(sigs))

    def rewrite(round_no: int, direction: str, envs: list[Envelope]) -> list[Envelope]:
        place_groups()
        if direction != "down":
            return envs
        if cfg.malicious and round_no == 3:
            # whatever the honest server decided (it rejects group B's signatures on
            # the other set and may abort), the adversary sends its own requests
            u3 = _members(full_u3["alive"], n)
            dropped = set(eve.routed) - set(eve.masked)
            return [Envelope.of(SERVER, c, 3,
                                signed_request(c, u3 - {v}, dropped | {v}) if c in group_b
                                else signed_request(c, u3, dropped))
                    for c in range(n)]
        out = []
        for e in envs:
            m = e.message()
            if isinstance(m, ConsistencyRequest):
                full_u3["alive"], full_u3["session"] = m.alive, m.session
                if e.recipient in group_b:
                    e = Envelope.of(SERVER, e.recipient, e.round,
                                    ConsistencyRequest(m.session, n, b_view(m.alive)))
            elif isinstance(m, UnmaskRequest) and e.recipient in group_b:
                m = UnmaskRequest(m.session, n,
                                  set_to_bitmap(sorted(_members(m.alive, n) - {v}), n),
                                  set_to_bitmap(sorted(_members(m.dropped, n) | {v}), n))
                e = Envelope.of(SERVER, e.recipient, e.round, m)
            out.append(e)
        return out

    eve.rewrite = rewrite
    kw: dict[str, Any] = {"signing_keys": sks, "verify_keys": pks} if cfg.malicious else {}
    with colluders_decrypt(cfg, corrupt) as held:
        run = run_checked(cfg, x, seed, adversary=eve, collective=cfg.malicious, **kw)
    _pool(eve, held, owners={v})
    learned = recover_input(eve, cfg, v)
    exact = learned is not None and bool((learned == x[v]).all())
    return {"n": n, "threat": threat, "degree": cfg.degree, "threshold": t,
            "min_honest": cfg.params.min_honest, "colluders": len(corrupt),
            "group_a": groups.get("half", 0), "group_b": len(group_b),
            "b_shares_of_victim": len(eve.b_shares.get(v, [])),
            "s_shares_of_victim": len(eve.s_shares.get(v, [])),
            "victim_input_recovered": exact, "aborts": _abort_counts(run),
            "group_b_aborted": sum(c in run.client_abort_reasons for c in group_b),
            "server": run.server_state.value,
            "per_client_double_reveal": any(run.transcript.revealed_both(c, v)
                                            for c in range(n))}


def drop_window_study(n: int, threat: str, seed: int = 0,
                      graph: str = "harary") -> dict[str, Any]:
    """A server that chooses who drops, to carve a small unmaskable set around a victim.

    It takes the smaller of two sets ``C`` around the victim in which every member has
    ``t`` neighbours inside: ``t + 1`` consecutive ring positions (closed whenever
    ``t <= k/2``) and the greedy :func:`closed_set_around`; then it drops
    every honest neighbour of ``C`` before round 2, lets the protocol finish and unmasks
    the sum over ``C`` from what it recorded.

    Returns:
        Set size, drops (and the model's dropout budget), whether the sum over ``C``
        was recovered exactly, and the threat model's ``min_honest``.
    """
    cfg = _threat_config(n, threat, graph, b"fedhh attack: drop window", seed)
    t = cfg.threshold
    x = _inputs(cfg, seed)
    eve = Eavesdropper()
    found: dict[str, Any] = {}

    def boundary_of(neigh: Any) -> set[int]:
        """The graph exists once round 0 closed (its seed is the transcript's, which
        the server saw in the key lists it sent)."""
        c = closed_set_around(neigh, VICTIM, t)
        if cfg.degree < n - 1:
            ring = ring_order(n, cfg.graph_seed(eve.transcript)).tolist()
            pos = ring.index(VICTIM)
            arc = {ring[(pos + d) % n] for d in range(t + 1)}
            if all(len(set(neigh[u]) & arc) >= t for u in arc) and len(arc) < len(c):
                c = arc
        found["c"] = c
        found["boundary"] = b = set().union(*(set(neigh[u]) for u in c)) - c
        return b

    kw: dict[str, Any] = {}
    if cfg.malicious:
        sks, pks = _pki(cfg, seed)
        kw = {"signing_keys": sks, "verify_keys": pks}
    run = run_checked(cfg, x, seed, adversary=eve, dropout=Dropout({2: boundary_of}), **kw)
    c, boundary = found["c"], found["boundary"]
    partial = unmask_subset(eve, cfg, c) if run.completed else None
    ref = np.array([int(s) % cfg.modulus for s in x[sorted(c)].astype(object).sum(axis=0)],
                   dtype=np.uint64)
    exact = partial is not None and bool((partial == ref).all())
    budget = math.ceil(round(cfg.params.dropout_rate * n, 9))
    return {"n": n, "threat": threat, "degree": cfg.degree, "threshold": t,
            "min_honest": cfg.params.min_honest, "set_size": len(c),
            "dropped": len(boundary), "dropout_budget": budget,
            "partial_sum_recovered": exact,
            "below_min_honest": exact and len(c) < cfg.params.min_honest,
            "completed": run.completed, "server": run.server_state.value,
            "aborts": _abort_counts(run)}


def pooled_shares_study(n: int, threat: str, colluders: int, seed: int = 0,
                        graph: str = "complete") -> dict[str, Any]:
    """Colluding clients pool the shares they hold with the server (no deviation
    otherwise): every honest input for which the pool reaches ``t`` shares of both
    ``b_v`` and ``s_v^SK`` is recovered.

    Returns:
        Parameters, coalition size, and how many honest inputs the pool recovers
        exactly (also with the coalition cut to ``ceil(gamma n)``, the model's size).
    """
    cfg = _threat_config(n, threat, graph, b"fedhh attack: pooled shares", seed)
    x = _inputs(cfg, seed)
    corrupt = set(range(n - colluders, n))
    kw: dict[str, Any] = {}
    if cfg.malicious:
        sks, pks = _pki(cfg, seed)
        kw = {"signing_keys": sks, "verify_keys": pks}
    eve = Eavesdropper()
    with colluders_decrypt(cfg, corrupt) as held:
        run = run_checked(cfg, x, seed, adversary=eve, **kw)
    honest = [u for u in range(n) if u not in corrupt]
    in_model = math.ceil(round(cfg.params.corrupt_fraction * n, 9))

    def recovered(coalition: set[int]) -> int:
        pool = Eavesdropper(keys=eve.keys, masked=eve.masked, routed=eve.routed,
                            transcript=eve.transcript)
        _pool(pool, {r: held[r] for r in coalition})
        got = 0
        for u in honest:
            if (len(pool.b_shares.get(u, [])) < cfg.threshold
                    or len(pool.s_shares.get(u, [])) < cfg.threshold):
                continue
            learned = recover_input(pool, cfg, u)
            got += learned is not None and bool((learned == x[u]).all())
        return got

    return {"n": n, "threat": threat, "graph": graph, "degree": cfg.degree,
            "threshold": cfg.threshold, "min_honest": cfg.params.min_honest,
            "colluders": len(corrupt), "honest": len(honest),
            "inputs_recovered": recovered(corrupt),
            "coalition_in_model": in_model,
            "inputs_recovered_by_model_coalition": recovered(set(sorted(corrupt)[:in_model])),
            "completed": run.completed}


def _gamma_n(n: int) -> int:
    return math.ceil(round(DEFAULT_CORRUPT_FRACTION * n, 9))


def _split_outcome(name: str, threat: str, colluders: int, seed: int) -> Outcome:
    r = split_view_study(100, threat, colluders, seed)
    if threat == "malicious":
        ok = not r["victim_input_recovered"] and not r["per_client_double_reveal"]
        exp = "x_v not recovered; the equivocation ends in aborts"
    else:
        ok = r["victim_input_recovered"] and not r["per_client_double_reveal"]
        exp = "limit: x_v recovered exactly, no client revealed both shares"
    return Outcome(name, exp,
                   f"n=100 k={r['degree']} t={r['threshold']}, {r['colluders']} colluders, "
                   f"groups {r['group_a']}/{r['group_b']} ({r['group_b_aborted']} of group B "
                   f"aborted): server holds {r['b_shares_of_victim']} b- and "
                   f"{r['s_shares_of_victim']} s-shares of x_v; recovered: "
                   f"{r['victim_input_recovered']}; aborts {r['aborts']}", ok,
                   {"server": r["server"], "aborts": r["aborts"]}, r)


@attack("secagg.split_view_no_colluders_malicious", system="secagg",
        target="Bonawitz et al. section 6 (ConsistencyCheck) with the malicious-model "
               "parameters of secagg.params (2t > k + C per neighbourhood)",
        expected="n=100 Harary, threat malicious (k=16, t=11), no colluder: the clients "
                 "shown the survivor set without the victim lack t signatures and abort "
                 "too_few_signatures; x_v is not recovered")
def split_view_no_colluders_malicious(seed: int) -> Outcome:
    """Split view, no colluding client, malicious-model session."""
    return _split_outcome("secagg.split_view_no_colluders_malicious", "malicious", 0, seed)


@attack("secagg.split_view_no_colluders_semi_honest", system="secagg", kind="measured",
        target="the semi-honest threat model's parameters (t > C, no consistency round)",
        expected="limit: n=100 Harary, threat semi-honest (k=12, t=6), no colluder: two "
                 "halves of the victim's neighbours told different stories give the server "
                 "t shares of both secrets; x_v recovered exactly")
def split_view_no_colluders_semi_honest(seed: int) -> Outcome:
    """Split view, no colluding client, semi-honest-model session."""
    return _split_outcome("secagg.split_view_no_colluders_semi_honest", "semi-honest", 0,
                          seed)


@attack("secagg.split_view_colluders_malicious", system="secagg",
        target="malicious-model parameters with ceil(gamma n) = 5 colluders among the "
               "victim's neighbours (worst placement), their signatures forged on both sets",
        expected="n=100, threat malicious: 5 colluders + either honest group stay below t "
                 "on one of the two secrets (2t - k = 6 > 5); x_v not recovered")
def split_view_colluders_malicious(seed: int) -> Outcome:
    """Split view with gamma n colluders, malicious-model session."""
    return _split_outcome("secagg.split_view_colluders_malicious", "malicious",
                          _gamma_n(100), seed)


@attack("secagg.split_view_colluders_semi_honest", system="secagg", kind="measured",
        target="semi-honest-model parameters with ceil(gamma n) = 5 colluders",
        expected="limit: n=100, threat semi-honest: x_v recovered exactly")
def split_view_colluders_semi_honest(seed: int) -> Outcome:
    """Split view with gamma n colluders, semi-honest-model session."""
    return _split_outcome("secagg.split_view_colluders_semi_honest", "semi-honest",
                          _gamma_n(100), seed)


def _window_outcome(name: str, threat: str, seed: int) -> Outcome:
    r = drop_window_study(100, threat, seed)
    if threat == "malicious":
        ok = not r["below_min_honest"]
        exp = f"no sum over fewer than min_honest = {r['min_honest']} honest clients"
    else:
        ok = r["below_min_honest"]
        exp = "limit: the sum over a small window around the victim is recovered"
    return Outcome(name, exp,
                   f"n=100 k={r['degree']} t={r['threshold']}: |C| = {r['set_size']} after "
                   f"dropping {r['dropped']} (budget {r['dropout_budget']}); sum over C "
                   f"recovered: {r['partial_sum_recovered']}; min_honest {r['min_honest']}",
                   ok, {"server": r["server"], "aborts": r["aborts"]}, r)


@attack("secagg.drop_window_malicious", system="secagg",
        target="Bell et al. 2020: the server chooses who drops; malicious-model parameters "
               "(t > k/2 + corrupt support, secagg.params min_honest)",
        expected="n=100 Harary, threat malicious: every set whose sum the server can unmask "
                 "by dropping its boundary holds at least min_honest = 43 honest clients")
def drop_window_malicious(seed: int) -> Outcome:
    """Drops chosen to isolate a window around the victim, malicious-model session."""
    return _window_outcome("secagg.drop_window_malicious", "malicious", seed)


@attack("secagg.drop_window_semi_honest", system="secagg", kind="measured",
        target="the semi-honest model assumes random dropouts; a server choosing them is "
               "outside it",
        expected="limit: n=100 Harary, threat semi-honest (k=12, t=6): dropping the 12 "
                 "honest neighbours of 7 consecutive ring positions around the victim gives "
                 "the server the exact sum of those 7 inputs")
def drop_window_semi_honest(seed: int) -> Outcome:
    """Drops chosen to isolate a window around the victim, semi-honest-model session."""
    return _window_outcome("secagg.drop_window_semi_honest", "semi-honest", seed)


def _pool_outcome(name: str, threat: str, seed: int) -> Outcome:
    r = pooled_shares_study(100, threat, _gamma_n(100) + 1, seed)
    if threat == "malicious":
        ok = r["inputs_recovered"] == 0 and r["inputs_recovered_by_model_coalition"] == 0
        exp = "no input recovered"
    else:
        ok = (r["inputs_recovered"] == r["honest"]
              and r["inputs_recovered_by_model_coalition"] == 0)
        exp = "limit: one client past the model recovers every honest input"
    return Outcome(name, exp,
                   f"n=100 complete, t={r['threshold']}: {r['colluders']} colluders recover "
                   f"{r['inputs_recovered']} of {r['honest']} honest inputs "
                   f"({r['coalition_in_model']} colluders: "
                   f"{r['inputs_recovered_by_model_coalition']})", ok,
                   {"completed": r["completed"]}, r)


@attack("secagg.pooled_shares_malicious", system="secagg",
        target="Bonawitz et al. 2017: t > (n + gamma n)/2 on the complete graph",
        expected="n=100 complete, threat malicious (t=53): 6 colluders pooling every share "
                 "they hold recover no input")
def pooled_shares_malicious(seed: int) -> Outcome:
    """ceil(gamma n) + 1 colluding clients pool their shares, malicious-model session."""
    return _pool_outcome("secagg.pooled_shares_malicious", "malicious", seed)


@attack("secagg.pooled_shares_semi_honest", system="secagg", kind="measured",
        target="semi-honest parameters: t = ceil(gamma n) + 1 on the complete graph",
        expected="limit: n=100 complete, threat semi-honest (t=6): 5 colluders (the model) "
                 "recover nothing, 6 recover every honest input exactly")
def pooled_shares_semi_honest(seed: int) -> Outcome:
    """ceil(gamma n) + 1 colluding clients pool their shares, semi-honest-model session."""
    return _pool_outcome("secagg.pooled_shares_semi_honest", "semi-honest", seed)
