"""Thresholding-committee transport: secure aggregation whose sum is never unmasked in one
place, followed by a secure comparison of every count with ``theta``.

Theory of operation
-------------------
One round (:meth:`ThresholdTransport.run_round`). The default (``threat="malicious"``)
is secure against one deviating member, the server or a helper (docs/threshold.md):

1. **Secure aggregation with two blinding participants.** The session has the ``n``
   clients at positions ``0..n-1`` and the two committee helpers at positions ``n`` and
   ``n+1`` (:func:`protocol.core.secagg_engine.run_secagg`, every message through the
   codec, the same threat-model parameters as :mod:`~protocol.core.transports.
   secagg_transport`), over ``F_p``, ``p = 2^61 - 1``. Helper ``h`` draws a 32-byte
   seed and derives from it its whole secure-aggregation client and its blinding
   vector ``R_h`` (:mod:`protocol.core.committee.binding`), so the server unmasks only
   ``S = sum + R_1 + R_2``. The helpers' positions are the session's ``required`` set
   (:class:`secagg.state.SessionConfig`), bound into the session id: a client refuses
   (``REQUIRED_PARTICIPANT_MISSING``) to reveal shares for a survivor set without both
   helpers. Helpers never drop (dropouts are drawn for clients only); client dropouts
   keep Bonawitz et al.'s behaviour.
2. **Each member derives its own shares.** Helper 2 unmasks ``S`` on a replica of the
   server (:class:`~protocol.core.committee.binding.MirroredServer`) from the same
   signed client messages; helper 1's seed goes to the server and helper 2's to helper
   1, each of whom replays that helper's client and checks every message it sent
   (:func:`~protocol.core.committee.binding.audit_helper`). The committee holds
   ``(S, -R1)``, ``(-R1, -R2)``, ``(-R2, S)``.
3. **Verified comparison** (:func:`protocol.core.committee.verified.
   run_verified_committee`): every multiplication verified before anything is opened,
   checked openings, context-bound messages; only the pass bits are opened and, when
   the round reveals counts (TrieHH++), only the counts of the passing candidates.
4. **Samples** (:meth:`ThresholdTransport.draw_sample`): a mechanism that samples its
   voters gets each round's sample from the three members' commit-then-reveal beacon
   (:mod:`protocol.core.sample_beacon`), one per round, rounds in order; a vote round
   whose ``Votes.sample`` is not the one its beacon selects aborts before any session.
5. **Vector rounds** (modulus ``spec.modulus``): the release is the whole sum; the
   server audits both helpers and adds their shares. **Report rounds** are not
   supported (:class:`~protocol.core.contract.ContractError`).

``threat="semi-honest"`` (a named option) keeps the earlier design: the ring
``Z_{2^k}`` (``k`` from :func:`protocol.core.committee.ring_bits` of ``(n, theta)``),
OS blinding vectors, and the semi-honest committee
(:func:`protocol.core.committee.run_committee`) on ``(S, -R_1, -R_2)``.

Failures: a member that fails, deviates or sends something malformed aborts the round
with ``AggregationAborted("committee_<reason>")`` naming the check
(``helper_audit_failed``, ``replica_failed``, ``input_mismatch``,
``verification_failed``, ``open_mismatch``, ``replayed_message``, ...); a session whose
survivor set lacks a helper aborts as ``threshold_helper_missing`` (or with the
secure-aggregation abort reason). There is never a partial release.

Views (``RoundResult.views``): ``server`` -- the secure-aggregation server's view with the
*blinded* sum, what it audited, and its committee view; ``helper1``, ``helper2`` -- the
share ``-R_h``, what each audited or unmasked, and the committee view (keys received,
every received message, the opened values); ``clients`` -- as for secure aggregation.

Randomness: OS randomness by default; ``simulate=True`` (the explicit switch) derives
every key, every helper seed and the committee's keys from the ``rng`` of ``run_round``.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core.committee import CommitteeAborted, Hook, ring_bits, run_committee
from protocol.core.committee import field as F
from protocol.core.committee.binding import (
    AuditFailed, MirroredServer, audit_helper, helper_blind, uniform_mod,
)
from protocol.core.committee.verified import MessageHook
from protocol.core.contract import (
    AggregationAborted, ContractError, Contributions, Cost, Kind, Release, RoundResult,
    RoundSpec, Transport, Votes,
)
from protocol.core.corruption import CorruptClients
from protocol.core.job_ledger import HelperLedger, LedgerRefusal
from protocol.core.randomness import SEED_BYTES, OsRandom, insecure_deterministic_randomness
from protocol.core.sample_beacon import (
    MEMBERS, VALUE_BYTES, BeaconTranscript, Sample, SampleRejected, beacon_context,
    check_sample, run_beacon, sample_users, server_drawn,
)
from protocol.core.secagg_engine import Dropout, SecAggRun
from protocol.core.transports.secagg_transport import (
    SecAggSessionOptions, corrupt_inputs, note_corruption, spec_context,
)
from protocol.core.transports.threshold_reports import (
    MIN_VALID_FRACTION, ReportKeys, compare, run_report_round,
)
from secagg import crypto
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.params import SecAggParams
from secagg.state import AbortReason, SessionConfig

__all__ = ["ThresholdTransport", "HELPERS", "Deviation", "uniform_mod", "COMMITTEE_INPUTS"]

#: where the committee's input comes from: each device's validated report (the
#: default), or the sum of a secure-aggregation session (no client input is checked)
COMMITTEE_INPUTS = ("reports", "secagg")

#: the committee's helper names, in committee order after the server
HELPERS = ("helper1", "helper2")


@dataclass(frozen=True)
class Deviation:
    """Switches that make one committee member deviate (the attack catalogue, tests and
    the launcher's fault switches use them; an honest run passes none).

    Attributes:
        components: ``components(member, (first, second)) -> (first, second)``: the
            copies a member computes with (a server that shifts ``S``, a helper that
            shifts ``-R_h``).
        seed: ``seed(helper, sigma) -> sigma``: what a helper hands its auditor.
        secagg_input: ``secagg_input(helper, R_h) -> vector``: what a helper enters into
            secure aggregation instead of ``R_h``.
        party_classes: the verified committee's party classes (a member that skips
            its own checks).
        replica_feed: ``replica_feed(message) -> message``: what the server forwards
            to helper 2's replica in place of each client message.
        helper_exchange: ``helper_exchange(inbound, outbound) -> (inbound, outbound)``:
            the copy of helper 2's exchange with the server that the server forwards to
            helper 1 for its audit.
        beacon_reveal: ``beacon_reveal(member, value) -> value``: what a member reveals
            in the sample beacon after every commitment is in
            (:func:`protocol.core.sample_beacon.run_beacon`).
        intake_reports: ``intake_reports(batch, frames) -> frames``: the device frames
            the server takes into a batch of a validated round (it may drop chosen
            ones or inject others).
        intake_relay: ``intake_relay(helper, batch) -> batch``: the
            :class:`~protocol.core.committee.intake.ReportBatch` the server forwards
            each helper (altered or swapped parts, a report of a device outside the
            sample).
        intake_verdicts: ``intake_verdicts(member, codes) -> codes``: a member's own
            verdicts on a batch (an accusation of a valid report), used and sent
            consistently.
        intake_hook: ``intake_hook(step, sender, recipient, message) -> message`` on
            the intake's messages between members (``verdicts``, ``verdicts-echo``):
            ``None`` loses one, another value replaces it (a member that tells the two
            others different verdicts).
        validity_hook: a :data:`~protocol.core.committee.verified.MessageHook` on the
            validity check's messages.
        validity_classes: the validity check's party classes (a member that errs in
            the check).
    """

    components: Callable[[int, tuple[np.ndarray, np.ndarray]],
                         tuple[np.ndarray, np.ndarray]] | None = None
    seed: Callable[[int, bytes], bytes] | None = None
    secagg_input: Callable[[int, np.ndarray], np.ndarray] | None = None
    party_classes: Sequence[type] | None = None
    replica_feed: Callable[[Any], Any] | None = None
    helper_exchange: Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]] | None = None
    beacon_reveal: Callable[[str, bytes], bytes] | None = None
    intake_reports: Callable[[int, list[bytes]], list[bytes]] | None = None
    intake_relay: Callable[[int, Any], Any] | None = None
    intake_verdicts: Callable[[int, np.ndarray], np.ndarray] | None = None
    intake_hook: Callable[[str, int, int, Any], Any] | None = None
    validity_hook: MessageHook | None = None
    validity_classes: Sequence[type] | None = None


class ThresholdTransport(SecAggSessionOptions, Transport):
    """Secure aggregation into a three-member committee that opens only the release.

    Takes the secure-aggregation options of
    :class:`~protocol.core.transports.secagg_transport.SecAggSessionOptions` (the
    malicious threat model by default, as every secure-aggregation session), plus:

    Args:
        committee_hook: ``hook(step, sender, recipient, payload) -> payload`` on every
            committee message (``None`` loses it; under the malicious model it may also
            return a whole :class:`~protocol.core.committee.verified.CommitteeMessage`,
            e.g. one replayed from another round). Attack studies and tests model a
            faulty member with it.
        deviation: a :class:`Deviation` (malicious model only).
        keep_ledgers: the helpers keep their ledgers across jobs
            (:mod:`protocol.core.job_ledger`, what a deployment keeps on disk): one beacon
            per task and round until a job completes, every job that ends after a beacon
            whose round did not complete counted, jobs of the task refused past
            ``max_abandoned``. ``False`` models helpers that forget (a fresh ledger per
            job: the restart attack's "defence off").
        max_abandoned: the helpers' budget of jobs abandoned after a beacon, per task
            (default 0, as ``fedhh helper --max-abandoned``).

    The helpers never drop; ``dropout`` applies to clients only, and ``simulate`` also
    derives the helpers' seeds and the committee's randomness from the ``rng`` of
    ``run_round``.

    Raises:
        ValueError: bad option values.
    """

    name = "threshold"
    kinds = frozenset({Kind.VOTE, Kind.VECTOR})

    def __init__(self, *args: Any, committee_hook: Hook | MessageHook | None = None,
                 deviation: Deviation | None = None, committee_input: str = "reports",
                 min_valid_fraction: float = MIN_VALID_FRACTION,
                 corrupt: CorruptClients | None = None, keep_ledgers: bool = True,
                 max_abandoned: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if type(keep_ledgers) is not bool:
            raise ValueError("keep_ledgers must be a bool")
        self.keep_ledgers = keep_ledgers
        #: the helpers' ledger (both honest helpers keep the same one), in memory in
        #: place of the files a deployment keeps
        self.ledger = HelperLedger(max_abandoned=max_abandoned)
        self.committee_hook = committee_hook
        if deviation is not None and not isinstance(deviation, Deviation):
            raise ValueError("deviation must be a threshold.Deviation")
        self.deviation = deviation or Deviation()
        if committee_input not in COMMITTEE_INPUTS:
            raise ValueError(f"committee_input must be one of {', '.join(COMMITTEE_INPUTS)}")
        self.committee_input = committee_input
        if not 0.0 <= float(min_valid_fraction) <= 1.0:
            raise ValueError("min_valid_fraction must be in [0, 1]")
        self.min_valid_fraction = float(min_valid_fraction)
        self.corrupt = corrupt
        self._report_keys: ReportKeys | None = None
        self._report_model: tuple[float, float] | None = None
        self._report_calibration = [0.0, 0.0]
        #: task -> the current job's 16-byte instance id (bound into every report)
        self._job_ids: dict[str, bytes] = {}
        #: (task, round) -> the beacon the committee ran for that round's sample, in the
        #: task's current job
        self._beacons: dict[tuple[str, int], BeaconTranscript] = {}
        #: task -> jobs started (what every member sees of restarts)
        self.jobs_started: dict[str, int] = {}

    def start_job(self, task: str) -> None:
        """A new job of ``task``: its rounds count from 1 again, as the helpers'
        ledgers allow (:mod:`protocol.core.job_ledger`). The task's open job, if any,
        ends first -- completed if every beacon's round completed, else abandoned after
        the beacon (counted: the helpers record
        ``committee_job_abandoned_after_beacon``). Under the malicious model the new
        job is refused once the task's abandoned jobs pass the helpers' budget.

        Raises:
            AggregationAborted: ``committee_abandon_budget_spent``.
        """
        self._beacons = {k: v for k, v in self._beacons.items() if k[0] != task}
        self.jobs_started[task] = self.jobs_started.get(task, 0) + 1
        self._job_ids[task] = self._new_job_id(task)
        if self.malicious:
            self._close_job(task, "the server started the task again")
            if not self.keep_ledgers:  # helpers that forget: a fresh ledger per job
                self.ledger = HelperLedger(max_abandoned=self.ledger.max_abandoned)
            self._open_job(task)

    def _close_job(self, task: str, how: str) -> None:
        self.ledger.close_job(task, "completed", "", how)

    def _open_job(self, task: str) -> None:
        try:
            self.ledger.open_job(task, self.job_id(task))
        except LedgerRefusal as exc:
            raise AggregationAborted(f"committee_{exc.reason}", exc.detail) from None

    def _new_job_id(self, task: str) -> bytes:
        if self.simulate:
            return hashlib.sha256(b"fedhh job\x00" + task.encode() + b"\x00"
                                  + str(self.jobs_started.get(task, 0)).encode()).digest()[:16]
        return OsRandom().token_bytes(16)

    def job_id(self, task: str) -> bytes:
        """The 16-byte instance id of ``task``'s current job (every validated report
        is bound to it)."""
        if task not in self._job_ids:
            self._job_ids[task] = self._new_job_id(task)
        return self._job_ids[task]

    def report_keys(self) -> ReportKeys:
        """The helpers' X25519 keys and the devices' roster keys of this simulated
        deployment."""
        if self._report_keys is None:
            self._report_keys = ReportKeys(self.simulate)
        return self._report_keys

    @property
    def validates(self) -> bool:
        """Whether vote rounds take validated reports (the default under the malicious
        model)."""
        return self.malicious and self.committee_input == "reports"

    @property
    def progress_label(self) -> str:
        """What the progress line inside a round counts."""
        return "validated reports" if self.validates else "secure aggregation"

    #: reports of the probe rounds (:meth:`predict_session_seconds`, validated input)
    PROBE_REPORTS, PROBE_REPORT_DIMS = 32, (16, 2048)

    def predict_session_seconds(self, n: int, dim: int) -> float:
        """Predicted CPU seconds of one vote round of ``n`` clients over ``dim``
        candidates. Validated reports: a measured per-report cost ``a + b dim`` (two
        probe rounds of :attr:`PROBE_REPORTS` reports, simulated keys, after a warm-up),
        scaled by the rounds run since; the committee fed by secure aggregation: the
        session's estimate (:meth:`SecAggSessionOptions.predict_session_seconds`)."""
        if not self.validates:
            return super().predict_session_seconds(n, dim)
        if self._report_model is None:
            self._report_model = self._probe_reports()
        a, b = self._report_model
        measured, predicted = self._report_calibration
        scale = measured / predicted if predicted > 0 and measured > 0 else 1.0
        return n * (a + b * dim) * scale

    def _probe_reports(self) -> tuple[float, float]:
        from protocol.core.contract import RoundSpec as _Spec

        k = self.PROBE_REPORTS
        probe = ThresholdTransport(simulate=True)

        def per_report(d: int) -> float:
            spec = _Spec("fedhh estimate", 1, Kind.VOTE,
                         candidates=tuple(str(i) for i in range(d)), theta=2,
                         reveal_counts=False)
            t0 = time.process_time()
            probe.run_round(spec, Votes(np.arange(k) % d), np.random.default_rng(0))
            return (time.process_time() - t0) / k

        lo, hi = self.PROBE_REPORT_DIMS
        per_report(lo)  # warm-up
        c_lo, c_hi = per_report(lo), per_report(hi)
        b = max(0.0, (c_hi - c_lo) / (hi - lo))
        return max(0.0, c_lo - b * lo), b

    def _calibrate_reports(self, n: int, dim: int, cost: Cost) -> None:
        if self._report_model is None or n < self.PROBE_MIN_CLIENTS:
            return
        a, b = self._report_model
        measured = float(sum(v for k, v in cost.cpu_seconds.items() if k != "committee"))
        self._report_calibration[0] += measured
        self._report_calibration[1] += n * (a + b * dim)

    @property
    def calibrated_sessions(self) -> bool:
        if self.validates:
            return self._report_calibration[1] > 0
        return super().calibrated_sessions

    def planned_workers(self, n: int) -> int:
        """Validated rounds run in this process (the devices of the next batch in a
        second thread); the committee fed by secure aggregation as its sessions."""
        return 1 if self.validates else super().planned_workers(n)

    def draw_sample(self, task: str, round_no: int, population: int, size: int,
                    rng: np.random.Generator) -> Sample:
        """Under the malicious model the three members run the commit-then-reveal
        beacon (:mod:`protocol.core.sample_beacon`): each commits to its own value
        before any is revealed, so no one member chooses the sample. ``simulate=True``
        draws the values from ``rng`` in the order every transport does (the same
        sample as ``plain``); otherwise each member draws its own from the OS. The
        semi-honest option keeps the server's draw.

        Raises:
            AggregationAborted: ``committee_sample_commitment_mismatch`` (a member
                revealed a value its commitment does not open),
                ``committee_sample_redrawn`` (a beacon for this or a later round of the
                task was already run).
        """
        if not self.malicious:
            return super().draw_sample(task, round_no, population, size, rng)
        if not any(j["status"] == "open" for j in self.ledger.jobs(task)):
            self._open_job(task)  # a round outside a mechanism's run: its own job
        last = max((r for t, r in self._beacons if t == task), default=None)
        if last is not None and int(round_no) <= last:
            # one beacon per round, rounds in order: a server cannot draw again until
            # it likes the sample (each redraw costs it a round number)
            raise AggregationAborted("committee_sample_redrawn",
                                     f"a beacon for round {last} of {task!r} was already run")
        context = beacon_context(task, round_no, population, size)
        try:  # the helpers' ledgers: one beacon per task and round, recorded first
            self.ledger.begin_beacon(task, int(round_no))
        except LedgerRefusal as exc:
            raise AggregationAborted(f"committee_{exc.reason}", exc.detail) from None
        if self.simulate:
            values = server_drawn(rng)
        else:
            values = {m: OsRandom().token_bytes(VALUE_BYTES) for m in MEMBERS}
        # the helpers reveal (and record that they did) once every commitment is in:
        # from here on the server can compute the sample
        self.ledger.revealed(task, int(round_no))
        try:
            beacon = run_beacon(context, values, self.deviation.beacon_reveal)
        except SampleRejected as exc:
            raise AggregationAborted(f"committee_{exc.reason}", exc.detail) from None
        self._beacons[(task, int(round_no))] = beacon
        return Sample(sample_users(beacon.seed, population, size), beacon, population,
                      committee=True)

    def _check_sample(self, spec: RoundSpec, votes: Votes) -> None:
        """What every helper and every device checks before a sampled vote round: the
        users are the ones this round's beacon selects (a device outside the sample
        refuses; one inside refuses a round whose sample another device was forced
        into, as the transcript would not verify)."""
        sample = votes.sample
        if sample is None:
            return  # the mechanism does not sample (every user takes part)
        ran = self._beacons.get((spec.task, int(spec.round)))
        if ran is None or not sample.committee or sample.beacon != ran:
            raise AggregationAborted("committee_sample_not_from_beacon",
                                     "the round's sample is not the one the committee's "
                                     "beacon drew for it")
        try:
            check_sample(sample, spec.task, spec.round, len(sample.users))
        except SampleRejected as exc:
            raise AggregationAborted(f"committee_{exc.reason}", exc.detail) from None

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        if self.malicious:
            sampled = isinstance(contributions, Votes) and contributions.sample is not None
            if sampled:
                self._check_sample(spec, contributions)
            if self.validates and spec.kind is Kind.VOTE:
                if not isinstance(contributions, Votes):
                    raise ContractError(
                        f"a vote round cannot take {type(contributions).__name__}")
                self.announce(len(contributions.choice), spec.domain_size,
                              "validated round")
                result = run_report_round(self, spec, contributions, rng)
                self._calibrate_reports(len(contributions.choice), spec.domain_size,
                                        result.cost)
            else:
                self._check_corrupt_form()
                result = self._run_verified(spec, contributions, rng)
            if sampled:
                # the round completed: its beacon's sample was used
                self.ledger.round_completed(spec.task, int(spec.round))
                beacon = contributions.sample.beacon.as_dict()
                for member in MEMBERS:
                    view = result.views.setdefault(member, {})
                    view["sample_beacon"] = beacon
                    view["jobs_started"] = self.jobs_started.get(spec.task, 0)
                    view["abandoned_after_beacon"] = self.ledger.abandoned(spec.task)
            return result
        self._check_corrupt_form()
        return self._run_semi_honest(spec, contributions, rng)

    def _check_corrupt_form(self) -> None:
        if self.corrupt is not None and self.corrupt.on_reports:
            raise ContractError(f"the corrupted-client strategy {self.corrupt.strategy!r} "
                                "attacks validated reports: it needs the committee's "
                                "validated input (committee_input='reports', --threat "
                                "malicious)")

    # ----------------------------------------------------------- randomness

    def _sources(self, rng: np.random.Generator) -> tuple[Any, list[Any], list[Any]]:
        if self.simulate:
            base = insecure_deterministic_randomness(int(rng.integers(0, 1 << 63)),
                                                     "threshold-transport")
            return (base.child("secagg"), [base.child(h) for h in HELPERS],
                    [base.child(f"committee-{i}") for i in range(3)])
        return OsRandom(), [OsRandom(), OsRandom()], [OsRandom(), OsRandom(), OsRandom()]

    def _check_run(self, run: SecAggRun, helper_pos: tuple[int, ...], spec: RoundSpec,
                   params: SecAggParams, drop: Dropout | None) -> int:
        if any(r is AbortReason.REQUIRED_PARTICIPANT_MISSING
               for r in run.client_abort_reasons.values()):
            raise AggregationAborted("threshold_helper_missing",
                                     "clients refused to unmask a sum without both helpers")
        if not run.completed or run.result is None:
            raise self.session_aborted(run, params, drop)
        if not set(helper_pos) <= run.survivors:
            raise AggregationAborted("threshold_helper_missing",
                                     "a helper's blinding input is not in the sum")
        contributed = len(run.survivors) - len(HELPERS)
        if contributed < spec.min_participants:
            raise AggregationAborted("too_few_participants",
                                     f"{contributed} contributions survived, "
                                     f"{spec.min_participants} required")
        return contributed

    # ------------------------------------------------------ malicious model

    def _run_verified(self, spec: RoundSpec, contributions: Contributions,
                      rng: np.random.Generator) -> RoundResult:
        """The default: inputs bound by the replica and the audits, the comparison
        verified (:mod:`protocol.core.committee.binding`,
        :mod:`protocol.core.committee.verified`)."""
        dev = self.deviation
        n, dim, modulus, client_input = self.client_inputs(
            spec, contributions, lambda m: F.P)
        client_input, bad = corrupt_inputs(self, spec, contributions, client_input, modulus)
        total = n + len(HELPERS)
        helper_pos = tuple(range(n, total))
        self.announce(total, dim, "secure-aggregation session (with the committee's helpers)")
        params = self.session_params(total)
        secagg_rand, helper_rand, committee_rand = self._sources(rng)
        seeds = [bytes(r.token_bytes(SEED_BYTES)) for r in helper_rand]
        blinds = [helper_blind(s, dim, modulus) for s in seeds]
        entered = [dev.secagg_input(h, b.copy()) if dev.secagg_input else b
                   for h, b in enumerate(blinds)]
        config = SessionConfig(params, tuple(range(total)), spec_context(spec), dim, modulus,
                               malicious=True, required=frozenset(helper_pos),
                               server_nonce=secagg_rand.token_bytes(FRESH_NONCE_BYTES))
        pairs = [crypto.ed25519_keypair(secagg_rand) for _ in range(total)]
        verify_keys = [pk for _, pk in pairs]
        server = MirroredServer(config, verify_keys=verify_keys, watched=helper_pos,
                                feed=dev.replica_feed)
        drop = self.dropout_schedule(n, rng)
        run = self.run_session(config, _WithHelpers(client_input, entered, n),
                               rand=secagg_rand, dropout=drop,
                               signing_keys=[sk for sk, _ in pairs], verify_keys=verify_keys,
                               server=server, client_seeds=dict(zip(helper_pos, seeds)),
                               progress=self.client_progress)
        contributed = self._check_run(run, helper_pos, spec, params, drop)
        s_server = run.result.astype(np.uint64)
        assert server.replica is not None
        s_replica = server.replica.result
        if s_replica is None:
            raise AggregationAborted("committee_replica_failed",
                                     "helper 2's replica of the server did not complete")
        s_replica = s_replica.astype(np.uint64)
        # each helper hands its seed to its auditor (helper 1 -> server, 2 -> helper 1)
        audit_seconds = [0.0, 0.0]
        audited = []
        for h, pos in enumerate(helper_pos):
            handed = dev.seed(h, seeds[h]) if dev.seed else seeds[h]
            inbound, outbound = list(server.inbound[pos]), list(server.outbound[pos])
            if h == 1 and dev.helper_exchange is not None:
                # helper 1 audits helper 2 on the copy of its exchange the server forwards
                inbound, outbound = dev.helper_exchange(inbound, outbound)
            t0 = time.process_time()
            try:
                audited.append(audit_helper(config, pos, handed, modulus, inbound,
                                            outbound, verify_keys))
            except AuditFailed as exc:
                raise AggregationAborted("committee_helper_audit_failed",
                                         f"{HELPERS[h]}: {exc.detail}") from None
            finally:
                audit_seconds[h] += time.process_time() - t0
        if spec.kind is Kind.VECTOR:
            # the release is the whole sum: the server, which audited helper 1, is handed
            # helper 1's audit of helper 2 with helper 2's seed (it learns R2 too)
            total_sum = _add_mod([s_server, _negate(audited[0], modulus),
                                  _negate(audited[1], modulus)], modulus)
            release = Release(spec, contributed, vector=total_sum)
            views = _views(run, s_server, [_negate(b, modulus) for b in blinds], None)
            return RoundResult(release, views, _cost(run, None, server, audit_seconds))
        neg_r1, neg_r2 = F.neg(blinds[0]), F.neg(blinds[1])
        aud_r1, aud_r2 = F.neg(audited[0]), F.neg(audited[1])
        comps = [(s_server, aud_r1), (neg_r1, aud_r2), (neg_r2, s_replica)]
        context = hashlib.sha256(b"fedhh threshold committee\x00" + run.config.session
                                 + spec_context(spec)).digest()
        out = compare(self, spec, comps, context, committee_rand)
        release = self._release(spec, contributed, out)
        views = _views(run, s_server, [neg_r1, neg_r2], out)
        views["server"]["audited"] = {"helper1_blind": audited[0].copy()}
        views["helper1"]["audited"] = {"helper2_blind": audited[1].copy()}
        views["helper2"]["replica_sum"] = s_replica.copy()
        result = RoundResult(release, views, _cost(run, out, server, audit_seconds))
        note_corruption(self, spec, contributions, bad, result, validated=False)
        return result

    @staticmethod
    def _release(spec: RoundSpec, contributed: int, out: Any) -> Release:
        passed = np.flatnonzero(out.passed)
        if spec.reveal_counts:
            assert out.counts is not None
            counts = {spec.candidates[i]: int(c) for i, c in zip(passed, out.counts)}
        else:
            # membership only: the count field is a placeholder at theta, which the
            # release drops (reveal_counts is false), never a real count
            counts = {spec.candidates[i]: int(spec.theta or 0) for i in passed}
        return Release(spec, contributed, counts=counts)

    # ---------------------------------------------------- semi-honest model

    def _run_semi_honest(self, spec: RoundSpec, contributions: Contributions,
                         rng: np.random.Generator) -> RoundResult:
        """``threat="semi-honest"``: the committee of Araki et al. (``rss``) on
        ``Z_{2^k}``; no replica, no audits, no verification."""
        n, dim, modulus, client_input = self.client_inputs(
            spec, contributions, lambda m: 1 << ring_bits(m, spec.theta))
        client_input, bad = corrupt_inputs(self, spec, contributions, client_input, modulus)
        k = ring_bits(n, spec.theta) if spec.kind is Kind.VOTE else 0
        total = n + len(HELPERS)
        helper_pos = tuple(range(n, total))
        self.announce(total, dim, "secure-aggregation session (with the committee's helpers)")
        params = self.session_params(total)
        secagg_rand, helper_rand, committee_rand = self._sources(rng)
        blinds = [uniform_mod(r, dim, modulus) for r in helper_rand]
        # every attempt draws a fresh server nonce (see docs/secagg-primitives.md)
        config = SessionConfig(params, tuple(range(total)), spec_context(spec), dim, modulus,
                               malicious=self.malicious, required=frozenset(helper_pos),
                               server_nonce=secagg_rand.token_bytes(FRESH_NONCE_BYTES))
        drop = self.dropout_schedule(n, rng)
        run = self.run_session(config, _WithHelpers(client_input, blinds, n),
                               rand=secagg_rand, dropout=drop, progress=self.client_progress)
        contributed = self._check_run(run, helper_pos, spec, params, drop)
        blinded = run.result.astype(np.uint64)
        helper_shares = [_negate(b, modulus) for b in blinds]
        if spec.kind is Kind.VECTOR:
            total_sum = _add_mod([blinded, *helper_shares], modulus)
            release = Release(spec, contributed, vector=total_sum)
            views = _views(run, blinded, helper_shares, None)
            views["server"]["helper_shares_received"] = [s.copy() for s in helper_shares]
            return RoundResult(release, views, _cost(run, None))
        try:
            out = run_committee([blinded, *helper_shares], k, spec.theta,
                                reveal_counts=spec.reveal_counts, rands=committee_rand,
                                hook=self.committee_hook)  # type: ignore[arg-type]
        except CommitteeAborted as exc:
            raise AggregationAborted(f"committee_{exc.reason}", str(exc)) from None
        result = RoundResult(self._release(spec, contributed, out),
                             _views(run, blinded, helper_shares, out), _cost(run, out))
        note_corruption(self, spec, contributions, bad, result, validated=False)
        return result


