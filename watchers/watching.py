"""The list-then-watch loop: one per watched resource, never one per job.

:func:`watch_resource` keeps one resource (say, all pods of MPIJobs, cluster-wide) mirrored
into a sink of :class:`WatchChange` s, through every disturbance an API server produces:

* list in pages of ``list_page_size`` (as client-go's pager does; the pages are read back to
  back, so the watch starts as soon as the API server has answered), pass every object on as
  ``ADDED``, then watch from the list's resourceVersion;
* a watch that ends normally (its server-side ``timeoutSeconds`` passed) resumes from the
  last resourceVersion seen, so nothing is missed and nothing repeated;
* ``BOOKMARK`` events only advance that resourceVersion, so a quiet resource resumes from a
  recent version instead of an expired one;
* ``410 Gone`` (the version was compacted away) relists: every object known before but absent
  now comes out first as a synthetic ``DELETED`` carrying its last known state (the deletion
  happened while we were not looking), then new objects as ``ADDED`` and changed ones
  (another resourceVersion) as ``MODIFIED``; unchanged objects are not repeated;
* the first list has nothing of its own to compare with: once it is complete (every page),
  ``listed`` is told which uids it found, so the caller can compare them with what it published
  before the loop started (objects deleted while no watcher ran; see
  :meth:`watchers.published.PublishedVersions.gone`) — unless the watch resumed (below),
  which brings those deletions itself;
* a watch with a stored position (``positions``: where the previous watcher had handed every
  change on, :mod:`watchers.positions`) does not wait for that list: it watches from the
  position at once — a failure right after a restart is seen at once, not after a list of
  thousands of pods — and lists beside it. The two are merged by resourceVersion, which
  Kubernetes defines as comparable within a resource (KEP-5504; :func:`controller.contract.kubeflow.compare`):
  a listed object goes on only if it is newer than what the watch already gave for it, and a
  watched change only if it is newer than what the list gave; an object the watch saw deleted
  is not brought back by the older list. A position the server no longer serves (``410 Gone``)
  lists first, as a first start does;
* connection errors and 5xx answers reconnect with exponential backoff and jitter (reset by
  the next success); unknown event types and objects without ``metadata.uid`` are logged,
  counted and skipped, never fatal;
* setting ``stop`` ends the loop promptly: the open HTTP response is shut down;
* what the loop keeps of each object between its changes (to compare a relist with) is the
  whole object, except for Nodes, of which only name, uid and version are kept
  (:func:`watchers.nodes.skeleton`): the node watch sees every node of the cluster, and a Node
  weighs tens of KiB.

The Kubernetes client is synchronous: each watch request is read by a short-lived thread that
hands events to the event loop through a bounded queue (``call_soon_threadsafe``), so a slow
sink slows the reading of the socket instead of growing memory. Errors surface as our own
:mod:`controller.kube.gateway` classes; the gateway is a Protocol so tests can also feed canned streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from controller.contract.backoff import Backoff
from controller.contract.kubeflow import compare
from controller.contract.settings import WatcherSettings
from controller.kube.errors import APIError, APIGoneError, APIUnavailableError
from controller.kube.gateway import ListPage
from controller.kube.resources import EVENT_TYPES, NODES, RawObject, RawWatchEvent, Resource, WatchEventType
from watchers.metrics import WatchMetrics
from watchers.nodes import skeleton
from watchers.positions import WatchPositions

__all__ = ["Backoff", "Listed", "WatchChange", "WatchGateway", "WatchStreamLike", "watch_resource"]

log = logging.getLogger(__name__)

HANDOFF_CAPACITY = 1024
"""Events read ahead of the sink per watch; beyond it the reading thread waits (TCP backpressure)."""

LIST_RESTARTS = 3
"""How often a paginated list whose ``continue`` token expired starts again before it counts as an error."""

YIELD_EVERY = 100
"""Listed objects handed to the sink between two turns of the event loop: a sink that never
has to wait would otherwise hold every other watch, and the publish loop, for the whole list."""

READER_JOIN_TIMEOUT_S = 2.0
"""How long a finished watch waits for its reading thread, so no request outlives the loop by much."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WatchChange:
    """One change of one object, as the sink receives it."""

    resource: Resource
    type: WatchEventType
    object: RawObject


