"""Errors every room may raise or catch, each meaning one decision for whoever handles it.

    Exception
     ├── RetryableError        a failure that may pass if tried again (redeliver, reconnect)
     └── StartupError          a process cannot start: one line for the operator, naming the setting

Lower-level errors (SQLAlchemy's, NATS's, Kubernetes') are translated into these at one
boundary each: the store's engine, the bus's settling, the Kubernetes gateway.
"""

from __future__ import annotations

__all__ = ["RetryableError", "StartupError"]


class RetryableError(Exception):
    """A failure that may pass on redelivery or a later attempt (a lost connection, a timeout)."""


class StartupError(Exception):
    """A process cannot start; ``str()`` is one line naming what to check."""
