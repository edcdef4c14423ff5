"""The embedded PostgreSQL and NATS know who owns them: a server left behind by a killed
``up`` is taken over by the next one and stopped with it, a server of another data directory
on the configured port is refused with a message naming the port and both directories, and a
second process beside a live owner shares its servers without stopping them. Real servers and
real processes throughout; Linux (``/proc``) only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from controller.cli.embedded import EmbeddedNats, EmbeddedServiceError, EmbeddedServices
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster
from controller.testing.waits import STARTUP_S
from tests.history.test_end_to_end_watch_to_history import kubeconfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


# --- helpers ---


def processes_of(data_dir: Path) -> dict[int, str]:
    """Live processes whose command line names ``data_dir`` (the postmaster's -D, NATS's -sd)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if str(data_dir) in cmdline and state not in ("Z", "X"):
            found[int(entry.name)] = cmdline
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postgres" / "pgdata" / "postmaster.pid").read_text().split()[0])


def nats_pid(data_dir: Path) -> int:
    return int((data_dir / "nats" / "nats.pid").read_text().strip())


def eventually(check: Callable[[], bool], timeout_s: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(what())
        time.sleep(0.05)


def up_env(data_dir: Path, pg_port: int, nats_port: int, **more: str) -> dict[str, str]:
    """``up`` on the embedded services only: no MPIJC_ variable inherited, no URL set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    return {
        **env,
        "MPIJC_EMBEDDED__DATA_DIR": str(data_dir),
        "MPIJC_EMBEDDED__POSTGRES_PORT": str(pg_port),
        "MPIJC_EMBEDDED__NATS_PORT": str(nats_port),
        "MPIJC_API__AUTH": "off",
        "MPIJC_METRICS__PORT": str(free_port()),
        **more,
    }


def start_up(env: dict[str, str], cwd: Path, log: Path, command: str = "up") -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli", command],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_healthy(
    process: subprocess.Popen[bytes], api_port: int, log: Path, timeout_s: float = STARTUP_S
) -> None:
    """Until the API answers: ``up`` has started its services and installed its signal handlers."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert process.poll() is None, f"up exited with {process.returncode}:\n{log.read_text()[-3000:]}"
        try:
            if httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"up never became healthy:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from controller.cli.embedded import EmbeddedServices
    with EmbeddedServices(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), None, None):
        print("ready", flush=True)
        time.sleep(600)
    """
)


def killed_owner(data_dir: Path, pg_port: int, nats_port: int) -> None:
    """An owner process that starts the services and is then killed with SIGKILL."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(data_dir), str(pg_port), str(nats_port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


