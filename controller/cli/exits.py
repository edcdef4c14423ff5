"""The exit statuses of every ``mpijob-controller`` command: one table, documented once
(``docs/cli.md``), and the errors that carry a status up to :func:`controller.cli.commands.main`.

The table (0 ok, 1 the run or a check failed, 2 usage, 3 refused or unreachable, 4 not found,
5 timed out, 130 Ctrl-C), :class:`Exit` and :class:`UsageError` (a malformed argument, exit 2)
are the Python client's (:mod:`controller.client.errors`), whose errors carry their status. A
command raises :class:`CommandError` (or one of the client's errors) with one line for the user;
``main`` prints ``mpijob-controller COMMAND: LINE`` and exits with its status (with ``--debug``,
the traceback too).
"""

from __future__ import annotations

from controller.client.errors import ClientError, Exit, UsageError

__all__ = ["CommandError", "Exit", "UsageError"]


class CommandError(ClientError):
    """A command cannot go on: ``str()`` is one line for the user, ``status`` the exit status."""

    def __init__(self, line: str, status: Exit) -> None:
        super().__init__(line)
        self.status = status
