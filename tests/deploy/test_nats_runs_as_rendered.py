"""The bundled NATS runs as the manifests render it, and its identities hold to their permissions.

``kubectl kustomize`` renders the overlays; the NATS StatefulSet's container arguments,
environment and the ConfigMap's configuration file are taken from the render as they are, only
paths (volumes) and ports rewritten to local ones, and the wheel's ``nats-server`` runs them.
Then clients connect as the identities of :mod:`controller.bus.serverconfig`, through
:func:`controller.bus.streams.connect` and the credentials of ``NatsSettings``, and do what their
roles do, and what they must not.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.js.api import AckPolicy, ConsumerConfig, KeyValueConfig
from nats.js.errors import NotFoundError

from consumers import history, kube_events
from consumers.audit import consumer as audit
from consumers.notify import consumer as notify
from consumers.registry import CONSUMERS
from consumers.rules import logreader, replica, snapshot
from consumers.rules import service as rules
from controller.bus import logshares, versions
from controller.bus.buckets import open_bucket
from controller.bus.leases import lease_bucket
from controller.bus.pulling import Puller
from controller.bus.server import nats_server_binary
from controller.bus.serverconfig import ANY, IDENTITIES, MAX_MSG_BYTES, PULL_MAX_BYTES, STREAMS, render
from controller.bus.streams import connect, ensure_streams
from controller.cli.embedded import EmbeddedNats, port_open
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
from controller.testing.ports import free_port
from controller.testing.waits import until
from tests.audit_helpers import audit_record
from tests.deploy.test_deploy_manifests_render_and_validate import DEPLOY, Obj, find
from tests.deploy.test_deploy_manifests_render_and_validate import render as kustomize
from watchers import sharing
from watchers.admission.spool import LazyJetStream

# one worker runs them all: one bundled server is started for the module
pytestmark = pytest.mark.xdist_group("test_nats_runs_as_rendered")

TOPOLOGY = Topology()
"""The topology of the rendered manifests (no MPIJC_NATS__PREFIX)."""


def test_the_shipped_configuration_file_is_the_rendered_one() -> None:
    assert (DEPLOY / "base" / "nats.conf").read_text() == render(TOPOLOGY), (
        "deploy/base/nats.conf is stale: python -m controller.bus.serverconfig > deploy/base/nats.conf"
    )


@dataclass
class Pod:
    """One NATS pod of a render, run locally."""

    name: str
    args: list[str]
    env: dict[str, str]
    client_port: int
    monitor_port: int


def _nats_pods(objs: list[Obj], where: Path, passwords: dict[str, str]) -> list[Pod]:
    """The pods of StatefulSet mpijc-nats as local commands: the container's arguments and
    environment, each volume a local directory (the ConfigMap's files written into it), each
    port a free local one, ``$(VAR)`` expanded as the kubelet does, Secrets' keys from ``passwords``."""
    statefulset = find(objs, "StatefulSet", "mpijc-nats")
    spec = statefulset["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    names = [f"mpijc-nats-{i}" for i in range(statefulset["spec"]["replicas"])]
    ports = {name: {"client": free_port(), "monitor": free_port(), "cluster": free_port()} for name in names}
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    pods = []
    for name in names:
        paths: dict[str, str] = {}
        for mount in container["volumeMounts"]:
            local = where / name / mount["name"]
            local.mkdir(parents=True)
            source = volumes.get(mount["name"], {}).get("configMap")
            if source is not None:
                for file, text in find(objs, "ConfigMap", source["name"])["data"].items():
                    (local / file).write_text(text)
            paths[mount["mountPath"]] = str(local)
        env: dict[str, str] = {}
        for variable in container.get("env", []):
            source = variable.get("valueFrom", {})
            if "secretKeyRef" in source:
                assert source["secretKeyRef"]["name"] == "mpijc-nats-users"
                env[variable["name"]] = passwords[source["secretKeyRef"]["key"]]
            elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[variable["name"]] = name
            else:
                env[variable["name"]] = variable["value"]

        rewrites = {f"$({variable})": value for variable, value in env.items()}
        rewrites |= {f"{o}.mpijc-nats-headless:6222": f"127.0.0.1:{ports[o]['cluster']}" for o in names}
        rewrites["0.0.0.0:6222"] = f"127.0.0.1:{ports[name]['cluster']}"
        args = [_local(arg, paths, rewrites) for arg in container["args"]]
        args[args.index("--http_port") + 1] = str(ports[name]["monitor"])
        args += ["--addr", "127.0.0.1", "--port", str(ports[name]["client"])]
        pods.append(Pod(name, args, env, ports[name]["client"], ports[name]["monitor"]))
    return pods


def _local(arg: str, paths: dict[str, str], rewrites: dict[str, str]) -> str:
    """A container argument made local: a path under a volume's mount moved to the volume's
    directory, each of ``rewrites`` (variables, other pods' and own route addresses) replaced."""
    for mount_path, path in paths.items():
        if arg == mount_path or arg.startswith(mount_path + "/"):
            return path + arg[len(mount_path) :]
    for old, new in rewrites.items():
        arg = arg.replace(old, new)
    return arg


@contextmanager
def _running(pods: list[Pod], where: Path) -> Iterator[list[Pod]]:
    """The pods' servers, stopped on leaving; a server that exits at once fails with its output."""
    processes = []
    try:
        for pod in pods:
            log = (where / f"{pod.name}.log").open("wb")
            processes.append(
                (
                    pod,
                    log,
                    subprocess.Popen(
                        [nats_server_binary(), *pod.args], env=pod.env, stdout=log, stderr=subprocess.STDOUT
                    ),
                )
            )
        for pod, _, process in processes:
            deadline = time.monotonic() + 30
            while not port_open(pod.client_port) and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert port_open(pod.client_port), (pod.name, (where / f"{pod.name}.log").read_text())
        yield pods
        for pod, _, process in processes:
            assert process.poll() is None, (pod.name, (where / f"{pod.name}.log").read_text())
    finally:
        for _, log, process in processes:
            process.terminate()
            process.wait(10)
            log.close()


def _url(pods: list[Pod]) -> str:
    return ",".join(f"nats://127.0.0.1:{pod.client_port}" for pod in pods)


@asynccontextmanager
async def connected(url: str, settings: NatsSettings) -> AsyncIterator[tuple[NATS, list[str]]]:
    """A connection with ``settings``' credentials, and the errors the server sent it
    (permission violations)."""
    nc = await asyncio.wait_for(connect(url, f"test-{settings.user or 'anonymous'}", settings), 30)
    errors: list[str] = []

    async def collect(exc: Exception) -> None:
        errors.append(str(exc))

    nc._error_cb = collect
    try:
        yield nc, errors
    finally:
        await nc.close()


def _as(
    url: str, user: str, passwords: dict[str, str]
) -> AbstractAsyncContextManager[tuple[NATS, list[str]]]:
    """:func:`connected` as ``user`` with its password."""
    return connected(url, NatsSettings(user=user, password=passwords[user]))


async def refused(errors: list[str], subject: str) -> None:
    """Until the server has told the client it may not publish to or subscribe to ``subject``."""
    await until(
        lambda: any("permissions violation" in e.lower() and subject.lower() in e.lower() for e in errors),
        10,
        lambda: errors,
    )


@pytest.fixture(scope="module")
def passwords() -> dict[str, str]:
    """As docs/security.md makes them: a letter, then letters and digits (nats-server reads the
    variables as configuration values: one starting with a digit would be read as a number)."""
    return {who.name: "p" + secrets.token_hex(16) for who in IDENTITIES}


async def _admin_declares(url: str, passwords: dict[str, str], replicas: int) -> None:
    """The migrate Job's part: the admin declares the streams, JetStream takes messages."""
    async with _as(url, "admin", passwords) as (admin, _):
        js = admin.jetstream()
        await until(lambda: _meta_ready(js), 30, lambda: "no JetStream meta leader")
        await ensure_streams(js, TOPOLOGY, NatsSettings(replicas=replicas))
        ack = await js.publish("jobs.ns.job.pod", b"{}")
        assert ack.stream == "JOBS" and ack.seq == 1
        info = await js.stream_info("JOBS")
        assert info.config.max_msg_size == 8 * 1024 * 1024 and info.config.num_replicas == replicas


async def _meta_ready(js: nats.js.JetStreamContext) -> bool:
    try:
        await js.account_info()
    except NatsError:
        return False
    return True


def test_the_ha_servers_form_a_jetstream_cluster_as_rendered(
    tmp_path: Path, passwords: dict[str, str]
) -> None:
    pods = _nats_pods(kustomize(DEPLOY / "overlays" / "ha"), tmp_path, passwords)
    assert len(pods) == 3
    with _running(pods, tmp_path):
        asyncio.run(_admin_declares(_url(pods), passwords, replicas=3))


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory, passwords: dict[str, str]) -> Iterator[str]:
    """The single bundled server of the kubernetes overlay, its streams declared by the admin."""
    where = tmp_path_factory.mktemp("nats")
    pods = _nats_pods(kustomize(DEPLOY / "overlays" / "kubernetes"), where, passwords)
    with _running(pods, where):
        asyncio.run(_admin_declares(_url(pods), passwords, replicas=1))
        yield _url(pods)


async def test_an_anonymous_client_or_a_wrong_password_is_refused(
    bundled: str, passwords: dict[str, str]
) -> None:
    for credentials in ({}, {"user": "watchers", "password": passwords["admin"]}):
        nc = NATS()
        try:
            with pytest.raises(NatsError, match=r"(?i)authorization"):
                await nc.connect(bundled, allow_reconnect=False, max_reconnect_attempts=0, **credentials)
        finally:
            await nc.close()


async def test_the_watchers_publish_observations_and_nothing_else(
    bundled: str, passwords: dict[str, str]
) -> None:
    before = await _counts(bundled, passwords)
    async with _as(bundled, "watchers", passwords) as (nc, errors):
        js = nc.jetstream(timeout=2)
        await ensure_streams(js, TOPOLOGY, NatsSettings())  # at their configuration: only looked up
        assert (await js.publish("jobs.team-a.train.pod", b"{}")).stream == "JOBS"
        published = await open_bucket(js, KeyValueConfig(bucket=TOPOLOGY.bucket("published")))
        await published.put("pod.uid", b"7")
        assert (await published.get("pod.uid")).value == b"7"
        leases = await lease_bucket(js, TOPOLOGY.bucket(sharing.LEASE_BUCKET), 6.0)  # the log followers'
        await leases.create("lease.p0", b"watcher-0")
        probes = await nc.subscribe(TOPOLOGY.log_probes())  # the progress probes, for the log followers
        assert (await js.publish("jobs.team-a.train.log", b"{}")).stream == "JOBS"
        assert (await probes.next_msg(timeout=5)).subject == "jobs.team-a.train.log"
        shares = logshares.LogShares(js, TOPOLOGY, 1024)  # a namespace past its share of LOGS
        stored = await js.publish("logs.team-a.train.uid.train-launcher.main", b"{}")
        shares.record("team-a", stored.seq, 2048)
        assert await shares.settle() == {"team-a": 1}
        with pytest.raises(NotFoundError):  # evicted
            await js.get_last_msg("LOGS", "logs.team-a.train.uid.train-launcher.main")

        await nc.publish("audit.team-a", b"{}")
        await refused(errors, "audit.team-a")
        await nc.publish("findings.team-a.train.oom", b"{}")
        await refused(errors, "findings.team-a.train.oom")
        with pytest.raises(NatsError):
            await js.purge_stream("JOBS")
        await refused(errors, "$JS.API.STREAM.PURGE.JOBS")
        with pytest.raises(NatsError):
            await js.delete_stream("FINDINGS")
        await refused(errors, "$JS.API.STREAM.DELETE.FINDINGS")
        await nc.subscribe("jobs.>")
        await refused(errors, "jobs.>")
        await nc.subscribe("_INBOX_history.>")  # another identity's replies
        await refused(errors, "_INBOX_history.>")

    assert await _counts(bundled, passwords) == {**before, "JOBS": before["JOBS"] + 2}


async def _counts(url: str, passwords: dict[str, str]) -> dict[str, int]:
    """Messages in each stream, as the admin sees them."""
    async with _as(url, "admin", passwords) as (admin, _):
        js = admin.jetstream()
        return {
            name: (await js.stream_info(name)).state.messages for name in ("JOBS", "FINDINGS", "AUDIT", "DLQ")
        }


async def test_a_consumer_reads_and_acks_with_its_own_durable_only(
    bundled: str, passwords: dict[str, str]
) -> None:
    async with _as(bundled, "admin", passwords) as (admin, _):
        await admin.jetstream().publish("jobs.team-b.train.job", b"{}")
    async with _as(bundled, "history", passwords) as (nc, errors):
        js = nc.jetstream(timeout=2)
        sub = await js.pull_subscribe("jobs.>", durable="history", stream="JOBS")
        messages = await sub.fetch(100, timeout=5)
        assert messages
        for msg in messages:
            await msg.ack_sync()  # the server has taken the ack
        await nc.flush()
        info = await js.consumer_info("JOBS", "history")
        assert info.num_ack_pending == 0 and info.num_pending == 0 and info.delivered.stream_seq >= 1
        with pytest.raises(NatsError):
            await js.pull_subscribe("jobs.>", durable="notify", stream="JOBS")
        await refused(errors, "$JS.API.CONSUMER")
        await nc.publish("jobs.team-b.train.job", b"{}")
        await refused(errors, "jobs.team-b.train.job")
        await nc.publish("dlq.history", b"{}")  # its own dead letters: allowed
        await nc.flush()
        assert not [e for e in errors if "dlq.history" in e]


async def test_the_rules_keep_their_buckets_and_publish_findings(
    bundled: str, passwords: dict[str, str]
) -> None:
    async with _as(bundled, "rules", passwords) as (nc, errors):
        js = nc.jetstream(timeout=2)
        state = await open_bucket(js, KeyValueConfig(bucket=TOPOLOGY.bucket("rules-state")))
        await state.put("p0", b"snapshot")
        assert (await state.get("p0")).value == b"snapshot"
        assert (await js.publish("findings.team-a.train.oom", b"{}")).stream == "FINDINGS"
        reader = await js.pull_subscribe("findings.>", stream="FINDINGS")  # an ephemeral reader
        assert [m.subject for m in await reader.fetch(1, timeout=5)] == ["findings.team-a.train.oom"]
        await reader.unsubscribe()
        # its log reader: its durable on LOGS, what it saw on the job's subject
        logs = await js.pull_subscribe("logs.>", durable=TOPOLOGY.durable(logreader.CONSUMER), stream="LOGS")
        await logs.unsubscribe()
        assert (await js.publish("jobs.team-a.train.logseen", b"{}")).stream == "JOBS"
        with pytest.raises((NatsError, NotFoundError)):
            await js.key_value(TOPOLOGY.bucket("published"))  # the watchers' bucket
        await refused(errors, "KV_published")


@pytest.mark.parametrize(
    ("intruder", "owner", "stream", "durable", "subject"),
    [
        ("rules", "history", "JOBS", history.CONSUMER, "jobs.team-c.train.job"),
        ("rules", "k8s-events", "FINDINGS", kube_events.CONSUMER, "findings.team-c.train.oom"),
        ("api", "rules", "LOGS", logreader.CONSUMER, "logs.team-c.train.uid.launcher.main"),
    ],
    ids=["rules-on-history", "rules-on-k8s-events", "api-on-rules-logs"],
)
async def test_a_role_that_reads_any_consumer_cannot_touch_another_roles_durable(
    bundled: str,
    passwords: dict[str, str],
    intruder: str,
    owner: str,
    stream: str,
    durable: str,
    subject: str,
) -> None:
    """The rules read ``JOBS`` and ``FINDINGS``, the API ``LOGS``, through consumers named at run
    time; another role's durable on those streams stays out of their reach: its messages cannot
    be pulled or acknowledged away, nor the durable re-pointed (also by a create request without
    a name, whose body names it) or deleted."""
    config = ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT, filter_subject=subject)
    async with _as(bundled, "admin", passwords) as (admin, _):
        await admin.jetstream().publish(subject, b"{}")
    async with _as(bundled, owner, passwords) as (nc, _):
        await nc.jetstream(timeout=2).add_consumer(stream, config)
        sub = await nc.jetstream(timeout=2).pull_subscribe_bind(durable, stream=stream)
        (delivered,) = await sub.fetch(1, timeout=5)  # left unacknowledged meanwhile

        async with _as(bundled, intruder, passwords) as (other, errors):
            js = other.jetstream(timeout=1)
            await other.publish(delivered.reply, b"+ACK")
            await refused(errors, f"$JS.ACK.{stream}.{durable}.")
            with pytest.raises(NatsError):
                await (await js.pull_subscribe_bind(durable, stream=stream)).fetch(1, timeout=1)
            await refused(errors, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}")
            with pytest.raises(NatsError):
                await js.delete_consumer(stream, durable)
            await refused(errors, f"$JS.API.CONSUMER.DELETE.{stream}.{durable}")
            with pytest.raises(NatsError):
                await js.add_consumer(stream, replace(config, filter_subject=f"{stream.lower()}.>"))
            await refused(errors, f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}")
            body = {
                "stream_name": stream,
                "config": {"name": durable, "filter_subject": f"{stream.lower()}.>"},
            }
            with pytest.raises(NatsError):
                await other.request(f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps(body).encode(), timeout=1)
            await refused(errors, f"$JS.API.CONSUMER.CREATE.{stream}")

        info = await nc.jetstream(timeout=2).consumer_info(stream, durable)
        assert info.config.filter_subject == subject and info.num_ack_pending == 1
        await delivered.ack_sync()  # its owner still can
        assert (await nc.jetstream(timeout=2).consumer_info(stream, durable)).num_ack_pending == 0


