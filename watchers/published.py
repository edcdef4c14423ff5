"""What was last published for each watched object, and what a start learns from it.

After a restart, an upgrade or a leader change the watchers list everything again. Within the
stream's duplicate window JetStream drops what it already holds; past it, every unchanged
pod and job would reach every consumer again (34,000 messages for 1,000 jobs of 16 workers).
:class:`PublishedVersions` remembers, per object, the version last published in the
``published`` bucket (:mod:`controller.bus.versions` does its I/O). It is loaded once at start
and consulted before publishing: an observation whose object is at the version already published
is dropped. Log probes are never remembered (each is new by nature), and a deleted object is
forgotten, its key purged from the bucket
(:meth:`controller.bus.versions.PublishedBucket.forget_later`): the bucket, each start's load
and the watcher's memory hold the objects that exist, not every pod the cluster deleted in a
week.

A value is ``<resourceVersion>:<change>``, then for a job or a pod two more lines: which list
covers it (``<job kind>/<namespace>``: an MPIJob's pods are listed apart from a TrainJob's) and
its identity as JSON, what a deletion of it says besides uid and version (a job's kind,
namespace, name, phase, labels and times; a pod's job, name, namespace, role, index, phase,
node and creation time). A start keeps them as read and parses the identities of the objects
that are gone, and of the jobs (kind, namespace and name: the correlator knows every run
published before at once, :meth:`PublishedVersions.jobs`). The identity is what lets a start
publish the deletion of an object deleted while no watcher was running
(:meth:`PublishedVersions.gone`): a relist has no earlier list to compare with, only this
bucket. Kubernetes Events carry none: an Event expiring says nothing about a run.

A value an earlier version wrote (no identity) still counts as a version, and is rewritten
with the identity the next time a relist sees its object (:meth:`VersionedPublisher.publish`).
For a job already gone by then (deleted during the upgrade that brought identities) the last
observation of its name on the JOBS stream gives the identity, unless the name was reused
since; a pod, or a job whose name was reused, cannot be told deleted, and its key expires with
the bucket's ``max_age``.

The versions are written after their observations are stored, and nobody waits for them: one
lost with its server costs only a republish after the next restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from controller.bus.answering import until_answered
from controller.bus.client import NATS, KeyValue, NatsError
from controller.bus.publishing import Publisher
from controller.bus.versions import PublishedBucket, watch_bucket
from controller.contract.events import (
    BusEvent,
    JobObserved,
    JobRef,
    PodObserved,
    parse_event,
    resource_version_in,
    version_of,
)
from controller.contract.kubeflow import JobKind
from controller.contract.phases import Phases
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics

__all__ = ["PublishedVersions", "VersionedPublisher", "versioned", "watch_pods"]

log = logging.getLogger(__name__)

_UNREMEMBERED = frozenset({"log"})
_GONE = ":DELETED"


_CONTAINER_STATE = {
    "name": True,
    "init": True,
    "state": True,
    "restart_count": True,
    "exit_code": True,
    "reason": True,
}
_IDENTITIES: dict[str, tuple[type[JobObserved] | type[PodObserved], dict[str, Any]]] = {
    "job": (
        JobObserved,
        dict.fromkeys(
            ("kind", "namespace", "name", "phase", "labels", "created_at", "started_at", "finished_at"), True
        ),
    ),
    "pod": (
        PodObserved,
        {
            **dict.fromkeys(("job", "name", "namespace", "role", "replica", "index", "phase", "node"), True),
            "created_at": True,
            "containers": {"__all__": _CONTAINER_STATE},
        },
    ),
}
"""Per event type, the model and the fields a deletion of the object needs besides uid and version
(and, of a pod, what the log followers need: its replica and its containers' states,
:func:`watch_pods`)."""


def _key(event: BusEvent) -> str:
    return f"{event.type}.{event.uid}"


def _version(event: BusEvent) -> str:
    return version_of(event)  # a pod version republished with its late log tail is a change


def _same(held: str | None, version: str) -> bool:
    """Whether the version published (``held``) already says what ``version`` says: the same
    resourceVersion (and log tail), listed (``ADDED``) or watched (``MODIFIED``) alike — a
    relist reports as ADDED what the last watch published as MODIFIED. A deletion is news unless
    it was the deletion that was published."""
    if held is None:
        return False
    held_state, _, held_change = held.rpartition(":")
    state, _, change = version.rpartition(":")
    return held_state == state and (held_change == "DELETED") == (change == "DELETED")


def _value(event: BusEvent) -> str:
    """The bucket's value for ``event``: its version, then (a job, a pod) its list and identity."""
    if isinstance(event, JobObserved):
        scope = f"{event.kind}/{event.namespace}"
    elif isinstance(event, PodObserved):
        scope = f"{event.job.kind}/{event.namespace}"
    else:
        return _version(event)
    identity = event.model_dump_json(include=_IDENTITIES[event.type][1], exclude_none=True)
    return f"{_version(event)}\n{scope}\n{identity}"


