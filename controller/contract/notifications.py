"""Notifications as receivers see them: event types, the webhook payload, and subscription filters.

The payload is a stable, versioned contract (``docs/webhooks.md``): a Standard Webhooks
envelope — ``type`` (``job.failed``, ``finding.firing``, …), ``timestamp`` (when it happened)
and ``data`` — whose ``data.schema_version`` grows only with incompatible changes. The same
JSON is the body of a webhook and the source an email is rendered from.

A subscription selects events by namespace, job name, an equality-based label selector on
the job's labels (``team=nlp,tier!=dev,gpu``, as ``kubectl -l``), event types (``job.*``
and ``finding.*`` wildcards allowed; ``finding.observed``, live evidence that is no verdict yet,
only when named: :data:`OPT_IN_TYPES`), and for findings their rules and severities.
:class:`Filters` is the one place that decides whether an event matches; the API validates
with the same parsers, so a filter that is stored is a filter that works.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from pydantic import Field

from controller.contract.findings import Evidence, FindingStatus, RuleId, Severity
from controller.contract.message import Message
from controller.contract.selectors import LabelSelector, SelectorError, parse_selector

EventType = Literal[
    "job.created",
    "job.running",
    "job.succeeded",
    "job.failed",
    "job.deleted",
    "finding.firing",
    "finding.resolved",
    "finding.observed",
]
Channel = Literal["webhook", "email"]
SubscriptionState = Literal["active", "disabled", "suspended", "expired"]
DeliveryStatus = Literal["pending", "delivered", "failed"]

EVENT_TYPES: tuple[str, ...] = get_args(EventType)
EVENT_PATTERNS: frozenset[str] = frozenset({*EVENT_TYPES, "job.*", "finding.*"})
OPT_IN_TYPES: frozenset[str] = frozenset({"finding.observed"})
"""Types delivered only to a subscription that names them: neither ``finding.*`` nor an empty
list of types selects them. ``finding.observed`` is evidence (a line a running job printed),
not a failure: a subscriber who never asked for it is never woken by a run that recovers."""
RULES: frozenset[str] = frozenset(get_args(RuleId))
SEVERITIES: frozenset[str] = frozenset(get_args(Severity))
PAYLOAD_SCHEMA_VERSION: Literal[1] = 1


class JobInfo(Message):
    """The job (one run, by uid) an event is about."""

    uid: str
    kind: str
    namespace: str
    name: str
    phase: str | None = Field(default=None, description="Last known phase; unknown for an unseen job.")
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class FindingInfo(Message):
    """What the rules concluded (``finding.*`` events only)."""

    id: str
    rule: RuleId
    severity: Severity
    status: FindingStatus = Field(
        description="``pending`` only on ``finding.observed``: evidence, the run still going."
    )
    root_cause: str
    remediation: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    doc_anchor: str
    revision: int
    superseded_by: RuleId | None = None
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None = None


class Links(Message):
    """Where to read more: this API's run and timeline, and the troubleshooting section."""

    run: str
    timeline: str
    docs: str | None = None


class EventData(Message):
    """``data`` of a webhook payload."""

    schema_version: Literal[1] = PAYLOAD_SCHEMA_VERSION
    subscription_id: str
    job: JobInfo
    finding: FindingInfo | None = None
    links: Links


class WebhookEvent(Message):
    """One webhook body (Standard Webhooks envelope)."""

    type: EventType
    timestamp: datetime = Field(description="When the event happened (not when it was sent).")
    data: EventData


def parse_payload(body: str | bytes) -> WebhookEvent:
    """A stored or received body; raises ``pydantic.ValidationError`` if it is not one."""
    return WebhookEvent.model_validate_json(body)


def links(public_url: str, docs_url: str, job_uid: str, doc_anchor: str | None = None) -> Links:
    """Links of an event, on the configured public base URLs (paths when unset)."""
    base = public_url.rstrip("/")
    docs = None
    if doc_anchor is not None:
        docs = f"{docs_url.rstrip('/')}/{doc_anchor.removeprefix('docs/')}" if docs_url else doc_anchor
    return Links(
        run=f"{base}/api/v1/runs/{job_uid}", timeline=f"{base}/api/v1/runs/{job_uid}/timeline", docs=docs
    )


# --------------------------------------------------------------------------- label selectors


class FilterError(ValueError):
    """A subscription filter that cannot work; the message says which part and why."""


def check_event_patterns(patterns: Iterable[str]) -> list[str]:
    """The patterns, deduplicated in order; raises :class:`FilterError` for an unknown one."""
    out = list(dict.fromkeys(patterns))
    unknown = [p for p in out if p not in EVENT_PATTERNS]
    if unknown:
        raise FilterError(f"unknown event types {unknown}; choose from {sorted(EVENT_PATTERNS)}")
    return out


def check_members(what: str, values: Iterable[str], allowed: frozenset[str]) -> list[str]:
    """``values`` deduplicated; raises :class:`FilterError` for one outside ``allowed``."""
    out = list(dict.fromkeys(values))
    unknown = [v for v in out if v not in allowed]
    if unknown:
        raise FilterError(f"unknown {what} {unknown}; choose from {sorted(allowed)}")
    return out


def _selector(text: str) -> LabelSelector:
    try:
        return parse_selector(text)
    except SelectorError as exc:
        raise FilterError(str(exc)) from exc


@dataclass(frozen=True)
class Filters:
    """What a subscription wants; empty collections and ``None`` mean "any"."""

    namespace: str | None = None
    job_name: str | None = None
    selector: LabelSelector | None = None
    event_types: frozenset[str] = frozenset()
    rules: frozenset[str] = frozenset()
    severities: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        namespace: str | None,
        job_name: str | None,
        label_selector: str | None,
        event_types: Iterable[str],
        rules: Iterable[str],
        severities: Iterable[str],
    ) -> Filters:
        """Filters from stored (or requested) values; raises :class:`FilterError` if one is bad."""
        return cls(
            namespace=namespace,
            job_name=job_name,
            selector=_selector(label_selector) if label_selector else None,
            event_types=frozenset(check_event_patterns(event_types)),
            rules=frozenset(check_members("rules", rules, RULES)),
            severities=frozenset(check_members("severities", severities, SEVERITIES)),
        )

    def wants_type(self, event_type: str) -> bool:
        """Whether the types asked for select ``event_type`` (an opt-in type only by its name)."""
        if event_type in OPT_IN_TYPES:
            return event_type in self.event_types
        if not self.event_types:
            return True
        family = event_type.split(".", 1)[0] + ".*"
        return event_type in self.event_types or family in self.event_types

    def matches(self, event_type: str, job: JobInfo, finding: FindingInfo | None = None) -> bool:
        """Whether an event of ``event_type`` about ``job`` (and ``finding``) is wanted here."""
        if self.namespace is not None and job.namespace != self.namespace:
            return False
        if self.job_name is not None and job.name != self.job_name:
            return False
        if not self.wants_type(event_type):
            return False
        if self.selector is not None and not self.selector.matches(job.labels):
            return False
        if finding is not None:
            if self.rules and finding.rule not in self.rules:
                return False
            if self.severities and finding.severity not in self.severities:
                return False
        return True