@pytest.fixture
def ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture
def nothing_left(tmp_path: Path) -> Iterator[None]:
    """Whatever a test left running under tmp_path fails it (and is stopped)."""
    yield
    left = processes_of(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running: {left}"


# --- the situation of the issue, end to end ---


def test_up_killed_with_sigkill_leaves_nothing_behind_after_the_next_up(
    sim: SimCluster, tmp_path: Path, nothing_left: None
) -> None:
    data = tmp_path / "data"
    pg_port, nats_port, api_port = free_port(), free_port(), free_port()
    env = up_env(
        data,
        pg_port,
        nats_port,
        MPIJC_API__PORT=str(api_port),
        MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
    )
    log = tmp_path / "up.log"

    first = start_up(env, tmp_path, log)
    try:
        wait_healthy(first, api_port, log)
        postgres, nats = postmaster_pid(data), nats_pid(data)
    finally:
        first.kill()  # an OOM kill, a crashed terminal: no cleanup runs
        first.wait()

    # NATS dies with its owner (parent-death signal); PostgreSQL, detached by pg_ctl, survives:
    # that is the leftover the next start must deal with
    eventually(lambda: not alive(nats), 5, lambda: f"NATS (pid {nats}) outlived its killed owner")
    assert alive(postgres), "the situation to recover from: PostgreSQL survives the SIGKILL"
    assert postgres in processes_of(data)

    # the killed up's own children (API, watchers, consumers) are not the embedded services and
    # stop on their own; a fresh API port keeps the next up from racing the old API for its port
    api_port = free_port()
    env["MPIJC_API__PORT"] = str(api_port)
    second = start_up(env, tmp_path, log)
    try:
        wait_healthy(second, api_port, log)
        assert postmaster_pid(data) == postgres, "our own PostgreSQL is taken over, not started twice"
        assert "taking over the embedded PostgreSQL" in log.read_text()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(120)

    assert second.returncode == 0, log.read_text()[-3000:]
    assert not alive(postgres), "the taken-over PostgreSQL stops with its new owner"
    assert processes_of(data) == {}


def test_up_refuses_a_port_held_by_another_data_directorys_server(
    sim: SimCluster, tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    pg_port, nats_port = ports
    a, b = tmp_path / "a", tmp_path / "b"
    with EmbeddedServices(a, pg_port, nats_port, None, None):
        serving_a = postmaster_pid(a), nats_pid(a)
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "controller.cli", "up"],
            env=up_env(
                b,
                pg_port,
                nats_port,
                MPIJC_API__PORT=str(free_port()),
                MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
            ),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        took = time.monotonic() - started
        assert all(alive(pid) for pid in serving_a), "the other installation's servers are left alone"
        assert (postmaster_pid(a), nats_pid(a)) == serving_a

    assert took < 30
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [  # one line, from the CLI's EmbeddedServiceError handling
        f"mpijob-controller up: port {pg_port} is in use by a PostgreSQL serving {a / 'postgres' / 'pgdata'}, "
        f"not {b / 'postgres' / 'pgdata'}; stop it or set MPIJC_EMBEDDED__POSTGRES_PORT"
    ]
    assert processes_of(b) == {}


# --- the ownership rules, on EmbeddedServices directly ---


def test_a_clean_stop_stops_everything_and_the_next_start_is_fresh(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    with EmbeddedServices(tmp_path, *ports, None, None):
        first = postmaster_pid(tmp_path), nats_pid(tmp_path)
    assert not any(alive(pid) for pid in first)
    assert processes_of(tmp_path) == {}
    # a postmaster.pid left naming a live process that is not PostgreSQL (a pid reused) is stale
    (tmp_path / "postgres" / "pgdata" / "postmaster.pid").write_text(
        f"{os.getpid()}\n{tmp_path}\n0\n{ports[0]}\n"
    )

    with EmbeddedServices(tmp_path, *ports, None, None) as services:
        second = postmaster_pid(tmp_path), nats_pid(tmp_path)
        assert services.database_url.endswith(f":{ports[0]}/mpijc")
        assert services.nats_url == f"nats://127.0.0.1:{ports[1]}"
    assert second[0] != first[0] and second[1] != first[1]
    assert processes_of(tmp_path) == {}


def test_a_data_directory_too_deep_for_a_unix_socket_path_still_starts(
    tmp_path: Path, ports: tuple[int, int]
) -> None:
    """A Unix-domain socket's path holds at most 107 bytes; the embedded PostgreSQL serves TCP only,
    so a data directory deep in a home directory (or a test worker's temporary one) starts."""
    deep = tmp_path / ("a-long-directory-name-" * 5)
    assert len(str(deep / "postgres" / "pgdata" / f".s.PGSQL.{ports[0]}")) > 107
    with EmbeddedServices(deep, *ports, None, None) as services:
        assert services.database_url.endswith(f":{ports[0]}/mpijc")

        async def answer() -> int:
            conn = await asyncpg.connect(services.database_url)
            try:
                return int(await conn.fetchval("SELECT 1"))
            finally:
                await conn.close()

        assert asyncio.run(answer()) == 1
    assert processes_of(deep) == {}


def test_lock_files_naming_a_killed_postmaster_not_yet_reaped_are_stale(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    """After everything was SIGKILLed, the postmaster may be a zombie for a while (its parent,
    init, has not reaped it): it holds nothing, but answers PostgreSQL's kill(0)."""
    with EmbeddedServices(tmp_path, *ports, None, None):
        pass
    # as PostgreSQL's user: a process of another user answers its kill(0) with EPERM, read as gone
    corpse = subprocess.Popen(["sleep", "60"], user="embedded_postgres" if os.geteuid() == 0 else None)
    corpse.kill()  # not waited for: a zombie of this process until the end of the test
    deadline = time.monotonic() + 10
    while Path(f"/proc/{corpse.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the killed process never became a zombie"
        time.sleep(0.01)
    pgdata = tmp_path / "postgres" / "pgdata"
    (pgdata / "postmaster.pid").write_text(f"{corpse.pid}\n{pgdata}\n0\n{ports[0]}\n")
    (pgdata / f".s.PGSQL.{ports[0]}.lock").write_text(f"{corpse.pid}\n{pgdata}\n0\n{ports[0]}\n")
    try:
        with EmbeddedServices(tmp_path, *ports, None, None) as services:
            assert services.database_url.endswith(f":{ports[0]}/mpijc")
            assert postmaster_pid(tmp_path) != corpse.pid
    finally:
        corpse.wait()
    assert processes_of(tmp_path) == {}


def test_servers_left_by_a_killed_owner_are_taken_over_and_stopped_with_the_new_owner(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    killed_owner(tmp_path, *ports)
    leftover = postmaster_pid(tmp_path)
    assert alive(leftover)

    with EmbeddedServices(tmp_path, *ports, None, None):
        assert postmaster_pid(tmp_path) == leftover, "adopted, not started a second time"
        assert alive(nats_pid(tmp_path))
    assert not alive(leftover)
    assert processes_of(tmp_path) == {}


def test_a_leftover_postgres_on_another_port_is_restarted_on_the_configured_one(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    killed_owner(tmp_path, free_port(), ports[1])
    leftover = postmaster_pid(tmp_path)

    with EmbeddedServices(tmp_path, *ports, None, None) as services:
        assert not alive(leftover)
        assert postmaster_pid(tmp_path) != leftover
        assert services.database_url.endswith(f":{ports[0]}/mpijc")
    assert processes_of(tmp_path) == {}


def test_a_leftover_nats_without_an_owner_is_replaced_by_one_tied_to_its_owner(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    """As an earlier version (or a start off the main thread) could leave it: no parent-death signal."""
    store = tmp_path / "nats" / "jetstream"
    store.mkdir(parents=True)
    old = subprocess.Popen(
        [EmbeddedNats.binary(), "-a", "127.0.0.1", "-p", str(ports[1]), "-js", "-sd", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        eventually(lambda: bool(processes_of(store)), STARTUP_S, lambda: "nats-server did not start")
        eventually(lambda: _port_open(ports[1]), STARTUP_S, lambda: "nats-server did not listen")
        with EmbeddedServices(tmp_path, *ports, None, None):
            assert old.poll() is not None, "the leftover was stopped"
            assert nats_pid(tmp_path) != old.pid
    finally:
        if old.poll() is None:
            old.kill()
        old.wait()
    assert processes_of(tmp_path) == {}


def test_a_second_process_beside_a_live_owner_shares_its_servers_and_leaves_them_running(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    """``history`` beside ``up``: the owner lock is held, so the second user is a guest."""
    with EmbeddedServices(tmp_path, *ports, None, None):
        running = postmaster_pid(tmp_path), nats_pid(tmp_path)
        with EmbeddedServices(tmp_path, *ports, None, None) as guest:
            assert guest.database_url.endswith(f":{ports[0]}/mpijc")
        assert all(alive(pid) for pid in running)
        assert (postmaster_pid(tmp_path), nats_pid(tmp_path)) == running
    assert not any(alive(pid) for pid in running)


def test_another_data_directorys_nats_on_the_port_is_refused(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    serving = EmbeddedNats(a / "nats", ports[1])
    serving.start()
    try:
        with pytest.raises(EmbeddedServiceError) as refused:
            EmbeddedNats(b / "nats", ports[1]).start()
    finally:
        serving.stop()
    assert str(refused.value) == (
        f"port {ports[1]} is in use by a NATS server serving {a / 'nats' / 'jetstream'}, "
        f"not {b / 'nats' / 'jetstream'}; stop it or set MPIJC_EMBEDDED__NATS_PORT"
    )


def test_a_port_held_by_another_program_is_refused(tmp_path: Path, nothing_left: None) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(EmbeddedServiceError) as refused:
            EmbeddedNats(tmp_path / "nats", port).start()
    message = str(refused.value)
    assert message.startswith(f"port {port} is in use by ") and f"(pid {os.getpid()})" in message
    assert message.endswith(
        f"not the embedded NATS of {tmp_path / 'nats' / 'jetstream'}; stop it or set MPIJC_EMBEDDED__NATS_PORT"
    )


def sql(url: str, *statements: str) -> list[tuple[object, ...]]:
    """The rows of the last of ``statements``, run on a connection of its own."""

    async def run() -> list[tuple[object, ...]]:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            for statement in statements[:-1]:
                await conn.execute(statement)
            return [tuple(r) for r in await conn.fetch(statements[-1])]
        finally:
            await conn.close()

    return asyncio.run(run())


def _answers(url: str) -> bool:
    """Whether the PostgreSQL at ``url`` answers a query (its port opens while it is still
    starting up: "the database system is starting up")."""
    try:
        return sql(url, "SELECT 1") == [(1,)]
    except (OSError, asyncpg.exceptions.CannotConnectNowError):
        return False


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_second_process_takes_the_servers_over_when_their_owner_stops_them_and_leaves(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    """An ``api`` started while the last one stops: it shared the owner's servers, the owner
    stops them, and it starts them again on the same ports and data instead of losing them."""
    owner = EmbeddedServices(tmp_path, *ports, None, None)
    with owner:
        guest = EmbeddedServices(tmp_path, *ports, None, None).__enter__()
        sql(guest.database_url, "CREATE TABLE kept (n int)", "INSERT INTO kept VALUES (7)")
        first = postmaster_pid(tmp_path), nats_pid(tmp_path)
    try:
        assert not any(alive(pid) for pid in first), "the owner stopped its servers"
        eventually(
            lambda: (
                _port_open(ports[0])
                and _port_open(ports[1])
                and bool(processes_of(tmp_path))
                and _answers(guest.database_url)
            ),
            STARTUP_S,
            lambda: f"not taken over: {processes_of(tmp_path)}",
        )
        assert sql(guest.database_url, "SELECT n FROM kept") == [(7,)]
        assert postmaster_pid(tmp_path) not in first and nats_pid(tmp_path) not in first
    finally:
        guest.close()
    assert processes_of(tmp_path) == {}, "stopped with its new owner"


def test_an_api_beside_one_that_stops_keeps_its_database(
    tmp_path: Path, ports: tuple[int, int], nothing_left: None
) -> None:
    """The second ``api`` shares the first one's servers; the first one stops them as it stops,
    and the second starts them again: it answers ready again, and stops cleanly, no traceback."""
    first_port, second_port = free_port(), free_port()
    logs = tmp_path / "first.log", tmp_path / "second.log"
    apis: list[subprocess.Popen[bytes]] = []
    try:
        for port, log in zip((first_port, second_port), logs, strict=True):  # the first one owns
            env = up_env(tmp_path / "data", *ports, MPIJC_API__PORT=str(port))
            apis.append(start_up(env, tmp_path, log, "api"))
            wait_healthy(apis[-1], port, log)
        apis[0].send_signal(signal.SIGINT)
        assert apis[0].wait(60) == 0, logs[0].read_text()[-3000:]
        eventually(
            lambda: ready(second_port), STARTUP_S, lambda: f"not ready again:\n{logs[1].read_text()[-3000:]}"
        )
    finally:
        for api in apis:
            if api.poll() is None:
                api.send_signal(signal.SIGINT)
            api.wait(60)
    assert apis[1].returncode == 0, logs[1].read_text()[-3000:]
    for log in logs:
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def ready(port: int) -> bool:
    with contextlib.suppress(httpx.TransportError):
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    return False