async def watch_pods(kv: KeyValue) -> AsyncGenerator[tuple[str, PodObserved | None, bool]]:
    """The pods ``kv`` (the ``published`` bucket) holds, as the last observation published of
    each says them, then each pod published since: ``(uid, pod, caught_up)``, the pod ``None``
    once it is deleted, ``caught_up`` on the first entry with nothing pending after it (every pod
    held at the start told). What the log followers of
    every watcher replica learn the pods from (:mod:`watchers.sharing`). A value without identity
    (an earlier version's) or one that does not parse says ``None``."""
    async for key, value, last in watch_bucket(kv, "pod.>"):
        uid = key.partition(".")[2]
        yield uid, _pod_in(uid, value), last


def _pod_in(uid: str, value: bytes | None) -> PodObserved | None:
    """The pod a ``published`` value says, ``None`` if deleted or unreadable (an earlier
    version's value, without identity, is one)."""
    if not value:
        return None
    version, _, rest = value.decode(errors="replace").partition("\n")
    identity = rest.partition("\n")[2]
    if not identity or version.endswith(_GONE):
        return None
    try:
        return PodObserved.model_validate(
            {
                **json.loads(identity),
                "uid": uid,
                "resource_version": resource_version_in(version),
                "change": version.rpartition(":")[2],
                "observed_at": datetime.now(UTC),
            }
        )
    except (ValueError, TypeError) as exc:
        log.warning("published identity of pod %s does not parse; not followed: %s", uid, exc)
        return None


