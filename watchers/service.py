"""The watcher process: one watch per resource kind → correlate → publish, under leader election.

Watch loops run concurrently and feed one queue; a single publisher task drains it in
batches, so the order in which the correlator releases events (a job before its pods) is
the order they reach the bus. Two bounded log reads, never a log stream:

- a pod update where a container just terminated with an error gets its log tail attached,
  fetched once per container restart; one the API server would not serve is read again while
  the pod exists, and the pod goes out again with it (:class:`watchers.tails.LogTails`);
- every ``progress_probe_s`` each running launcher's log (for a run without one, its first
  replica's: Master-0, Worker-0, node 0) is probed with ``sinceSeconds``
  and a :class:`~controller.contract.events.LogProbed` says how many new lines it wrote
  (:class:`ProgressProbe`) — what tells a hung MPI job from a quiet healthy one.

Beside the elected watches, on every replica, the containers of running launcher and worker
pods are followed into the ``LOGS`` stream (:class:`watchers.sharing.SharedFollower`,
``MPIJC_LOGS__FOLLOW``), the replicas sharing the runs through leases; they learn the pods and
the runs that went quiet from what the leader published.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import IO, Any, Literal

from controller.bus.client import NATS
from controller.bus.positions import read_positions, save_positions
from controller.bus.publishing import Publisher
from controller.contract.clock import pause
from controller.contract.events import BusEvent, Change, LogProbed
from controller.contract.kinds import JobKind, speaks_for_run
from controller.contract.redaction import scrub_lines
from controller.contract.settings import Settings, WatcherSettings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.kube.resources import JOB_RESOURCES, WATCHED, Resource, job_kinds_of
from controller.metrics import PipelineMetrics
from watchers.correlating import Correlator, ObjectKind, Observation
from watchers.discovery import follow_served
from watchers.leader import LeaderElector
from watchers.metrics import WatchMetrics
from watchers.normalizing import failure_signal, pod_owner
from watchers.pipeline import MAX_BATCH, Pipeline, publish_every
from watchers.positions import WatchPositions, position_name
from watchers.published import VersionedPublisher, versioned
from watchers.recording import object_kind, write_record
from watchers.sharing import SharedFollower
from watchers.tails import READ_THREADS, LogTails, PodHandover, Tails
from watchers.usage import reading_usage
from watchers.watching import ChangeSink, Listed, WatchChange, watch_resource

QUEUE_LIMIT = 50_000
"""Observations waiting to be published, per lane. Large enough that a relist of a big cluster
is taken whole and its watch starts at once (an OOM kill during the relist is seen then, not
after it is published); bounded so that a long NATS outage stops the watches instead of
exhausting memory."""

TAIL_READS_IN_FLIGHT = READ_THREADS
"""Log tails read side by side, each for another pod, one a thread of their own
(:data:`watchers.tails.READ_THREADS`)."""

POSITIONS_SAVE_S = 1.0
"""How often, at most, the watches' positions are stored (a plain publish per watch that moved)."""

log = logging.getLogger(__name__)

PROBE_TAIL_LINES = 5


class ProgressProbe:
    """Knows the running pods whose log speaks for their run — launchers, and the first replica
    of a launcher-less run (:func:`controller.contract.kinds.speaks_for_run`) — and probes
    their recent log output on demand."""

    def __init__(
        self,
        gateway: KubeGateway,
        correlator: Correlator,
        settings: WatcherSettings,
    ) -> None:
        self._gateway = gateway
        self._correlator = correlator
        self._settings = settings
        self._running: dict[str, Mapping[str, Any]] = {}

    def track(self, change: WatchChange) -> None:
        """Follow which pods that speak for their run are running."""
        meta = change.object.get("metadata") or {}
        owner = pod_owner(change.object)
        uid = str(meta.get("uid"))
        running = (change.object.get("status") or {}).get("phase") == "Running"
        if owner and speaks_for_run(owner) and running and change.type != "DELETED":
            self._running[uid] = change.object
        else:
            self._running.pop(uid, None)

    async def probe(self) -> list[LogProbed]:
        """One ``sinceSeconds`` read per pod followed; pods whose run is unknown are skipped."""
        since = int(self._settings.progress_probe_s)
        probes: list[LogProbed] = []
        for uid, pod in list(self._running.items()):
            meta = pod.get("metadata") or {}
            namespace, name = str(meta.get("namespace")), str(meta.get("name"))
            job = self._correlator.pods.get((namespace, name))
            owner = pod_owner(pod)
            containers = (pod.get("spec") or {}).get("containers") or [{}]
            container = str(containers[0].get("name", ""))
            if job is None or owner is None:
                continue
            try:
                lines = await asyncio.to_thread(
                    self._gateway.read_log_tail,
                    namespace,
                    name,
                    container,
                    10_000,
                    self._settings.log_tail_bytes * 64,
                    since,
                )
            except Exception as exc:
                log.info("progress probe of %s/%s failed: %s", namespace, name, exc)
                continue
            now = datetime.now(UTC)
            probes.append(
                LogProbed(
                    job=job,
                    uid=uid,
                    name=name,
                    role=owner["role"],
                    replica=owner["replica"],
                    index=owner["index"],
                    container=container,
                    resource_version=str(int(now.timestamp() * 1000)),
                    since_s=since,
                    new_lines=len(lines),
                    tail=scrub_lines(lines[-PROBE_TAIL_LINES:]),  # secrets and NULs never leave
                    observed_at=now,
                )
            )
        return probes


