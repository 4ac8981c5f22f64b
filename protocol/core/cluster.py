"""Where the client side of a simulated round runs: in this process, or on a cluster.

An :class:`Engine` holds one stateful *shard* object per batch of clients (an actor that
lives on one worker for the whole session) and calls a method on every shard at once:
:meth:`Engine.start_shards` creates them, :meth:`Engine.imap` calls one method on each
(in parallel on a cluster) and yields, shard by shard in order as each call returns, its
result or :class:`ShardLost` when the worker holding it died (:meth:`Engine.map`: all at
once). Arguments and results are bytes and small arrays, never
per-client Python objects (see :mod:`protocol.core.secagg_shards`).

* :class:`LocalEngine`: the shards are objects in this process, called one after the
  other (``--workers 1``, and the reference the others are tested against);
* :class:`DaskEngine`: Dask distributed actors (``pip install 'fedhh[cluster]'``): a
  ``LocalCluster`` of ``workers`` single-threaded worker processes started here, or an
  existing scheduler at ``address`` (``--cluster tcp://host:8786``), through the same
  code path.

:func:`make_engine` picks one from ``workers`` and ``address``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

__all__ = ["Engine", "LocalEngine", "DaskEngine", "ShardLost", "make_engine",
           "ClusterUnavailable", "default_workers", "dask_available"]


class ClusterUnavailable(RuntimeError):
    """The distributed engine is not installed or cannot be reached."""


@dataclass(frozen=True)
class ShardLost:
    """A shard whose worker died (or could not be reached) during a call."""

    shard: int
    detail: str


def dask_available() -> bool:
    """Is Dask distributed installed (the ``cluster`` extra)?"""
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class Engine:
    """Interface (see the module docstring)."""

    name = "engine"
    workers = 1

    def start_shards(self, cls: type, args: Sequence[tuple]) -> list[Any]:
        raise NotImplementedError

    def imap(self, handles: Sequence[Any], method: str, args: Iterable[tuple]
             ) -> Iterator[Any]:
        """Call ``method`` on every handle with its arguments; yield the results in the
        handles' order, each as soon as it is ready (a caller can work on the first
        results while the later calls still run). ``args`` is read as the calls are
        made, one tuple per handle, so that a caller can build each call's arguments
        only then. A call whose worker died yields a :class:`ShardLost`."""
        raise NotImplementedError

    def map(self, handles: Sequence[Any], method: str, args: Iterable[tuple]
            ) -> list[Any]:
        """:meth:`imap`, all results at once."""
        return list(self.imap(handles, method, args))

    def worker_of(self, handle: Any) -> int:
        """The worker process (numbered from 0) that holds a shard started here: shards
        of one worker share that process's memory (a session's memo)."""
        return 0

    def drop(self, handles: Sequence[Any]) -> None:
        """Release shards that are no longer needed."""

    def close(self) -> None:
        """Stop what this engine started."""

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalEngine(Engine):
    """Shards as objects in this process, called in turn."""

    name = "local"
    workers = 1

    def start_shards(self, cls: type, args: Sequence[tuple]) -> list[Any]:
        return [cls(*a) for a in args]

    def imap(self, handles: Sequence[Any], method: str, args: Iterable[tuple]
             ) -> Iterator[Any]:
        # lazily: shard i runs when the caller asks for its result
        for h, a in zip(handles, args):
            yield getattr(h, method)(*a)


#: Dask's developer logs of recent messages and transitions: each batched stream
#: (scheduler to worker, client to scheduler) keeps its last 1,000 messages by default,
#: and a message that starts a shard holds the shard's arguments (config, rows, keys)
#: by reference, so every finished session's arguments stayed in the driver (about
#: 70 MB a session at 10^6 users). Off for the cluster this engine starts and for its
#: client on a cluster it joins.
_NO_MESSAGE_LOGS = {"distributed.admin.low-level-log-length": 0}

#: Dask settings of a local cluster this engine starts (not of a cluster it joins)
_LEAN_LOCAL_CLUSTER = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "10s",
    "distributed.admin.system-monitor.disk": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    # the nannies (in this process) read each worker's memory every 100 ms by default,
    # about 3% of the driver's CPU in a 10^6-user round; once a second still stops a
    # worker that outgrows its limit
    "distributed.worker.memory.monitor-interval": "1s",
    **_NO_MESSAGE_LOGS,
}


class DaskEngine(Engine):
    """Shards as Dask distributed actors.

    Args:
        workers: worker processes of the local cluster (ignored with ``address``).
        address: an existing scheduler (``tcp://host:port``); ``None`` starts a
            ``LocalCluster`` of ``workers`` single-threaded processes here.

    Raises:
        ClusterUnavailable: Dask distributed is not installed, or the scheduler cannot
            be reached.
    """

    name = "dask"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        if address is not None:
            _probe(address)  # before Dask's import and its 30 s connection timeout
        try:
            import logging

            from distributed import Client, LocalCluster
        except ImportError:
            raise ClusterUnavailable("the distributed engine needs Dask distributed: "
                                     "pip install 'fedhh[cluster]'") from None
        logging.getLogger("distributed").setLevel(logging.ERROR)
        # this process is now a driver: it packs and frees shard messages of MiB at a
        # time, which glibc's moving mmap threshold would keep in its heap
        from protocol.core.memory import fixed_mmap_threshold

        fixed_mmap_threshold()
        self._cluster = None
        self._futures: dict[int, Any] = {}
        self._workers: dict[int, int] = {}
        try:
            if address is None:
                import dask

                n = workers or default_workers()
                # the cluster is ours, for a simulation's CPU: Dask's own sampling
                # profiler (every 10 ms on each worker, about 3% of a worker's CPU in a
                # 10^6-user TrieHH round) is off, its system monitor (psutil every
                # 0.5 s, disk counters included) and memory monitor are slower; the
                # nannies hand this configuration to the worker processes they start
                with dask.config.set(_LEAN_LOCAL_CLUSTER):
                    self._cluster = LocalCluster(n_workers=n, threads_per_worker=1,
                                                 processes=True, dashboard_address=":0",
                                                 silence_logs=logging.ERROR)
                    self.client = Client(self._cluster)
            else:
                import dask

                # this client's own message log only (the scheduler is not ours)
                with dask.config.set(_NO_MESSAGE_LOGS):
                    self.client = Client(address, timeout=30)
        except ClusterUnavailable:
            self.close()
            raise
        except (OSError, TimeoutError) as exc:
            self.close()
            raise ClusterUnavailable(f"cannot reach the Dask scheduler at {address}: {exc}"
                                     ) from None
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))

    def worker_addresses(self) -> list[str]:
        return sorted(self.client.scheduler_info()["workers"])

    def start_shards(self, cls: type, args: Sequence[tuple]) -> list[Any]:
        addresses = self.worker_addresses()
        if not addresses:
            raise ClusterUnavailable("the Dask scheduler has no workers")
        futures = [self.client.submit(cls, *a, actor=True, pure=False,
                                      workers=[addresses[i % len(addresses)]])
                   for i, a in enumerate(args)]
        actors = [f.result() for f in futures]
        # the futures keep the actors alive on their workers until drop()
        self._futures.update({id(a): f for a, f in zip(actors, futures)})
        self._workers.update({id(a): i % len(addresses) for i, a in enumerate(actors)})
        return actors

    def worker_of(self, handle: Any) -> int:
        return self._workers.get(id(handle), 0)

    def drop(self, handles: Sequence[Any]) -> None:
        """Release the actors (their clients' state leaves the workers' memory)."""
        for h in handles:
            self._workers.pop(id(h), None)
            f = self._futures.pop(id(h), None)
            if f is not None:
                try:
                    f.release()
                except Exception:  # noqa: BLE001 - a dead worker's actor is gone anyway
                    pass

    def imap(self, handles: Sequence[Any], method: str, args: Iterable[tuple]
             ) -> Iterator[Any]:
        # at most `window` calls in flight: a worker's next call is queued while it runs
        # this one, and the results this process has not taken yet (an actor's result
        # is sent here when it is ready, not when it is asked for) are at most that many
        # shards' worth, not a whole step's
        window = max(2, 2 * self.workers)
        arg_iter = iter(args)
        pending: dict[int, Any] = {}

        def submit(i: int) -> None:
            a = next(arg_iter)
            try:
                pending[i] = getattr(handles[i], method)(*a)
            except Exception as exc:  # noqa: BLE001 - a dead actor: the shard is lost
                pending[i] = ShardLost(i, f"{type(exc).__name__}: {exc}"[:300])

        n = len(handles)
        for i in range(min(n, window)):
            submit(i)
        for i in range(n):
            p = pending.pop(i)
            if isinstance(p, ShardLost):
                result = p
            else:
                try:
                    result = p.result()
                except Exception as exc:  # noqa: BLE001 - worker died mid-call
                    result = ShardLost(i, f"{type(exc).__name__}: {exc}"[:300])
            # the future goes with its result (an actor future keeps it); the next call
            # is made before the caller handles this result, so the workers stay busy
            del p
            if i + window < n:
                submit(i + window)
            yield result
            del result

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing never fails a run
                pass
            self.client = None
        if self._cluster is not None:
            try:
                self._cluster.close()
            except Exception:  # noqa: BLE001
                pass
            self._cluster = None


#: how long :func:`_probe` waits for a scheduler's TCP port to accept
PROBE_SECONDS = 5.0


def _probe(address: str, timeout: float = PROBE_SECONDS) -> None:
    """Fail at once when a ``tcp://HOST:PORT`` scheduler address takes no connection
    (nothing listens there, the host does not resolve, or no answer in ``timeout``
    seconds), instead of after Dask's 30-second connection timeout. Other schemes
    (``tls://``, ``ucx://``, ...) are left to Dask.

    Raises:
        ClusterUnavailable: the address is malformed or takes no TCP connection.
    """
    import socket
    from urllib.parse import urlsplit

    if "://" not in address:
        address = f"tcp://{address}"
    parts = urlsplit(address)
    if parts.scheme != "tcp":
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise ClusterUnavailable(f"--cluster {address}: expected tcp://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError:
        raise ClusterUnavailable(f"cannot reach the Dask scheduler at {address}: "
                                 "connection refused (is a scheduler running there?)"
                                 ) from None
    except socket.gaierror as exc:
        raise ClusterUnavailable(f"cannot reach the Dask scheduler at {address}: the "
                                 f"host name does not resolve ({exc.strerror})") from None
    except (OSError, TimeoutError) as exc:
        what = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or exc)
        raise ClusterUnavailable(f"cannot reach the Dask scheduler at {address}: {what}"
                                 + (f" in {timeout:g} s" if isinstance(exc, TimeoutError)
                                    else "")) from None


def make_engine(workers: int | None = 1, address: str | None = None) -> Engine:
    """``LocalEngine`` for one worker and no address; else :class:`DaskEngine`.

    Raises:
        ClusterUnavailable: see :class:`DaskEngine`.
        ValueError: ``workers < 1``.
    """
    if workers is not None and workers < 1:
        raise ValueError("workers must be >= 1")
    if address is None and (workers or 1) == 1:
        return LocalEngine()
    return DaskEngine(workers, address)
