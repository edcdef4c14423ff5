"""Email notifications: the message (text and HTML, single or digest) and the SMTP mailer.

An email is rendered from the same JSON a webhook carries
(:class:`controller.contract.notifications.WebhookEvent`), so both channels say the same
thing: for a finding its root cause in one sentence, the remediation steps, the evidence,
and links to the run, its timeline and the troubleshooting section; for a job its new
phase. Several events about one job inside the digest window (``notify.digest_window_s``)
become one digest, newest last — the dispatcher decides when.

Header values are built from what a finding says (its root cause quotes the workload), so
they are sanitized: every control character and line break (CR, LF, NEL, U+2028 …) becomes a
space and the value is bounded (:data:`MAX_SUBJECT`), so a root cause can neither add a
header (``\r\nBcc: …``) nor make the message impossible to compose.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Protocol

import aiosmtplib

from controller.contract.notifications import WebhookEvent
from controller.contract.settings import SmtpSettings

SUBJECT_PREFIX = "[mpijob-controller]"
MAX_SUBJECT = 200
"""Characters of a subject; a longer one is cut and ends with an ellipsis."""
_UNSAFE_IN_HEADER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\s]+")
_VERBS = {
    "job.created": "was created",
    "job.running": "is running",
    "job.succeeded": "succeeded",
    "job.failed": "failed",
    "job.deleted": "was deleted",
}


class MailError(Exception):
    """Sending failed; ``permanent`` means retrying the same message cannot succeed."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class Mailer(Protocol):
    """Something that sends a composed email."""

    async def send(self, message: EmailMessage) -> None: ...


class SmtpMailer:
    """Sends through the configured SMTP server, one connection per message."""

    def __init__(self, settings: SmtpSettings) -> None:
        if not settings.host:
            raise ValueError("notify.smtp.host is not set")
        self._settings = settings

    async def send(self, message: EmailMessage) -> None:
        s = self._settings
        try:
            await aiosmtplib.send(
                message,
                hostname=s.host,
                port=s.port,
                username=s.username,
                password=s.password.get_secret_value() if s.password else None,
                use_tls=s.security == "tls",
                start_tls=s.security == "starttls",
                validate_certs=s.validate_certs,
                timeout=s.timeout_s,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            raise MailError(f"every recipient was refused: {exc}", permanent=True) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise MailError(f"SMTP {exc.code}: {exc.message}", permanent=500 <= exc.code < 600) from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise MailError(f"{type(exc).__name__}: {exc}", permanent=False) from exc


def smtp_mailer(settings: SmtpSettings) -> SmtpMailer | None:
    """The SMTP mailer, or ``None`` when no server is configured (email subscriptions are refused)."""
    return SmtpMailer(settings) if settings.host else None


def headline(event: WebhookEvent) -> str:
    """One line saying what happened."""
    job, finding = event.data.job, event.data.finding
    who = f"{job.namespace}/{job.name}"
    if finding is None:
        return f"{job.kind} {who} {_VERBS.get(event.type, event.type)}"
    if event.type == "finding.resolved":
        return f"Resolved: {who}: {finding.root_cause}"
    if event.type == "finding.observed":
        return f"Observed, still running: {who}: {finding.root_cause}"
    return f"[{finding.severity}] {who}: {finding.root_cause}"


def header_value(text: str, limit: int = MAX_SUBJECT) -> str:
    """``text`` fit for one header line: controls and line breaks collapsed to single spaces, at
    most ``limit`` characters."""
    value = _UNSAFE_IN_HEADER.sub(" ", text).strip()
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def _text(event: WebhookEvent) -> str:
    finding, link = event.data.finding, event.data.links
    lines = [headline(event), f"When: {event.timestamp:%Y-%m-%d %H:%M:%S %Z}".rstrip()]
    if finding is not None:
        lines += ["", f"Root cause: {finding.root_cause}"]
        if finding.remediation:
            lines += ["", "What to do:", *(f"  {n}. {step}" for n, step in enumerate(finding.remediation, 1))]
        if finding.evidence:
            lines += ["", "Evidence:", *(f"  - {e.source} {e.field}: {e.value}" for e in finding.evidence)]
    lines += ["", f"Run:      {link.run}", f"Timeline: {link.timeline}"]
    if link.docs:
        lines.append(f"Guide:    {link.docs}")
    return "\n".join(lines)


def _html(event: WebhookEvent) -> str:
    e, finding, link = html.escape, event.data.finding, event.data.links
    parts = [
        f"<h3>{e(headline(event))}</h3>",
        f"<p><small>{e(f'{event.timestamp:%Y-%m-%d %H:%M:%S %Z}')}</small></p>",
    ]
    if finding is not None:
        parts.append(f"<p><strong>Root cause:</strong> {e(finding.root_cause)}</p>")
        if finding.remediation:
            steps = "".join(f"<li>{e(step)}</li>" for step in finding.remediation)
            parts.append(f"<p><strong>What to do:</strong></p><ol>{steps}</ol>")
        if finding.evidence:
            facts = "".join(
                f"<li><code>{e(x.source)}</code> {e(x.field)}: <code>{e(x.value)}</code></li>"
                for x in finding.evidence
            )
            parts.append(f"<p><strong>Evidence:</strong></p><ul>{facts}</ul>")
    anchors = [("Run", link.run), ("Timeline", link.timeline)] + ([("Guide", link.docs)] if link.docs else [])
    parts.append("<p>" + " · ".join(f'<a href="{e(url)}">{name}</a>' for name, url in anchors) + "</p>")
    return "\n".join(parts)


def compose(
    events: Sequence[WebhookEvent], recipients: Sequence[str], sender: str, delivery_ids: Sequence[str]
) -> EmailMessage:
    """One email about ``events`` (one job, oldest first): a single notice, or a digest of several."""
    if not events:
        raise ValueError("nothing to send")
    job = events[-1].data.job
    if len(events) == 1:
        subject = f"{SUBJECT_PREFIX} {headline(events[0])}"
        intro_text = intro_html = ""
    else:
        subject = f"{SUBJECT_PREFIX} {len(events)} updates about {job.namespace}/{job.name}"
        intro_text = (
            f"{len(events)} things happened to {job.namespace}/{job.name} since the last email "
            "(grouped so a flapping job does not flood your inbox); the latest is last.\n\n"
        )
        intro_html = f"<p>{html.escape(intro_text.strip())}</p>\n"
    separator = "\n\n" + "-" * 60 + "\n\n"
    message = EmailMessage()
    message["Subject"] = header_value(subject)
    message["From"] = header_value(sender, 998)
    message["To"] = header_value(", ".join(recipients), 10_000)
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(idstring=delivery_ids[0], domain="mpijob-controller")
    message["X-MPIJC-Delivery-Ids"] = " ".join(delivery_ids)
    message.set_content(intro_text + separator.join(_text(event) for event in events) + "\n")
    body = "\n<hr>\n".join(_html(event) for event in events)
    message.add_alternative(f"<html><body>\n{intro_html}{body}\n</body></html>\n", subtype="html")
    return message
