"""The nats-server configuration file: message and JetStream limits, and who may do what.

One rendering serves every topology: ``deploy/base/nats.conf`` (the ConfigMap of the bundled
NATS, ``deploy/components/ha-nats`` too) is this module's output, and the embedded server of
``up`` and ``demo`` is started with the same limits and users (``-c``, :func:`write_embedded`).
Render it with ``python -m controller.bus.serverconfig`` (``--prefix``, ``--no-users``).

Every process connects as the identity of its role (:data:`IDENTITIES`); each may publish only
the subjects it writes, use only the consumers it reads with, and keep only its own key-value
buckets. An identity that reads a stream through consumers named at run time (:data:`ANY`: the
rules' partitions, ephemeral readers) is denied every other identity's durable of that stream
by name (:func:`foreign_durables`), and may not create a consumer without a name in the
subject (the body could name another's): it cannot pull, acknowledge, re-point or delete them.
Only ``admin`` (the migrate Job, operators) may create, update, purge or delete the streams
``JOBS``, ``FINDINGS``, ``AUDIT`` and ``DLQ`` — the other identities may only look them up (every
process checks at start that they are at their configuration, and leaves them alone when they
are). Each identity's inboxes are ``_INBOX_<identity>.…`` (:func:`inbox_prefix`), so
no identity can read the replies and pulled messages meant for another. Passwords are never in
the file: the manifests' names environment variables (``$NATS_PASSWORD_<IDENTITY>``) that
nats-server resolves at start, filled from Secret ``mpijc-nats-users``; the embedded server's
holds bcrypt hashes of the passwords generated in its data directory (``docs/security.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.contract.subjects import (
    AUDIT_DURABLE,
    AUDIT_LIFECYCLE_DURABLE,
    HISTORY_DURABLE,
    HISTORY_FINDINGS_DURABLE,
    K8S_EVENTS_DURABLE,
    NOTIFY_DURABLE,
    NOTIFY_FINDINGS_DURABLE,
    RULES_DURABLE,
    RULES_LOGS_DURABLE,
    StreamFamily,
    Topology,
)

ANY = "*"
"""In :attr:`Identity.reads`: any consumer of the stream (ephemeral readers, partitions)."""

STREAMS: tuple[StreamFamily, ...] = ("jobs", "findings", "audit", "dlq", "logs")

MAX_PAYLOAD = "8MB"
"""Largest message the server takes: an event with a pod's log tail stays far below it."""
MAX_MSG_BYTES = 8 * 1024 * 1024
"""The same, in bytes (``MB`` is 2**20 to nats-server): the streams' ``max_msg_size``."""
PULL_MAX_BYTES = 4 * MAX_MSG_BYTES
"""Most bytes one pull request is handed (JetStream's ``max_bytes``): a batch of large messages
stays under the 64 MiB a nats-py subscription holds before it is a slow consumer, whose
connection the server cuts; at least one largest message, so every message can be pulled."""


@dataclass(frozen=True)
class Identity:
    """What one role does on the bus; names are those of :mod:`controller.contract.subjects`
    before the topology's prefix is applied."""

    name: str
    publishes: tuple[StreamFamily, ...] = ()
    reads: Mapping[StreamFamily, tuple[str, ...]] = field(default_factory=dict)
    """Stream family → the consumers (durable names) it reads with, or :data:`ANY`."""
    dead_letters: tuple[str, ...] = ()
    """Consumers whose dead letters (``dlq.<consumer>``) it publishes."""
    gets: tuple[StreamFamily, ...] = ()
    """Streams whose last message of a subject it reads (a log follower's resume position)."""
    buckets: tuple[str, ...] = ()
    """Key-value buckets it keeps (creates, reads, writes, purges keys of)."""
    purges: tuple[StreamFamily, ...] = ()
    """Streams it purges messages of (the log followers: a namespace's oldest past its share)."""
    monitors: bool = False
    """Reads the state of the streams and of their consumers (the API's JetStream metrics)."""
    hears_probes: bool = False
    """Hears the progress probes (``jobs.*.*.log``) as they are published: which runs went quiet,
    what the log followers of every watcher replica follow first (:mod:`watchers.sharing`)."""
    admin: bool = False

    @property
    def variable(self) -> str:
        """The environment variable nats-server reads this identity's password from."""
        return "NATS_PASSWORD_" + self.name.upper().replace("-", "_")