def test_one_identity_at_most_reads_a_stream_through_any_consumer() -> None:
    """Consumers named at run time cannot be denied by name: two identities reading one stream
    so could reach each other's."""
    for family in STREAMS:
        assert len([who for who in IDENTITIES if ANY in who.reads.get(family, ())]) <= 1, family


def test_every_identity_has_a_password_variable_in_the_statefulset() -> None:
    objs = kustomize(DEPLOY / "overlays" / "kubernetes")
    (container,) = find(objs, "StatefulSet", "mpijc-nats")["spec"]["template"]["spec"]["containers"]
    variables = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"] if "valueFrom" in e
    }
    assert variables == {who.variable: who.name for who in IDENTITIES}


async def test_the_embedded_server_has_the_limits_of_the_manifests(tmp_path: Path) -> None:
    """Thirty 4 MB messages: taken (nats-server's default max_payload is 1 MiB), and pulled in
    batches under ``max_bytes``, so the consumer's connection is never cut as a slow consumer."""
    server = EmbeddedNats(tmp_path, free_port())
    server.start()
    try:
        assert server.users is not None
        nc = await connect(server.url, "test-embedded", server.users.settings("admin", NatsSettings()))
        try:
            assert nc.max_payload == MAX_MSG_BYTES
            js = nc.jetstream()
            await ensure_streams(js, TOPOLOGY, NatsSettings())
            for n in range(30):
                assert (await js.publish(f"jobs.ns.job{n}.log", b"x" * 4_000_000)).stream == "JOBS"
            with pytest.raises(NatsError):  # over the streams' max_msg_size
                await js.publish("jobs.ns.big.log", b"x" * (MAX_MSG_BYTES + 1))
            config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT)
            puller = await Puller.open(nc, "JOBS", "big", config, batch=500, wait_s=1, heartbeat_s=0.5)
            batches: list[int] = []
            while sum(batches) < 30:
                batch = await puller.pull()
                assert sum(len(m.data) for m in batch) <= PULL_MAX_BYTES
                for msg in batch:
                    await msg.ack()
                batches.append(len(batch))
            await puller.close()
            assert len(batches) > 1 and nc.is_connected
        finally:
            await nc.close()
    finally:
        server.stop()


