"""The exit statuses of every ``mpijob-controller`` command: one table, documented once
(``docs/cli.md``), and the errors that carry a status up to :func:`controller.cli.commands.main`.

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

A command raises :class:`CommandError` (or one of the API client's errors) with one line for the
user; ``main`` prints ``mpijob-controller COMMAND: LINE`` and exits with its status (with
``--debug``, the traceback too).
"""

from __future__ import annotations

import enum

__all__ = ["CommandError", "Exit", "UsageError"]


class Exit(enum.IntEnum):
    """An exit status, the same for every command."""

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


class CommandError(Exception):
    """A command cannot go on: ``str()`` is one line for the user, ``status`` the exit status."""

    def __init__(self, line: str, status: Exit) -> None:
        super().__init__(line)
        self.status = status


class UsageError(CommandError):
    """A malformed argument or setting, named in one line (exit 2)."""

    def __init__(self, line: str) -> None:
        super().__init__(line, Exit.USAGE)
