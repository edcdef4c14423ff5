"""Following the logs of active runs into ``LOGS``: one long ``pods/log`` request per running
container of a launcher or worker pod, its lines batched onto the container's subject as they
arrive.

Which containers: those running in a Running pod (as the leader published it,
:meth:`LogFollower.track`) of a run in a partition this replica holds
(:meth:`LogFollower.hold`, :mod:`watchers.sharing`), at most ``max_follows`` at once
(``MPIJC_LOGS__MAX_FOLLOWS``). Beyond the bound the order is explicit:
runs with a failing pod first (Failed, or a container that ended non-zero), then runs whose
launcher went quiet at the last progress probe (possibly hanging), then the rest; within each,
the pods whose log speaks for their run (launchers, the first replica of a launcher-less run)
first, then the oldest pods; a follow that falls out of the first ``max_follows`` is
stopped and resumed when a place frees.

Where a follow resumes (after a broken stream, a preemption, a restart of the watcher, or on
another replica) is read from the bus only: the last batch on the container's subject
(:func:`controller.bus.logstore.stored_end`). It asks the kubelet for that whole second
again (``sinceTime`` has seconds) and drops what it already stored
(:class:`~watchers.lines.Resume`): no gap, no duplicate. A line cut by a broken
connection is dropped and read whole again. Each batch is stored only right after the last one
the follow knows of (:func:`controller.bus.logstore.publish_after`): a follow that finds another
follower's batch there stops, and the next schedule starts it again from the bus if its
partition is still held here.

Each run's text is capped (``run_max_bytes``, counted from the containers' stored positions):
the batch that reaches the cap says so in its note, and the run's containers are no longer
followed. Each namespace's share of the stream (``namespace_max_bytes``) is settled once a
schedule: a namespace past it has its own oldest lines evicted
(:class:`~controller.bus.logshares.LogShares`).

Threads: one blocking read per follow, on an executor of ``max_follows`` threads, into a buffer
the follow takes from as one chunk (:class:`_Pump`): a container printing line by line is read
once per batch, when its take asks (every chunk that arrived meanwhile at once), not once per
line, and the event loop is woken by a read only when a take waits for one. A container's lines
go out at once when its last batch went out ``linger_s`` ago or more, or was a whole batch's
worth (a backlog), else when that much has passed (or a batch's worth has arrived): a quiet
container's line is stored as soon as it is read, a chatty one's in at most one batch per
``linger_s``, and a follow under load publishes bigger batches, not more. What the follows
publish in one turn of the loop goes out as one burst
(:class:`~controller.bus.publishing.Bursts`), each batch still on its own condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from controller.bus.client import NATS
from controller.bus.logshares import LogShares
from controller.bus.logstore import StoredEnd, SupersededError, publish_after, stored_end
from controller.bus.publishing import Bursts
from controller.contract.backoff import Backoff
from controller.contract.cancelling import cancel_and_wait
from controller.contract.clock import pause
from controller.contract.errors import RetryableError
from controller.contract.events import JobRef, PodObserved
from controller.contract.kinds import PodOwner, speaks_for_run
from controller.contract.logs import LogBatch, LogPosition, PackedBatch, since_time
from controller.contract.settings import LogSettings, NatsSettings
from controller.contract.subjects import Topology, urgent
from controller.kube.errors import APIError, APIForbiddenError, APINotFoundError
from watchers.lines import LineSplitter, Resume, decode_lines
from watchers.metrics import WatchMetrics
from watchers.packing import pack

__all__ = ["FollowKey", "LogFollower", "LogSource"]

log = logging.getLogger(__name__)

FollowKey = tuple[str, str]
"""(pod uid, container name)."""
SCHEDULE_S = 1.0
"""How often the followed set is brought to what should be followed."""
PARK_BELOW = 8192
"""Bytes of a read below which its pump parks until a take asks for more (:class:`_Pump`), if
the read ended where the server's last write did: a trickle of lines as they are printed; a
larger read, or one that cut a chunk, is a backlog, read on at once."""
PARK_S = 0.5
"""The longest a pump stays parked: a batch's worth, or the end of the stream, ends a longer
linger at most this late."""


class Follow(Protocol):
    """One followed log (:class:`controller.kube.gateway.LogFollow`)."""

    def read(self, size: int = ...) -> bytes: ...

    def caught_up(self) -> bool:
        """Whether the last read ended where the server's last write did (a backlog still
        arriving is not)."""
        ...

    def close(self) -> None: ...


class LogSource(Protocol):
    """The one call following needs (:meth:`controller.kube.gateway.KubeGateway.follow_log`)."""

    def follow_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        since_time: str | None = None,
        *,
        previous: bool = False,
    ) -> Follow: ...


@dataclass
class _Pod:
    """What the follower knows of one pod."""

    uid: str
    job: JobRef
    namespace: str
    name: str
    role: Literal["launcher", "worker"]
    index: int | None
    created: datetime
    running: dict[str, int] = field(default_factory=dict)
    """Restart count of each running container, by name."""
    failing: bool = False
    speaks: bool = False
    """Its log speaks for its run: a launcher, or the first replica of a launcher-less run."""


class LogFollower:
    """Follows the containers of active runs' pods into ``LOGS`` (see the module)."""

    def __init__(
        self,
        source: LogSource,
        nc: NATS,
        topology: Topology,
        settings: LogSettings,
        nats: NatsSettings,
        backoff_max_s: float = 30.0,
        metrics: WatchMetrics | None = None,
        held: Collection[int] | None = None,
    ) -> None:
        """``held``: the partitions (of ``settings.partitions``) whose runs are followed here
        (None: all of them, a follower alone)."""
        self._metrics = metrics or WatchMetrics()
        self._source = source
        self._js = nc.jetstream()
        self._topology = topology
        self._settings = settings
        self._retry_s = nats.publish_retry_s
        self._backoff_max_s = max(backoff_max_s, settings.retry_s)
        self._held = set(range(settings.partitions) if held is None else held)
        self._pods: dict[str, _Pod] = {}
        self._tasks: dict[FollowKey, asyncio.Task[None]] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        """Follows cancelled by a schedule and not ended yet."""
        self._partition_of: dict[FollowKey, int] = {}
        self._done: dict[FollowKey, int] = {}
        """Restart count at which a container's follow ended with its log (not followed again)."""
        self._quiet: set[str] = set()
        """Runs whose launcher printed nothing new at the last progress probe."""
        self._stored: dict[str, _Stored] = {}
        """Bytes stored per container, by run uid (what the run's cap counts)."""
        self._capped: set[str] = set()
        self._beyond = 0
        """Containers wanted beyond the bound at the last schedule."""
        self._bursts = Bursts(self._js, self._retry_s)
        """What the follows publish in one turn of the loop goes out together."""
        self._executor = ThreadPoolExecutor(max(1, settings.max_follows), thread_name_prefix="log-follow")
        self._closed = False
        """Set by :meth:`close`: a partition claimed after it (the leases' loop ends last) starts nothing."""
        self.shares = LogShares(
            self._js,
            topology,
            settings.namespace_max_bytes,
            replicas=nats.replicas,
            ttl_s=nats.logs_max_age_s,
        )

    @property
    def following(self) -> frozenset[FollowKey]:
        """The containers followed now."""
        return frozenset(key for key, task in self._tasks.items() if not task.done())

    # -- what the watches and probes tell -------------------------------------------------------

    def track(self, pod: PodObserved) -> None:
        """Take a pod's change: which of its containers run, whether it is failing."""
        if pod.change == "DELETED":
            self.forget(pod.uid)
            return
        containers = [c for c in pod.containers if not c.init]
        running = {c.name: c.restart_count for c in containers if c.state == "running"}
        owner = PodOwner(
            kind=pod.job.kind, name=pod.job.name, role=pod.role, replica=pod.replica, index=pod.index
        )
        self._pods[pod.uid] = _Pod(
            pod.uid,
            pod.job,
            pod.namespace,
            pod.name,
            pod.role,
            pod.index,
            pod.created_at,
            running if pod.phase == "Running" else {},
            urgent(pod) or any(c.restart_count > 0 for c in containers),
            speaks_for_run(owner),
        )

    def forget(self, uid: str) -> None:
        """A pod is gone: nothing of it is kept (nor of its run, once its last pod is gone)."""
        self._pods.pop(uid, None)
        for key in [key for key in self._done if key[0] == uid]:
            del self._done[key]
        for run, stored in list(self._stored.items()):
            for key in [key for key in stored.of if key[0] == uid]:
                stored.drop(key)
            if not stored.of:
                del self._stored[run]
        live = {pod.job.uid for pod in self._pods.values()}
        self._capped &= live
        self._quiet &= live

    def quiet(self, run_uid: str, new_lines: int) -> None:
        """A progress probe of the run's launcher read ``new_lines`` (0: quiet, maybe hanging)."""
        if new_lines == 0:
            self._quiet.add(run_uid)
        else:
            self._quiet.discard(run_uid)

    # -- scheduling -----------------------------------------------------------------------------

    @property
    def pods(self) -> frozenset[str]:
        """The uids of the pods known."""
        return frozenset(self._pods)

    @property
    def held(self) -> frozenset[int]:
        """The partitions whose runs are followed here."""
        return frozenset(self._held)

    def partition(self, job: JobRef) -> int:
        """The partition of a run: a stable hash of its namespace/job (:meth:`Topology.partition_of`)."""
        return self._topology.partition_of(job.namespace, job.name, self._settings.partitions)

    def hold(self, partition: int) -> None:
        """Follow the runs of ``partition`` too (its lease was just claimed); they start at once."""
        self._held.add(partition)
        self._metrics.log_partitions.set(len(self._held))
        self.schedule()

    async def let_go(self, partition: int) -> None:
        """Stop following the runs of ``partition`` (its lease lost, or to be handed over) and wait
        until their follows have stopped: what they stored is what the next holder resumes after."""
        self._held.discard(partition)
        self._metrics.log_partitions.set(len(self._held))
        stopping = [task for key, task in self._tasks.items() if self._partition_of.get(key) == partition]
        for key in [key for key in self._tasks if self._partition_of.get(key) == partition]:
            del self._tasks[key]
        await cancel_and_wait(stopping)
        self._metrics.log_follows.labels("followed").set(len(self.following))

    def wanted(self) -> list[tuple[FollowKey, _Pod, JobRef]]:
        """The containers to follow now, most urgent first, at most ``max_follows``: those of the
        runs of the partitions held."""
        failing = {p.job.uid for p in self._pods.values() if p.failing}
        candidates: list[tuple[tuple[int, int, datetime, str], FollowKey, _Pod, JobRef]] = []
        for pod in self._pods.values():
            job = pod.job
            if job.uid in self._capped or self.partition(job) not in self._held:
                continue
            urgency = 0 if job.uid in failing else 1 if job.uid in self._quiet else 2
            for container, restarts in pod.running.items():
                key = (pod.uid, container)
                if self._done.get(key) == restarts:
                    continue
                order = (urgency, 0 if pod.speaks else 1, pod.created, pod.name)
                candidates.append((order, key, pod, job))
        candidates.sort(key=lambda c: (c[0], c[1]))
        self._beyond = max(len(candidates) - self._settings.max_follows, 0)
        return [(key, pod, job) for _, key, pod, job in candidates[: self._settings.max_follows]]

    def schedule(self) -> None:
        """Start the follows wanted and not running; stop those running and no longer wanted
        (a pod gone, or pushed out of the bound by more urgent runs). Closed, it starts nothing:
        its readers' threads are gone."""
        if self._closed:
            return
        wanted = {key: (pod, job) for key, pod, job in self.wanted()}
        for key, task in list(self._tasks.items()):
            if task.done():
                del self._tasks[key]
            elif key not in wanted and self._stoppable(key):
                task.cancel()
                self._stopping.add(task)  # until it ends: a cancellation may be lost (close() repeats it)
                task.add_done_callback(self._stopping.discard)
                del self._tasks[key]
        for key, (pod, job) in wanted.items():
            if key not in self._tasks:
                restarts = pod.running[key[1]]
                self._partition_of[key] = self.partition(job)
                self._tasks[key] = asyncio.create_task(
                    self._follow(key, pod, job, restarts), name=f"follow-{key}"
                )
        for key in [key for key in self._partition_of if key not in self._tasks]:
            del self._partition_of[key]
        self._metrics.log_follows.labels("followed").set(len(self.following))
        self._metrics.log_follows.labels("beyond_bound").set(self._beyond)

    def _stoppable(self, key: FollowKey) -> bool:
        """Whether a follow no longer wanted is stopped: its pod is gone, or it still runs (pushed
        out of the bound); one whose container ended reads on to the end of its log."""
        pod = self._pods.get(key[0])
        return pod is None or key[1] in pod.running

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the followed set up to date, and the namespaces' shares settled, until ``stop``;
        then stop every follow."""
        settling = asyncio.create_task(self._settle_shares(stop), name="log-shares")
        try:
            while not stop.is_set():
                self.schedule()
                await pause(stop, SCHEDULE_S)
        finally:
            await cancel_and_wait([settling])
            await self.close()

    async def _settle_shares(self, stop: asyncio.Event) -> None:
        """Every ``SCHEDULE_S`` until ``stop``, bring the namespaces' accounts up to what was
        stored, evicting each namespace's own oldest lines past its share
        (:class:`~controller.bus.logshares.LogShares`); beside the schedule, which a bus slow to
        answer must not hold up. The bus away, what was stored stays noted for the next time."""
        while not stop.is_set():
            await pause(stop, SCHEDULE_S)
            try:
                evicted = await self.shares.settle()
            except Exception as exc:
                log.warning("the namespaces' log shares are not settled yet: %r", exc)
                continue
            self._metrics.log_share_evictions.inc(sum(evicted.values()))

    async def close(self) -> None:
        """Stop every follow (each resumes from the bus when followed again)."""
        self._closed = True
        await cancel_and_wait([*self._tasks.values(), *self._stopping])
        self._tasks.clear()
        await self._bursts.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- one follow -----------------------------------------------------------------------------

    async def _follow(self, key: FollowKey, pod: _Pod, job: JobRef, restarts: int) -> None:
        container = key[1]
        where = f"{pod.namespace}/{pod.name}/{container}"
        end = await self._start(key, pod, job, where)
        if end is None or end.position.capped:
            return
        backoff = Backoff(self._settings.retry_s, self._backoff_max_s)
        batches = _Batches(pod, job, container, self._settings, self._topology)
        while True:
            pump: _Pump | None = None
            try:
                if end.position.ts:  # an instance that ended since the last line stored: its rest first
                    end = await self._previous(key, pod, job, end)
                    if end.position.capped:
                        return
                position = end.position
                follow = self._source.follow_log(
                    pod.namespace, pod.name, container, since_time(position.ts) if position.ts else None
                )
                batches.resume(position)
                pump = _Pump(follow, self._executor, self._settings.batch_max_bytes)
                not_before = 0.0
                while chunk := await pump.take(not_before):
                    end = await self._store(batches.feed(chunk, end.position), key, job, end)
                    not_before = self._next_take(len(chunk))
                    if end.position.capped:
                        return
                    backoff.reset()
                if self._runs(key, restarts):  # ended cleanly, yet the container runs: a proxy closed it
                    delay = backoff.next_delay()
                    self._metrics.log_reopened.labels("ended").inc()
                    log.info("the log of %s ended while it runs; following it again in %.1fs", where, delay)
                    await asyncio.sleep(delay)
                    continue
                end = await self._store(batches.finish(end.position), key, job, end)
                self._done[key] = restarts
                log.info("log of %s followed to its end", where)
                return
            except (APINotFoundError, APIForbiddenError) as exc:
                log.info("log of %s not followed: %s", where, exc)
                self._done[key] = restarts
                return
            except SupersededError as exc:  # another replica follows it: the next schedule decides
                self._metrics.log_reopened.labels("superseded").inc()
                log.warning("log of %s stored by another follower meanwhile; stopped here: %s", where, exc)
                return
            except (APIError, RetryableError) as exc:  # broken stream, API server or bus away
                delay = backoff.next_delay()
                self._metrics.log_reopened.labels("broken").inc()
                log.info("following the log of %s again in %.1fs: %s", where, delay, exc)
                await asyncio.sleep(delay)
            finally:
                if pump is not None:
                    pump.close()

    async def _start(self, key: FollowKey, pod: _Pod, job: JobRef, where: str) -> StoredEnd | None:
        """Where the container's stored log ends; None when it is not followed now."""
        try:
            end = await stored_end(
                self._js, self._topology, job.namespace, job.name, job.uid, pod.name, key[1]
            )
        except Exception as exc:  # the bus is away: the next schedule tries again
            log.warning("log of %s not followed yet, its stored position is unreadable: %r", where, exc)
            await asyncio.sleep(self._settings.retry_s)
            return None
        if end.position.capped:
            self._capped.add(job.uid)
            return None
        self._stored.setdefault(job.uid, _Stored()).set(key, end.position.stored_bytes)
        return end

    async def _previous(self, key: FollowKey, pod: _Pod, job: JobRef, end: StoredEnd) -> StoredEnd:
        """What the container's previous instance printed after the last line stored, read from its
        ``previous=true`` log before a follow is opened again: a follow that broke, then the
        container ended and started anew, is not opened on the new instance with the old one's
        last lines unread. Without such an ending the previous instance's lines are older than
        what is stored and dropped (:class:`~watchers.lines.Resume`); a container that
        never restarted has no previous log (400); a kubelet or API server refusing costs those
        lines only."""
        position = end.position
        batches = _Batches(pod, job, key[1], self._settings, self._topology)
        batches.resume(position)
        follow = self._source.follow_log(
            pod.namespace, pod.name, key[1], since_time(position.ts), previous=True
        )
        pump = _Pump(follow, self._executor, self._settings.batch_max_bytes)
        try:
            while chunk := await pump.take():
                end = await self._store(batches.feed(chunk, end.position), key, job, end)
                if end.position.capped:
                    return end
            return await self._store(batches.finish(end.position), key, job, end)
        except APIError as exc:
            level = logging.DEBUG if exc.status == 400 else logging.INFO  # 400: no previous instance
            log.log(level, "previous log of %s/%s/%s not read: %s", pod.namespace, pod.name, key[1], exc)
            return end
        finally:
            pump.close()

    def _next_take(self, taken: int) -> float:
        """When the next take of a follow that just stored ``taken`` bytes may go: at once after a
        batch's worth (a backlog is read as fast as it is stored), else after ``linger_s``."""
        if taken >= self._settings.batch_max_bytes:
            return 0.0
        return asyncio.get_running_loop().time() + self._settings.linger_s

    def _runs(self, key: FollowKey, restarts: int) -> bool:
        """Whether the container still runs as the instance followed, as far as the watch says."""
        pod = self._pods.get(key[0])
        return pod is not None and pod.running.get(key[1]) == restarts

    async def _store(
        self, batches: Sequence[PackedBatch], key: FollowKey, job: JobRef, end: StoredEnd
    ) -> StoredEnd:
        """Publish ``batches`` within the run's cap, after the container's stored ``end``; where the
        container's stored log ends then (a capped position where the cap was reached). Raises
        :class:`SupersededError` if another follower stored a batch of it meanwhile."""
        stored = self._stored.setdefault(job.uid, _Stored())
        kept: list[PackedBatch] = []
        for batch in batches:
            head = batch.head
            total = stored.total - stored.of.get(key, 0) + head.position.stored_bytes
            if total > self._settings.run_max_bytes or job.uid in self._capped:
                note = f"log cap of {self._settings.run_max_bytes} bytes reached for this run: no more kept"
                capped = head.position.model_copy(
                    update={"capped": True, "stored_bytes": stored.of.get(key, 0)}
                )
                kept.append(PackedBatch(head.model_copy(update={"position": capped, "note": note})))
                if job.uid not in self._capped:
                    self._metrics.log_capped.inc()
                self._capped.add(job.uid)
                break
            kept.append(batch)
            stored.set(key, head.position.stored_bytes)
        if not kept:
            return end
        seq = await publish_after(
            self._js, self._topology, kept, end.seq, self._retry_s, self.shares, self._bursts
        )
        self._metrics.log_lines.inc(sum(batch.count for batch in kept))
        return StoredEnd(kept[-1].head.position, seq)


