"""Findings: what the rules consumer concluded about a run, as a bus message.

A finding names one cause (or one stall) of one run in the user's words: a root-cause
sentence, the exact fields and log lines that triggered it, remediation steps and a link
to ``docs/troubleshooting.md``. There is at most one finding per (job uid, rule): its id
is derived from both, so every update and the final resolution of the same problem land
on the same row downstream, and a replay of the same events yields the same ids.

A finding goes ``firing`` → (updated while firing, ``revision`` + 1 each time) →
``resolved``; it may fire again later as a new episode under the same id. A finding read from
evidence that is not yet a verdict — a line a running job printed, a Kubernetes Event of a run
still going — starts ``pending``: what was seen, worded as such ("Worker-1 printed … at 10:42:07
UTC and is still running"), shown by the API but never announced as firing. It becomes
``firing`` (the next revision, same id) once the failure is confirmed (its pod ends non-zero,
the job fails, or the stated silence passes: ``docs/troubleshooting.md``), or ``resolved`` when
the run goes on without it. Readers that knew only ``firing`` and ``resolved`` read a pending
finding as a status they do not know: the notifier announces it only as ``finding.observed``, to
the subscriptions that name that type. ``revision``
grows with every published change, so consumers drop an older revision that arrives
late, and :func:`message_id` gives each change its own ``Nats-Msg-Id``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import Field

from controller.contract.events import SCHEMA_VERSION, JobRef
from controller.contract.message import Message

RuleId = Literal[
    "oom",
    "gpu-oom",
    "gpu-error",
    "gpu-fault",
    "segfault",
    "disk-full",
    "quota",
    "rendezvous",
    "mpi-comm",
    "mpi-abort",
    "image-pull",
    "unschedulable",
    "crashloop",
    "evicted",
    "node-lost",
    "node-degraded",
    "failure-propagation",
    "restarting",
    "hang-pending",
    "hang-init",
    "hang-progress",
    "gpu-idle",
    "gpu-throttled",
    "memory-near-limit",
    "oom-predicted",
    "straggler",
    "failed",
]
Severity = Literal["info", "warning", "critical"]
FindingStatus = Literal["pending", "firing", "resolved"]
ACTIVE: frozenset[str] = frozenset({"pending", "firing"})
"""The statuses of a finding that still holds (not resolved)."""

# Fixed namespace for uuid5 finding ids; never change it, or every stored id changes.
_FINDING_NAMESPACE = uuid.UUID("6f1d7a52-2c4b-4f0e-9a57-3d2f5a0c8b11")


class Evidence(Message):
    """One observed fact behind a finding: which object, which field (or ``log``), what value."""

    source: str = Field(description="The object it was read from, e.g. ``pod/pi-worker-2``.")
    field: str = Field(description="Field path such as ``containers[worker].reason``, or ``log``.")
    value: str


class Finding(Message):
    """A root cause or stall of one run, firing or resolved."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["finding"] = "finding"
    id: str = Field(description="Deterministic from (job uid, rule); see :func:`finding_id`.")
    rule: RuleId
    severity: Severity
    status: FindingStatus
    job: JobRef
    root_cause: str = Field(description="One sentence in the user's words.")
    evidence: tuple[Evidence, ...] = ()
    remediation: tuple[str, ...] = ()
    doc_anchor: str = Field(description="e.g. ``docs/troubleshooting.md#oom``.")
    dedup_key: str = Field(description="``<job uid>/<rule>``: one finding per run and rule.")
    revision: int = Field(default=1, ge=1, description="Grows with every published change.")
    superseded_by: RuleId | None = Field(
        default=None,
        description="Set on resolution when another finding turned out to explain this one "
        "(an MPI abort explained by a worker's OOM kill).",
    )
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None = None


def dedup_key(job_uid: str, rule: RuleId) -> str:
    """The key findings are deduplicated on: one per run and rule."""
    return f"{job_uid}/{rule}"


def finding_id(job_uid: str, rule: RuleId) -> str:
    """A stable UUID for the finding of ``rule`` on the run ``job_uid``."""
    return str(uuid.uuid5(_FINDING_NAMESPACE, dedup_key(job_uid, rule)))


def doc_anchor(rule: RuleId) -> str:
    """Where ``docs/troubleshooting.md`` explains ``rule``."""
    return f"docs/troubleshooting.md#{rule}"


def parse_finding(payload: bytes | str) -> Finding:
    """Parse one ``findings.*`` payload; raises ``pydantic.ValidationError`` if malformed."""
    return Finding.model_validate_json(payload)


def message_id(finding: Finding) -> str:
    """The JetStream ``Nats-Msg-Id`` of one published change of a finding."""
    return f"finding:{finding.id}:{finding.revision}"
