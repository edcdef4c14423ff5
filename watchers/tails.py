"""Log tails of containers that ended in error: read once per container restart, and read again
when the API server could not serve them.

A pod update where a container just terminated with a non-zero exit gets that container's
bounded log tail attached before it goes out; the tail is what tells an NCCL timeout from a
CUDA error or a missing Python module. A Failed pod keeps its logs until it is deleted, so one
refused read must not decide what the user is told: a read the gateway gave up on as
unavailable (429/5xx or no answer, after its own retries) is not marked done. It is read again
in the background, with the watcher's reconnect backoff, until it succeeds, the pod is deleted,
its container runs again, or ``log_tail_retry_s`` has passed; then ``late`` is called with the
pod's newest version and the tails read, and the watcher publishes that version again with
them (a message of its own: :func:`controller.contract.events.version_of`).

While the last read was refused as unavailable (the API server is struggling), a newly failed
container is not read in the pod's update but handed to the background at once, so an outage
holds the pod watch back by one read's retries, not one per failed pod; the next read that is
answered (one node's kubelet unreachable fails only its pods' reads) ends that. Any other error
(the log or the pod is gone, RBAC refuses it) is final, as before.

:class:`PodHandover` reads the tails of several pods side by side (a job whose sixteen workers
fail together costs one read's time, not sixteen), while each pod's changes still go on in the
order they were watched.

The reads run in threads of their own (``READ_THREADS``), not in the event loop's default
executor: that one (``min(32, cores + 4)`` threads, 6 on two cores) also reads every watch's
list page by page, holding a thread for a whole list, and a restart lists a dozen resources
beside their resumed watches at once; a failure's tail queued behind them, and its pod behind it,
until those lists ended (issue 40: the kills after a restart reached the bus with the end of the
17,000 pods' list).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.contract.backoff import Backoff
from controller.contract.cancelling import cancel_and_wait
from controller.contract.events import Change
from controller.contract.settings import WatcherSettings
from controller.kube.errors import APIUnavailableError
from watchers.normalizing import error_terminated

__all__ = ["LateTails", "LogTails", "PodHandover", "TailReader", "Tails"]

log = logging.getLogger(__name__)

READ_THREADS = 16
"""Threads reading log tails (:class:`PodHandover` has as many reads in flight in the watcher)."""

Tails = dict[str, tuple[str, ...]]
"""Log tail lines by container name."""
LateTails = Callable[[Change, Mapping[str, Any], Tails], Awaitable[None]]
"""Called with a pod's newest change and version, and the tails read late (and those read before)."""


class TailReader(Protocol):
    """The one call tails need (:meth:`controller.kube.gateway.KubeGateway.read_log_tail`)."""

    def read_log_tail(
        self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int
    ) -> list[str]: ...


@dataclass
class _Retry:
    """A pod whose failed containers' tails are still to be read."""

    change: Change
    pod: Mapping[str, Any]
    missing: dict[str, int] = field(default_factory=dict)
    """Restart count of each container whose tail is missing, by name."""
    read: Tails = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid"))


def _failures(pod: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    """(name, restart count) of each container that terminated with a non-zero exit."""
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or ()}
    for name in error_terminated(pod):
        yield name, int(statuses.get(name, {}).get("restartCount") or 0)