async def test_a_password_file_is_read_at_each_connection(
    bundled: str, passwords: dict[str, str], tmp_path: Path
) -> None:
    secret = tmp_path / "password"
    secret.write_text(passwords["notify"] + "\n")  # as a mounted Secret's file may end
    nc = await asyncio.wait_for(
        connect(bundled, "test-file", NatsSettings(user="notify", password_file=secret)), 30
    )
    try:
        assert nc.is_connected
        js = nc.jetstream(timeout=2)
        await js.add_consumer("JOBS", durable_name="notify", filter_subject="jobs.*.*.job")
        assert (await js.consumer_info("JOBS", "notify")).config.filter_subject == "jobs.*.*.job"
    finally:
        await nc.close()


async def test_only_the_admin_declares_streams(
    bundled: str, passwords: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    week = NatsSettings().max_age_s
    async with _as(bundled, "watchers", passwords) as (nc, errors):
        js = nc.jetstream(timeout=1)
        with caplog.at_level(logging.WARNING, logger="controller.bus.streams"):  # a new release's limits
            await ensure_streams(js, TOPOLOGY, NatsSettings(max_age_s=week / 7))
        assert caplog.text.count("could not update stream") == 4 and "using it as it is" in caplog.text
        await refused(errors, "$JS.API.STREAM.UPDATE.JOBS")

        async with _as(bundled, "admin", passwords) as (admin, _):
            assert (await admin.jetstream().stream_info("JOBS")).config.max_age == week
            await admin.jetstream().delete_stream("DLQ")
        with pytest.raises(PermissionError, match="could not create stream DLQ"):
            await ensure_streams(js, TOPOLOGY, NatsSettings())
        await refused(errors, "$JS.API.STREAM.CREATE.DLQ")

    async with _as(bundled, "admin", passwords) as (admin, _):
        await ensure_streams(admin.jetstream(), TOPOLOGY, NatsSettings())
        assert (await admin.jetstream().stream_info("DLQ")).config.max_msg_size == MAX_MSG_BYTES


def test_the_identities_name_the_roles_durables_and_buckets() -> None:
    """The permissions name what the code uses: a durable or bucket renamed in a role without
    its identity would be refused at once in a cluster."""
    reads = {who.name: who.reads for who in IDENTITIES}
    assert set(CONSUMERS) <= set(reads)
    assert reads["history"] == {"jobs": (history.CONSUMER,), "findings": (history.FINDINGS_CONSUMER,)}
    assert reads["notify"] == {"jobs": (notify.CONSUMER,), "findings": (notify.FINDINGS_CONSUMER,)}
    assert reads["audit"] == {"jobs": (audit.LIFECYCLE_CONSUMER,), "audit": (audit.CONSUMER,)}
    assert reads["k8s-events"] == {"findings": (kube_events.CONSUMER,)}
    assert rules.CONSUMER == "rules" and reads["rules"] == {
        "jobs": ("*",),
        "findings": ("*",),
        "logs": (logreader.CONSUMER,),
    }
    buckets = {who.name: who.buckets for who in IDENTITIES}
    assert buckets["watchers"] == (versions.BUCKET, sharing.LEASE_BUCKET, logshares.BUCKET)
    assert buckets["rules"] == (snapshot.STATE_BUCKET, replica.LEASE_BUCKET)
    assert {who.name for who in IDENTITIES if who.buckets} == {"watchers", "rules"}


async def test_the_admission_webhook_publishes_audit_records_as_its_identity(
    bundled: str, passwords: dict[str, str]
) -> None:
    before = await _counts(bundled, passwords)
    settings = NatsSettings(user="admission", password=passwords["admission"])
    bus = LazyJetStream(bundled, settings)
    bus.start()
    try:
        await until(lambda: bus.ready, 30, lambda: "the admission webhook never connected")
        assert await bus([audit_record(1), audit_record(2)]) == 2
    finally:
        await bus.close()
    assert await _counts(bundled, passwords) == {**before, "AUDIT": before["AUDIT"] + 2}