IDENTITIES: tuple[Identity, ...] = (
    Identity("admin", admin=True),
    Identity(
        "watchers",
        publishes=("jobs", "logs"),
        gets=("logs",),
        buckets=("published", "logs-leases", "logs-shares"),
        purges=("logs",),
        hears_probes=True,
    ),
    Identity("admission", publishes=("audit",)),
    Identity(
        "history",
        reads={"jobs": (HISTORY_DURABLE,), "findings": (HISTORY_FINDINGS_DURABLE,)},
        dead_letters=(HISTORY_DURABLE, HISTORY_FINDINGS_DURABLE),
    ),
    Identity(
        "rules",
        publishes=("findings", "jobs"),  # jobs: what its log reader saw in running jobs' output
        reads={"jobs": (ANY,), "findings": (ANY,), "logs": (RULES_LOGS_DURABLE,)},
        dead_letters=(RULES_DURABLE, RULES_LOGS_DURABLE),
        buckets=("rules-state", "rules-leases"),
    ),
    Identity(
        "notify",
        reads={"jobs": (NOTIFY_DURABLE,), "findings": (NOTIFY_FINDINGS_DURABLE,)},
        dead_letters=(NOTIFY_DURABLE, NOTIFY_FINDINGS_DURABLE),
    ),
    Identity("dispatch"),
    Identity(
        "audit",
        publishes=("audit",),
        reads={"jobs": (AUDIT_LIFECYCLE_DURABLE,), "audit": (AUDIT_DURABLE,)},
        dead_letters=(AUDIT_DURABLE, AUDIT_LIFECYCLE_DURABLE),
    ),
    Identity("k8s-events", reads={"findings": (K8S_EVENTS_DURABLE,)}, dead_letters=(K8S_EVENTS_DURABLE,)),
    Identity("api", reads={"logs": (ANY,)}, monitors=True),
)
"""Every identity on the bus: ``admin``, and one per process kind (the watchers, the admission
webhook, each consumer role of ``consumers.registry.CONSUMERS``, the API)."""


def identity(name: str) -> Identity:
    """The identity called ``name``; a clear error for an unknown one."""
    for known in IDENTITIES:
        if known.name == name:
            return known
    raise KeyError(f"no NATS identity {name!r}; known: {', '.join(i.name for i in IDENTITIES)}")


def inbox_prefix(user: str) -> str:
    """The inbox prefix of ``user``'s connections: its replies come to ``_INBOX_<user>.…`` only."""
    return f"_INBOX_{user}"


