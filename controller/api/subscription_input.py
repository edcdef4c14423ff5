"""What a client sends to create or change a subscription, and the checks it must pass.

:class:`SubscriptionIn` and :class:`SubscriptionPatch` are the bodies, every field bounded in length
(characters, or items of a list) before it is checked; :class:`Validator` checks a subscription's
fields as they would be stored — filters (:class:`~controller.contract.notifications.Filters`),
expiry, a webhook's URL against the SSRF guard, an email subscription's recipients — and raises
422 with the reason. Every check is linear in its input (:func:`is_address` and
:func:`selector_requirements` are single passes, no regular expression to backtrack).
:data:`SubscriptionId` and :data:`DeliveryId` are the path parameters naming one.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import HTTPException, Path
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from controller.api.limits import SubscriptionQuotas
from controller.api.params import Instant, JobName, Namespace
from controller.contract.clock import Clock
from controller.contract.cloudevents import Format
from controller.contract.egress import EgressPolicy, EgressRefusedError
from controller.contract.notifications import Channel, FilterError, Filters
from controller.contract.settings import NotifySettings

__all__ = [
    "DELIVERY_ID",
    "MAX_ID",
    "MAX_RECIPIENTS",
    "SUBSCRIPTION_ID",
    "DeliveryId",
    "SubscriptionId",
    "SubscriptionIn",
    "SubscriptionPatch",
    "Validator",
    "is_address",
    "reject_nul",
    "selector_requirements",
    "unprocessable",
]

# Bounds of every field a client sends (characters, or items of a list).
MAX_URL = 2048
MAX_DESCRIPTION = 1024
MAX_SELECTOR = 1024
MAX_SELECTOR_REQUIREMENTS = 32
MAX_ADDRESS = 254
"""An email address (RFC 5321's limit on a forward path)."""
MAX_RECIPIENTS = 50
MAX_EVENT_PATTERNS = 16
MAX_RULES = 32
MAX_SEVERITIES = 8
MAX_ID = 64

SUBSCRIPTION_ID = re.compile(r"sub_[0-9a-f]{32}")
DELIVERY_ID = re.compile(r"msg_[0-9a-f]{32}")

Url = Annotated[str, StringConstraints(max_length=MAX_URL)]
Address = Annotated[str, StringConstraints(max_length=MAX_ADDRESS)]
Selector = Annotated[str, StringConstraints(max_length=MAX_SELECTOR)]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION)]
EventPattern = Annotated[str, StringConstraints(max_length=32)]
RuleName = Annotated[str, StringConstraints(max_length=64)]
SeverityName = Annotated[str, StringConstraints(max_length=16)]
SubscriptionId = Annotated[str, Path(max_length=MAX_ID, description="A subscription id (`sub_…`).")]
DeliveryId = Annotated[str, Path(max_length=MAX_ID, description="A delivery id (`msg_…`).")]

_URL_DOC = f"Webhook endpoint (http/https, at most {MAX_URL} characters)."
_RECIPIENTS_DOC = (
    f"Email addresses (channel email): 1 to {MAX_RECIPIENTS}, each at most {MAX_ADDRESS} characters."
)
_SELECTOR_DOC = (
    f"e.g. team=nlp,tier!=dev,gpu (at most {MAX_SELECTOR} characters and {MAX_SELECTOR_REQUIREMENTS} "
    "requirements)"
)

_FORMAT_DOC = (
    "What a webhook receives: `standard` (one JSON event), `cloudevents` (CloudEvents 1.0, binary "
    "mode: ce-* headers, the data as body) or `cloudevents-structured` (application/cloudevents+json); "
    "every format is signed alike."
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubscriptionIn(_Body):
    """A new subscription."""

    channel: Channel = "webhook"
    url: Url | None = Field(default=None, description=_URL_DOC)
    format: Format = Field(default="standard", description=_FORMAT_DOC)
    recipients: list[Address] = Field(
        default_factory=list, max_length=MAX_RECIPIENTS, description=_RECIPIENTS_DOC
    )
    namespace: Namespace | None = Field(default=None, description="Only jobs in this namespace; unset: all.")
    job_name: JobName | None = Field(default=None, description="Only jobs of this name.")
    label_selector: Selector | None = Field(default=None, description=_SELECTOR_DOC)
    event_types: list[EventPattern] = Field(
        default_factory=list,
        max_length=MAX_EVENT_PATTERNS,
        description="e.g. job.failed, finding.*; empty: all (finding.* when rules or severities are set).",
    )
    rules: list[RuleName] = Field(
        default_factory=list, max_length=MAX_RULES, description="Finding rules, e.g. oom; empty: all."
    )
    severities: list[SeverityName] = Field(
        default_factory=list, max_length=MAX_SEVERITIES, description="Finding severities; empty: all."
    )
    one_shot: bool = Field(default=False, description="Expire after the first matching event.")
    expires_at: Instant | None = Field(default=None, description="Stop matching after this time (RFC 3339).")
    description: Description = ""


class SubscriptionPatch(_Body):
    """Changes to a subscription; ``state`` re-enables (``active``) or pauses (``disabled``) it.

    A ``suspended`` subscription (its creator lost read access where it points) becomes active
    only if its creator may read there again; a change by its creator records who they are now."""

    url: Url | None = Field(default=None, description=_URL_DOC)
    format: Format | None = Field(default=None, description=_FORMAT_DOC)
    recipients: list[Address] | None = Field(
        default=None, max_length=MAX_RECIPIENTS, description=_RECIPIENTS_DOC
    )
    namespace: Namespace | None = None
    job_name: JobName | None = None
    label_selector: Selector | None = Field(default=None, description=_SELECTOR_DOC)
    event_types: list[EventPattern] | None = Field(default=None, max_length=MAX_EVENT_PATTERNS)
    rules: list[RuleName] | None = Field(default=None, max_length=MAX_RULES)
    severities: list[SeverityName] | None = Field(default=None, max_length=MAX_SEVERITIES)
    one_shot: bool | None = None
    expires_at: Instant | None = None
    description: Description | None = None
    state: Literal["active", "disabled"] | None = None


def unprocessable(message: str) -> HTTPException:
    """A 422 that says what is wrong."""
    return HTTPException(422, message)


def reject_nul(fields: dict[str, Any]) -> None:
    """PostgreSQL text cannot hold NUL: say so (422) instead of failing at the database."""
    for name, value in fields.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and "\x00" in t for t in texts):
            raise unprocessable(f"{name} may not contain NUL characters")