async def _watch_all(
    gateway: KubeGateway,
    settings: Settings,
    sink: ChangeSink,
    stop: asyncio.Event,
    tails: LogTails | PodHandover,
    *beside: Coroutine[Any, Any, None],
    metrics: WatchMetrics | None = None,
    listed: Listed | None = None,
    positions: WatchPositions | None = None,
) -> None:
    """One watch per resource kind (and namespace) into ``sink``, and ``beside`` them, until
    ``stop`` is set (``listed`` hears of each first complete list, ``positions`` tells where
    each may resume); then the log tails still being read again are let go. A job kind is
    watched once the API server serves its CRD (:func:`watchers.discovery.follow_served`)."""
    namespaces = _namespaces(settings)
    jobs = set(JOB_RESOURCES.values())
    try:
        async with asyncio.TaskGroup() as group:

            def start(resource: Resource) -> None:
                for namespace in namespaces if resource.namespaced else [None]:
                    group.create_task(
                        watch_resource(
                            gateway,
                            resource,
                            namespace,
                            sink,
                            settings.watcher,
                            stop,
                            metrics=metrics,
                            listed=listed,
                            positions=positions,
                        )
                    )

            for resource in WATCHED:
                if resource not in jobs:
                    start(resource)
            group.create_task(
                follow_served(
                    gateway, [r for r in WATCHED if r in jobs], start, settings.watcher.discovery_s, stop
                )
            )
            for task in beside:
                group.create_task(task)
    finally:
        await tails.close()


def _namespaces(settings: Settings) -> list[str | None]:
    """The namespaces watched one by one, or ``[None]``: cluster-wide."""
    return list(settings.kube.namespaces) or [None]


async def _stored_positions(nc: NATS, topology: Topology, settings: Settings) -> WatchPositions:
    """Where the watches of the last watcher stood, as far as stored."""
    names = [
        position_name(r, ns) for r in WATCHED for ns in (_namespaces(settings) if r.namespaced else [None])
    ]
    return WatchPositions(await read_positions(nc, topology, settings.nats, names))


async def probe_loop(
    probe: Callable[[], Awaitable[list[LogProbed]]],
    publisher: Publisher,
    metrics: PipelineMetrics,
    interval_s: float,
    stop: asyncio.Event,
) -> None:
    """Call ``probe`` (:meth:`ProgressProbe.probe`) every ``interval_s`` until ``stop`` and publish
    what it read (:func:`watchers.pipeline.publish_every`)."""
    await publish_every(probe, publisher, metrics, "log", interval_s, stop)


