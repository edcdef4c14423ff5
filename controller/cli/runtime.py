"""What a command runs on: the services it uses, reached or started, and the parts it wires.

Each command asks only for what it uses — the database, the bus, or both — so ``history``
or ``audit verify`` never wait for NATS and the watchers never wait for PostgreSQL.
:func:`runtime` starts the embedded services where no URL is configured, waits at most
``startup_timeout_s`` for each, migrates, declares the streams, and on failure raises
:class:`~controller.contract.errors.StartupError` with one line naming the setting to
check. Once running, lost connections reconnect with backoff as before.

On the embedded NATS each command connects as the identity of its role (``identity``, from
:mod:`controller.bus.serverconfig`), with the password made in the data directory, after the
``admin`` identity declared the streams; a configured NATS (``MPIJC_NATS__URL``) is reached as
its settings say (``MPIJC_NATS__USER`` …), and the migrate Job declares the streams there.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry

from controller.bus.client import NATS, JetStreamContext
from controller.bus.publishing import Publisher
from controller.bus.streams import connect, disconnect, ensure_streams
from controller.cli.embedded import EmbeddedServices
from controller.cli.embedded.nats_users import EmbeddedNatsUsers
from controller.contract.errors import StartupError
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import Heartbeat, PipelineMetrics, serve_metrics

# SQLAlchemy and alembic (0.3 s of CPU) are imported by the commands that use the database
# only: the watcher's start needs neither
if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from controller.kube.gateway import KubeGateway
    from watchers.admission.certificates import CertificateReloader

log = logging.getLogger("mpijob_controller")

_UNUSED = "unused://"
"""Given to the embedded launcher for a service the command does not use: nothing is started."""


@dataclass
class Runtime:
    """What a command gets: settings (on the embedded NATS, with its identity's credentials),
    metrics, and the services it asked for."""

    settings: Settings
    topology: Topology
    metrics: PipelineMetrics
    database_url: str = ""
    nats_url: str = ""
    _engine: AsyncEngine | None = None
    _nc: NATS | None = None
    _nats_users: EmbeddedNatsUsers | None = None

    def nats_as(self, identity: str) -> NatsSettings:
        """How to connect as ``identity``: on the embedded NATS with its password; on a configured
        NATS with the role's password file of ``role_password_files`` where it is set (a
        :class:`StartupError` for a role it lacks), else as the settings' one identity."""
        if self._nats_users is not None:
            return self._nats_users.settings(identity, self.settings.nats)
        files = self.settings.nats.role_password_files
        if not files:
            return self.settings.nats
        if identity not in files:
            raise StartupError(
                f"MPIJC_NATS__ROLE_PASSWORD_FILES: no password file for {identity!r} (it has "
                f"{', '.join(sorted(files))}): each role of the process connects as its own identity"
            )
        return self.settings.nats.as_user(identity, files[identity])

    @property
    def holds_nats_users(self) -> bool:
        """Whether the NATS is the embedded one, whose every identity's password is at hand."""
        return self._nats_users is not None

    @property
    def nats_for(self) -> Callable[[str], NatsSettings] | None:
        """Role → its identity's settings where each role has its own (the embedded NATS, or
        ``MPIJC_NATS__ROLE_PASSWORD_FILES``), else None: one identity, the settings', for all."""
        each_own = self.holds_nats_users or bool(self.settings.nats.role_password_files)
        return self.nats_as if each_own else None

    def nats_environment(self, *identities: str) -> dict[str, str]:
        """What a child process needs to connect as ``identities[0]`` (and, given several consumer
        roles, each of them as its own): on the embedded NATS the users and password files;
        nothing for a configured NATS (the child has the settings)."""
        return {} if self._nats_users is None else self._nats_users.environment(*identities)

    @contextlib.asynccontextmanager
    async def connected_as(self, identity: str) -> AsyncIterator[NATS]:
        """A further connection as ``identity`` (:meth:`nats_as`), drained on leaving."""
        nc = await connect(self.nats_url, f"mpijc-{identity}", self.nats_as(identity))
        try:
            yield nc
        finally:
            await disconnect(nc)

    @property
    def engine(self) -> AsyncEngine:
        assert self._engine is not None, "this command did not ask for the database"
        return self._engine

    @property
    def nc(self) -> NATS:
        assert self._nc is not None, "this command did not ask for the bus"
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        return self.nc.jetstream()

    @property
    def publisher(self) -> Publisher:
        return Publisher(self.js, self.topology, self.settings.nats.publish_retry_s)


