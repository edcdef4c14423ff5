"""The conditions of the nodes a run's pods run on, as changes the rules can judge.

Kubernetes keeps a node's health on the Node itself, as ``status.conditions``, not as Events:
the kubelet's ``Ready`` (``False`` or ``Unknown`` once it stops posting), ``MemoryPressure``,
``DiskPressure``, ``PIDPressure`` and ``NetworkUnavailable``; node-problem-detector's
(``KernelDeadlock`` with reason ``KernelHasDeadlock``, ``ReadonlyFilesystem`` with
``FilesystemIsReadOnly``, ``FrequentKubeletRestart``, ``FrequentContainerdRestart``,
``CorruptDockerOverlay2``, ``KubeletUnhealthy``, ``ContainerRuntimeUnhealthy``, …); and those a
GPU health monitor sets (NVIDIA's NVSentinel names them after its checks, ``SysLogsXIDError``,
``SysLogsSXIDError``, ``SysLogsGPUFallenOff``; AKS's node-problem-detector sets ``GPUMissing``;
providers add their own, such as ``NebiusGPUError``). By their convention a condition other
than ``Ready`` reports a problem when ``True``; ``Ready`` does when it is not ``True``.

:class:`NodeHealth` keeps the conditions of the nodes that host a watched pod only (a cluster's
other nodes cost nothing but the moment their update is read); a node already degraded when it
hosts none of ours yet is held for the correlator's grace period, so a pod listed after its node
(a start lists both at once) still learns of it. Each change of a condition — one that goes bad,
or one that was bad and clears — becomes a :class:`~controller.contract.events.K8sEventObserved`
about the Node for each run on it (:func:`condition_event`), its uid derived from the node, the
condition, the change and the run, so the same change read again (a relist, a restart) is the
same message.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.contract.events import (
    NODE_CONDITION_SOURCE,
    Change,
    Condition,
    JobRef,
    K8sEventObserved,
    ObjectRef,
)
from watchers.normalizing import parse_time

__all__ = ["ConditionSeen", "NodeHealth", "abnormal", "condition_event", "conditions_of", "skeleton"]

_HEALTHY_WHEN_TRUE = frozenset({"Ready"})
MAX_CONDITIONS = 32
"""Conditions read per node (a node has about ten); more are not ours to keep."""


def skeleton(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the node watch keeps of a Node between its changes: its name, uid and version (a
    relist compares versions, a deletion needs the name). A Node object weighs tens of KiB (its
    images, its addresses); a cluster's thousands of them are read as they change, never held."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Node"),
        "metadata": {key: meta[key] for key in ("name", "uid", "resourceVersion") if key in meta},
    }


def abnormal(kind: str, status: str) -> bool:
    """Whether condition ``kind`` at ``status`` reports a problem: ``Ready`` not ``True``, any
    other ``True`` (``Unknown`` of those says nothing)."""
    return status != "True" if kind in _HEALTHY_WHEN_TRUE else status == "True"


@dataclass(frozen=True, slots=True)
class ConditionSeen:
    """One condition of one node as last read."""

    node: str
    node_uid: str
    resource_version: str
    kind: str
    status: str
    reason: str
    message: str
    since: datetime | None

    @property
    def abnormal(self) -> bool:
        return abnormal(self.kind, self.status)


def conditions_of(obj: Mapping[str, Any]) -> dict[str, ConditionSeen]:
    """The conditions of a raw Node, by type."""
    meta = obj.get("metadata") or {}
    name, uid, version = (
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        str(meta.get("resourceVersion", "")),
    )
    found: dict[str, ConditionSeen] = {}
    for raw in ((obj.get("status") or {}).get("conditions") or ())[:MAX_CONDITIONS]:
        if not isinstance(raw, dict) or not raw.get("type"):
            continue
        kind = str(raw["type"])[:128]
        found[kind] = ConditionSeen(
            name,
            uid,
            version,
            kind,
            str(raw.get("status", "Unknown")),
            str(raw.get("reason") or "")[:256],
            str(raw.get("message") or "")[:1024],
            parse_time(raw.get("lastTransitionTime")),
        )
    return found


@dataclass
class NodeHealth:
    """The conditions of the nodes hosting watched pods, and the changes to tell."""

    kept: dict[str, dict[str, ConditionSeen]] = field(default_factory=dict)
    waiting: dict[str, tuple[Mapping[str, Any], float]] = field(default_factory=dict)
    """Degraded nodes that host none of ours yet: their newest object, until a deadline."""

    def observe(
        self, obj: Mapping[str, Any], change: Change, hosting: bool, deadline: float
    ) -> list[ConditionSeen]:
        """The changes a Node observation brings to the runs on it (none when it hosts none)."""
        name = str((obj.get("metadata") or {}).get("name", ""))
        if change == "DELETED" or not hosting:
            self.kept.pop(name, None)
            self.waiting.pop(name, None)
            if change != "DELETED" and any(c.abnormal for c in conditions_of(obj).values()):
                self.waiting[name] = (obj, deadline)
            return []
        return self._read(name, obj)

    def landed(self, name: str) -> list[ConditionSeen]:
        """A pod of another run now runs on ``name``: what is wrong with the node now."""
        held = self.waiting.pop(name, None)
        if held is not None:
            return self._read(name, held[0])
        return [c for c in self.kept.get(name, {}).values() if c.abnormal]

    def left(self, name: str) -> None:
        """No watched pod runs on ``name`` any more."""
        self.kept.pop(name, None)

    def expire(self, now: float) -> None:
        """Forget degraded nodes that still host none of ours past their deadline."""
        for name in [name for name, (_, deadline) in self.waiting.items() if deadline <= now]:
            del self.waiting[name]

    def _read(self, name: str, obj: Mapping[str, Any]) -> list[ConditionSeen]:
        new = conditions_of(obj)
        old = self.kept.get(name)
        self.kept[name] = new
        if old is None:
            return [c for c in new.values() if c.abnormal]
        changed: list[ConditionSeen] = []
        for kind, now in new.items():
            before = old.get(kind)
            if before is None:
                if now.abnormal:
                    changed.append(now)
            elif (before.status, before.since) != (now.status, now.since) and (
                now.abnormal or before.abnormal
            ):
                changed.append(now)
        return changed


def condition_event(seen: ConditionSeen, job: JobRef, observed_at: datetime) -> K8sEventObserved:
    """The change ``seen`` of a node's condition, told to the run ``job``."""
    since = seen.since.isoformat() if seen.since else ""
    uid = uuid.uuid5(
        uuid.NAMESPACE_OID, f"{seen.node_uid or seen.node}/{seen.kind}/{seen.status}/{since}/{job.uid}"
    )
    words = f"{seen.kind} is {seen.status}" + (f" ({seen.reason})" if seen.reason else "")
    return K8sEventObserved(
        change="ADDED",
        job=job,
        uid=str(uid),
        resource_version=seen.resource_version or "0",
        reason=seen.kind,
        message=f"{words}: {seen.message}" if seen.message else words,
        event_type="Warning" if seen.abnormal else "Normal",
        involved=ObjectRef(kind="Node", name=seen.node, uid=seen.node_uid or None),
        first_timestamp=seen.since,
        last_timestamp=seen.since,
        source=NODE_CONDITION_SOURCE,
        observed_at=observed_at,
        condition=Condition(
            type=seen.kind,
            status=seen.status,
            reason=seen.reason or None,
            message=seen.message or None,
            last_transition_time=seen.since,
        ),
    )
