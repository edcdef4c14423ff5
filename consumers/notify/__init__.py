"""Notifications: bus events to signed webhooks and emails, through a PostgreSQL outbox.

- :mod:`.consumer` — durable consumers of ``jobs.*.*.job`` and ``findings.>``: phase transitions
  and finding changes, matched to subscriptions, written to the outbox (then acked);
- :mod:`.dispatch` — sends due outbox rows: per-endpoint isolation, retries, dead letters,
  auto-disable, email digests;
- :mod:`.sending` / :mod:`.mailing` — one HTTP attempt / one SMTP message;
- :mod:`.alerting` / :mod:`.alertmanager` — findings as Alertmanager alerts, and the pusher
  (run beside the dispatcher) that sends them to every configured Alertmanager;
- :mod:`.metrics` — the consumer's and dispatcher's Prometheus series.

Wiring (``consumers/service.py``): await :func:`prepare`, run the :func:`durables` (``wake``
nudges a dispatcher in the same process; others hear of new rows through PostgreSQL
``NOTIFY``), and ``Dispatcher.run(stop)`` in the ``dispatch`` role. Both the consumer and the
dispatchers run as many replicas as wanted. :class:`.dispatch.Dispatcher` is imported from its
module, not from here: its HTTP client (aiohttp) loads only in a process that dispatches.
"""

from consumers.notify.consumer import CONSUMER, FINDINGS_CONSUMER, Notifier, durables, prepare
from consumers.notify.mailing import Mailer, MailError, SmtpMailer, smtp_mailer
from consumers.notify.metrics import NotifyMetrics

__all__ = [
    "CONSUMER",
    "FINDINGS_CONSUMER",
    "MailError",
    "Mailer",
    "Notifier",
    "NotifyMetrics",
    "SmtpMailer",
    "durables",
    "prepare",
    "smtp_mailer",
]
