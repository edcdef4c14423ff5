"""Optional action: write each finding as a Kubernetes Event on its job, so ``kubectl describe`` shows it.

Off by default (``MPIJC_ACTIONS__EMIT_K8S_EVENTS='["oom","mpi-comm"]'``, or ``["*"]`` for every
rule); the consumer role ``k8s-events``. It reads findings from the bus through one durable
pull consumer, so several replicas share the work and each finding revision is written once.
The Event name is derived from the finding id and revision: a redelivered message meets 409
Conflict and is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from typing import Any

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from consumers.wiring import Role, Wiring
from controller.contract.findings import Finding, parse_finding
from controller.contract.kubeflow import api_version
from controller.contract.subjects import Topology
from controller.kube.gateway import APIConflictError, APIError, KubeGateway

log = logging.getLogger(__name__)

CONSUMER = "k8s-events"
COMPONENT = "mpijob-controller"


def event_for(finding: Finding, instance: str) -> dict[str, Any]:
    """The core/v1 Event that tells the job's owner what was found."""
    job = finding.job
    stamp = (finding.resolved_at or finding.last_seen).isoformat().replace("+00:00", "Z")
    status = "resolved" if finding.status == "resolved" else finding.severity
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
        "type": "Normal" if finding.status == "resolved" or finding.severity == "info" else "Warning",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def wanted(finding: Finding, rules: Collection[str]) -> bool:
    return "*" in rules or finding.rule in rules


async def annotate_jobs(
    js: JetStreamContext,
    topology: Topology,
    gateway: KubeGateway,
    rules: Collection[str],
    instance: str,
    stop: asyncio.Event,
) -> None:
    """Write Events for findings of ``rules`` until ``stop`` is set; returns at once if none are wanted."""
    if not rules:
        return
    sub = await js.pull_subscribe(
        topology.wildcard("findings"),
        durable=topology.durable(CONSUMER),
        stream=topology.stream("findings"),
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW, max_deliver=5),
    )
    try:
        while not stop.is_set():
            try:
                msgs = await sub.fetch(50, timeout=1)
            except (NatsTimeoutError, TimeoutError):
                continue
            for msg in msgs:
                await _annotate(msg.data, gateway, rules, instance)
                await msg.ack()
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _annotate(payload: bytes, gateway: KubeGateway, rules: Collection[str], instance: str) -> None:
    try:
        finding = parse_finding(payload)
    except ValueError as exc:
        log.warning("not a finding, skipped: %s", exc)
        return
    if not wanted(finding, rules):
        return
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
    gateway, identity = wiring.kube(), wiring.settings.leader.identity
    return Role(
        background=(lambda stop: annotate_jobs(wiring.js, wiring.topology, gateway, rules, identity, stop),)
    )
