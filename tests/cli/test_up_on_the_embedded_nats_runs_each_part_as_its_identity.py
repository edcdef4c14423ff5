"""The embedded NATS has the manifests' users and permissions, and ``up`` runs each part as its role.

``up`` on the embedded NATS (no ``MPIJC_NATS__URL``) hands each child the password file of its
role's identity and no other, a child of several consumer roles each role's file, and each role
there connects as its own identity; a job OOM-killed in the (simulated) cluster reaches the API with its
finding, and the API's JetStream metrics are read, without one refusal in the server's log: what
the parts do is allowed (the rules publish the finding, the history reads its durable, in one
process). With a part's own credentials, what its role may not do is refused — the rules' file of
the shared process does not open the history's durable — and a client without a password is not
let in. The passwords are made once per data directory,
readable by their owner only, and new ones are made when they are deleted.
"""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError

from controller.bus.serverconfig import IDENTITIES
from controller.cli.embedded import EmbeddedNats
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import HISTORY_DURABLE, Topology
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.waits import STARTUP_S, until
from tests.cli.test_up_runs_the_whole_controller import eventually, oom_killed_run, started_children
from tests.deploy.test_nats_runs_as_rendered import connected, refused
from tests.history.test_end_to_end_watch_to_history import kubeconfig

pytestmark = pytest.mark.slow


def environ(pid: int) -> dict[str, str]:
    """The environment a process was started with."""
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)


def refusals(log: Path) -> list[str]:
    """The server's log lines about a refused login or operation."""
    return [line for line in log.read_text().splitlines() if "Violation" in line or "authentication" in line]


async def anonymous_is_refused(url: str) -> None:
    nc = NATS()
    try:
        with pytest.raises(NatsError, match=r"(?i)authorization"):
            await nc.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    finally:
        await nc.close()


def identities_of(children: dict[int, str], users: Path) -> dict[str, tuple[str, ...]]:
    """Each child's command → the NATS identities it was given: its own, then (a process of
    several consumer roles) each role's; each has its own password file, and no other credential."""
    identities = {}
    for pid, command in children.items():
        part = environ(pid)
        assert "MPIJC_NATS__PASSWORD" not in part and "MPIJC_NATS__CREDS_FILE" not in part
        assert Path(part["MPIJC_NATS__PASSWORD_FILE"]) == users / part["MPIJC_NATS__USER"]
        roles = json.loads(part.get("MPIJC_NATS__ROLE_PASSWORD_FILES", "{}"))
        assert {role: Path(file) for role, file in roles.items()} == {role: users / role for role in roles}
        identities[command.split("controller.cli ", 1)[1].strip()] = (part["MPIJC_NATS__USER"], *roles)
    return identities


async def one_role_may_not_use_anothers_durable(url: str, pid: int, topology: Topology) -> None:
    """With the password file ``up`` gave the shared process's rules role, reading the history's
    durable is refused; with the file it gave the history role, it is answered."""
    files = {
        role: Path(file) for role, file in json.loads(environ(pid)["MPIJC_NATS__ROLE_PASSWORD_FILES"]).items()
    }
    durable, jobs = topology.durable(HISTORY_DURABLE), topology.stream("jobs")
    async with connected(url, NatsSettings(user="rules", password_file=files["rules"])) as (nc, errors):
        with pytest.raises(NatsError):
            await nc.jetstream(timeout=2).consumer_info(jobs, durable)
        await refused(errors, f"$JS.API.CONSUMER.INFO.{jobs}.{durable}")
    async with connected(url, NatsSettings(user="history", password_file=files["history"])) as (nc, errors):
        assert (await nc.jetstream(timeout=2).consumer_info(jobs, durable)).name == durable
        assert errors == []


async def what_the_roles_may_not_is_refused(url: str, users: Path, topology: Topology) -> None:
    """With the API's password, purging AUDIT; with the watchers', writing an audit record or
    deleting FINDINGS; without one, connecting."""
    api = NatsSettings(user="api", password_file=users / "api")
    async with connected(url, api) as (nc, errors):
        js = nc.jetstream(timeout=2)

        async def audited() -> int:
            return (await js.stream_info(topology.stream("audit"))).state.messages

        await until(audited, STARTUP_S, lambda: "no lifecycle record on AUDIT")
        kept = await audited()
        with pytest.raises(NatsError):
            await js.purge_stream(topology.stream("audit"))
        await refused(errors, f"$JS.API.STREAM.PURGE.{topology.stream('audit')}")
        assert await audited() == kept
    watchers = NatsSettings(user="watchers", password_file=users / "watchers")
    async with connected(url, watchers) as (nc, errors):
        await nc.publish(topology.audit("team-a"), b"{}")
        await refused(errors, topology.audit("team-a"))
        with pytest.raises(NatsError):
            await nc.jetstream(timeout=2).delete_stream(topology.stream("findings"))
        await refused(errors, f"$JS.API.STREAM.DELETE.{topology.stream('findings')}")
    await anonymous_is_refused(url)


