"""Attach every pod and Kubernetes event to the run (job uid) it belongs to.

Jobs, pods and events come from independent watches, so a worker pod or a
``FailedScheduling`` event can arrive before its MPIJob. The correlator keeps a small index
(job name → uid, pod name → job) and holds what it cannot place yet for
``pending_ttl_s``; anything still unplaced after that is not ours (a pod of another
workload, an event about some Deployment) and is dropped and counted. Deleted jobs and pods
stay in the index for the same grace period, so late events about them still find their run.

After a restart the index starts from the jobs published before it (:meth:`Correlator.seed`,
from the ``published`` bucket): a pod of such a job that fails at once is placed at once, not
after the list of every job beside the resumed watch. What the watches say wins: a job observed
replaces a seeded one of its name, a pod whose ``ownerReferences`` name its job's uid goes to that
uid only (held until it is known, never placed by name on another), and a seeded job that the
first complete list (or the resumed watch, :meth:`Correlator.settle`) did not bring again is
forgotten after the same grace period as a deleted one: it was deleted while no watcher ran.

Two kinds of Events are about neither a job nor a pod, yet explain a run:

- Events about a **Node** (``SystemOOM``, ``OOMKilling``: the kernel's OOM killer) reach every
  run with a pod on that node (``spec.nodeName``), one copy each, its uid derived from the
  Event's and the run's so neither JetStream nor the history collapses the copies. A Node
  event with no pod of ours on the node is not ours.
- A **Node**'s conditions (kubelet, node-problem-detector, a GPU health monitor) are kept for the
  nodes hosting a pod of ours only, and each change reaches every run on the node as such an
  Event (:mod:`watchers.nodes`); a run whose first pod lands on a degraded node is told what is
  wrong with it.
- Events about a **batch Job** (``FailedCreate`` from the Job controller when a quota refuses
  the pods) reach the run that Job serves: ``<mpijob>-launcher`` is an MPIJob's launcher Job, and
  a TrainJob's JobSet names its Jobs ``<trainjob>-<replicatedJob>-<index>`` (the longest
  TrainJob name of the namespace that prefixes the Job's wins).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from controller.contract.clock import Monotonic
from controller.contract.events import BusEvent, Change, JobRef
from controller.contract.kinds import JobKind, PodOwner, kind_named
from watchers.nodes import ConditionSeen, NodeHealth, condition_event
from watchers.normalizing import (
    involved_object,
    job_ref,
    normalize_event,
    normalize_job,
    normalize_pod,
    pod_owner,
)

log = logging.getLogger(__name__)

ObjectKind = Literal["job", "pod", "event", "node"]
LAUNCHER_JOB_SUFFIX = "-launcher"
"""The MPI operator names an MPIJob's launcher Job ``<mpijob>-launcher``."""


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
    unchanged: Callable[[Observation], bool] = lambda observation: False
    """Whether a job, pod or event observation says nothing new (already published at this
    version): it is placed — the index learns the run or the pod — but no event is built for it
    (a job's manifest is not written)."""
    jobs: dict[tuple[str, JobKind, str], JobRef] = field(default_factory=dict)
    jobs_by_uid: dict[str, JobRef] = field(default_factory=dict)
    pods: dict[tuple[str, str], JobRef] = field(default_factory=dict)
    nodes: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # node → pod keys on it
    pod_nodes: dict[tuple[str, str], str] = field(default_factory=dict)  # pod key → its node
    run_pods: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)
    """(node, run uid) → the keys of that run's pods on the node: whether a pod is its run's first
    on a node is found among them, not among every pod on the node."""
    pod_runs: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # → (node, run uid)
    node_health: NodeHealth = field(default_factory=NodeHealth)
    dropped: int = 0
    _seeded: dict[str, JobRef] = field(default_factory=dict)
    """Uid → run of the seeded jobs no list or watch has given yet."""
    _settled: set[tuple[JobKind, str | None]] = field(default_factory=set)
    """(job kind, namespace or ``None``: all) whose first complete list (or resumed watch) ended."""
    _held: dict[tuple[str, ...], list[_Held]] = field(default_factory=dict)  # by what they wait for
    _forget: list[tuple[float, Callable[[], None]]] = field(default_factory=list)

    def observe(self, observation: Observation) -> list[BusEvent]:
        """Events ready to publish now; what cannot be placed yet is held."""
        if observation.kind == "job":
            return self._job(observation)
        if observation.kind == "node":
            return self._node(observation)
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
        self.node_health.expire(now)
        return len(expired)

    def seed(self, jobs: Iterable[JobRef]) -> list[BusEvent]:
        """Index ``jobs`` (those published before this start) until the watches say otherwise;
        returns what waited for them. A job already observed keeps what its observation said, and
        a seeded job of a kind and namespace already :meth:`settle` d is forgotten after the grace
        period unless observed meanwhile."""
        released: list[BusEvent] = []
        for ref in jobs:
            key = (ref.namespace, ref.kind, ref.name)
            if ref.uid in self.jobs_by_uid or key in self.jobs:
                continue
            self.jobs[key] = ref
            self.jobs_by_uid[ref.uid] = ref
            self._seeded[ref.uid] = ref
            if self._is_settled(ref):
                self._later(functools.partial(self._unseed, ref))
            released += [*self._release(("job", *key)), *self._release(("batch", ref.namespace))]
        return released

    def settle(self, kinds: Collection[JobKind], namespace: str | None) -> None:
        """The first complete list of the jobs of ``kinds`` in ``namespace`` (``None``: all) was
        handed on, or their resumed watch tells what was deleted meanwhile itself: a seeded job
        of them not observed within the grace period was deleted while no watcher ran."""
        self._settled.update((kind, namespace) for kind in kinds)
        for ref in list(self._seeded.values()):
            if self._is_settled(ref):
                self._later(functools.partial(self._unseed, ref))

    def _is_settled(self, ref: JobRef) -> bool:
        return (ref.kind, None) in self._settled or (ref.kind, ref.namespace) in self._settled

    def _unseed(self, ref: JobRef) -> None:
        """Forget seeded ``ref`` unless a list or watch gave it meanwhile."""
        if self._seeded.get(ref.uid) == ref:
            del self._seeded[ref.uid]
            self._forget_job((ref.namespace, ref.kind, ref.name), ref)

    @property
    def held(self) -> int:
        return sum(len(waiting) for waiting in self._held.values())

    def _job(self, observation: Observation) -> list[BusEvent]:
        """The job's event (none if unchanged: only its run is learnt) and what waited for it."""
        if self.unchanged(observation):
            event, ref = None, job_ref(observation.object)
        else:
            event = normalize_job(observation.object, observation.change, observation.observed_at)
            ref = event.ref
        key = (ref.namespace, ref.kind, ref.name)
        self.jobs[key] = ref
        self.jobs_by_uid[ref.uid] = ref
        self._seeded.pop(ref.uid, None)
        if observation.change == "DELETED":
            self._later(lambda: self._forget_job(key, ref))
        released = [*self._release(("job", *key)), *self._release(("batch", ref.namespace))]
        return released if event is None else [event, *released]

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

    def _forget_pod(self, key: tuple[str, str], job: JobRef, node: str) -> None:
        if self.pods.get(key) == job:
            del self.pods[key]
            self._off_node(key, node)
            self._run_on(key, "", job)

    def _on_node(self, key: tuple[str, str], node: str) -> None:
        """Index pod ``key`` under ``node`` only (a recreated pod may land elsewhere); constant
        time, whatever the number of nodes."""
        before = self.pod_nodes.get(key)
        if before is not None and before != node:
            self._off_node(key, before)
        if node:
            self.nodes.setdefault(node, set()).add(key)
            self.pod_nodes[key] = node

    def _run_on(self, key: tuple[str, str], node: str, job: JobRef) -> None:
        """Index pod ``key`` of run ``job`` under (``node``, its uid) only (none for no node)."""
        before = self.pod_runs.pop(key, None)
        if before is not None:
            keys = self.run_pods[before]
            keys.discard(key)
            if not keys:
                del self.run_pods[before]
        if node:
            self.run_pods.setdefault((node, job.uid), set()).add(key)
            self.pod_runs[key] = (node, job.uid)

    def _off_node(self, key: tuple[str, str], node: str) -> None:
        if self.pod_nodes.get(key) == node:
            del self.pod_nodes[key]
        keys = self.nodes.get(node)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.nodes[node]
                self.node_health.left(node)

    def _later(self, forget: Callable[[], None]) -> None:
        self._forget.append((self.clock() + self.pending_ttl_s, forget))

    def _pod_job(self, obj: Mapping[str, Any], owner: PodOwner) -> JobRef | None:
        """The run of a pod: the job its ``ownerReferences`` name by uid, once known (never
        another of that name); without such a reference (a launcher a batch Job owns), the job of
        its name."""
        meta = obj.get("metadata") or {}
        refs = meta.get("ownerReferences") or ()
        owners = [ref["uid"] for ref in refs if ref.get("kind") == owner["kind"] and ref.get("uid")]
        if owners:
            return next((self.jobs_by_uid[uid] for uid in owners if uid in self.jobs_by_uid), None)
        return self.jobs.get((meta.get("namespace", "default"), owner["kind"], owner["name"]))

    def _place(self, observation: Observation) -> list[BusEvent] | None:
        obj = observation.object
        if observation.kind == "pod":
            owner = pod_owner(obj)
            if owner is None:
                return []  # not a launcher or worker: someone else's pod
            job = self._pod_job(obj, owner)
            if job is None:
                return None
            meta = obj.get("metadata") or {}
            pod_key = (str(meta.get("namespace", job.namespace)), str(meta.get("name")))
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            landed = bool(node) and observation.change != "DELETED" and not self._runs_on(node, job, pod_key)
            self.pods[pod_key] = job
            self._on_node(pod_key, node)
            self._run_on(pod_key, node, job)
            if observation.change == "DELETED":
                self._later(lambda: self._forget_pod(pod_key, job, node))
            told = self._conditions(node, self.node_health.landed(node), observation, job) if landed else []
            if self.unchanged(observation):
                return told
            return [
                normalize_pod(
                    obj, observation.change, job, observation.observed_at, observation.log_tail, owner=owner
                ),
                *told,
            ]
        involved = involved_object(obj)
        namespace = str((obj.get("metadata") or {}).get("namespace", "default"))
        event_job: JobRef | None = None
        if (spec := kind_named(involved.kind)) is not None:
            event_job = self.jobs_by_uid.get(involved.uid or "") or self.jobs.get(
                (namespace, spec.kind, involved.name)
            )
        elif involved.kind == "Pod":
            event_job = self.pods.get((namespace, involved.name))
        elif involved.kind == "Node":
            return self._node_event(observation, involved.name)
        elif involved.kind == "Job":
            event_job = self._batch_job(namespace, involved.name)
        else:
            return []  # about a Deployment, a Service, …: not ours
        if event_job is None:
            return None
        if self.unchanged(observation):
            return []
        return [normalize_event(obj, observation.change, event_job, observation.observed_at)]

    def _node_event(self, observation: Observation, node: str) -> list[BusEvent]:
        """One copy of a Node's event for each run with a pod on ``node`` (none: not ours)."""
        runs = {self.pods[key].uid: self.pods[key] for key in self.nodes.get(node, ()) if key in self.pods}
        copies: list[BusEvent] = []
        for job in sorted(runs.values(), key=lambda ref: ref.uid):
            event = normalize_event(observation.object, observation.change, job, observation.observed_at)
            copies.append(event.model_copy(update={"uid": node_event_uid(event.uid, job.uid)}))
        return copies

    def _runs_on(self, node: str, job: JobRef, but: tuple[str, str]) -> bool:
        """Whether another pod of run ``job`` than ``but`` is on ``node`` already."""
        return any(key != but and self.pods.get(key) == job for key in self.run_pods.get((node, job.uid), ()))

    def _node(self, observation: Observation) -> list[BusEvent]:
        """The changes of a Node's conditions, for each run with a pod on it."""
        name = str((observation.object.get("metadata") or {}).get("name", ""))
        seen = self.node_health.observe(
            observation.object,
            observation.change,
            bool(self.nodes.get(name)),
            self.clock() + self.pending_ttl_s,
        )
        return self._conditions(name, seen, observation)

    def _conditions(
        self, node: str, seen: list[ConditionSeen], observation: Observation, only: JobRef | None = None
    ) -> list[BusEvent]:
        """Each change in ``seen`` told to each run with a pod on ``node`` (or to ``only``)."""
        if not seen:
            return []
        runs = {self.pods[key].uid: self.pods[key] for key in self.nodes.get(node, ()) if key in self.pods}
        if only is not None:
            runs = {only.uid: only}
        return [
            condition_event(change, job, observation.observed_at)
            for job in sorted(runs.values(), key=lambda ref: ref.uid)
            for change in seen
        ]

    def _batch_job(self, namespace: str, name: str) -> JobRef | None:
        """The run a batch Job serves: an MPIJob's launcher Job, or a Job of a TrainJob's JobSet."""
        if name.endswith(LAUNCHER_JOB_SUFFIX):
            mpijob = self.jobs.get((namespace, "MPIJob", name.removesuffix(LAUNCHER_JOB_SUFFIX)))
            if mpijob is not None:
                return mpijob
        trainjobs = [
            ref
            for (ns, kind, job), ref in self.jobs.items()
            if ns == namespace and kind == "TrainJob" and name.startswith(f"{job}-")
        ]
        return max(trainjobs, key=lambda ref: len(ref.name), default=None)


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
    if (spec := kind_named(involved.kind)) is not None:
        return ("job", namespace, spec.kind, involved.name)
    if involved.kind == "Job":  # which run it serves is known once that run's job arrives
        return ("batch", namespace)
    return ("pod", namespace, involved.name)


def node_event_uid(event_uid: str, job_uid: str) -> str:
    """The uid of a Node event's copy for one run: stable, and distinct per run."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{event_uid}/{job_uid}"))


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}"