class LogTails:
    """Reads the log tail of error-terminated containers, once per container restart (see the module)."""

    def __init__(
        self,
        gateway: TailReader,
        settings: WatcherSettings,
        late: LateTails | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        """Without ``late``, a tail that could not be read is given up at once."""
        self._gateway = gateway
        self._settings = settings
        self._late = late if settings.log_tail_retry_s > 0 else None
        self._rng = rng
        self._fetched: dict[str, set[tuple[str, int]]] = {}
        """(container, restart count) of each tail read or given up, by pod uid."""
        self._retrying: dict[str, _Retry] = {}
        self._struggling = False
        """The last read was refused as unavailable."""
        self._threads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="log-tail")
        """The reads' own threads (see the module): started as reads need them."""

    @property
    def retrying(self) -> int:
        """Pods whose tails are being read again."""
        return len(self._retrying)

    def wants(self, change: Change, pod: Mapping[str, Any]) -> bool:
        """Whether :meth:`for_pod` would read a tail (or forget a pod) for this change."""
        return change == "DELETED" or any(True for _ in self._new_failures(pod))

    def _new_failures(self, pod: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
        """(name, restart count) of each failed container whose tail is neither read nor being read again."""
        uid = _uid(pod)
        retry = self._retrying.get(uid)
        fetched: Collection[tuple[str, int]] = self._fetched.get(uid) or ()
        for name, restarts in _failures(pod):
            if (name, restarts) not in fetched and not (retry and retry.missing.get(name) == restarts):
                yield name, restarts

    async def for_pod(self, change: Change, pod: Mapping[str, Any]) -> Tails:
        """Log tail per newly error-terminated container of ``pod`` (empty when nothing is new)."""
        uid = _uid(pod)
        if change == "DELETED":  # its logs went with it
            self._forget(uid)
            return {}
        retry = self._retrying.get(uid)
        if retry is not None:
            retry.change, retry.pod = change, pod
        tails: Tails = {}
        unavailable: dict[str, int] = {}
        for name, restarts in list(self._new_failures(pod)):
            if self._late is not None and self._struggling:  # do not wait: read it in the background
                unavailable[name] = restarts
                continue
            try:
                lines = await self._read(pod, name)
            except APIUnavailableError as exc:
                if self._late is None:
                    self._done(uid, name, restarts)
                    log.info("no log tail for %s/%s: %s", _name(pod), name, exc)
                else:
                    unavailable[name] = restarts
                    log.info("log tail of %s/%s not read yet, reading it again: %s", _name(pod), name, exc)
                continue
            except Exception as exc:  # a missing log must not hold the event back
                self._done(uid, name, restarts)
                log.info("no log tail for %s/%s: %s", _name(pod), name, exc)
                continue
            self._done(uid, name, restarts)
            tails[name] = lines
        if unavailable:
            self._retry_later(change, pod, unavailable, tails)
        return tails

    async def close(self) -> None:
        """Stop every read in the background."""
        tasks = [r.task for r in self._retrying.values() if r.task is not None]
        await cancel_and_wait(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._retrying.clear()
        self._threads.shutdown(wait=False, cancel_futures=True)

    # -- in the background ----------------------------------------------------------------------

    def _retry_later(
        self, change: Change, pod: Mapping[str, Any], missing: dict[str, int], read: Tails
    ) -> None:
        uid = _uid(pod)
        retry = self._retrying.setdefault(uid, _Retry(change, pod))
        retry.missing.update(missing)
        retry.read.update(read)
        if retry.task is None or retry.task.done():
            retry.task = asyncio.create_task(self._retry(uid, retry), name=f"log-tail-{uid}")

    async def _retry(self, uid: str, retry: _Retry) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.log_tail_retry_s
        backoff = Backoff(self._settings.backoff_initial_s, self._settings.backoff_max_s, self._rng)
        try:
            while retry.missing:
                delay = backoff.next_delay()
                if loop.time() + delay > deadline:
                    log.warning(
                        "log tail of %s/%s not read in %.0fs; giving up",
                        _name(retry.pod),
                        ", ".join(retry.missing),
                        self._settings.log_tail_retry_s,
                    )
                    return
                await asyncio.sleep(delay)
                got = await self._read_missing(uid, retry)
                if got and self._late is not None:
                    retry.read.update(got)
                    await self._late(retry.change, retry.pod, dict(retry.read))
        finally:
            if self._retrying.get(uid) is retry:
                del self._retrying[uid]

    async def _read_missing(self, uid: str, retry: _Retry) -> Tails:
        """One more read of each missing tail of the pod's newest version."""
        pod, now = retry.pod, dict(_failures(retry.pod))
        got: Tails = {}
        for name, restarts in list(retry.missing.items()):
            if now.get(name) != restarts:  # running again, or failed again: this failure's log is gone
                del retry.missing[name]
                continue
            try:
                got[name] = await self._read(pod, name)
            except APIUnavailableError:
                continue
            except Exception as exc:
                log.info("no log tail for %s/%s: %s", _name(pod), name, exc)
            del retry.missing[name]
            self._done(uid, name, restarts)
        if got:
            log.info("log tail of %s/%s read after all", _name(pod), ", ".join(got))
        return got

    def _done(self, uid: str, container: str, restarts: int) -> None:
        """That failure's tail is read, or given up: never read again."""
        self._fetched.setdefault(uid, set()).add((container, restarts))

    def _forget(self, uid: str) -> None:
        retry = self._retrying.pop(uid, None)
        if retry is not None and retry.task is not None:
            retry.task.cancel()
        self._fetched.pop(uid, None)

    async def _read(self, pod: Mapping[str, Any], container: str) -> tuple[str, ...]:
        meta = pod.get("metadata") or {}
        try:
            lines = await asyncio.get_running_loop().run_in_executor(
                self._threads,
                functools.partial(
                    self._gateway.read_log_tail,
                    str(meta.get("namespace")),
                    str(meta.get("name")),
                    container,
                    self._settings.log_tail_lines,
                    self._settings.log_tail_bytes,
                ),
            )
        except APIUnavailableError:
            self._struggling = True
            raise
        except Exception:
            self._struggling = False  # answered, if not with a log
            raise
        self._struggling = False
        return tuple(lines)


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name"))


HandOn = Callable[[Change, Mapping[str, Any], Tails], Awaitable[None]]
"""Takes a pod's change with the tails read for it."""


class PodHandover:
    """Hands each pod change on with its new log tails: in watch order per pod, the tail reads of
    different pods side by side (at most ``reads_in_flight`` at once). A change that needs no
    read and has no earlier change of its pod still waiting goes on at once."""

    def __init__(self, tails: LogTails, hand_on: HandOn, reads_in_flight: int) -> None:
        self._tails = tails
        self._hand_on = hand_on
        self._slots = asyncio.Semaphore(reads_in_flight)
        self._waiting: dict[str, asyncio.Task[None]] = {}
        """The last change still waiting, by pod uid."""

    @property
    def busy(self) -> bool:
        """Whether some change was taken but not handed on yet."""
        return bool(self._waiting)

    async def __call__(self, change: Change, pod: Mapping[str, Any]) -> None:
        uid = _uid(pod)
        before = self._waiting.get(uid)
        if before is None and not self._tails.wants(change, pod):
            await self._hand_on(change, pod, {})
            return
        task = asyncio.create_task(self._in_order(before, change, pod), name=f"pod-{uid}")
        self._waiting[uid] = task
        task.add_done_callback(lambda done: self._waiting.get(uid) is done and self._waiting.pop(uid))

    async def _in_order(
        self, before: asyncio.Task[None] | None, change: Change, pod: Mapping[str, Any]
    ) -> None:
        if before is not None:
            await asyncio.wait([before])  # the pod's earlier change first; its failure is its own
        async with self._slots:
            tails = await self._tails.for_pod(change, pod)
        await self._hand_on(change, pod, tails)

    async def close(self) -> None:
        """Drop what is still waiting (the watchers stop; the next start lists again), and stop
        the tails' reads in the background."""
        tasks = list(self._waiting.values())
        await cancel_and_wait(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._waiting.clear()
        await self._tails.close()