@dataclass(frozen=True)
class Permissions:
    """Subjects an identity may publish to and subscribe to; ``deny_publish`` wins over
    ``publish`` (nats-server's ``deny``)."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = ()


_API = "$JS.API"


def _consumer_subjects(stream: str, consumer: str, *, nameless: bool = False) -> list[str]:
    """What reading ``stream`` through ``consumer`` (a durable name, or ``*`` for any) takes;
    ``nameless``: also creating consumers whose name the server picks (a key-value watch's),
    which lets the request's body name any consumer, so only on a stream no other identity
    reads (:func:`_bucket_subjects`)."""
    named = [
        f"{_API}.CONSUMER.CREATE.{stream}.{consumer}",
        f"{_API}.CONSUMER.CREATE.{stream}.{consumer}.>",  # with a filter subject
        f"{_API}.CONSUMER.DURABLE.CREATE.{stream}.{consumer}",
        f"{_API}.CONSUMER.INFO.{stream}.{consumer}",
        f"{_API}.CONSUMER.MSG.NEXT.{stream}.{consumer}",
        f"$JS.ACK.{stream}.{consumer}.>",
    ]
    if consumer != ANY:
        return named
    return [  # ephemeral readers (named by the client, nats-py's NUID), removed again, flow-controlled
        *named,
        *([f"{_API}.CONSUMER.CREATE.{stream}"] if nameless else []),
        f"{_API}.CONSUMER.DELETE.{stream}.*",
        f"{_API}.CONSUMER.LIST.{stream}",
        f"{_API}.CONSUMER.NAMES.{stream}",
        f"$JS.FC.{stream}.>",
    ]


def _foreign_consumer_subjects(stream: str, durable: str) -> list[str]:
    """Everything that would act on another identity's durable ``durable`` of ``stream``: create
    or re-point it, look it up, pause, delete it (one-token verbs, with a filter too), pull from
    it, move its leader, acknowledge its messages."""
    return [
        f"{_API}.CONSUMER.*.{stream}.{durable}",
        f"{_API}.CONSUMER.*.{stream}.{durable}.>",
        f"{_API}.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"{_API}.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"{_API}.CONSUMER.LEADER.STEPDOWN.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def _bucket_subjects(bucket: str) -> list[str]:
    """Keeping key-value bucket ``bucket``: its stream ``KV_<bucket>`` and its keys."""
    stream = f"KV_{bucket}"
    return [
        f"$KV.{bucket}.>",
        *(f"{_API}.STREAM.{verb}.{stream}" for verb in ("CREATE", "UPDATE", "INFO", "PURGE")),
        f"{_API}.STREAM.MSG.GET.{stream}",
        f"{_API}.DIRECT.GET.{stream}",
        f"{_API}.DIRECT.GET.{stream}.>",
        *_consumer_subjects(stream, ANY, nameless=True),
    ]


def permissions(topology: Topology, who: Identity) -> Permissions:
    """The subjects ``who`` may publish and subscribe to in ``topology``."""
    if who.admin:
        return Permissions(publish=(">",), subscribe=(">",))
    publish = [f"{_API}.INFO", *(f"{_API}.STREAM.INFO.{topology.stream(family)}" for family in STREAMS)]
    publish += [topology.wildcard(family) for family in who.publishes]
    publish += [topology.dead_letter(consumer) for consumer in who.dead_letters]
    for family, consumers in who.reads.items():
        for consumer in consumers:
            name = consumer if consumer == ANY else topology.durable(consumer)
            publish += _consumer_subjects(topology.stream(family), name)
    for family in who.gets:
        publish.append(f"{_API}.STREAM.MSG.GET.{topology.stream(family)}")
    for family in who.purges:
        publish.append(f"{_API}.STREAM.PURGE.{topology.stream(family)}")
    for bucket in who.buckets:
        publish += _bucket_subjects(topology.bucket(bucket))
    if who.monitors:  # read-only: what exists, how far behind each consumer is
        publish += [f"{_API}.STREAM.LIST", *(f"{_API}.CONSUMER.LIST.{topology.stream(f)}" for f in STREAMS)]
    subscribe = [f"{inbox_prefix(who.name)}.>", *([topology.log_probes()] if who.hears_probes else [])]
    deny = [
        subject
        for family, durable in foreign_durables(who)
        for subject in _foreign_consumer_subjects(topology.stream(family), topology.durable(durable))
    ]
    return Permissions(
        publish=tuple(dict.fromkeys(publish)), subscribe=tuple(subscribe), deny_publish=tuple(deny)
    )


def foreign_durables(who: Identity) -> list[tuple[StreamFamily, str]]:
    """The durables of other identities on the streams ``who`` reads through any consumer
    (:data:`ANY`): what its permissions deny it by name, so that it acknowledges, pulls from,
    re-points and deletes its own consumers only."""
    return [
        (family, durable)
        for family, consumers in who.reads.items()
        if ANY in consumers
        for other in IDENTITIES
        if other.name != who.name
        for durable in other.reads.get(family, ())
        if durable != ANY
    ]


@dataclass(frozen=True)
class Limits:
    """The server's limits; the defaults suit the bundled NATS (a 10 GiB volume, 1 GiB of memory)."""

    max_payload: str = MAX_PAYLOAD
    max_file_store: str = "9GB"
    """JetStream's file store, below the 10 GiB volume so the server refuses writes rather than
    failing on a full disk."""
    max_memory_store: str = "256MB"
    """Memory-backed streams: none of ours are; kept small under the pod's 1 GiB limit."""


def render(
    topology: Topology,
    *,
    users: bool = True,
    limits: Limits | None = None,
    hashes: Mapping[str, str] | None = None,
) -> str:
    """The configuration file's text: limits, and (``users``) the identities' permissions, each
    password the identity's environment variable or, in ``hashes`` (identity → bcrypt hash, which
    nats-server compares a client's password with), its hash."""
    limits = limits or Limits()
    lines = [
        "# The nats-server configuration of mpijob-controller, rendered by",
        "# `python -m controller.bus.serverconfig` (controller/bus/serverconfig.py): do not edit,",
        "# render again. Passwords come from the environment ($NATS_PASSWORD_<IDENTITY>).",
        f"max_payload: {limits.max_payload}",
        "jetstream {",
        f"  max_file_store: {limits.max_file_store}",
        f"  max_memory_store: {limits.max_memory_store}",
        "}",
    ]
    if users:
        lines += ["authorization {", "  users: ["]
        for who in IDENTITIES:
            allowed = permissions(topology, who)
            lines += [
                "    {",
                f"      user: {json.dumps(who.name)}",
                f"      password: {json.dumps(hashes[who.name]) if hashes else '$' + who.variable}",
                "      permissions: {",
                f"        publish: {{allow: {json.dumps(list(allowed.publish))}{_denied(allowed)}}}",
                f"        subscribe: {{allow: {json.dumps(list(allowed.subscribe))}}}",
                "      }",
                "    }",
            ]
        lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def _denied(allowed: Permissions) -> str:
    """The ``deny`` list of a rendered ``publish`` permission, if any."""
    return f", deny: {json.dumps(list(allowed.deny_publish))}" if allowed.deny_publish else ""


def write_embedded(directory: Path, topology: Topology, hashes: Mapping[str, str] | None) -> Path:
    """Write the configuration file of the embedded server into ``directory`` (readable by its
    owner only): the limits and, with ``hashes`` (identity → bcrypt hash of its password), the
    users and permissions of ``topology``; without, no users (a test session's server, shared by
    tests under many prefixes). Returns its path."""
    path = directory / "nats.conf"
    text = render(topology, users=hashes is not None, hashes=hashes)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    path.chmod(0o600)  # a file an earlier version wrote may have been readable by others
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Print the configuration file (``deploy/base/nats.conf`` is this with no arguments)."""
    parser = argparse.ArgumentParser(prog="python -m controller.bus.serverconfig", description=__doc__)
    parser.add_argument("--prefix", default="", help="the installation's MPIJC_NATS__PREFIX")
    parser.add_argument("--no-users", action="store_true", help="limits only, no authorization")
    args = parser.parse_args(argv)
    sys.stdout.write(render(Topology(args.prefix), users=not args.no_users))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
