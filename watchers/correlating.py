"""Attach every pod and Kubernetes event to the run (job uid) it belongs to.

Jobs, pods and events come from independent watches, so a worker pod or a
``FailedScheduling`` event can arrive before its MPIJob. The correlator keeps a small index
(job name → uid, pod name → job) and holds what it cannot place yet for
``pending_ttl_s``; anything still unplaced after that is not ours (a pod of another
workload, an event about some Deployment) and is dropped and counted. Deleted jobs and pods
stay in the index for the same grace period, so late events about them still find their run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from controller.contract.clock import Monotonic
from controller.contract.events import BusEvent, Change, JobRef
from controller.contract.kubeflow import JobKind
from watchers.normalizing import (
    JOB_KINDS,
    involved_object,
    normalize_event,
    normalize_job,
    normalize_pod,
    pod_owner,
)

log = logging.getLogger(__name__)

ObjectKind = Literal["job", "pod", "event"]


@dataclass(frozen=True)
class Observation:
    """One raw object change as a watch (or a replayed file) delivered it."""

    kind: ObjectKind
    change: Change
    object: Mapping[str, Any]
    observed_at: datetime
    log_tail: tuple[str, ...] = ()


@dataclass
class _Held:
    observation: Observation
    deadline: float


@dataclass
class Correlator:
    """Turns observations into bus events, in an order where every job precedes its pods."""

    pending_ttl_s: float
    clock: Monotonic
    jobs: dict[tuple[str, JobKind, str], JobRef] = field(default_factory=dict)
    jobs_by_uid: dict[str, JobRef] = field(default_factory=dict)
    pods: dict[tuple[str, str], JobRef] = field(default_factory=dict)
    dropped: int = 0
    _held: dict[tuple[str, ...], list[_Held]] = field(default_factory=dict)  # by what they wait for
    _forget: list[tuple[float, Callable[[], None]]] = field(default_factory=list)

    def observe(self, observation: Observation) -> list[BusEvent]:
        """Events ready to publish now; what cannot be placed yet is held."""
        if observation.kind == "job":
            return self._job(observation)
        placed = self._place(observation)
        if placed is None:
            held = _Held(observation, self.clock() + self.pending_ttl_s)
            self._held.setdefault(_waits_for(observation), []).append(held)
            return []
        return placed + self._release(_pod_key(observation.object)) if observation.kind == "pod" else placed

    def expire(self) -> int:
        """Drop held observations and forget deleted objects past their grace period."""
        now = self.clock()
        expired = [held for waiting in self._held.values() for held in waiting if held.deadline <= now]
        for key in list(self._held):
            self._held[key] = [held for held in self._held[key] if held.deadline > now]
            if not self._held[key]:
                del self._held[key]
        for held in expired:
            log.debug("no run for %s %s; dropped", held.observation.kind, _name(held.observation.object))
        self.dropped += len(expired)
        due = [forget for at, forget in self._forget if at <= now]
        self._forget = [(at, forget) for at, forget in self._forget if at > now]
        for forget in due:
            forget()
        return len(expired)

    @property
    def held(self) -> int:
        return sum(len(waiting) for waiting in self._held.values())

    def _job(self, observation: Observation) -> list[BusEvent]:
        event = normalize_job(observation.object, observation.change, observation.observed_at)
        ref = event.ref
        key = (ref.namespace, ref.kind, ref.name)
        self.jobs[key] = ref
        self.jobs_by_uid[ref.uid] = ref
        if observation.change == "DELETED":
            self._later(lambda: self._forget_job(key, ref))
        return [event, *self._release(("job", *key))]

    def _release(self, key: tuple[str, ...]) -> list[BusEvent]:
        """Place what waited for ``key``: a new job frees its pods and events, a new pod its events."""
        released: list[BusEvent] = []
        keys = [key]
        while keys:
            for held in self._held.pop(keys.pop(), []):
                placed = self._place(held.observation)
                if placed is None:  # waits for something else now (a pod whose job is another uid)
                    self._held.setdefault(_waits_for(held.observation), []).append(held)
                    continue
                released += placed
                if held.observation.kind == "pod":
                    keys.append(_pod_key(held.observation.object))
        return released

    def _forget_job(self, key: tuple[str, JobKind, str], ref: JobRef) -> None:
        if self.jobs.get(key) == ref:
            del self.jobs[key]
        self.jobs_by_uid.pop(ref.uid, None)

    def _forget_pod(self, key: tuple[str, str], job: JobRef) -> None:
        if self.pods.get(key) == job:
            del self.pods[key]

    def _later(self, forget: Callable[[], None]) -> None:
        self._forget.append((self.clock() + self.pending_ttl_s, forget))

    def _pod_job(self, obj: Mapping[str, Any]) -> JobRef | None:
        owner = pod_owner(obj)
        if owner is None:
            return None
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("kind") == owner["kind"] and ref.get("uid") in self.jobs_by_uid:
                return self.jobs_by_uid[ref["uid"]]
        namespace = (obj.get("metadata") or {}).get("namespace", "default")
        return self.jobs.get((namespace, owner["kind"], owner["name"]))

    def _place(self, observation: Observation) -> list[BusEvent] | None:
        obj = observation.object
        if observation.kind == "pod":
            if pod_owner(obj) is None:
                return []  # not a launcher or worker: someone else's pod
            job = self._pod_job(obj)
            if job is None:
                return None
            meta = obj.get("metadata") or {}
            pod_key = (str(meta.get("namespace", job.namespace)), str(meta.get("name")))
            self.pods[pod_key] = job
            if observation.change == "DELETED":
                self._later(lambda: self._forget_pod(pod_key, job))
            return [
                normalize_pod(obj, observation.change, job, observation.observed_at, observation.log_tail)
            ]
        involved = involved_object(obj)
        namespace = str((obj.get("metadata") or {}).get("namespace", "default"))
        event_job: JobRef | None = None
        if involved.kind in JOB_KINDS:
            event_job = self.jobs_by_uid.get(involved.uid or "") or self.jobs.get(
                (namespace, JOB_KINDS[involved.kind], involved.name)
            )
        elif involved.kind == "Pod":
            event_job = self.pods.get((namespace, involved.name))
        else:
            return []  # about a Deployment, a Node, …: not ours
        if event_job is None:
            return None
        return [normalize_event(obj, observation.change, event_job, observation.observed_at)]


def _pod_key(obj: Mapping[str, Any]) -> tuple[str, ...]:
    meta = obj.get("metadata") or {}
    return ("pod", str(meta.get("namespace", "default")), str(meta.get("name")))


def _waits_for(observation: Observation) -> tuple[str, ...]:
    """The key of the object whose arrival may place a held pod or event."""
    obj = observation.object
    namespace = str((obj.get("metadata") or {}).get("namespace", "default"))
    if observation.kind == "pod":
        owner = pod_owner(obj)
        return ("job", namespace, owner["kind"], owner["name"]) if owner else ("none",)
    involved = involved_object(obj)
    if involved.kind in JOB_KINDS:
        return ("job", namespace, JOB_KINDS[involved.kind], involved.name)
    return ("pod", namespace, involved.name)


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}"