class _Stored:
    """The bytes of text stored of each followed container of one run, and their sum (what the
    run's cap counts), kept as they change: not summed again for each batch of a run of hundreds."""

    def __init__(self) -> None:
        self.of: dict[FollowKey, int] = {}
        self.total = 0

    def set(self, key: FollowKey, stored: int) -> None:
        self.total += stored - self.of.get(key, 0)
        self.of[key] = stored

    def drop(self, key: FollowKey) -> None:
        self.total -= self.of.pop(key, 0)


class _Pump:
    """Reads one follow on an executor thread, into a buffer the event loop takes from.

    A take lingers first (until ``not_before``), then takes what the buffer holds, or asks for
    a read and waits for it. After a short read that ended where the server's last write did
    (below ``PARK_BELOW``, whole chunks: lines as they are printed) the thread parks until a
    take asks (at most ``PARK_S``): what arrives while a follow's last batch waits for its ack
    or lingers stays on the connection, and the one read the next take asks for hands it all
    over (every chunk that arrived, :class:`~controller.kube.streams.ChunkedBody`): one wake-up
    of the thread and of the loop per batch, not one per chunk the container printed. Any other
    read (a backlog) is followed by the next at once; once the buffer holds ``limit`` bytes the
    thread waits for the loop before it reads more (the kubelet's side then waits for us): it
    holds at most ``limit`` and one read, and a take lingering goes at once."""

    def __init__(self, follow: Follow, executor: ThreadPoolExecutor, limit: int) -> None:
        self._follow = follow
        self._limit = limit
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        self._full = asyncio.Event()
        self._lock = threading.Condition()
        self._chunks: list[bytes] = []
        self._size = 0
        self._ended = False
        self._error: BaseException | None = None
        self._closed = False
        self._waiting = False
        """A take waits for bytes: the next read wakes it."""
        self._reading = self._loop.run_in_executor(executor, self._run)

    def _run(self) -> None:
        """On the executor: read until the end, the stream breaks, or :meth:`close`."""
        error: BaseException | None = None
        try:
            while chunk := self._follow.read():
                with self._lock:
                    while self._size >= self._limit and not self._closed:
                        self._lock.wait()
                    if self._closed:
                        return
                    wake, self._waiting = self._waiting, False
                    self._chunks.append(chunk)
                    self._size += len(chunk)
                    full = self._size >= self._limit
                if wake:
                    self._loop.call_soon_threadsafe(self._ready.set)
                if full:  # a batch's worth: a take lingering goes now
                    self._loop.call_soon_threadsafe(self._full.set)
                elif len(chunk) < PARK_BELOW and self._follow.caught_up():
                    self._park()
        except BaseException as exc:  # handed to the loop, raised by take()
            error = exc
        with self._lock:
            self._ended, self._error = True, error
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody takes any more
            self._loop.call_soon_threadsafe(self._ready.set)
            self._loop.call_soon_threadsafe(self._full.set)  # the end does not linger

    def _park(self) -> None:
        """After a short read: wait until a take asks for a read (or :meth:`close`), at most ``PARK_S``."""
        with self._lock:
            deadline = time.monotonic() + PARK_S
            while not (self._waiting or self._closed) and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(left)

    async def take(self, not_before: float = 0.0) -> bytes:
        """All that was read since the last take, unless the buffer is full after waiting until
        the loop's time ``not_before``, and waiting for a read if it holds nothing; ``b""`` at the
        end of the log; the read's error where the stream broke (after what was read before it)."""
        while True:
            self._full.clear()
            if (delay := not_before - self._loop.time()) > 0 and self._size < self._limit:
                timer = self._loop.call_later(delay, self._full.set)
                await self._full.wait()
                timer.cancel()
            with self._lock:
                if wait := not (self._chunks or self._ended):  # the next read wakes this take
                    self._waiting = True
                    self._ready.clear()
                    self._lock.notify()  # a parked thread reads now
            if wait:
                await self._ready.wait()
            with self._lock:
                chunks, self._chunks, self._size = self._chunks, [], 0
                ended, error = self._ended, self._error
                self._lock.notify()
            if chunks:
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            if error is not None:
                raise error
            if ended:
                return b""

    def close(self) -> None:
        """Stop reading (the thread ends with its read)."""
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._follow.close()


