"""JetStream streams and durables: connecting, declaring, aligning, and waiting for consumers.

Streams are declared idempotently (created, or updated to the configured limits) before
anything is published or consumed; publishing itself is :mod:`controller.bus.publishing`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StorageType, StoreCompression, StreamConfig
from nats.js.errors import NotFoundError

from controller.bus.answering import is_unanswered, until_answered
from controller.bus.serverconfig import MAX_MSG_BYTES, inbox_prefix
from controller.contract.credentials import tls_context
from controller.contract.settings import NatsSettings
from controller.contract.subjects import StreamFamily, Topology

log = logging.getLogger(__name__)

FAMILIES: tuple[StreamFamily, ...] = ("jobs", "findings", "audit", "dlq", "logs")

LOGS_DUPLICATE_WINDOW_S = 120.0
"""A log batch is deduplicated only against its own retried publish (a lost ack), never against a
relist: two minutes, so the ids the server remembers stay few at thousands of batches a minute."""


def stream_config(topology: Topology, family: StreamFamily, settings: NatsSettings) -> StreamConfig:
    """The configuration each stream is kept at.

    ``LOGS`` differs: S2-compressed (log text shrinks several times), bounded by age and by
    bytes (``logs_max_age_s``, ``logs_max_bytes``), the oldest lines discarded first. JetStream
    has no byte limit per subject (``max_msgs_per_subject`` counts messages, whose size a batch
    decides), so the per-run cap and the per-namespace share are the followers'
    (``MPIJC_LOGS__RUN_MAX_BYTES``, ``MPIJC_LOGS__NAMESPACE_MAX_BYTES``:
    :mod:`controller.bus.logshares`, docs/logs.md)."""
    if family == "logs":
        return StreamConfig(
            name=topology.stream(family),
            subjects=[topology.wildcard(family)],
            storage=StorageType.FILE,
            duplicate_window=LOGS_DUPLICATE_WINDOW_S,
            max_age=settings.logs_max_age_s,
            max_bytes=settings.logs_max_bytes,
            discard=DiscardPolicy.OLD,
            num_replicas=settings.replicas,
            max_msg_size=MAX_MSG_BYTES,
            compression=StoreCompression.S2,
        )
    return StreamConfig(
        name=topology.stream(family),
        subjects=[topology.wildcard(family)],
        storage=StorageType.FILE,
        duplicate_window=settings.duplicate_window_s,
        max_age=settings.max_age_s,
        discard=DiscardPolicy.OLD,
        num_replicas=settings.replicas,
        max_msg_size=MAX_MSG_BYTES,
    )


async def ensure_streams(js: JetStreamContext, topology: Topology, settings: NatsSettings) -> None:
    """Create every stream, or bring an existing one to the configured limits; one already at
    them is left alone, so an identity that may only look streams up (every one but ``admin``,
    :mod:`controller.bus.serverconfig`) starts once the admin has declared them. An update it
    may not make (a new release's limits before the migrate Job has run) is logged, and the
    stream used as it is."""
    for family in FAMILIES:
        config = stream_config(topology, family, settings)
        name = config.name or ""
        try:
            info = await until_answered(functools.partial(js.stream_info, name), f"stream {name}")
        except NotFoundError:
            await _declared(js.add_stream(config), config, "create")
            log.info("created stream %s for %s", config.name, config.subjects)
        else:
            if _differs(info.config, config):
                try:
                    await _declared(js.update_stream(config), config, "update")
                except PermissionError as exc:
                    log.warning("%s; using it as it is", exc)


_DECLARED = (
    "subjects",
    "storage",
    "duplicate_window",
    "max_age",
    "max_bytes",
    "discard",
    "num_replicas",
    "max_msg_size",
    "compression",
)
"""The fields of :func:`stream_config`, compared with what the server has."""


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    """Whether a stream's configuration differs from ``wanted`` in a field that declares."""
    return any(_declared_value(current, key) != _declared_value(wanted, key) for key in _DECLARED)


def _declared_value(config: StreamConfig, key: str) -> object:
    """A field as compared: unset limits and compression read as the server's defaults."""
    value = getattr(config, key)
    if key == "max_bytes" and value is None:
        return -1
    if key == "compression" and value is None:
        return StoreCompression.NONE
    return value


async def _declared(request: Awaitable[object], config: StreamConfig, verb: str) -> None:
    """Await a stream's creation or update; a refusal (or no answer: a request the server's
    permissions drop is never answered) says who may declare streams."""
    try:
        await request
    except (NatsTimeoutError, NoRespondersError) as exc:
        raise PermissionError(
            f"could not {verb} stream {config.name} ({exc!r}): with NATS authorization only the admin "
            "identity may, and the migrate Job declares them (docs/security.md)"
        ) from exc


async def align_durable(
    js: JetStreamContext, stream: str, durable: str, *, subject: str, max_ack_pending: int
) -> bool:
    """Give an existing durable consumer the filter ``subject`` and ``max_ack_pending``; returns
    whether it changed.

    Subscribing binds to a durable as it was declared, so a filter narrowed or a hand-out
    made ordered (:func:`controller.bus.settling.consumer_config`) in a later version would
    never reach a running installation; the server keeps the consumer's position across the
    update. A durable that does not exist yet is left to be created."""
    try:
        info = await until_answered(
            functools.partial(js.consumer_info, stream, durable), f"durable {durable} of {stream}"
        )
    except NotFoundError:
        return False
    config = info.config
    if (
        config.filter_subject == subject
        and not config.filter_subjects
        and config.max_ack_pending == max_ack_pending
    ):
        return False
    await js.add_consumer(
        stream, replace(config, filter_subject=subject, filter_subjects=None, max_ack_pending=max_ack_pending)
    )
    log.info("durable %s on %s now filters %s, %d pending at most", durable, stream, subject, max_ack_pending)
    return True


async def ack_floor(js: JetStreamContext, stream: str, durable: str) -> int | None:
    """The stream sequence up to which durable ``durable`` acknowledged everything (None: no such
    durable)."""
    try:
        info = await until_answered(
            functools.partial(js.consumer_info, stream, durable), f"durable {durable} of {stream}"
        )
    except NotFoundError:
        return None
    return info.ack_floor.stream_seq if info.ack_floor else 0


async def remove_durable(js: JetStreamContext, stream: str, durable: str) -> bool:
    """Delete durable ``durable`` of ``stream``; False if there was none."""
    try:
        await js.delete_consumer(stream, durable)
    except NotFoundError:
        return False
    return True


async def connect(url: str, name: str, settings: NatsSettings | None = None) -> NATS:
    """Connect, then reconnect without limit: a restarting NATS must not kill a watcher.

    ``url`` may list several servers of a cluster, comma-separated (``nats://a:4222,nats://b:4222``);
    the client tries them in turn and learns the rest of the cluster from the one it reaches.
    Once connected, connection errors are logged as one line each, not as tracebacks. The first
    connection is retried quietly until it succeeds; callers bound that wait
    (``startup_timeout_s``) and say why they gave up. ``settings`` carries the identity
    (:func:`credentials`)."""
    connected = False

    async def error(exc: Exception) -> None:
        log.log(
            logging.WARNING if connected else logging.DEBUG, "NATS %s: %s", name, exc or type(exc).__name__
        )

    nc = await nats.connect(
        servers=servers(url),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        error_cb=error,
        **credentials(settings or NatsSettings()),
    )
    connected = True
    return nc


async def disconnect(nc: NATS) -> None:
    """Drain the connection (what it published is flushed, its subscriptions end), or close it
    when it cannot be drained: a connection reconnecting to a server that is gone refuses to
    drain, and one left open keeps reconnecting and keeps the process from exiting."""
    if nc.is_closed:
        return
    if nc.is_connected:
        try:
            await nc.drain()
            return
        except Exception as exc:
            log.debug("NATS %s: drain failed (%s); closing", nc.options.get("name"), exc)
    try:
        await nc.close()
    except asyncio.CancelledError:
        # nats-py closing a connection that was reconnecting awaits the old socket's close waiter,
        # which its own reconnect task, cancelled a moment before, may have cancelled with it: the
        # connection is closed all the same. A cancellation of the caller is passed on.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.debug("NATS %s: closed (its socket's close waiter was cancelled)", nc.options.get("name"))


def credentials(settings: NatsSettings) -> dict[str, Any]:
    """nats-py's connect options for the identity of ``settings``: user and password (a password
    file is read at every connection, so a rotated one is taken on the next reconnect) or a
    credentials file, the identity's own inboxes, and TLS verified against ``tls_ca_file``."""
    options: dict[str, Any] = {}
    if settings.user:
        options["user"] = settings.user
        options["inbox_prefix"] = inbox_prefix(settings.user)
        if settings.password_file is not None:
            path = settings.password_file
            options["password"] = lambda: path.read_text().strip()
        elif settings.password is not None:
            options["password"] = settings.password.get_secret_value()
    if settings.creds_file is not None:
        options["user_credentials"] = str(settings.creds_file)
    if settings.tls_ca_file is not None:
        options["tls"] = tls_context(settings.tls_ca_file)
    return options


def servers(url: str) -> list[str]:
    """The server URLs of a comma-separated list."""
    return [server.strip() for server in url.split(",") if server.strip()]


async def wait_until_consumed(
    js: JetStreamContext, stream: str, durable: str, timeout_s: float = 60.0
) -> None:
    """Block until a durable consumer has acknowledged everything in its stream.

    Everything: each message its filter takes that the stream held when the durable was first
    seen here, and whatever came since. The server signals a consumer of a new message after it
    has acknowledged the publish, so a consumer asked right after a publish can show nothing
    pending; the durable's delivered sequence must therefore reach the stream's last message of
    its filter as well, not only its pending counts fall to zero.

    A consumer split into partitions (the rules: durables ``<durable>_p<n>``,
    :meth:`Topology.partition_durable`) has consumed everything when each of its partitions has;
    until the first of them is declared, it has not."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    targets: dict[str, int] = {}
    while True:
        try:
            names, waiting = await _waiting(js, stream, durable, targets)
        except Exception as exc:
            if not is_unanswered(exc):  # a stream leader being elected: ask again
                raise
            names, waiting = [], f"no answer from JetStream: {exc!r}"
        if names and not waiting:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(waiting or f"no durable {durable} (nor partitions of it) on {stream}")
        await asyncio.sleep(0.05)


async def _waiting(
    js: JetStreamContext, stream: str, durable: str, targets: dict[str, int]
) -> tuple[list[str], str]:
    """The durables (or partitions) of ``durable``, and what the first with work left still has.

    ``targets``: the stream sequence each durable must have delivered, read the first time it is
    seen (its filter's last message then) and kept across calls."""
    names = await _durables(js, stream, durable)
    for name in names:
        info = await js.consumer_info(stream, name)
        if name not in targets:
            targets[name] = await _last_taken(js, stream, info.config.filter_subject)
        delivered = info.delivered.stream_seq or 0
        if info.num_pending or info.num_ack_pending or delivered < targets[name]:
            return names, (
                f"{name} still has {info.num_pending} pending, {info.num_ack_pending} unacked,"
                f" delivered up to {delivered} of {targets[name]}"
            )
    return names, ""


async def _last_taken(js: JetStreamContext, stream: str, subject: str | None) -> int:
    """The stream sequence of the last message on ``subject`` (the whole stream when None), 0 if none."""
    if not subject:
        return (await js.stream_info(stream)).state.last_seq
    try:
        return (await js.get_last_msg(stream, subject)).seq or 0
    except NotFoundError:
        return 0


async def _durables(js: JetStreamContext, stream: str, durable: str) -> list[str]:
    """``durable`` if it exists, else the durables of its partitions."""
    try:
        await js.consumer_info(stream, durable)
    except NotFoundError:
        pass
    else:
        return [durable]
    partition = re.compile(re.escape(durable) + r"_p[0-9]+")
    return sorted(
        info.name for info in await js.consumers_info(stream) if info.name and partition.fullmatch(info.name)
    )
