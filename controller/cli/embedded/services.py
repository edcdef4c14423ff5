"""The embedded services a command uses: started for each URL left unset, stopped on leaving."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import TracebackType

from controller.cli.embedded.nats_server import EmbeddedNats
from controller.cli.embedded.nats_users import EmbeddedNatsUsers
from controller.cli.embedded.postgres import EmbeddedPostgres

__all__ = ["EmbeddedServices"]


class EmbeddedServices(contextlib.AbstractContextManager["EmbeddedServices"]):
    """Start what is not configured, stop what was started, on leaving the ``with`` block.

    The embedded NATS has the users and permissions of ``nats_prefix``'s topology
    (:class:`EmbeddedNats`), or none with ``nats_users=False``."""

    def __init__(
        self,
        data_dir: Path,
        postgres_port: int,
        nats_port: int,
        database_url: str | None,
        nats_url: str | None,
        *,
        nats_prefix: str = "",
        nats_users: bool = True,
    ) -> None:
        self._postgres = None if database_url else EmbeddedPostgres(data_dir / "postgres", postgres_port)
        self._nats = (
            None if nats_url else EmbeddedNats(data_dir / "nats", nats_port, nats_prefix, users=nats_users)
        )
        self.database_url = database_url or ""
        self.nats_url = nats_url or ""

    @property
    def nats_users(self) -> EmbeddedNatsUsers | None:
        """The identities' passwords of the embedded NATS; None for a configured NATS (its
        identity is the settings') or an embedded one without users."""
        return self._nats.users if self._nats else None

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
