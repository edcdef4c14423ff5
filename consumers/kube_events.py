"""Optional action: write each finding as a Kubernetes Event on its job, so ``kubectl describe`` shows it.

Off by default (``MPIJC_ACTIONS__EMIT_K8S_EVENTS='["oom","mpi-comm"]'``, or ``["*"]`` for every
rule); the consumer role ``k8s-events``. It reads findings from the bus through one durable
(:class:`~controller.bus.consuming.Durable`), so several replicas share the work and each finding
revision is written once; a payload that is no finding is dead-lettered like any other.
The Event name is derived from the finding id and revision: a redelivered message meets 409
Conflict and is done. A pending finding (evidence a running job printed, not yet a verdict) is
written as a ``Normal`` Event marked ``[observed]``: only a confirmed one is a ``Warning``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from typing import Any

from consumers.wiring import Role, Wiring
from controller.bus.consuming import Durable
from controller.contract.findings import Finding, parse_finding
from controller.contract.kubeflow import api_version
from controller.contract.subjects import K8S_EVENTS_DURABLE
from controller.kube.errors import APIConflictError, APIError
from controller.kube.gateway import KubeGateway

log = logging.getLogger(__name__)

CONSUMER = K8S_EVENTS_DURABLE
COMPONENT = "mpijob-controller"


def event_for(finding: Finding, instance: str) -> dict[str, Any]:
    """The core/v1 Event that tells the job's owner what was found."""
    job = finding.job
    stamp = (finding.resolved_at or finding.last_seen).isoformat().replace("+00:00", "Z")
    status = {"resolved": "resolved", "pending": "observed"}.get(finding.status, finding.severity)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{job.name}.{finding.id[:8]}.{finding.revision}",
            "namespace": job.namespace,
            "labels": {"app.kubernetes.io/managed-by": COMPONENT},
        },
        "involvedObject": {
            "apiVersion": api_version(job.kind),
            "kind": job.kind,
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.uid,
        },
        "reason": "".join(part.capitalize() for part in finding.rule.split("-"))
        + ("Resolved" if finding.status == "resolved" else ""),
        "message": f"[{status}] {finding.root_cause}. See {finding.doc_anchor}"[:1024],
        "type": "Warning" if finding.status == "firing" and finding.severity != "info" else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def wanted(finding: Finding, rules: Collection[str]) -> bool:
    return "*" in rules or finding.rule in rules


def durable(gateway: KubeGateway, rules: Collection[str], instance: str) -> Durable[Finding]:
    """The durable that writes findings of ``rules`` as Events (new findings only: a durable
    created now does not announce the past on every job)."""

    async def annotate(findings: Sequence[Finding]) -> None:
        for finding in findings:
            if wanted(finding, rules):
                await _annotate(finding, gateway, instance)

    return Durable("findings", CONSUMER, parse_finding, annotate, new_only=True)


async def _annotate(finding: Finding, gateway: KubeGateway, instance: str) -> None:
    try:
        await asyncio.to_thread(gateway.create_event, finding.job.namespace, event_for(finding, instance))
    except APIConflictError:
        pass  # this revision was written before a redelivery
    except APIError as exc:  # forbidden (RBAC not granted), job gone: say so, do not block the stream
        log.warning("could not write an Event on %s/%s: %s", finding.job.namespace, finding.job.name, exc)


async def attach(wiring: Wiring) -> Role:
    """The Kubernetes-event writer: nothing to run unless ``actions.emit_k8s_events`` names rules."""
    rules = wiring.settings.actions.emit_k8s_events
    if not rules:
        return Role()
    return Role(durables=(durable(wiring.kube(), rules, wiring.settings.leader.identity),))
