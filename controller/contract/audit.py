"""Audit records on the bus (``audit.<ns>``): who created, changed or deleted which job, and how it ended.

Three sources produce them, all as one frozen model, :class:`AuditRecord`:

- ``admission`` — the validating admission webhook (``watchers.admission.webhook``) saw a CREATE,
  UPDATE or DELETE of an MPIJob or TrainJob and records the requesting user;
- ``lifecycle`` — a job observed on ``jobs.>`` entered Succeeded or Failed, or was deleted
  (:func:`lifecycle_record`); no user is known, the reason comes from the job's conditions;
- ``retention`` — the audited purge removed old records (written by
  :func:`controller.store.auditchain.purge` directly, never published).

Every record carries an ``id`` that names the happening, not the message: the admission
request uid, or ``<job uid>/<verb>`` for the lifecycle. It is the ``Nats-Msg-Id`` and the
table's unique key, so however often a Failed job is observed, its run has one ``failed``
record. The audit table and its hash chain live in :mod:`controller.store.auditchain`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import Field

from controller.contract.events import SCHEMA_VERSION, Condition, JobObserved
from controller.contract.kubeflow import API_GROUPS, JobKind
from controller.contract.message import Message

__all__ = [
    "Actor",
    "AuditRecord",
    "AuditVerb",
    "AuditedObject",
    "PurgeSummary",
    "ServiceAccount",
    "Source",
    "lifecycle_record",
    "message_id",
    "parse_audit_record",
    "service_account_of",
]

Source = Literal["admission", "lifecycle", "retention"]
AuditVerb = Literal["create", "update", "delete", "completed", "failed", "deleted", "purge"]

_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


class ServiceAccount(Message):
    """A Kubernetes service account, from a ``system:serviceaccount:<ns>:<name>`` username."""

    namespace: str
    name: str


class Actor(Message):
    """Who asked: the ``userInfo`` of an AdmissionReview, or who ran a purge."""

    username: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    service_account: ServiceAccount | None = None


class AuditedObject(Message):
    """The job a record is about; ``uid`` links it to the run (``/api/v1/runs/{uid}``)."""

    api_group: str
    api_version: str
    kind: JobKind
    name: str
    uid: str | None = None


class PurgeSummary(Message):
    """What a retention purge removed: enough to verify the chain from the purge point on."""

    retention_days: int
    before: datetime = Field(description="Records recorded before this instant were due.")
    removed: int
    first_seq: int
    last_seq: int
    last_removed_hash: str = Field(description="Hash of record ``last_seq``: the next record's prev_hash.")
    oldest_recorded_at: datetime
    newest_recorded_at: datetime


class AuditRecord(Message):
    """One audit record, as published on ``audit.<ns>`` and hashed into the chain."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["audit"] = "audit"
    id: str = Field(description="Names the happening: one record per id, however often it is seen.")
    source: Source
    verb: AuditVerb
    at: datetime = Field(description="When it happened (webhook call, job finish, deletion, purge).")
    namespace: str | None = Field(description="None only for cluster-wide records (purges).")
    actor: Actor | None = Field(default=None, description="None where no user is known (lifecycle).")
    object: AuditedObject | None = None
    outcome: str | None = Field(
        default=None,
        description="``allowed`` (admission: the webhook admitted it; a later admission stage may still "
        "refuse), ``Succeeded``/``Failed`` (lifecycle), the last phase (deleted).",
    )
    reason: str | None = None
    message: str | None = None
    changes: tuple[str, ...] = Field(default=(), description="UPDATE: the field paths that changed.")
    request_uid: str | None = Field(default=None, description="The AdmissionReview uid (API server logs).")
    caller: Literal["mtls", "unverified"] | None = Field(
        default=None,
        description="Admission: how the webhook's caller was authenticated. ``mtls``: it presented a "
        "client certificate from ``admission.client_ca_file`` (the API server); ``unverified``: "
        "no client certificate was required, so anyone who reached the webhook could have sent it "
        "(corroborate against the watch stream). None for other sources and older records.",
    )
    purge: PurgeSummary | None = None


def parse_audit_record(payload: bytes | str) -> AuditRecord:
    """Parse one ``audit.*`` payload; raises ``pydantic.ValidationError`` if malformed."""
    return AuditRecord.model_validate_json(payload)


def message_id(record: AuditRecord) -> str:
    """The JetStream ``Nats-Msg-Id``: the record id, so a happening is stored once."""
    return f"audit:{record.id}"


def service_account_of(username: str) -> ServiceAccount | None:
    """``system:serviceaccount:<ns>:<name>`` → the service account; anything else → None."""
    if not username.startswith(_SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username.removeprefix(_SERVICE_ACCOUNT_PREFIX).partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return ServiceAccount(namespace=namespace, name=name)


def audited_object(kind: JobKind, name: str, uid: str | None) -> AuditedObject:
    """The :class:`AuditedObject` of a job of ``kind``, with its API group and version."""
    group, version = API_GROUPS[kind]
    return AuditedObject(api_group=group, api_version=version, kind=kind, name=name, uid=uid)


_LIFECYCLE: dict[str, tuple[AuditVerb, frozenset[str]]] = {
    "Succeeded": ("completed", frozenset({"Succeeded", "Complete"})),
    "Failed": ("failed", frozenset({"Failed"})),
}
"""Terminal phase → the verb and the condition types that explain it (MPIJob, TrainJob)."""


def _explaining(conditions: Sequence[Condition], types: frozenset[str]) -> Condition | None:
    """The condition that explains a terminal phase: of the given types and true, else any with a reason."""
    matching = [c for c in conditions if c.type in types and c.status == "True"]
    with_reason = matching or [c for c in conditions if c.reason]
    return with_reason[-1] if with_reason else None


def lifecycle_record(event: JobObserved) -> AuditRecord | None:
    """The lifecycle record a job observation stands for: completed, failed, deleted, or none."""
    obj = audited_object(event.kind, event.name, event.uid)
    if event.change == "DELETED":
        return AuditRecord(
            id=f"{event.uid}/deleted",
            source="lifecycle",
            verb="deleted",
            at=event.observed_at,
            namespace=event.namespace,
            object=obj,
            outcome=event.phase,
        )
    if event.phase not in _LIFECYCLE:
        return None
    verb, types = _LIFECYCLE[event.phase]
    condition = _explaining(event.conditions, types)
    return AuditRecord(
        id=f"{event.uid}/{verb}",
        source="lifecycle",
        verb=verb,
        at=event.finished_at or event.observed_at,
        namespace=event.namespace,
        object=obj,
        outcome=event.phase,
        reason=condition.reason if condition else None,
        message=condition.message if condition else None,
    )