def _where(url: str) -> str:
    """``host:port`` of a URL, without credentials (for error messages)."""
    parts = urlsplit(url.split(",", maxsplit=1)[0])
    return parts.netloc.rpartition("@")[2] or url


async def _reach_database(url: str, settings: Settings, variable: str, *, owner: bool = False) -> AsyncEngine:
    from controller.store.engine import make_engine, ping

    engine = make_engine(url, settings.database.pool_size)
    try:
        async with asyncio.timeout(settings.startup_timeout_s):
            while True:
                try:
                    async with engine.connect() as conn:
                        await ping(conn)
                    break
                except Exception as exc:
                    if "password authentication" in str(exc) or "does not exist" in str(exc):
                        raise StartupError(
                            f"{variable}: PostgreSQL at {_where(url)} refused us: {exc}"
                        ) from exc
                    log.debug("waiting for PostgreSQL at %s: %s", _where(url), exc)
                    await asyncio.sleep(1.0)
        await _migrate_or_check(engine, url, settings)
        if not owner and settings.database.url is not None and not _is_embedded(url, settings):
            await _check_runtime_role(engine, settings)
    except TimeoutError as exc:
        await engine.dispose()
        raise StartupError(
            f"{variable}: PostgreSQL at {_where(url)} did not answer within {settings.startup_timeout_s:g} s "
            "(MPIJC_STARTUP_TIMEOUT_S)"
        ) from exc
    except BaseException:
        await engine.dispose()
        raise
    return engine


async def _migrate_or_check(engine: AsyncEngine, url: str, settings: Settings) -> None:
    """Migrate as the owner (``owner_url``; else, single-role mode, as ``url``: always for the embedded
    PostgreSQL, elsewhere only with ``single_role``, else a one-line refusal), or with
    ``MPIJC_DATABASE__MIGRATE=false`` only check that someone did: a one-line error if not."""
    from controller.store import migrate

    database = settings.database
    if database.migrate:
        if database.owner_url is not None:
            await migrate.upgrade_async(database.owner_url.get_secret_value(), database.runtime_role)
            return
        if database.url is not None and not database.single_role:
            raise StartupError(
                "MPIJC_DATABASE__OWNER_URL is unset: migrations need the schema owner's URL (the "
                "Secret mpijc-database-owner), so the runtime role cannot rewrite the audit table; "
                "set MPIJC_DATABASE__SINGLE_ROLE=true to migrate as the runtime role anyway (docs/audit.md)"
            )
        if database.url is not None:
            log.warning(
                "single-role mode (MPIJC_DATABASE__SINGLE_ROLE=true): migrating as the runtime role, which "
                "owns the audit table and could rewrite it; set MPIJC_DATABASE__OWNER_URL to separate them"
            )
        await migrate.upgrade_async(url, single_role=True)
        return
    head = migrate.HEAD
    deadline = asyncio.get_running_loop().time() + settings.startup_timeout_s
    while True:  # the migrate Job may be running right now: wait for it, within the startup timeout
        async with engine.connect() as conn:
            at = await migrate.current_revision(conn)
        if at == head:
            return
        if asyncio.get_running_loop().time() >= deadline:
            break
        log.info("waiting for the migrate Job: schema at %s, expected %s", at or "none", head)
        await asyncio.sleep(min(2.0, settings.startup_timeout_s))
    if at != head:
        raise StartupError(
            f"MPIJC_DATABASE__MIGRATE=false: the schema at {_where(url)} is at revision {at or 'none'}, "
            f"not {head}; run the migrate Job (mpijob-controller migrate, MPIJC_DATABASE__OWNER_URL) first"
        )


def _is_embedded(url: str, settings: Settings) -> bool:
    """Whether ``url`` is this machine's embedded PostgreSQL (a loopback address on
    ``MPIJC_EMBEDDED__POSTGRES_PORT``), as ``up`` hands it to its parts: single-role by design
    (docs/security.md, "The runtime role"), so not a runtime URL to check."""
    parts = urlsplit(url.split(",", maxsplit=1)[0])
    try:
        port = parts.port
    except ValueError:
        return False
    return parts.hostname in ("127.0.0.1", "localhost", "::1") and port == settings.embedded.postgres_port


