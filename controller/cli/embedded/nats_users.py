"""The embedded NATS's users: a password for every identity of :mod:`controller.bus.serverconfig`,
made once per data directory.

Each password is 128 random bits in its own file, ``<data dir>/nats/users/<identity>``, readable
by its owner only (the folder too), never printed or logged; the server's configuration holds
only their bcrypt hashes. Each part of ``up`` is handed the file of its role's identity
(``MPIJC_NATS__USER``, ``MPIJC_NATS__PASSWORD_FILE``), a process of several consumer roles the
file of each role's (``MPIJC_NATS__ROLE_PASSWORD_FILES``). The files are made by the process that
starts the server, when it starts it, for every identity that has none; to rotate them, delete
the folder and start the owner (``up``) again.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from controller.bus.serverconfig import IDENTITIES, identity
from controller.cli.embedded.server import EmbeddedServiceError
from controller.contract.settings import NatsSettings

__all__ = ["BCRYPT_ROUNDS", "EmbeddedNatsUsers"]

BCRYPT_ROUNDS = 4
"""bcrypt's cost (2**4 rounds), the least it takes: a work factor slows the guessing of chosen
passwords, and nothing guesses 128 random bits; nats-server checks the hash at every connection,
so each part's connection costs it about a millisecond, not a tenth of a second."""


class EmbeddedNatsUsers:
    """The passwords of the embedded NATS's identities, one file each in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def password_file(self, name: str) -> Path:
        """The file holding identity ``name``'s password (a clear error for an unknown identity)."""
        return self.directory / identity(name).name

    def ensure(self) -> Mapping[str, str]:
        """Make the passwords that are missing; identity → bcrypt hash of its password, for the
        server's configuration (:func:`controller.bus.serverconfig.write_embedded`)."""
        import bcrypt  # the embedded extra's: only the embedded server needs it

        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        hashes = {}
        for who in IDENTITIES:
            path = self.password_file(who.name)
            try:
                password = path.read_text().strip()
            except FileNotFoundError:
                password = secrets.token_hex(16)
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "w") as out:
                    out.write(password + "\n")
            if not password:
                raise EmbeddedServiceError(f"{path} is empty: delete {self.directory} to make new passwords")
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(BCRYPT_ROUNDS))
            hashes[who.name] = hashed.decode()
        return hashes

    def settings(self, name: str, base: NatsSettings) -> NatsSettings:
        """``base`` with identity ``name`` and its password file; a one-line error when the file
        is missing (deleted while the server runs: its owner makes new ones when it starts)."""
        path = self.password_file(name)
        if not path.is_file():
            raise EmbeddedServiceError(
                f"the embedded NATS has no password for {name!r} in {self.directory}: "
                "restart the command that started it (up) to make them"
            )
        return base.as_user(name, path)

    def environment(self, *names: str) -> dict[str, str]:
        """The settings a child process connects as identity ``names[0]`` with; given several (the
        consumer roles of one process), each role connects as its own identity too
        (``MPIJC_NATS__ROLE_PASSWORD_FILES``)."""
        files = {name: str(self.settings(name, NatsSettings()).password_file) for name in names}
        own = {"MPIJC_NATS__USER": names[0], "MPIJC_NATS__PASSWORD_FILE": files[names[0]]}
        return own if len(names) == 1 else {**own, "MPIJC_NATS__ROLE_PASSWORD_FILES": json.dumps(files)}
