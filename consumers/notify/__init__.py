"""Notifications: bus events to signed webhooks and emails, through a PostgreSQL outbox.

- :mod:`.consumer` — durable subscribers on ``jobs.*.*.job`` and ``findings.>``: phase transitions
  and finding changes, matched to subscriptions, written to the outbox (then acked);
- :mod:`.dispatch` — sends due outbox rows: per-endpoint isolation, retries, dead letters,
  auto-disable, email digests;
- :mod:`.sending` / :mod:`.mailing` — one HTTP attempt / one SMTP message.

Wiring (``consumers/service.py``): build a :class:`Dispatcher`, await :func:`prepare`, include
:func:`build_router` with ``wake=dispatcher.wake``, start the broker, then run
``dispatcher.run(stop)`` beside it. The consumer should run as one replica; dispatchers may
run as many as wanted.
"""

from consumers.notify.consumer import CONSUMER, FINDINGS_CONSUMER, Notifier, build_router, prepare
from consumers.notify.dispatch import Dispatcher
from consumers.notify.mailing import Mailer, MailError, SmtpMailer, smtp_mailer
from consumers.notify.metrics import NotifyMetrics

__all__ = [
    "CONSUMER",
    "FINDINGS_CONSUMER",
    "Dispatcher",
    "MailError",
    "Mailer",
    "Notifier",
    "NotifyMetrics",
    "SmtpMailer",
    "build_router",
    "prepare",
    "smtp_mailer",
]
