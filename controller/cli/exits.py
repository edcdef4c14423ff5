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

The table and :class:`Exit` are the Python client's (:mod:`controller.client.errors`), whose
errors carry their status. A command raises :class:`CommandError` (or one of the client's
errors) with one line for the user; ``main`` prints ``mpijob-controller COMMAND: LINE`` and exits
with its status (with ``--debug``, the traceback too).
"""

from __future__ import annotations

from controller.client.errors import ClientError, Exit

__all__ = ["CommandError", "Exit", "UsageError"]


class CommandError(ClientError):
    """A command cannot go on: ``str()`` is one line for the user, ``status`` the exit status."""

    def __init__(self, line: str, status: Exit) -> None:
        super().__init__(line)
        self.status = status


class UsageError(CommandError):
    """A malformed argument or setting, named in one line (exit 2)."""

    def __init__(self, line: str) -> None:
        super().__init__(line, Exit.USAGE)
