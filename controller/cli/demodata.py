"""The demo's data directory: made afresh by each ``demo``, kept once anything else wrote to it,
and the token of the API that ``demo --serve`` runs on loopback.

``demo`` replays its scenarios into the embedded PostgreSQL and NATS of ``MPIJC_EMBEDDED__DATA_DIR``
(``.mpijc/``), where ``history`` and the API find them. A replay stores only what the data does
not hold yet, so a second demo on the first one's data would deliver nothing and repeat the
first one's mails. So the demo marks a data directory it made (``demo.json``) and removes that
directory's services' data before it replays again; ``up``, ``watch`` and ``replay`` remove the
mark (:func:`claim`), and a data directory holding anything but the demo's data is never removed.

``demo --serve`` serves the API on loopback with a token made for it, written to
``api-token`` in the data directory (mode 0600: readable by the user only) and removed when it
stops; the client commands read that file when they talk to a loopback API and have no token
of their own (``MPIJC_CLIENT__LOCAL_TOKEN_FILE``, :mod:`.apiclient`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from controller.cli.embedded.ownership import OwnerLock
from controller.contract.errors import StartupError
from controller.contract.settings import Settings

__all__ = ["MARK", "TOKEN_FILE", "claim", "embedded_only", "made_by_demo", "mark", "reset", "served_token"]

MARK = "demo.json"
"""In the data directory: the demo made it, and nothing else wrote to it since."""
TOKEN_FILE = "api-token"
"""In the data directory: the bearer token of the API ``demo --serve`` runs, while it runs."""
_SERVICES = ("postgres", "nats")
"""The services' folders in the data directory (:class:`~controller.cli.embedded.EmbeddedServices`)."""


def embedded_only(settings: Settings) -> bool:
    """Whether both services are the embedded ones (neither URL configured)."""
    return settings.database.url is None and settings.nats.url is None


def made_by_demo(data_dir: Path) -> bool:
    """Whether the demo made ``data_dir`` and nothing else wrote to it since."""
    return (data_dir / MARK).is_file()


def holds_data(data_dir: Path) -> bool:
    """Whether a service ever ran in ``data_dir``."""
    return any((data_dir / name).exists() for name in _SERVICES)


def reset(data_dir: Path) -> None:
    """Remove the services' data of a directory the demo made, so the next replay starts afresh;
    a :class:`StartupError` when a process runs on them (a ``demo --serve``, a ``history``)."""
    for name in _SERVICES:
        folder = data_dir / name
        if not folder.exists():
            continue
        lock = OwnerLock(folder / "owner.lock")
        if not lock.acquire():
            raise StartupError(
                f"{data_dir}: the demo's data is in use by {lock.holder()} (a `demo --serve`?): stop it, "
                "then run the demo again"
            )
        lock.release()
    for name in _SERVICES:
        shutil.rmtree(data_dir / name, ignore_errors=True)
    (data_dir / MARK).unlink(missing_ok=True)


def mark(data_dir: Path, scenarios: int) -> None:
    """Note that the demo made ``data_dir`` (what it replayed, when)."""
    note = {"replayed_at": datetime.now(UTC).isoformat(), "scenario_files": scenarios}
    (data_dir / MARK).write_text(json.dumps(note) + "\n")


def claim(settings: Settings) -> None:
    """A command that writes a cluster's data (``up``, ``watch``, ``replay``) takes the embedded
    data directory over: the demo no longer removes it."""
    if settings.database.url is None or settings.nats.url is None:
        (settings.embedded.data_dir / MARK).unlink(missing_ok=True)


@contextlib.contextmanager
def served_token(data_dir: Path) -> Iterator[str]:
    """A new bearer token, in ``data_dir/api-token`` (mode 0600) while inside, removed after."""
    token = secrets.token_urlsafe(32)
    path = data_dir / TOKEN_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # created anew: never an older file's mode or owner
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    try:
        yield token
    finally:
        path.unlink(missing_ok=True)
