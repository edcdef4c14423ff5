"""One lifecycle for every embedded server: own it or share it, take over what was left, start,
wait until it answers, stop.

A subclass says how its server is found (:meth:`EmbeddedServer.running`), launched, made ready,
recognised on a port and stopped; :meth:`EmbeddedServer.start` and :meth:`EmbeddedServer.stop`
are the same for all of them (see :mod:`controller.cli.embedded`).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from controller.cli.embedded.ownership import OwnerLock
from controller.cli.embedded.processes import listening_pids, port_open, program

__all__ = ["EmbeddedServer", "EmbeddedServiceError", "Running"]

log = logging.getLogger("controller.cli.embedded")

OWNER_WAIT_S = 60.0
"""How long a second process waits for the owner's server to answer before giving up."""

TAKEOVER_POLL_S = 0.1
"""How often a process sharing the owner's server tries the owner lock, to take the server over
(start it again) once the owner has stopped it and left."""


class EmbeddedServiceError(RuntimeError):
    """An embedded server could not be started or used; the message is one line saying why."""


@dataclass(frozen=True)
class Running:
    """A live server process of our data directory, and the port it serves."""

    pid: int
    port: int | None


class EmbeddedServer(ABC):
    """A server of ``data_dir`` on 127.0.0.1:``port``, owned by whoever holds ``owner.lock``."""

    what: ClassVar[str]
    """The server's name in messages ("PostgreSQL", "NATS")."""
    port_variable: ClassVar[str]
    """The setting that moves it to another port, named in messages."""
    served_name: ClassVar[str]
    """The directory of ``data_dir`` the server keeps its data in."""
    log_name: ClassVar[str]
    """The file of ``data_dir`` the server writes its log to."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self._lock: OwnerLock | None = None
        self._owned = False  # a server runs that this object started or took over
        self._state = threading.Lock()  # ownership, as the takeover thread may change it
        self._leaving = threading.Event()
        self._successor: threading.Thread | None = None

    @property
    @abstractmethod
    def url(self) -> str:
        """How clients reach it."""

    @property
    def served(self) -> Path:
        """The directory the server keeps its data in, named in messages."""
        return self.data_dir / self.served_name

    @property
    def logfile(self) -> Path:
        """Where the server writes its log."""
        return self.data_dir / self.log_name

    @abstractmethod
    def running(self) -> Running | None:
        """The live server of this data directory, if one runs."""

    @abstractmethod
    def _launch(self) -> subprocess.Popen[bytes] | None:
        """Start the server process; the process when it is a child that :meth:`_wait_ready` can
        watch for an early exit, None when a launcher detached it."""

    @abstractmethod
    def _stop_owned(self) -> None:
        """Stop the server this object started or took over."""

    @abstractmethod
    def _stop_leftover(self, found: Running) -> None:
        """Stop a server of this data directory that an owner left behind."""

    @abstractmethod
    def _describe(self, pid: int) -> str | None:
        """``a <what> serving <dir>`` when ``pid`` is a server of this kind, else None."""

    def _adopt(self, found: Running) -> bool:
        """Whether a server left behind by a killed owner is taken over as it is (default: no,
        it is stopped and started again)."""
        return False

    def _ready(self) -> None:
        """Whatever clients need besides the open port (a database created, …); nothing by default."""
        return None

    def start(self) -> str:
        """Start the server (or take it over, or share the owner's); returns the URL."""
        self._leaving.clear()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lock = OwnerLock(self.data_dir / "owner.lock")
        if self._owner_serves(lock):
            self._ready()
            self._succeed_owner(lock)
            return self.url
        self._lock = lock
        try:
            self._start_owned()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _start_owned(self) -> None:
        found = self.running()
        if found is not None:
            if self._adopt(found):
                log.warning(
                    "taking over the embedded %s (pid %d) left running for %s",
                    self.what,
                    found.pid,
                    self.served,
                )
                self._owned = True
                self._ready()
                return
            log.warning(
                "stopping the embedded %s (pid %d, port %s) left running for %s",
                self.what,
                found.pid,
                found.port,
                self.served,
            )
            self._stop_leftover(found)
        if port_open(self.port):
            raise EmbeddedServiceError(self._port_taken())
        process = self._launch()
        self._owned = True
        self._wait_ready(process)
        self._ready()
        log.info("embedded %s on 127.0.0.1:%d (data in %s)", self.what, self.port, self.served)

    def _wait_ready(self, process: subprocess.Popen[bytes] | None, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not port_open(self.port):
            if process is not None and process.poll() is not None:
                raise EmbeddedServiceError(
                    f"{self.what} exited with status {process.returncode}; see {self.logfile}"
                )
            if time.monotonic() > deadline:
                raise EmbeddedServiceError(
                    f"{self.what} did not open port {self.port} in {timeout_s:.0f}s; see {self.logfile}"
                )
            time.sleep(0.01)

    def _owner_serves(self, lock: OwnerLock) -> bool:
        """False once ``lock`` is ours (we own the server); True when another live owner's server
        answers on our port and we may share it. A server of the owner on another port, or one
        that does not answer within :data:`OWNER_WAIT_S`, is an :class:`EmbeddedServiceError`."""
        what = f"{self.what} of {self.served}"
        deadline = time.monotonic() + OWNER_WAIT_S
        while not lock.acquire():
            found = self.running()
            if found is not None and found.port not in (None, self.port):
                raise EmbeddedServiceError(
                    f"the embedded {what} runs on port {found.port} for "
                    f"{lock.holder()}, not on port {self.port}; stop it or set {self.port_variable}"
                )
            if found is not None and port_open(self.port):
                log.info("using the embedded %s: %s's, on port %d", what, lock.holder(), self.port)
                return True
            if time.monotonic() > deadline:
                raise EmbeddedServiceError(
                    f"the embedded {what} belongs to {lock.holder()} but did not "
                    f"answer on port {self.port} within {OWNER_WAIT_S:.0f}s; see {self.logfile}"
                )
            time.sleep(0.1)
        return False

    def _succeed_owner(self, lock: OwnerLock) -> None:
        """Take the server over when its owner leaves (a second ``api`` started as the first one
        stops): the owner stops its server, and this process, which still uses it, starts it
        again on the same port and data, where its clients reconnect."""
        name = f"embedded-{self.what}-successor"
        self._successor = threading.Thread(
            target=self._take_over_when_free, args=(lock,), name=name, daemon=True
        )
        self._successor.start()

    def _take_over_when_free(self, lock: OwnerLock) -> None:
        while not self._leaving.wait(TAKEOVER_POLL_S):
            with self._state:
                if self._leaving.is_set() or not lock.acquire():
                    continue
                self._lock = lock
                what = f"the embedded {self.what} of {self.served}"
                log.warning("the owner of %s left; starting it here", what)
                try:
                    self._start_owned()
                except (EmbeddedServiceError, OSError) as exc:
                    log.error("%s cannot be started again: %s", what, exc)
                return

    def _port_taken(self) -> str:
        """Why the port cannot be ours: what listens there, as far as can be told."""
        advice = f"stop it or set {self.port_variable}"
        pids = listening_pids(self.port)
        serving = next((found for found in map(self._describe, pids) if found is not None), None)
        if serving is None:
            serving = self._describe_unseen()
        if serving is not None:
            return f"port {self.port} is in use by {serving}, not {self.served}; {advice}"
        who = ", ".join(program(pid) for pid in pids) or "another program"
        return f"port {self.port} is in use by {who}, not the embedded {self.what} of {self.served}; {advice}"

    def _describe_unseen(self) -> str | None:
        """What serves our port when its process cannot be inspected, if the server can be asked."""
        return None

    def stop(self) -> None:
        """Stop the server if this object started or took it over; give up ownership."""
        self._leaving.set()
        if self._successor is not None and self._successor is not threading.current_thread():
            self._successor.join()
            self._successor = None
        with self._state:
            try:
                if self._owned:
                    self._stop_owned()
                    self._owned = False
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None