class _Batches:
    """Turns the bytes of one followed container into batches of new, cleaned lines; what their
    messages share (the head's fields but the position, the subject) is made once."""

    def __init__(
        self, pod: _Pod, job: JobRef, container: str, settings: LogSettings, topology: Topology
    ) -> None:
        self._head = LogBatch(
            run_uid=job.uid,
            kind=job.kind,
            namespace=job.namespace,
            job=job.name,
            pod=pod.name,
            pod_uid=pod.uid,
            container=container,
            role=pod.role,
            index=pod.index,
            position=LogPosition(),
        )
        self._prefix = PackedBatch.prefix_of(self._head)
        self._subject = topology.log_subject(job.namespace, job.name, job.uid, pod.name, container)
        self._limit = settings.batch_max_bytes
        self._splitter = LineSplitter(settings.max_line_bytes)
        self._resume = Resume(LogPosition())

    def resume(self, position: LogPosition) -> None:
        """A new stream starts at ``position``: a partial line from the last is forgotten."""
        self._splitter.discard()
        self._resume = Resume(position)

    def feed(self, chunk: bytes, position: LogPosition) -> list[PackedBatch]:
        return self._batches(self._splitter.feed_text(chunk), position)

    def finish(self, position: LogPosition) -> list[PackedBatch]:
        return self._batches(decode_lines(list(self._splitter.finish())), position)

    def _batches(self, texts: list[str], position: LogPosition) -> list[PackedBatch]:
        packed = pack(texts, position, self._limit, self._resume)
        return [self._batch(lines, count, end) for lines, count, end in packed]

    def _batch(self, lines: bytes, count: int, position: LogPosition) -> PackedBatch:
        head = self._head.model_copy(update={"position": position})
        return PackedBatch(head, lines, count, self._prefix, self._subject)