async def _check_runtime_role(engine: AsyncEngine, settings: Settings) -> None:
    """Refuse a ``MPIJC_DATABASE__URL`` whose role owns the tables or is a superuser: the
    processes would then hold the power to rewrite the audit chain. Single-role mode
    (``MPIJC_DATABASE__SINGLE_ROLE``) is the explicit way to run so, and gets a warning."""
    from controller.store.roles import role_powers

    async with engine.connect() as conn:
        powers = await role_powers(conn)
    if not powers.can_alter_schema:
        return
    if settings.database.single_role:
        log.warning(
            "MPIJC_DATABASE__URL: %s and could alter or rewrite the audit chain "
            "(MPIJC_DATABASE__SINGLE_ROLE=true); connect as the runtime role to separate them",
            powers.describe(),
        )
        return
    raise StartupError(
        f"MPIJC_DATABASE__URL: {powers.describe()}, so this process could alter or rewrite the audit "
        f"chain; point it at the runtime role ({settings.database.runtime_role!r}, "
        "MPIJC_DATABASE__RUNTIME_ROLE, granted by the migrate Job), or set "
        "MPIJC_DATABASE__SINGLE_ROLE=true to run as one role anyway (docs/security.md)"
    )


async def _reach_bus(
    url: str, settings: Settings, name: str, variable: str, declare_as: NatsSettings | None = None
) -> NATS:
    """Connect as ``settings.nats`` and check the streams; ``declare_as`` (the embedded NATS's
    admin) declares them first, as the migrate Job does in a cluster."""
    if declare_as is not None:
        admin = await _connect_bus(url, settings, declare_as, name, variable)
        try:
            await _declare(admin, settings, url, variable)
        finally:
            await admin.close()
    nc = await _connect_bus(url, settings, settings.nats, name, variable)
    try:
        await _declare(nc, settings, url, variable)
    except BaseException:
        await nc.close()
        raise
    return nc


async def _connect_bus(url: str, settings: Settings, nats: NatsSettings, name: str, variable: str) -> NATS:
    try:
        async with asyncio.timeout(settings.startup_timeout_s):
            return await connect(url, name, nats)
    except TimeoutError as exc:
        raise StartupError(
            f"{variable}: NATS at {_where(url)} did not answer within {settings.startup_timeout_s:g} s "
            "(MPIJC_STARTUP_TIMEOUT_S)"
        ) from exc


async def _declare(nc: NATS, settings: Settings, url: str, variable: str) -> None:
    try:
        await ensure_streams(nc.jetstream(), Topology(settings.nats.prefix), settings.nats)
    except Exception as exc:
        raise StartupError(f"{variable}: NATS at {_where(url)} has no usable JetStream: {exc}") from exc


@contextlib.asynccontextmanager
async def runtime(
    settings: Settings,
    name: str,
    *,
    database: bool = True,
    bus: bool = True,
    identity: str = "admin",
    owner: bool = False,
) -> AsyncIterator[Runtime]:
    """Reach (or start) the services asked for, migrate, declare streams; tear down in reverse.
    On the embedded NATS the command connects as ``identity``, the identity of its role. A
    configured database is refused when its role could alter the schema, unless single-role
    mode is asked for or ``owner`` says the command connects as the owner (``migrate``)."""
    db_url = settings.database.url.get_secret_value() if settings.database.url else None
    with _services(
        settings, db_url if database else _UNUSED, settings.nats.url if bus else _UNUSED
    ) as services:
        users = services.nats_users
        declare_as = None
        if users is not None:
            declare_as = None if identity == "admin" else users.settings("admin", settings.nats)
            settings = settings.model_copy(update={"nats": users.settings(identity, settings.nats)})
        rt = Runtime(settings, Topology(settings.nats.prefix), PipelineMetrics(), _nats_users=users)
        db_variable = (
            "MPIJC_DATABASE__URL" if db_url else "the embedded PostgreSQL (MPIJC_EMBEDDED__POSTGRES_PORT)"
        )
        nats_variable = (
            "MPIJC_NATS__URL" if settings.nats.url else "the embedded NATS (MPIJC_EMBEDDED__NATS_PORT)"
        )
        try:
            rt.database_url = services.database_url if database else ""
            rt.nats_url = services.nats_url if bus else ""
            rt._engine, rt._nc = await _reach_both(
                _reach_database(rt.database_url, settings, db_variable, owner=owner) if database else None,
                _reach_bus(rt.nats_url, settings, name, nats_variable, declare_as) if bus else None,
            )
            if rt._engine is not None:
                from controller.store.timing import observe_db_writes

                observe_db_writes(rt._engine, rt.metrics)
            yield rt
        finally:
            if rt._engine is not None:
                await rt._engine.dispose()
            if rt._nc is not None:
                await disconnect(rt._nc)


