"""The client's errors and the exit status each one means: one table for the Python client and
every ``mpijob-controller`` command (``docs/cli.md``, ``docs/client.md``).

====  ===========  ================================================================================
code  name         meaning
====  ===========  ================================================================================
0     OK           done: the goal was met, the answer printed
1     FAILED       the run failed (``wait``), or a check failed (``audit verify``)
2     USAGE        a malformed argument or setting, a file that cannot be read, a process that
                   cannot start (one line names the option, the setting or the file)
3     REFUSED      the API refused (token, permissions, plain http) or could not be reached
4     NOT_FOUND    the job, attempt or run named does not exist (or the token may not read it)
5     TIMED_OUT    ``--timeout`` passed first
130   INTERRUPTED  stopped with Ctrl-C (SIGINT) before it finished
====  ===========  ================================================================================

Every error the client raises is a :class:`ClientError` whose ``str()`` is one line for a person
and whose ``status`` is its exit status, so a pipeline step can end with ``sys.exit(exc.status)``
as the commands do::

    ClientError
    ├── UsageError       a malformed argument or setting (an API URL, a CA file)       2
    ├── Refused          the API answered with an error that asking again does not     3
    │   │                fix (4xx but 429), or there is no usable token
    │   └── NotFound     404: no such job, attempt or run (or one the token may not    4
    │                    read)
    ├── Unreachable      the API did not answer, or answered 429/5xx; ``after``: its   3
    │                    Retry-After
    ├── TimedOut         ``wait`` reached its timeout first                             5
    └── RunFailed        ``wait``: the run failed or was deleted; ``run``: what the     1
                         API says of it, findings included

httpx's errors and the API's status codes are translated into these at one place
(:mod:`controller.client.connection`).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.contract.runs import RunDetail

__all__ = [
    "ClientError",
    "Exit",
    "NotFound",
    "Refused",
    "RunFailed",
    "TimedOut",
    "Unreachable",
    "UsageError",
]


class Exit(enum.IntEnum):
    """An exit status, the same for every command and every error of the client."""

    OK = 0
    FAILED = 1
    USAGE = 2
    REFUSED = 3
    NOT_FOUND = 4
    TIMED_OUT = 5
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        """The table's words for this status (``--help`` and docs/cli.md show them)."""
        return _MEANING[self]


_MEANING = {
    Exit.OK: "done: the goal was met, the answer printed",
    Exit.FAILED: "the run failed (wait), or a check failed (audit verify)",
    Exit.USAGE: "a malformed argument or setting, an unreadable file, a process that cannot start",
    Exit.REFUSED: "the API refused (token, permissions, plain http) or could not be reached",
    Exit.NOT_FOUND: "the job, attempt or run named does not exist (or the token may not read it)",
    Exit.TIMED_OUT: "--timeout passed first",
    Exit.INTERRUPTED: "stopped with Ctrl-C",
}


class ClientError(Exception):
    """The client cannot give the answer asked for: ``str()`` is one line, ``status`` the exit status."""

    status: Exit = Exit.REFUSED


class UsageError(ClientError):
    """A malformed argument or setting, named in one line."""

    status = Exit.USAGE


class Refused(ClientError):
    """The API answered with an error that asking again does not fix, or there is no token to send."""

    status = Exit.REFUSED


class NotFound(Refused):
    """The API answered 404: no such job, attempt or run, or one the token may not read."""

    status = Exit.NOT_FOUND


class Unreachable(ClientError):
    """The API is unreachable or busy; ``after`` seconds suggested (its ``Retry-After``)."""

    status = Exit.REFUSED

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.after = after


class TimedOut(ClientError):
    """A wait reached its timeout before the run met the goal."""

    status = Exit.TIMED_OUT


class RunFailed(ClientError):
    """The run waited for failed, or was deleted before it finished; ``run`` is what the API says
    of it now (its ``findings`` explain the failure)."""

    status = Exit.FAILED

    def __init__(self, line: str, run: RunDetail) -> None:
        super().__init__(line)
        self.run = run