ChangeSink = Callable[[WatchChange], Awaitable[None]]
Listed = Callable[[Resource, str | None, frozenset[str] | None], Awaitable[None]]
"""Told the resource, the namespace (``None``: cluster-wide) and the uids of a first complete
list; ``None`` instead of the uids when the watch resumed from its position, so it tells what
was deleted meanwhile itself."""


class WatchStreamLike(Protocol):
    """Raw watch events that another thread can close (see :class:`controller.kube.gateway.WatchStream`)."""

    def __iter__(self) -> Iterator[RawWatchEvent]: ...
    def __next__(self) -> RawWatchEvent: ...
    def close(self) -> None: ...


class WatchGateway(Protocol):
    """The two calls the loop needs (:class:`controller.kube.gateway.KubeGateway` implements them)."""

    def list_page(
        self, resource: Resource, namespace: str | None, limit: int = 0, continue_token: str | None = None
    ) -> ListPage: ...
    def watch(
        self, resource: Resource, namespace: str | None, resource_version: str, timeout_s: float
    ) -> WatchStreamLike: ...


async def watch_resource(
    gateway: WatchGateway,
    resource: Resource,
    namespace: str | None,
    sink: ChangeSink,
    settings: WatcherSettings,
    stop: asyncio.Event,
    *,
    metrics: WatchMetrics | None = None,
    rng: Callable[[], float] = random.random,
    listed: Listed | None = None,
    positions: WatchPositions | None = None,
) -> None:
    """Mirror ``resource`` (cluster-wide when ``namespace`` is None) into ``sink`` until ``stop`` is set.

    ``listed`` hears of the first complete list's uids, after its objects went to ``sink``.
    ``positions`` gives where to resume the watch without listing first, and hears how far it got.
    Returns when stopped; raises only what it cannot recover from (an exception of the sink or
    of ``listed``, a bug). Every API failure is retried: a 403 or a missing CRD may be fixed
    while we wait.
    """
    await _WatchLoop(
        gateway, resource, namespace, sink, settings, stop, metrics or WatchMetrics(), rng, listed, positions
    ).run()


class _Stopped(Exception):
    """Unwinds the loop when ``stop`` is set while it waits for the API."""


@dataclass(frozen=True, slots=True)
class _Ended:
    """The last item a reading thread hands over: the stream ended, normally or with ``error``."""

    error: Exception | None = None


def _whole(obj: RawObject) -> RawObject:
    return obj


def _uid(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) and uid else None


def _resource_version(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) and rv else None


class _Reader:
    """Reads one watch stream in a thread and hands events to the event loop through a bounded queue."""

    def __init__(self, stream: WatchStreamLike, loop: asyncio.AbstractEventLoop) -> None:
        self.stream = stream
        self.queue: asyncio.Queue[RawWatchEvent | _Ended] = asyncio.Queue()
        self._loop = loop
        self._slots = threading.Semaphore(HANDOFF_CAPACITY)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    async def get(self) -> RawWatchEvent | _Ended:
        item = await self.queue.get()
        self._slots.release()
        return item

    async def wait_closed(self) -> None:
        """Let the thread finish (it may be in a request the stream could not abort yet), briefly."""
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join, READER_JOIN_TIMEOUT_S)

    def stop(self) -> None:
        """From the event loop: close the stream and hand over an end marker at once."""
        if not self._stopped.is_set():
            self._stopped.set()
            self.stream.close()
            self.queue.put_nowait(_Ended())

    def _run(self) -> None:
        try:
            for event in self.stream:
                while not self._slots.acquire(timeout=0.25):
                    if self._stopped.is_set():
                        return
                self._post(event)
            self._post(_Ended())
        except Exception as exc:  # handed over and re-raised in the event loop
            self._post(_Ended(exc))

    def _post(self, item: RawWatchEvent | _Ended) -> None:
        if self._stopped.is_set():
            return
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self._stopped.set()


