"""Ledgers that survive a restart: what a committee helper and a device remember of the
jobs of a task, kept on disk and written atomically.

Theory of operation
-------------------
The commit-then-reveal beacon (:mod:`protocol.core.sample_beacon`) makes each round's
sample uniform, and inside one job a helper runs one beacon per round. A server that
*abandons* a job once it has seen a round's sample and starts the job again would get a
fresh sample each time: with ``R`` restarts a chosen device is in round 1's sample with
probability ``1 - (1 - m/n)^R`` (88% for ``m/n = 0.1``, ``R = 20``). The ledgers stop
that, because they outlive the job and the process:

* **The helper's ledger** (:class:`HelperLedger`, one file per helper state directory).
  Per task it keeps every job the helper joined (its 16-byte instance id, how it ended)
  and every beacon it took part in (round, state: ``started``, ``revealed`` once its
  value went to the server, ``completed`` once the round's comparison finished).
  Rules: (1) a job of a task starts only after the previous one was closed in the
  ledger (completed, or ended and recorded how); two processes on one state directory
  cannot run jobs at once (an exclusive ``flock``); (2) one beacon per (task, round)
  since the task's last *completed* job (a job that ended with the server's ``Bye``
  ``finished`` and every beacon's round completed) -- a second beacon is
  ``sample_redrawn``; (3) a job that ends in any other way with a beacon revealed
  whose round did not complete is **abandoned after the beacon**
  (``committee_job_abandoned_after_beacon``, with the round): the server saw a sample
  it did not use. These are counted per task, and once the count passes
  ``max_abandoned`` (default 0) the helper refuses every further job of the task
  (``committee_abandon_budget_spent``). With the default, a server sees at most one
  sample of a round that it does not then have to run to completion: the target's
  inclusion rate stays ``m/n``.
* **The device's ledger** (:class:`DeviceLedger`, one small file per device that ever
  voted). Per task: the votes it cast in every job (its budget, checked against the
  job's ``max_votes`` across jobs), the rounds of each job instance it voted in, so a
  restarted job cannot make it vote past its budget. Each SampleProof names its job
  instance and the helpers sign it; a device refuses a proof of an instance it voted
  in under an earlier connection (``sample_wrong_job``) or another instance than the
  one its connection started with.

Files are JSON, written as ``write temp + fsync + rename + fsync(dir)``: a crash leaves
the old or the new ledger, never a torn one. A ledger that cannot be read or parsed,
or whose content does not have the expected shape, raises :class:`LedgerError`
(``ledger_unreadable``, ``ledger_corrupt``); nothing resets it silently. A ledger
without a path lives in memory (the library's default, and what the in-process
simulation keeps in place of the disk).

What is left: a server can abandon a job *before* the beacon of its first round (it
saw no sample: no bias); a corrupted helper can make a job end after a beacon and so
spend the task's budget (a denial of service, which any member can cause anyway);
rerunning a *completed* job is a new release (each of its rounds costs the sampled
devices a vote of their per-task budget), which composes like any second run.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
from typing import Any

__all__ = ["LedgerError", "LedgerRefusal", "HelperLedger", "DeviceLedger",
           "atomic_write_json", "read_json", "HELPER_FORMAT", "DEVICE_FORMAT",
           "ABANDONED_EVENT"]

HELPER_FORMAT = "fedhh-helper-ledger/v1"
DEVICE_FORMAT = "fedhh-device-ledger/v1"
#: the named event of a job that ended after a beacon whose round did not complete
ABANDONED_EVENT = "committee_job_abandoned_after_beacon"

_HEX16 = re.compile(r"^[0-9a-f]{32}$")
_JOB_STATUSES = ("open", "completed", "abandoned", "aborted", "interrupted")
_BEACON_STATES = ("started", "revealed", "completed")


class LedgerError(Exception):
    """A ledger file that cannot be used: ``reason`` is ``ledger_unreadable`` (an I/O
    error), ``ledger_corrupt`` (not a ledger of this format), ``ledger_busy`` (another
    process holds the helper's ledger) or ``ledger_write_failed``."""

    def __init__(self, reason: str, path: Any, detail: str) -> None:
        super().__init__(f"{reason}: {path}: {detail}")
        self.reason, self.path, self.detail = reason, str(path), detail


class LedgerRefusal(Exception):
    """What the ledger refuses (the caller turns it into its named abort):
    ``sample_redrawn``, ``abandon_budget_spent``, ``job_still_open``, ``job_reused``,
    ``sample_wrong_job``, ``budget_spent``, ``already_voted``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


# ---------------------------------------------------------------------------- files
def atomic_write_json(path: pathlib.Path, doc: Any) -> None:
    """Write ``doc`` as JSON to ``path`` so that a crash leaves the old file or the new
    one: a temporary file in the same directory, fsync, rename over ``path``, fsync of
    the directory.

    Raises:
        LedgerError: ``ledger_write_failed``.
    """
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise LedgerError("ledger_write_failed", path, f"{type(exc).__name__}: {exc}"
                          ) from None


def read_json(path: pathlib.Path) -> Any:
    """The JSON document at ``path`` (``None`` if there is no file).

    Raises:
        LedgerError: ``ledger_unreadable`` or ``ledger_corrupt``.
    """
    path = pathlib.Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError("ledger_unreadable", path, f"{type(exc).__name__}: {exc}"
                          ) from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LedgerError("ledger_corrupt", path, f"not JSON ({exc})"[:200]) from None


def _need(ok: bool, path: Any, what: str) -> None:
    if not ok:
        raise LedgerError("ledger_corrupt", path, what)


def _is_int(v: Any, lo: int = 0, hi: int = (1 << 63) - 1) -> bool:
    return type(v) is int and lo <= v <= hi


# --------------------------------------------------------------------------- helpers
class HelperLedger:
    """A committee helper's jobs and beacons per task (see the module docstring).

    Args:
        path: the ledger file (``None``: in memory, for the library and the
            simulation).
        max_abandoned: the jobs of a task that may end abandoned after a beacon before
            the helper refuses the task's further jobs (default 0).
        lock: hold an exclusive lock on ``path + ".lock"`` while a job is open (two
            helper processes on one state directory cannot run jobs at once).

    Raises:
        LedgerError: the file cannot be read or is not a helper ledger.
        ValueError: a negative ``max_abandoned``.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, max_abandoned: int = 0,
                 lock: bool = True) -> None:
        if type(max_abandoned) is not int or max_abandoned < 0:
            raise ValueError("max_abandoned must be a non-negative int")
        self.path = pathlib.Path(path) if path is not None else None
        self.max_abandoned = max_abandoned
        self._lock_wanted = lock and self.path is not None
        self._lock_fd: int | None = None
        #: events of this process's jobs (``committee_job_abandoned_after_beacon``, ...)
        self.events: list[dict[str, Any]] = []
        self.doc = self._load()

    # ------------------------------------------------------------- file and shape
    def _load(self) -> dict[str, Any]:
        doc = read_json(self.path) if self.path is not None else None
        if doc is None:
            return {"format": HELPER_FORMAT, "tasks": {}}
        p = self.path
        _need(isinstance(doc, dict) and doc.get("format") == HELPER_FORMAT, p,
              f"not a {HELPER_FORMAT} file")
        tasks = doc.get("tasks")
        _need(isinstance(tasks, dict), p, "no tasks")
        for task, t in tasks.items():
            _need(isinstance(task, str) and isinstance(t, dict), p, "a task entry")
            _need(_is_int(t.get("abandoned_after_beacon")), p, f"{task}: abandoned count")
            jobs = t.get("jobs")
            _need(isinstance(jobs, list), p, f"{task}: jobs")
            for j in jobs:
                _need(isinstance(j, dict) and isinstance(j.get("instance"), str)
                      and bool(_HEX16.match(j["instance"]))
                      and j.get("status") in _JOB_STATUSES
                      and isinstance(j.get("reason", ""), str)
                      and isinstance(j.get("beacons"), dict), p, f"{task}: a job entry")
                for r, state in j["beacons"].items():
                    _need(isinstance(r, str) and r.isdigit() and int(r) < 1 << 63
                          and state in _BEACON_STATES, p, f"{task}: a beacon entry")
            _need(all(j["status"] != "open" for j in jobs[:-1]), p,
                  f"{task}: an open job before the last")
        return doc

    def _save(self) -> None:
        if self.path is not None:
            atomic_write_json(self.path, self.doc)

    def _task(self, task: str) -> dict[str, Any]:
        return self.doc["tasks"].setdefault(task, {"abandoned_after_beacon": 0, "jobs": []})

    def _lock(self) -> None:
        if not self._lock_wanted or self._lock_fd is not None:
            return
        import fcntl

        assert self.path is not None
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LedgerError("ledger_unreadable", lock, f"{type(exc).__name__}: {exc}"
                              ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LedgerRefusal("job_still_open", "another helper process holds this "
                                f"state directory's ledger ({lock})") from None
        self._lock_fd = fd
        self.doc = self._load()  # what the previous holder wrote last

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ queries
    def abandoned(self, task: str) -> int:
        """The task's jobs that ended abandoned after a beacon."""
        t = self.doc["tasks"].get(task)
        return 0 if t is None else int(t["abandoned_after_beacon"])

    def jobs(self, task: str) -> list[dict[str, Any]]:
        t = self.doc["tasks"].get(task)
        return [] if t is None else [dict(j) for j in t["jobs"]]

    def _open(self, task: str) -> dict[str, Any] | None:
        t = self.doc["tasks"].get(task)
        if t and t["jobs"] and t["jobs"][-1]["status"] == "open":
            return t["jobs"][-1]
        return None

    def _epoch_rounds(self, task: str) -> set[int]:
        """Rounds with a beacon since the task's last completed job."""
        rounds: set[int] = set()
        for j in reversed(self._task(task)["jobs"]):
            if j["status"] == "completed":
                break
            rounds.update(int(r) for r in j["beacons"])
        return rounds

    # ------------------------------------------------------------------ a job
    def open_job(self, task: str, instance: bytes) -> None:
        """Join job ``instance`` (16 bytes) of ``task``, recorded before anything of it
        runs. An open job left by a process that stopped is closed first as
        ``interrupted`` (abandoned after a beacon if it had one).

        Raises:
            LedgerRefusal: ``job_still_open`` (another process runs a job here),
                ``job_reused`` (an instance this helper joined before),
                ``abandon_budget_spent``.
            LedgerError: the file cannot be written.
        """
        if type(instance) is not bytes or len(instance) != 16:
            raise LedgerRefusal("malformed_message", "a job instance is 16 bytes")
        self._lock()
        try:
            stale = self._open(task)
            if stale is not None:
                self._close(task, stale, "interrupted",
                            "the helper stopped during the job", "the helper stopped")
            t = self._task(task)
            if any(j["instance"] == instance.hex() for j in t["jobs"]):
                raise LedgerRefusal("job_reused", "this helper joined that job instance "
                                                  "before")
            if t["abandoned_after_beacon"] > self.max_abandoned:
                raise LedgerRefusal(
                    "abandon_budget_spent",
                    f"{t['abandoned_after_beacon']} job(s) of {task!r} were abandoned after "
                    f"a beacon; this helper allows {self.max_abandoned}")
            t["jobs"].append({"instance": instance.hex(), "status": "open", "reason": "",
                              "beacons": {}})
            self._save()
        except BaseException:
            self._save_quietly()
            self._unlock()
            raise

    def _save_quietly(self) -> None:
        with contextlib.suppress(LedgerError):
            self._save()

    def begin_beacon(self, task: str, round_no: int) -> None:
        """Record a beacon for ``(task, round_no)`` in the open job, before this
        helper commits to anything.

        Raises:
            LedgerRefusal: ``sample_redrawn`` (a beacon for that round already ran since
                the task's last completed job), ``job_still_open`` (no open job).
        """
        job = self._open(task)
        if job is None:
            raise LedgerRefusal("job_still_open", "a beacon outside an open job")
        if int(round_no) in self._epoch_rounds(task):
            raise LedgerRefusal("sample_redrawn",
                                f"a beacon for round {round_no} of {task!r} already ran "
                                "(in this job or one that did not complete)")
        job["beacons"][str(int(round_no))] = "started"
        self._save()

    def _mark(self, task: str, round_no: int, state: str) -> None:
        job = self._open(task)
        if job is None or str(int(round_no)) not in job["beacons"]:
            raise LedgerRefusal("job_still_open", f"no beacon of round {round_no} is open")
        job["beacons"][str(int(round_no))] = state
        self._save()

    def revealed(self, task: str, round_no: int) -> None:
        """This helper is about to reveal its value for ``round_no`` (recorded first:
        from here on the server can compute the sample)."""
        self._mark(task, round_no, "revealed")

    def round_completed(self, task: str, round_no: int) -> None:
        """``round_no``'s comparison finished: its beacon's sample was used."""
        self._mark(task, round_no, "completed")

    def close_job(self, task: str, status: str, reason: str, how: str) -> dict[str, Any] | None:
        """End the open job of ``task``: ``status`` ``completed`` (the server's Bye
        ``finished``), or how it ended otherwise (``aborted``, ``abandoned``). A job with
        a revealed beacon whose round did not complete is abandoned after the beacon,
        whatever ``status`` says: counted, and returned as the event
        ``{"event": "committee_job_abandoned_after_beacon", "round": r, ...}``
        (``None`` otherwise). Never raises for a missing job; releases the lock.

        Raises:
            LedgerError: the file cannot be written.
        """
        try:
            job = self._open(task)
            if job is None:
                return None
            return self._close(task, job, status, reason, how)
        finally:
            self._unlock()

    def _close(self, task: str, job: dict[str, Any], status: str, reason: str,
               how: str) -> dict[str, Any] | None:
        unused = sorted(int(r) for r, s in job["beacons"].items() if s == "revealed")
        event = None
        if unused:
            status = "abandoned"
            t = self._task(task)
            t["abandoned_after_beacon"] += 1
            event = {"event": ABANDONED_EVENT, "task": task, "round": unused[-1],
                     "job": job["instance"], "how": how[:160],
                     "abandoned": t["abandoned_after_beacon"],
                     "max_abandoned": self.max_abandoned}
            self.events.append(event)
        job["status"] = status if status in _JOB_STATUSES else "aborted"
        job["reason"] = (event["event"] + f" (round {event['round']}; {how})"
                         if event else reason)[:200]
        self._save()
        return event


# --------------------------------------------------------------------------- devices
class DeviceLedger:
    """The devices' votes per task, one small file per device under ``directory``
    (``device-<member>.json``; ``None``: in memory). See the module docstring.

    Raises:
        LedgerError: a device's file cannot be read or is not a device ledger (when
            that device's entry is first needed).
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = pathlib.Path(directory) if directory is not None else None
        self._cache: dict[int, dict[str, Any]] = {}

    def _path(self, member: int) -> pathlib.Path | None:
        return None if self.directory is None else self.directory / f"device-{member}.json"

    def entry(self, member: int) -> dict[str, Any]:
        if member in self._cache:
            return self._cache[member]
        p = self._path(member)
        doc = read_json(p) if p is not None else None
        if doc is None:
            doc = {"format": DEVICE_FORMAT, "device": member, "tasks": {}}
        else:
            _need(isinstance(doc, dict) and doc.get("format") == DEVICE_FORMAT
                  and doc.get("device") == member and isinstance(doc.get("tasks"), dict),
                  p, f"not the {DEVICE_FORMAT} file of device {member}")
            for task, t in doc["tasks"].items():
                _need(isinstance(t, dict) and _is_int(t.get("votes"))
                      and isinstance(t.get("jobs"), dict), p, f"{task}: a task entry")
                for inst, rounds in t["jobs"].items():
                    _need((inst == "" or bool(_HEX16.match(inst))) and isinstance(rounds, list)
                          and all(_is_int(r) for r in rounds), p, f"{task}: a job entry")
        self._cache[member] = doc
        return doc

    def votes(self, member: int, task: str) -> int:
        t = self.entry(member)["tasks"].get(task)
        return 0 if t is None else int(t["votes"])

    def known_instance(self, member: int, task: str, instance: bytes) -> bool:
        """Whether ``member`` voted in job ``instance`` of ``task`` before."""
        t = self.entry(member)["tasks"].get(task)
        return t is not None and instance.hex() in t["jobs"]

    def check_vote(self, member: int, task: str, instance: bytes, round_no: int,
                   max_votes: int | None) -> None:
        """Whether ``member`` may vote in ``round_no`` of job ``instance``.

        Raises:
            LedgerRefusal: ``already_voted``, ``budget_spent``.
        """
        t = self.entry(member)["tasks"].get(task, {"votes": 0, "jobs": {}})
        if int(round_no) in t["jobs"].get(instance.hex(), []):
            raise LedgerRefusal("already_voted",
                                f"device {member} voted in round {round_no} of this job")
        if max_votes is not None and t["votes"] >= max_votes:
            raise LedgerRefusal("budget_spent",
                                f"sampled for round {round_no} after contributing to "
                                f"{t['votes']} rounds of {task!r}, the most this job allows")

    def record_vote(self, member: int, task: str, instance: bytes, round_no: int) -> None:
        """Record the vote on disk before it is sent.

        Raises:
            LedgerError: the file cannot be written.
        """
        doc = self.entry(member)
        t = doc["tasks"].setdefault(task, {"votes": 0, "jobs": {}})
        t["votes"] += 1
        t["jobs"].setdefault(instance.hex(), []).append(int(round_no))
        p = self._path(member)
        if p is not None:
            atomic_write_json(p, doc)