async def _reach_both(
    database: Coroutine[Any, Any, AsyncEngine] | None, bus: Coroutine[Any, Any, NATS] | None
) -> tuple[AsyncEngine | None, NATS | None]:
    """Reach the database (and migrate) and the bus (and declare the streams) side by side, so a
    start waits for the slower of the two, not their sum; if either fails, what the other
    reached is closed and the first failure raised."""
    engine, nc = await asyncio.gather(
        database if database is not None else _nothing(),
        bus if bus is not None else _nothing(),
        return_exceptions=True,
    )
    failure = next((r for r in (engine, nc) if isinstance(r, BaseException)), None)
    if failure is None:
        return engine, nc
    if engine is not None and not isinstance(engine, BaseException):
        await engine.dispose()
    if isinstance(nc, NATS):
        await nc.close()
    raise failure


async def _nothing() -> None:
    return None


@contextlib.contextmanager
def _services(settings: Settings, db_url: str | None, nats_url: str | None) -> Iterator[EmbeddedServices]:
    """The embedded services for each URL left unset; a one-line error if they are not installed."""
    embedded = settings.embedded
    services = EmbeddedServices(
        embedded.data_dir.resolve(),
        embedded.postgres_port,
        embedded.nats_port,
        db_url,
        nats_url,
        nats_prefix=settings.nats.prefix,
    )
    try:
        services.__enter__()
    except ModuleNotFoundError as exc:
        unset = " and ".join(
            name for name, url in (("MPIJC_DATABASE__URL", db_url), ("MPIJC_NATS__URL", nats_url)) if not url
        )
        raise StartupError(
            f"{unset}: not set, and the embedded services are not installed "
            "(pip install 'mpijob-controller[embedded]', or set the URL)"
        ) from exc
    try:
        yield services
    finally:
        services.__exit__(None, None, None)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_consumers(
    rt: Runtime, stop: asyncio.Event, started: asyncio.Event | None = None, only: Sequence[str] = ()
) -> None:
    """The consumer roles ``only`` (all when empty) until ``stop`` is set."""
    from consumers.registry import CONSUMERS
    from consumers.service import run_consumers as run

    await run(
        rt.nats_url,
        rt.topology,
        rt.settings,
        rt.engine,
        rt.metrics,
        stop,
        started,
        only or tuple(CONSUMERS),
        nats_for=rt.nats_for,
    )


async def run_watchers(rt: Runtime, stop: asyncio.Event) -> None:
    """The watchers, under leader election, until ``stop`` is set."""
    from controller.kube.errors import KubeConfigError
    from controller.kube.gateway import KubeGateway
    from watchers.service import run_watchers_elected

    follows = rt.settings.logs.max_follows if rt.settings.logs.follow else 0
    try:
        gateway = KubeGateway.from_settings(rt.settings.kube, connections=follows + 16)  # + watches, reads
    except KubeConfigError as exc:
        raise StartupError(f"MPIJC_KUBE__KUBECONFIG: no Kubernetes cluster to watch: {exc}") from exc
    await run_watchers_elected(rt.settings, gateway, rt.nc, rt.topology, rt.metrics, stop)