class UnwatchedDeletions:
    """Deletions of objects deleted while no watcher ran, told after each resource's first
    complete list (what was published of it and is gone now), published ahead of the queues.
    Kubernetes Events are not told: one expiring says nothing about a run."""

    @staticmethod
    def covers(resource: Resource) -> tuple[Literal["job", "pod"], tuple[JobKind, ...]]:
        """What a list of ``resource`` covers: the jobs of a kind, or the pods of the jobs of the
        kinds that share its label (none: Kubernetes Events)."""
        return ("job" if resource in JOB_RESOURCES.values() else "pod"), job_kinds_of(resource)

    def __init__(self, changes: VersionedPublisher, arrived: asyncio.Event) -> None:
        self._changes = changes
        self._arrived = arrived
        self._pending: list[BusEvent] = []
        self._telling: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    async def listed(self, resource: Resource, namespace: str | None, uids: frozenset[str] | None) -> None:
        """The first complete list of ``resource`` in ``namespace`` found ``uids``: compared with
        what was published once that is loaded, so the watch starts at once all the same
        (``None``: the watch resumed and tells its deletions itself; what was published of this
        list is let go)."""
        covers = self.covers(resource)
        if covers[1]:
            task = asyncio.create_task(self._tell(resource, namespace, covers, uids))
            self._telling.add(task)
            task.add_done_callback(self._telling.discard)

    async def _tell(
        self,
        resource: Resource,
        namespace: str | None,
        covers: tuple[Literal["job", "pod"], tuple[JobKind, ...]],
        uids: frozenset[str] | None,
    ) -> None:
        try:
            versions = await self._changes.loaded()
        except Exception as exc:  # the publish loop, which waits for the same load, fails with it
            log.warning(
                "%s: deletions while not watched not told, the versions did not load: %r", resource, exc
            )
            return
        what, kinds = covers
        gone = [event for kind in kinds for event in versions.gone(what, kind, namespace, uids)]
        if gone:
            where = "cluster-wide" if namespace is None else f"in {namespace!r}"
            log.info(
                "%s %s: %d deleted while not watched; publishing their deletion", resource, where, len(gone)
            )
            self._pending += gone
            self._arrived.set()

    def take(self, limit: int) -> list[BusEvent]:
        """Up to ``limit`` deletions to publish now."""
        taken, self._pending = self._pending[:limit], self._pending[limit:]
        return taken

    async def __aenter__(self) -> UnwatchedDeletions:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """The watchers stop: comparisons still waiting for the versions are dropped (the next
        start compares again)."""
        for task in self._telling:
            task.cancel()


def _settling(correlator: Correlator, listed: Listed) -> Listed:
    """``listed``, after the correlator's jobs seeded from what was published before are settled
    by the first complete list of their kind (or its resumed watch)."""

    async def settle(resource: Resource, namespace: str | None, uids: frozenset[str] | None) -> None:
        what, kinds = UnwatchedDeletions.covers(resource)
        if what == "job":
            correlator.settle(kinds, namespace)
        await listed(resource, namespace, uids)

    return settle


def _probes(
    gateway: KubeGateway,
    correlator: Correlator,
    settings: Settings,
    publisher: Publisher,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
) -> tuple[list[Callable[[], Coroutine[Any, Any, None]]], Callable[[WatchChange], None]]:
    """What starts the loops that probe running pods (their log output; their usage, when a
    Prometheus is configured) once the watches start, and what follows each pod change for them."""
    progress = ProgressProbe(gateway, correlator, settings.watcher)
    usage, track = reading_usage(settings.usage, correlator, publisher, metrics, stop, progress.track)
    interval = settings.watcher.progress_probe_s
    return [lambda: probe_loop(progress.probe, publisher, metrics, interval, stop), *usage], track