async def test_up_on_the_embedded_nats_runs_each_part_as_its_role(
    sim: SimCluster, settings: Settings, tmp_path: Path
) -> None:
    port, metrics_port, nats_port = free_port(), free_port(), free_port()
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
        MPIJC_API__PORT=str(port),
        MPIJC_METRICS__PORT=str(metrics_port),
        MPIJC_API__AUTH="off",
        MPIJC_EMBEDDED__NATS_PORT=str(nats_port),
        MPIJC_UP__DISPATCHERS="1",
    )
    del env["MPIJC_NATS__URL"]  # the embedded NATS, for this test's prefix
    url, server_log = f"nats://127.0.0.1:{nats_port}", tmp_path / "nats" / "nats.log"
    topology = Topology(settings.nats.prefix)
    log = tmp_path / "up.log"
    process = start_cli(["up"], env, tmp_path, log)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await eventually(client, "/healthz", lambda body: body == {"status": "ok"})
            await oom_killed_run(client, sim, "guarded")
            job = k.mpijob("guarded", workers=1)
            # the audit consumer publishes the failure's lifecycle record on AUDIT
            sim.update(k.with_conditions(sim.get(job), ("Failed", "MPIJobFailed", "2026-11-20T10:09:30Z")))
            async with httpx.AsyncClient(timeout=5) as scraper:
                metrics = (await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
        children = await started_children(process, 4)
        identities = identities_of(children, tmp_path / "nats" / "users")
        quiet = refusals(server_log)  # before this test tries what the roles may not
        await what_the_roles_may_not_is_refused(url, tmp_path / "nats" / "users", topology)
        shared = next(pid for pid, command in children.items() if command.rstrip().endswith("--only rules"))
        await one_role_may_not_use_anothers_durable(url, shared, topology)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)

    assert process.returncode == 0, log.read_text()[-3000:]
    assert identities == {
        "api": ("api",),
        "watch": ("watchers",),
        "consume --only history --only rules": ("history", "history", "rules"),
        "consume --only audit --only notify --only dispatch": ("audit", "audit", "notify", "dispatch"),
    }
    # rules publishing the finding the API served, history reading its durable, audit publishing
    # the lifecycle record: each role of a shared process did what only its own identity may
    assert quiet == [], "a part was refused what its role does"
    assert 'mpijc_scrape_ok{source="jetstream"} 1.0' in metrics, "the API could not read JetStream's state"


async def test_the_passwords_are_made_once_kept_private_and_new_when_deleted(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats", free_port())
    users = server.users
    assert users is not None
    admin = NatsSettings(user="admin", password_file=users.password_file("admin"))
    server.start()
    try:
        passwords = {who.name: users.password_file(who.name).read_text() for who in IDENTITIES}
        assert stat.S_IMODE(users.directory.stat().st_mode) == 0o700
        for who in IDENTITIES:
            assert stat.S_IMODE(users.password_file(who.name).stat().st_mode) == 0o600
        config = (tmp_path / "nats" / "nats.conf").read_text()
        assert stat.S_IMODE((tmp_path / "nats" / "nats.conf").stat().st_mode) == 0o600
        assert config.count('password: "$2b$') == len(IDENTITIES)
        assert not [name for name, password in passwords.items() if password.strip() in config]
        async with connected(server.url, admin) as (nc, _):
            assert nc.is_connected
        await anonymous_is_refused(server.url)
    finally:
        server.stop()

    server.start()  # the owner starts it again: the same passwords
    try:
        assert {who.name: users.password_file(who.name).read_text() for who in IDENTITIES} == passwords
        async with connected(server.url, admin) as (nc, _):
            assert nc.is_connected
    finally:
        server.stop()

    for who in IDENTITIES:  # rotation: delete them, start again
        users.password_file(who.name).unlink()
    server.start()
    try:
        assert users.password_file("admin").read_text() != passwords["admin"]
        async with connected(server.url, admin) as (nc, _):
            assert nc.is_connected
        nc = NATS()
        try:
            with pytest.raises(NatsError, match=r"(?i)authorization"):
                await nc.connect(
                    server.url,
                    user="admin",
                    password=passwords["admin"].strip(),
                    allow_reconnect=False,
                    max_reconnect_attempts=0,
                )
        finally:
            await nc.close()
    finally:
        server.stop()