class _WatchLoop:
    def __init__(
        self,
        gateway: WatchGateway,
        resource: Resource,
        namespace: str | None,
        sink: ChangeSink,
        settings: WatcherSettings,
        stop: asyncio.Event,
        metrics: WatchMetrics,
        rng: Callable[[], float],
        listed: Listed | None = None,
        positions: WatchPositions | None = None,
    ) -> None:
        self.gateway = gateway
        self.resource = resource
        self.namespace = namespace
        self.sink = sink
        self.settings = settings
        self.stop = stop
        self.backoff = Backoff(settings.backoff_initial_s, settings.backoff_max_s, rng)
        self.known: dict[str, RawObject] = {}  # uid -> last object seen: what a relist compares against
        self.keep: Callable[[RawObject], RawObject] = skeleton if resource == NODES else _whole
        self.resource_version: str | None = None  # None: list (again) before watching
        self.listed = False
        self.on_listed = listed
        self.positions = positions
        self.resumable = positions is not None  # the first start may resume from a stored position
        self.beside: asyncio.Task[None] | None = None  # the list beside a resumed watch
        self.tombstones: dict[str, str | None] | None = None
        """While a list runs beside the watch: uid → resourceVersion of the deletions it watched."""
        self.unproven = False  # resumed, and the server has not yet accepted the position
        self.merged = False  # the list beside the resumed watch is merged
        self.where = "cluster-wide" if namespace is None else f"in {namespace!r}"
        label = str(resource)
        self.m_events = {t: metrics.events.labels(label, t) for t in EVENT_TYPES}
        self.m_bookmarks = metrics.bookmarks.labels(label)
        self.m_lists = metrics.lists.labels(label)
        self.m_relists = metrics.relists.labels(label)
        self.m_known = metrics.known.labels(label)
        self.m_skipped = metrics.skipped
        self.m_errors = metrics.errors

    async def run(self) -> None:
        log.info("watching %s %s", self.resource, self.where)
        try:
            while not self.stop.is_set():
                try:
                    if self.resource_version is None and not self._resume():
                        await self._list()
                    await self._watch()
                except APIGoneError as exc:
                    await self._end_beside()
                    if self.resource_version is None:  # the list itself said 410: do not spin
                        await self._retry_later(exc)
                    else:
                        log.info(
                            "%s %s: resourceVersion %s expired; relisting",
                            self.resource,
                            self.where,
                            self.resource_version,
                        )
                        self.resource_version = None
                except APIError as exc:
                    await self._retry_later(exc)
        except _Stopped:
            pass
        finally:
            await self._end_beside()
            log.info("stopped watching %s %s", self.resource, self.where)

    def _resume(self) -> bool:
        """Watch from the stored position with a list beside, once, on the first start only."""
        position = self.positions.resume_from(self.resource, self.namespace) if self.positions else None
        if not self.resumable or position is None:
            return False
        self.resumable = False
        log.info("%s %s: resuming the watch from resourceVersion %s", self.resource, self.where, position)
        self.resource_version = position
        self.tombstones = {}
        self.unproven, self.merged = True, False
        self.beside = asyncio.create_task(self._list_beside(position), name=f"list {self.resource}")
        return True

    async def _end_beside(self) -> None:
        """Stop a list still running beside the watch (the watch failed or stops). A resume the
        server refused is void: what follows is a first list."""
        beside, self.beside, self.tombstones = self.beside, None, None
        if self.unproven:
            self.unproven = self.merged = False
        if beside is not None and not beside.done():
            beside.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beside

    async def _retry_later(self, exc: APIError) -> None:
        self.m_errors.labels(str(self.resource), type(exc).__name__).inc()
        delay = self.backoff.next_delay()
        level = logging.WARNING if isinstance(exc, APIUnavailableError) else logging.ERROR
        log.log(level, "%s %s: %s; retrying in %.2fs", self.resource, self.where, exc, delay)
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=delay)
        except TimeoutError:
            return

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """Run a blocking call in a thread; give up waiting (raise _Stopped) as soon as ``stop`` is set."""
        call = asyncio.ensure_future(asyncio.to_thread(function, *args))
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({call, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if call.done():
            return call.result()
        call.add_done_callback(lambda done: done.cancelled() or done.exception())  # nobody waits any more
        raise _Stopped

    # -- list ---------------------------------------------------------------------------------------

    async def _list(self) -> None:
        started = time.monotonic()
        items, resource_version, pages = await self._in_thread(self._read_pages)
        fresh = self._by_uid(items)
        previous, self.known = self.known, {uid: self.keep(obj) for uid, obj in fresh.items()}
        if self.listed:
            self.m_relists.inc()
            for uid, last in previous.items():
                if uid not in fresh:
                    await self._emit("DELETED", last)
        for n, (uid, obj) in enumerate(fresh.items(), 1):
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # the other watches (a failure) and the publish loop go on meanwhile
            old = previous.get(uid)
            if old is None:
                await self._emit("ADDED", obj)
            elif _resource_version(old) != _resource_version(obj):
                await self._emit("MODIFIED", obj)
        if not self.listed and self.on_listed is not None:
            await self.on_listed(self.resource, self.namespace, frozenset(fresh))
        self.m_known.set(len(self.known))
        self.m_lists.inc()
        self.listed = True
        self._advance(resource_version)
        self.backoff.reset()
        log.info(
            "%s %s: listed %d objects in %d pages at resourceVersion %s in %.2fs",
            self.resource,
            self.where,
            len(fresh),
            pages,
            resource_version,
            time.monotonic() - started,
        )

    async def _list_beside(self, position: str) -> None:
        """List while the watch resumed from ``position`` runs, and hand on only what the watch
        has not already given newer (see the module's docstring)."""
        started = time.monotonic()
        while True:
            try:
                items, resource_version, pages = await self._in_thread(self._read_pages)
                break
            except APIError as exc:
                await self._retry_later(exc)
            except _Stopped:
                return
            if self.stop.is_set():
                return
        fresh = self._by_uid(items)
        handed = 0
        try:
            for n, (uid, obj) in enumerate(fresh.items(), 1):
                if n % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # the watch beside (a failure) goes on meanwhile
                if not self._listed_is_newer(uid, obj):
                    continue
                old = self.known.get(uid)
                self.known[uid] = self.keep(obj)
                await self._emit("ADDED" if old is None else "MODIFIED", obj)
                handed += 1
            self.tombstones = None
            self.merged = True
            await self._settle_resume()
        except _Stopped:
            return
        self.m_known.set(len(self.known))
        self.m_lists.inc()
        log.info(
            "%s %s: listed %d objects in %d pages at resourceVersion %s beside the watch resumed from %s "
            "in %.2fs; %d were newer than what the watch had given",
            self.resource,
            self.where,
            len(fresh),
            pages,
            resource_version,
            position,
            time.monotonic() - started,
            handed,
        )

    async def _settle_resume(self) -> None:
        """Once the list beside is merged and the server took the position (the watch delivered
        something), the resume stands: this counts as the first list, and ``listed`` hears that
        the watch tells the deletions made meanwhile itself. Until then a ``410 Gone`` can still
        void it, and the list that follows is compared with what was published, as on any start."""
        if self.merged and not self.unproven and not self.listed:
            self.listed = True
            if self.on_listed is not None:
                await self.on_listed(self.resource, self.namespace, None)

    def _listed_is_newer(self, uid: str, obj: RawObject) -> bool:
        """Whether a listed object is newer than what the resumed watch gave for it (its change
        or its deletion); ``True`` when the versions cannot be ordered."""
        old = self.known.get(uid)
        if old is not None:
            order = compare(_resource_version(obj), _resource_version(old))
            return order is None or order > 0
        tombstones = self.tombstones or {}
        if uid not in tombstones:
            return True
        order = compare(_resource_version(obj), tombstones[uid])
        return order is not None and order > 0  # a recreation can't reuse the uid: never, in practice

    def _by_uid(self, items: list[RawObject]) -> dict[str, RawObject]:
        """Listed objects by uid; one without a uid is skipped and counted."""
        fresh: dict[str, RawObject] = {}
        for obj in items:
            uid = _uid(obj)
            if uid is None:
                self._skip("malformed", "listed object without metadata.uid", obj)
            else:
                fresh[uid] = obj
        return fresh

    def _read_pages(self) -> tuple[list[RawObject], str, int]:
        """Every page of one consistent list, read back to back (in a thread): the objects, the
        list's resourceVersion and how many pages it took. A list whose ``continue`` token
        expired midway starts again, a few times, before that counts as an error."""
        items: list[RawObject] = []
        token: str | None = None
        resource_version, pages, restarts = "", 0, 0
        while True:
            try:
                page = self.gateway.list_page(
                    self.resource, self.namespace, self.settings.list_page_size, token
                )
            except APIGoneError:
                if token is None or restarts >= LIST_RESTARTS:
                    raise
                restarts += 1
                log.info(
                    "%s %s: list expired after %d pages; listing again", self.resource, self.where, pages
                )
                items, token, pages = [], None, 0
                continue
            if token is None:
                resource_version = page.resource_version
            items += page.items
            pages += 1
            token = page.continue_token
            if not token:
                return items, resource_version, pages

    # -- watch --------------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Watch from the current resourceVersion until the server ends the stream, then again."""
        while not self.stop.is_set() and self.resource_version is not None:
            stream = self.gateway.watch(
                self.resource, self.namespace, self.resource_version, self.settings.watch_timeout_s
            )
            await self._consume(stream)

    async def _consume(self, stream: WatchStreamLike) -> None:
        reader = _Reader(stream, asyncio.get_running_loop())
        stopped = asyncio.ensure_future(self.stop.wait())
        stopped.add_done_callback(lambda _: reader.stop())
        reader.start()
        try:
            while True:
                item = await reader.get()
                if self.stop.is_set():
                    raise _Stopped
                if isinstance(item, _Ended) and item.error is not None:
                    raise item.error
                self.backoff.reset()
                if self.unproven:  # the server took the position
                    self.unproven = False
                    await self._settle_resume()
                if isinstance(item, _Ended):
                    return
                await self._handle(item)
        finally:
            stopped.cancel()
            reader.stop()
            await reader.wait_closed()

    async def _handle(self, event: RawWatchEvent) -> None:
        event_type = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if event_type == "BOOKMARK":
            self._advance(_resource_version(obj))
            self.m_bookmarks.inc()
            return
        if event_type not in EVENT_TYPES:
            self._skip("unknown-type", f"unsupported event type {event_type!r}", event)
            return
        uid = _uid(obj)
        if uid is None:
            self._skip("malformed", f"{event_type} event without metadata.uid", obj)
            self._advance(_resource_version(obj))
            return
        if event_type == "DELETED":
            self.known.pop(uid, None)
            if self.tombstones is not None:
                self.tombstones[uid] = _resource_version(obj)
        else:
            old = self.known.get(uid)
            if old is not None and compare(_resource_version(obj), _resource_version(old)) in (-1, 0):
                self._advance(_resource_version(obj))  # the list beside gave it newer already
                return
            self.known[uid] = self.keep(obj)
        self.m_known.set(len(self.known))
        await self._emit(cast(WatchEventType, event_type), obj)
        self._advance(_resource_version(obj))

    def _advance(self, resource_version: str | None) -> None:
        """Every change up to ``resource_version`` was handed to the sink."""
        if resource_version:
            self.resource_version = resource_version
            if self.positions is not None:
                self.positions.handed(self.resource, self.namespace, resource_version)

    async def _emit(self, event_type: WatchEventType, obj: RawObject) -> None:
        if self.stop.is_set():
            raise _Stopped
        await self.sink(WatchChange(self.resource, event_type, obj))
        self.m_events[event_type].inc()

    def _skip(self, reason: str, what: str, payload: object) -> None:
        self.m_skipped.labels(str(self.resource), reason).inc()
        log.warning("%s %s: skipping %s: %.300r", self.resource, self.where, what, payload)