def _add_mod(vectors: list[np.ndarray], modulus: int) -> np.ndarray:
    """Exact sum mod ``modulus`` (Python integers: three summands may pass 2^64)."""
    acc = sum(v.astype(object) for v in vectors) % modulus
    return np.asarray(acc, dtype=np.uint64)


def _negate(v: np.ndarray, modulus: int) -> np.ndarray:
    """``-v mod modulus`` for ``v`` in ``[0, modulus)``."""
    if modulus == 1 << 64:
        return np.uint64(0) - v
    return (np.uint64(modulus) - v) % np.uint64(modulus)


def _views(run: SecAggRun, blinded: np.ndarray, helper_shares: list[np.ndarray],
           out: Any) -> dict[str, dict[str, Any]]:
    sets = {k: sorted(v) for k, v in run.sets.items()}
    server: dict[str, Any] = {
        "session": run.config.session.hex(),
        "masked_input_digests": {u: d.hex() for u, d in sorted(run.input_digests.items())},
        "blinded_sum": blinded.copy(),
        **sets,
        "message_sizes": [(e.sender, e.recipient, e.round, e.kind, e.size)
                          for e in run.transcript.envelopes],
    }
    if out is not None:
        server["committee"] = out.views[0]
    views: dict[str, dict[str, Any]] = {"server": server}
    for h, name in enumerate(HELPERS):
        views[name] = {"share": helper_shares[h].copy(),
                       "committee": out.views[h + 1] if out is not None else None}
    views["clients"] = {
        "aborted": {i: r.value for i, r in run.client_abort_reasons.items()},
        "revealed_b_shares_of": {c: sorted(b) for c, (b, _) in run.transcript.reveals.items()},
        "revealed_s_shares_of": {c: sorted(s) for c, (_, s) in run.transcript.reveals.items()},
        "degree": run.config.degree,
        "threshold": run.config.threshold,
    }
    return views