class PublishedVersions:
    """The last published version of every object, mirrored from a KV bucket."""

    def __init__(self, nc: NATS, topology: Topology) -> None:
        self._bucket = PublishedBucket(nc, topology)
        self._topology = topology
        self._known: dict[str, str] = {}
        """Key → the version last published (no identity: that is only read at start)."""
        self._identities: dict[str, str] | None = None
        """Key → list and identity, as loaded, of the objects a start has not compared with a list yet."""
        self._by_list: dict[tuple[str, str, str], dict[str, tuple[str, str]]] = {}
        """(kind, job kind, namespace) → uid → (key, identity JSON) of those objects, once
        :meth:`gone` sorted them."""
        self._legacy: set[str] = set()
        """Keys of jobs and pods whose value an earlier version wrote, without identity."""
        self._jobs: dict[str, str] = {}
        """Uid → identity JSON, as loaded, of the jobs published before this start (:meth:`jobs`)."""

    async def load(self, settings: NatsSettings, phases: Phases | None = None) -> int:
        """Create the bucket if needed and read it whole; returns how many objects it holds.

        Read again from the start if asked again (a read the cluster cut short). ``phases``: each
        step's time is marked there (:mod:`controller.contract.phases`)."""
        phases = phases if phases is not None else Phases()
        entries = await self._bucket.read(settings, phases)
        self._known.clear()
        self._legacy.clear()
        identities: dict[str, str] = {}
        self._identities = identities
        gone: list[str] = []
        for key, value, deleted in entries:
            version, _, identity = value.partition("\n")
            if deleted or version.endswith(_GONE):
                gone.append(key)  # an earlier version kept deleted objects: never needed again
                self._known.pop(key, None)
                identities.pop(key, None)
                self._legacy.discard(key)
                continue
            self._known[key] = version
            if identity:
                identities[key] = identity
            elif key.partition(".")[0] in _IDENTITIES:
                self._legacy.add(key)
        self._bucket.forget_read(gone)  # in the background: the load waits for no purge
        phases.mark(f"sorted ({len(gone)} deleted)")
        if self._legacy:
            recovered = await self._recover_jobs(identities)
            log.info(
                "%d published versions were written by an earlier version without identity: rewritten "
                "as their objects are listed; %d of them jobs whose identity their last observation on "
                "the bus gave; a deletion while no watcher ran cannot be told for the others",
                len(self._legacy),
                recovered,
            )
        self._jobs = {
            key.partition(".")[2]: text.partition("\n")[2]
            for key, text in identities.items()
            if key.startswith("job.")
        }
        return len(self._known)

    def jobs(self) -> list[JobRef]:
        """The runs of the jobs published before this start and not deleted since, as far as this
        start's load knew them: what lets the correlator place a pod of one at once after a restart,
        before any list of the jobs ended (:meth:`watchers.correlating.Correlator.seed`). Read once:
        a second call returns none. An identity that does not parse is logged and skipped."""
        jobs, self._jobs = self._jobs, {}
        refs: list[JobRef] = []
        for uid, identity in jobs.items():
            try:
                fields = json.loads(identity)
                refs.append(
                    JobRef.model_validate(
                        {"uid": uid, **{name: fields.get(name) for name in ("kind", "namespace", "name")}}
                    )
                )
            except (ValueError, TypeError, AttributeError) as exc:  # ValidationError is a ValueError
                log.warning("published identity of job %s does not parse; not indexed: %s", uid, exc)
        return refs

    async def _recover_jobs(self, identities: dict[str, str]) -> int:
        """Identities of jobs whose value an earlier version wrote, from the last observation of
        each job name on the bus (a name since reused by another run gives none); how many."""
        legacy = {key.partition(".")[2]: key for key in self._legacy if key.startswith("job.")}
        if not legacy:
            return 0
        recovered = 0
        try:
            async for data in self._bucket.last_per_subject(
                self._topology.stream("jobs"), self._topology.job_observations()
            ):
                with contextlib.suppress(ValueError):  # not ours to judge here: the consumers dead-letter it
                    event = parse_event(data)
                    key = legacy.get(event.uid)
                    if key is not None and isinstance(event, JobObserved) and event.change != "DELETED":
                        identities[key] = _value(event).partition("\n")[2]
                        recovered += 1
        except (NatsError, TimeoutError) as exc:  # the JOBS stream missing or out of reach: none
            log.warning("identities of jobs published by an earlier version not read: %r", exc)
        return recovered

    def changed(self, events: Sequence[BusEvent]) -> list[BusEvent]:
        """``events`` less those whose object was already published at that version."""
        return [
            e for e in events if e.type in _UNREMEMBERED or not _same(self._known.get(_key(e)), _version(e))
        ]

    def unchanged(self, kind: str, uid: str, resource_version: str) -> bool:
        """Whether an observation of object ``uid`` (event type ``kind``) at ``resource_version``,
        without a log tail, says nothing the version published did not: what :meth:`changed`
        would drop, known before the observation is built. A value an earlier version wrote is
        never unchanged (it is rewritten with its identity when seen)."""
        key = f"{kind}.{uid}"
        held = self._known.get(key)
        if held is None or key in self._legacy:
            return False
        state, _, change = held.rpartition(":")
        return change != "DELETED" and state in (resource_version, f"{resource_version}+log")

    def legacy(self, events: Sequence[BusEvent]) -> list[BusEvent]:
        """Those of ``events`` already published at that version, but whose stored value an
        earlier version wrote (without identity)."""
        if not self._legacy:
            return []
        return [e for e in events if _key(e) in self._legacy and _same(self._known.get(_key(e)), _version(e))]

    def gone(
        self,
        kind: Literal["job", "pod"],
        job_kind: JobKind,
        namespace: str | None,
        listed: Collection[str] | None,
    ) -> list[BusEvent]:
        """The deletions of the jobs of ``job_kind``, or the pods of such jobs, in ``namespace``
        (``None``: in all) published before this start and not in ``listed`` (the uids a
        complete list of them found): deleted while no watcher was running. ``listed`` ``None``:
        the watch resumed from where the last one stood and tells those deletions itself; none.

        Asked once per kind and namespace, after the first complete list of them since
        :meth:`load`; later lists compare with the watch's own memory, so those objects are
        dropped from here. An identity that does not parse is logged and skipped."""
        if self._identities is None:
            raise RuntimeError("gone() before load()")
        if self._identities:
            self._sort_identities(self._identities)
            self._identities = {}
        scopes = [s for s in self._by_list if s[:2] == (kind, job_kind) and namespace in (None, s[2])]
        now = datetime.now(UTC)
        deletions: list[BusEvent] = []
        for scope in scopes:
            for uid, (key, identity) in self._by_list.pop(scope).items():
                if listed is None or uid in listed or key not in self._known:
                    continue
                model = _IDENTITIES[kind][0]
                version = self._known.get(key, "")
                try:
                    deletions.append(
                        model.model_validate(
                            {
                                **json.loads(identity),
                                "uid": uid,
                                "resource_version": resource_version_in(version),
                                "change": "DELETED",
                                "observed_at": now,
                            }
                        )
                    )
                except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                    log.warning("published identity of %s does not parse; no deletion for it: %s", key, exc)
        return deletions

    def _sort_identities(self, identities: dict[str, str]) -> None:
        """Group loaded identities by the list that covers them: kind, job kind and namespace."""
        for key, text in identities.items():
            kind, _, uid = key.partition(".")
            scope, _, identity = text.partition("\n")
            job_kind, _, namespace = scope.partition("/")
            self._by_list.setdefault((kind, job_kind, namespace), {})[uid] = (key, identity)

    async def remember(self, events: Sequence[BusEvent]) -> None:
        """Record ``events`` as published (puts nobody waits for); a lost one costs a republish later.

        A deleted object is forgotten: no relist lists it again, and kept it would grow the
        bucket, each start's load and the watcher's memory with every pod the cluster ever
        deleted. Its key is purged in the background (a purge is a request; awaited here it held
        the publish loop back and observations queued up); its last value says ``DELETED``, so a
        purge lost with the process is done by the next load.

        Only the newest of several versions of one object in ``events`` is written (one revision
        is kept: the older ones would be stored and replaced at once); a pod's states handed
        over in one batch cost the pipeline and the server one put."""
        newest: dict[str, BusEvent] = {}
        for event in events:
            if event.type not in _UNREMEMBERED:
                newest[_key(event)] = event
        gone: list[tuple[str, bytes]] = []
        try:
            for key, event in newest.items():
                value = _value(event).encode()
                await self._bucket.put(key, value)
                self._legacy.discard(key)
                if event.change == "DELETED":
                    self._known.pop(key, None)
                    gone.append((key, value))
                else:
                    self._known[key] = _version(event)
        except NatsError as exc:  # the client's buffer is full while it reconnects: known next time
            log.warning("published versions not recorded: %r", exc)
        self._bucket.forget_later(gone)