async def run_watchers(
    settings: Settings,
    gateway: KubeGateway,
    nc: NATS,
    topology: Topology,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
    watch_metrics: WatchMetrics | None = None,
) -> None:
    """Watch every resource kind and publish until ``stop`` is set."""
    queue: asyncio.Queue[Observation] = asyncio.Queue(maxsize=QUEUE_LIMIT)
    urgent: asyncio.Queue[Observation] = asyncio.Queue(maxsize=QUEUE_LIMIT)
    arrived = asyncio.Event()
    publisher = Publisher(nc.jetstream(), topology, settings.nats.publish_retry_s)
    changes = versioned(nc, topology, settings.nats, metrics)  # a relist republishes only what changed
    pipeline = Pipeline(
        changes.publish, metrics, settings.watcher.pending_ttl_s, stop=stop, unchanged=changes.unchanged
    )
    watch_metrics = watch_metrics or WatchMetrics(registry=metrics.registry)
    probes, track = _probes(gateway, pipeline.correlator, settings, publisher, metrics, stop)
    positions = await _stored_positions(nc, topology, settings)

    async def save_positions_if_published() -> None:
        """Once everything handed on is published (both lanes empty), store where the watches stand."""
        drained = queue.empty() and urgent.empty() and not handover.busy
        due = positions.due(time.monotonic(), POSITIONS_SAVE_S) if drained else {}
        if due:
            await save_positions(nc, topology, due)
            positions.saved(due)

    async def put(kind: ObjectKind, change: Change, obj: Mapping[str, Any], log_tail: Tails) -> None:
        lane = urgent if failure_signal(kind, obj) else queue
        lines = tuple(line for tail in log_tail.values() for line in tail)
        await lane.put(Observation(kind, change, obj, datetime.now(UTC), lines))
        arrived.set()

    pods = functools.partial(put, "pod")
    handover = PodHandover(LogTails(gateway, settings.watcher, pods), pods, TAIL_READS_IN_FLIGHT)

    async def sink(change: WatchChange) -> None:
        kind = object_kind({"kind": change.resource.kind})
        if kind == "pod":
            track(change)
            await handover(change.type, change.object)
        elif kind is not None:
            await put(kind, change.type, change.object, {})

    async def publish_loop() -> None:
        """Batches of up to MAX_BATCH, failure signals first: an OOM kill seen during a relist of
        thousands of pods goes out with the next batch, not after the relist. The first waits for
        the published versions (as its publish would), and the correlator starts from the jobs
        they hold: a pod of one is placed before the list of the jobs beside their resumed watch
        ends."""
        await pipeline.feed((), pipeline.correlator.seed((await changes.loaded()).jobs()))
        while not stop.is_set():
            if queue.empty() and urgent.empty() and not unwatched.pending:
                arrived.clear()
                await pause(arrived, 1.0)
                if queue.empty() and urgent.empty() and not unwatched.pending:
                    await pipeline.feed(())
                    await save_positions_if_published()
                    continue
            batch: list[Observation] = []
            for lane in (urgent, queue):
                while len(batch) < MAX_BATCH and not lane.empty():
                    batch.append(lane.get_nowait())
            await pipeline.feed(batch, unwatched.take(MAX_BATCH))
            await save_positions_if_published()
            await asyncio.sleep(0)  # a batch of unchanged objects publishes nothing: let the watches in

    async with UnwatchedDeletions(changes, arrived) as unwatched:
        await _watch_all(
            gateway,
            settings,
            sink,
            stop,
            handover,
            publish_loop(),
            *(start() for start in probes),
            metrics=watch_metrics,
            listed=_settling(pipeline.correlator, unwatched.listed),
            positions=positions,
        )


async def run_watchers_elected(
    settings: Settings,
    gateway: KubeGateway,
    nc: NATS,
    topology: Topology,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
) -> None:
    """:func:`run_watchers`, only while this replica holds the Lease (when election is enabled);
    beside it, whether it leads or not, this replica's share of the log follows (unless following
    is off)."""
    watch_metrics = WatchMetrics(registry=metrics.registry)

    async def watch() -> None:
        if not settings.leader.enabled:
            await run_watchers(settings, gateway, nc, topology, metrics, stop, watch_metrics)
            return
        elector = LeaderElector(gateway, settings.leader)
        await elector.run(
            lambda: run_watchers(settings, gateway, nc, topology, metrics, stop, watch_metrics), stop
        )

    if not settings.logs.follow or settings.logs.max_follows == 0:
        await watch()
        return
    following = SharedFollower(settings, gateway, nc, topology, watch_metrics)
    async with asyncio.TaskGroup() as group:
        group.create_task(watch())
        group.create_task(following.run(stop))


async def capture(settings: Settings, gateway: KubeGateway, out: IO[str], stop: asyncio.Event) -> None:
    """Record the live watch streams (with log tails) to JSON Lines until ``stop`` is set."""

    def record(change: Change, obj: Mapping[str, Any], tails: Tails) -> None:
        logs = {name: "\n".join(tail) for name, tail in tails.items()} or None
        write_record(out, change, obj, datetime.now(UTC), logs)
        out.flush()

    async def late(change: Change, pod: Mapping[str, Any], log_tail: Tails) -> None:
        record(change, pod, log_tail)  # the same version again, now with its tail

    tails = LogTails(gateway, settings.watcher, late)

    async def sink(change: WatchChange) -> None:
        log_tail = await tails.for_pod(change.type, change.object) if change.resource.kind == "Pod" else {}
        record(change.type, change.object, log_tail)

    await _watch_all(gateway, settings, sink, stop, tails)