def _cost(run: SecAggRun, out: Any, server: MirroredServer | None = None,
          audit_seconds: Sequence[float] = (0.0, 0.0)) -> Cost:
    """CPU by party: the replica's share of the server's calls is helper 2's; each
    audit is its auditor's (helper 1's by the server, helper 2's by helper 1)."""
    n = run.config.n - len(HELPERS)
    replica = server.replica_seconds if server is not None else 0.0
    cpu = {"server": run.server_seconds - replica + audit_seconds[0],
           "clients": float(run.client_seconds[:n].sum()), "codec": run.codec_seconds}
    for h, name in enumerate(HELPERS):
        cpu[name] = float(run.client_seconds[n + h])
    cpu["helper1"] += audit_seconds[1]
    cpu["helper2"] += replica
    up, down = int(run.bytes_up.sum()), int(run.bytes_down.sum())
    if out is not None:
        cpu["server"] += out.seconds[0]
        cpu["committee"] = float(sum(out.seconds))
        for h, name in enumerate(HELPERS):
            cpu[name] += out.seconds[h + 1]
        up += int(sum(out.bytes_sent))
    return Cost(cpu, bytes_up=up, bytes_down=down)


class _WithHelpers:
    """Inputs of a committee session: the clients' rows, then the helpers' blinding
    vectors at positions ``n, n + 1``. Picklable and shardable (see
    :class:`protocol.core.transports.secagg_transport.VoteRows`)."""

    def __init__(self, clients: Any, blinds: list[np.ndarray], n: int) -> None:
        self.clients, self.blinds, self.n = clients, blinds, n

    def __call__(self, i: int) -> np.ndarray:
        return self.blinds[i - self.n] if i >= self.n else self.clients(i)

    def shard(self, lo: int, hi: int) -> "_WithHelpers":
        part = self.clients.shard(min(lo, self.n), min(hi, self.n)) \
            if hasattr(self.clients, "shard") else self.clients
        return _WithHelpers(part, self.blinds, self.n)