async def serve_api(rt: Runtime, stop: asyncio.Event) -> None:
    """The read API until ``stop`` is set."""
    import uvicorn

    from controller.api.access import AccessReviewer, build_reviewer, forwarded_reviewer
    from controller.api.app import create_app, metrics_app
    from controller.api.limits import ApiLimits, SubscriptionQuotas
    from controller.api.logs import RunLogs, SearchLimits
    from controller.api.metrics_collectors import JetStreamCollector
    from controller.api.rechecks import CreatorRecheck
    from controller.api.server import forwarded_config, serve_in_thread, server_config
    from controller.api.streaming import StreamLimits

    @functools.cache
    def gateway() -> KubeGateway:  # one, for the reviewers of bearer and of forwarded tokens
        from controller.kube.gateway import KubeGateway

        return KubeGateway.from_settings(rt.settings.kube)

    def kubernetes(audiences: Sequence[str]) -> AccessReviewer:
        from controller.kube.reviews import KubeAccessReviewer

        return KubeAccessReviewer(gateway(), audiences)

    api, metrics_port = rt.settings.api, rt.settings.metrics.port
    certificate = api_certificate(rt.settings)
    reviewer = build_reviewer(api, kubernetes)
    app = create_app(
        rt.engine,
        rt.metrics,
        reviewer,
        notify=rt.settings.notify,
        collectors=[JetStreamCollector(rt.js, rt.topology, rt.metrics.registry, api.metrics_ttl_s)],
        metrics_ttl_s=api.metrics_ttl_s,
        limits=ApiLimits.from_settings(api),
        quotas=SubscriptionQuotas.from_settings(rt.settings.notify),
        streams=StreamLimits.from_settings(api),
        run_logs=RunLogs(rt.js, rt.topology),
        search=SearchLimits.from_settings(api),
    )
    tls = certificate.context if certificate is not None else None
    # the metrics port (liveness, readiness, scrapes) on a thread and loop of its own: a loop kept
    # busy by the API's requests must not fail the kubelet's liveness probe
    heartbeat = Heartbeat(rt.settings.metrics.stuck_after_s)
    metrics = metrics_app(app, asyncio.get_running_loop(), heartbeat)
    servers = [
        uvicorn.Server(server_config(app, api, api.port, tls=tls)),
        uvicorn.Server(server_config(metrics, api, metrics_port, capped=False)),
    ]
    serving = [
        asyncio.create_task(servers[0].serve()),
        asyncio.create_task(serve_in_thread(servers[1], "metrics-port")),
    ]
    if api.forwarded_token_port is not None:  # OpenShift's OAuth proxy beside the API (docs/ui.md)
        proxied = forwarded_config(app, api, forwarded_reviewer(api, reviewer, kubernetes))
        servers.append(uvicorn.Server(proxied))
        serving.append(asyncio.create_task(servers[-1].serve()))
    recheck = CreatorRecheck(rt.engine, reviewer, api.subscription_recheck_s)
    rechecking = [asyncio.create_task(recheck.run(stop))]
    beating = asyncio.create_task(heartbeat.run())
    if certificate is not None:
        rechecking.append(asyncio.create_task(certificate.run(stop, api.cert_reload_s)))
    scheme = "https" if certificate is not None else "http"
    log.info(
        "API on %s://%s:%d (auth: %s), metrics on port %d", scheme, api.host, api.port, api.auth, metrics_port
    )
    if api.forwarded_token_port is not None:
        log.info("the OAuth proxy's listener on http://127.0.0.1:%d", api.forwarded_token_port)
    await stop.wait()
    for server in servers:
        server.should_exit = True
    beating.cancel()
    await asyncio.gather(*serving, *rechecking)
    await asyncio.gather(beating, return_exceptions=True)


def api_certificate(settings: Settings) -> CertificateReloader | None:
    """The API's serving certificate (``MPIJC_API__TLS_CERT_FILE`` and ``…_KEY_FILE``), reloaded
    when renewed; None for plain HTTP. A :class:`StartupError` naming the setting when only one
    is set or they cannot be read."""
    from watchers.admission.certificates import CertificateReloader, UnreadableCertificate

    cert, key = settings.api.tls_cert_file, settings.api.tls_key_file
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        missing = "MPIJC_API__TLS_CERT_FILE" if cert is None else "MPIJC_API__TLS_KEY_FILE"
        raise StartupError(f"{missing}: unset, while the other half of the API's certificate is set")
    try:
        return CertificateReloader(cert, key)
    except UnreadableCertificate as exc:
        raise StartupError(f"MPIJC_API__TLS_CERT_FILE: cannot serve HTTPS with {exc}") from exc


@contextlib.asynccontextmanager
async def served_metrics(
    registry: CollectorRegistry, port: int, variable: str, stuck_after_s: float
) -> AsyncIterator[None]:
    """/metrics of ``registry`` and /healthz of this process's event loop (503 once it made no
    turn for ``stuck_after_s``: :func:`controller.metrics.serve_metrics`) on ``port`` while
    inside; a port that cannot be had is a :class:`StartupError` naming ``variable``."""
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(serve_metrics(registry, port, stuck_after_s))
        except OSError as exc:
            raise StartupError(f"{variable}: cannot serve /metrics on port {port}: {exc}") from exc
        yield


def metrics_server(rt: Runtime) -> contextlib.AbstractAsyncContextManager[None]:
    """/metrics and /healthz of a watcher or consumer process, for its probes and ServiceMonitor."""
    metrics = rt.settings.metrics
    return served_metrics(rt.metrics.registry, metrics.port, "MPIJC_METRICS__PORT", metrics.stuck_after_s)


async def replay(rt: Runtime, files: Sequence[Path], publisher: Publisher | None = None) -> int:
    """Feed capture files through the watcher pipeline, publishing with ``publisher`` (the
    runtime's connection's by default); prints what it read. Exit status."""
    from watchers.pipeline import replay_files

    stats = await replay_files(files, rt.settings, publisher or rt.publisher, rt.metrics)
    print(
        f"replayed {stats.records} records from {len(files)} file(s); skipped {stats.malformed} malformed "
        f"and {stats.unknown_kind} of other kinds {dict(stats.skipped_kinds) or ''}".rstrip()
    )
    return 0 if stats.records or not files else 1