_NOT_IN_ADDRESS = frozenset("@,<>")


def is_address(text: str) -> bool:
    """``local@domain.tld``: one ``@``, no whitespace, commas or angle brackets, a dot inside the
    domain. One pass over the text (no regular expression to backtrack)."""
    local, at, domain = text.partition("@")
    if not (local and at and domain):
        return False
    if any(char in _NOT_IN_ADDRESS or char.isspace() for part in (local, domain) for char in part):
        return False
    return "." in domain[1:-1]


def selector_requirements(selector: str) -> int:
    """How many comma-separated requirements ``selector`` has (commas inside ``( … )`` kept), in one pass."""
    depth, count = 0, 1
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            count += 1
    return count


class Validator:
    """Checks a subscription's fields as they would be stored; raises 422 with the reason."""

    def __init__(
        self, settings: NotifySettings, policy: EgressPolicy, clock: Clock, quotas: SubscriptionQuotas
    ) -> None:
        self._settings = settings
        self._policy = policy
        self._clock = clock
        self._quotas = quotas

    async def check(self, fields: dict[str, Any], url_changed: bool = True) -> dict[str, Any]:
        """``fields`` checked and normalised as they are stored (the URL asked about only when
        ``url_changed``)."""
        namespace, job_name = fields.get("namespace"), fields.get("job_name")
        selector = fields.get("label_selector")
        if selector is not None and not selector.strip():
            fields["label_selector"] = selector = None
        if selector is not None and selector_requirements(selector) > MAX_SELECTOR_REQUIREMENTS:
            raise unprocessable(f"label selector has more than {MAX_SELECTOR_REQUIREMENTS} requirements")
        if (fields.get("rules") or fields.get("severities")) and not fields.get("event_types"):
            fields["event_types"] = ["finding.*"]
        try:
            filters = Filters.of(
                namespace,
                job_name,
                selector,
                fields.get("event_types") or (),
                fields.get("rules") or (),
                fields.get("severities") or (),
            )
        except FilterError as exc:
            raise unprocessable(str(exc)) from exc
        fields["event_types"] = sorted(filters.event_types)
        fields["rules"] = sorted(filters.rules)
        fields["severities"] = sorted(filters.severities)
        expires = fields.get("expires_at")
        if expires is not None and (expires.tzinfo is None or expires <= self._clock()):
            raise unprocessable(
                "expires_at must be a future time with a timezone (e.g. 2026-12-01T00:00:00Z)"
            )
        if fields["channel"] == "webhook":
            await self._webhook(fields, url_changed)
        else:
            self._email(fields)
            if fields.get("format", "standard") != "standard":
                raise unprocessable("format applies to webhooks; an email subscription has none")
        return fields

    async def _webhook(self, fields: dict[str, Any], url_changed: bool) -> None:
        if fields.get("recipients"):
            raise unprocessable("recipients belong to channel email; a webhook has a url")
        url = fields.get("url")
        if not url:
            raise unprocessable("a webhook subscription needs a url")
        if url_changed:
            try:
                await self._policy.check(url)
            except EgressRefusedError as exc:
                raise unprocessable(str(exc)) from exc

    def _email(self, fields: dict[str, Any]) -> None:
        if not self._settings.smtp.host:
            raise unprocessable("email notifications are not configured on this server (notify.smtp.host)")
        if fields.get("url"):
            raise unprocessable("an email subscription has recipients, not a url")
        recipients = list(dict.fromkeys(fields.get("recipients") or ()))
        most = self._quotas.recipients
        if not 1 <= len(recipients) <= most:
            raise unprocessable(f"an email subscription needs 1 to {most} recipients")
        bad = [r for r in recipients if not is_address(r)]
        if bad:
            raise unprocessable(f"not email addresses: {bad}")
        fields["recipients"] = recipients