class VersionedPublisher:
    """Publishes observations whose object changed since it was last published, then remembers them."""

    def __init__(
        self,
        publisher: Publisher,
        versions: PublishedVersions,
        metrics: PipelineMetrics,
        loaded: Awaitable[object] | None = None,
    ) -> None:
        self._publisher = publisher
        self._versions = versions
        self._metrics = metrics
        self._loaded = loaded

    async def publish(self, observed: Sequence[BusEvent]) -> int:
        """Publish what changed (once the versions are loaded); returns how many were new to the stream."""
        await self.loaded()
        changed = self._versions.changed(observed)
        if len(changed) < len(observed):
            self._metrics.skipped_objects.labels("unchanged").inc(len(observed) - len(changed))
            # values an earlier version wrote get their identity now, without a republish
            await self._versions.remember(self._versions.legacy(observed))
        if not changed:
            return 0
        new = await self._publisher.publish(changed)
        await self._versions.remember(changed)
        return new

    def unchanged(self, kind: str, uid: str, resource_version: str) -> bool:
        """:meth:`PublishedVersions.unchanged`, once the versions are loaded (``False`` before)."""
        loaded = self._loaded
        if loaded is not None and not (
            isinstance(loaded, asyncio.Future)
            and loaded.done()
            and not loaded.cancelled()
            and loaded.exception() is None
        ):
            return False
        return self._versions.unchanged(kind, uid, resource_version)

    async def loaded(self) -> PublishedVersions:
        """The published versions, once loaded."""
        if self._loaded is not None:
            await self._loaded
        return self._versions


def versioned(
    nc: NATS, topology: Topology, settings: NatsSettings, metrics: PipelineMetrics
) -> VersionedPublisher:
    """A publisher that skips what was published before the last restart. The bucket is loaded
    in the background, while the watchers list: the first publish waits for it."""
    publisher = Publisher(nc.jetstream(), topology, settings.publish_retry_s)
    versions = PublishedVersions(nc, topology)

    async def load() -> None:
        started, phases = asyncio.get_running_loop().time(), Phases()
        held = await until_answered(
            lambda: versions.load(settings, phases), "published versions", missing=True
        )
        seconds = asyncio.get_running_loop().time() - started
        log.info("%d published versions loaded in %.2fs (%s)", held, seconds, phases)

    return VersionedPublisher(publisher, versions, metrics, asyncio.ensure_future(load()))
