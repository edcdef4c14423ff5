"""The demo's data directory and the local API's token: a second demo starts afresh (never on
data anything else wrote), its times end now, its log tails are readable, and the token of
``demo --serve`` is readable by its user only and sent only to this machine's API."""

from __future__ import annotations

import json
import os
import re
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.cli import demodata
from controller.cli.demo import relative_to_now, serve_demo, tail_batch
from controller.cli.embedded.ownership import OwnerLock
from controller.client import Refused, connection
from controller.contract.errors import StartupError
from controller.contract.settings import ClientSettings, Settings
from controller.testing.events import REF, failed_launcher
from controller.testing.ports import free_port
from controller.testing.processes import run_cli
from tests.cli.test_docs_commands_run_on_the_demo import normalized
from tests.conftest import SCENARIOS

POD_TOKEN = ClientSettings().token_file


def test_the_local_token_file_is_the_users_alone_and_goes_with_the_api(tmp_path: Path) -> None:
    (tmp_path / demodata.TOKEN_FILE).write_text("an older one\n")
    (tmp_path / demodata.TOKEN_FILE).chmod(0o644)

    with demodata.served_token(tmp_path) as token:
        path = tmp_path / demodata.TOKEN_FILE
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.read_text().strip() == token and len(token) >= 40

    assert not path.exists()


@pytest.mark.skipif(Path(POD_TOKEN).exists(), reason="a pod's token is there, and wins")
def test_client_commands_read_the_local_token_only_for_a_loopback_api(tmp_path: Path) -> None:
    local = tmp_path / "api-token"
    local.write_text("local-token\n")
    loopback = ClientSettings(api_url="http://127.0.0.1:8480", local_token_file=str(local))

    assert connection.authorization(loopback) == {"Authorization": "Bearer local-token"}
    remote = loopback.model_copy(update={"api_url": "https://mpijc-api.example:8480"})
    with pytest.raises(Refused, match=f"MPIJC_CLIENT__TOKEN_FILE: cannot read {POD_TOKEN}"):
        connection.authorization(remote)
    chosen = loopback.model_copy(update={"token_file": str(tmp_path / "absent")})
    with pytest.raises(Refused, match="absent"):  # a token file asked for is never replaced
        connection.authorization(chosen)


def test_a_demo_resets_only_a_data_directory_it_made_and_nobody_uses(tmp_path: Path) -> None:
    (tmp_path / "postgres").mkdir()
    (tmp_path / "nats").mkdir()
    demodata.mark(tmp_path, 1)
    held = OwnerLock(tmp_path / "postgres" / "owner.lock")
    assert held.acquire()  # a `demo --serve` running on it
    try:
        with pytest.raises(StartupError, match=f"in use by pid {os.getpid()}"):
            demodata.reset(tmp_path)
    finally:
        held.release()

    demodata.reset(tmp_path)

    assert not demodata.holds_data(tmp_path) and not demodata.made_by_demo(tmp_path)


def test_a_cluster_command_takes_the_data_directory_over(settings: Settings, tmp_path: Path) -> None:
    embedded = settings.model_copy(
        update={
            "database": settings.database.model_copy(update={"url": None}),
            "embedded": settings.embedded.model_copy(update={"data_dir": tmp_path}),
        }
    )
    demodata.mark(tmp_path, 1)

    demodata.claim(embedded)

    assert not demodata.made_by_demo(tmp_path)


def test_the_scenarios_times_move_together_to_end_a_minute_ago(tmp_path: Path) -> None:
    now = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
    source = SCENARIOS / "mpijob-train-retried.jsonl"

    (moved,) = relative_to_now([source], tmp_path, now)

    before = [json.loads(line) for line in source.read_text().splitlines()]
    after = [json.loads(line) for line in moved.read_text().splitlines()]
    stamps = [datetime.fromisoformat(r["observed_at"].replace("Z", "+00:00")) for r in after]
    assert max(stamps) <= now - timedelta(minutes=1) < max(stamps) + timedelta(seconds=1)
    offset = stamps[0] - datetime.fromisoformat(before[0]["observed_at"].replace("Z", "+00:00"))
    assert after[0]["object"]["metadata"]["creationTimestamp"] == (
        f"{datetime.fromisoformat('2026-11-20T10:00:00+00:00') + offset:%Y-%m-%dT%H:%M:%SZ}"
    )
    tails = [(b["logs"], a["logs"]) for b, a in zip(before, after, strict=True) if "logs" in b]
    assert tails and all(b == a for b, a in tails)  # the log tail says what it said


def test_a_pod_log_tail_is_stored_as_its_failed_containers_lines() -> None:
    pod = failed_launcher("[1,3]<stderr>:NCCL WARN timeout\n[1,3]<stderr>:CUDA error\n")

    batch = tail_batch(pod)

    assert batch is not None and (batch.run_uid, batch.pod) == (REF.uid, pod.name)
    assert [(line.rank, line.text) for line in batch.lines] == [
        (3, "[1,3]<stderr>:NCCL WARN timeout"),
        (3, "[1,3]<stderr>:CUDA error"),
    ]
    assert batch.lines[0].ts < batch.lines[1].ts == batch.position.ts
    assert batch.kind is None and batch.pod_uid is None  # the rules had the tail with the pod


@pytest.mark.slow
def test_a_second_demo_replays_afresh_with_the_same_report(tmp_path: Path) -> None:
    """Before, a second demo delivered nothing and repeated the first one's mails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    env |= {
        "MPIJC_EMBEDDED__DATA_DIR": str(tmp_path / ".mpijc"),
        "MPIJC_EMBEDDED__POSTGRES_PORT": str(free_port()),
        "MPIJC_EMBEDDED__NATS_PORT": str(free_port()),
        "MPIJC_METRICS__PORT": "0",
    }
    story = str(SCENARIOS / "mpijob-train-retried.jsonl")

    def demo() -> str:
        done = run_cli(["demo", "--scenarios", story], env, tmp_path, timeout_s=180)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    first, second = demo(), demo()

    assert second.startswith("replaying afresh: removed the last demo's data")
    # what the report counts (runs and their phases, deliveries of each kind, audit records); the
    # wording of a finding may differ, as the consumers race to see the pods first
    counted = re.compile(
        r"^(?:team-a/\S+ +\w+ +\d+ \w+ .*|.* \d+ with valid signatures.*|   +\d+ x .*|emails .*|== audit trail: \d+ records).*$",
        re.MULTILINE,
    )
    reports = [
        [normalized(re.split(" at http|; head", line)[0]) for line in counted.findall(out)]
        for out in (first, second)
    ]
    assert reports[0] == reports[1] and len(reports[0]) >= 6
    assert "1 x job.deleted" in second and "emails received: 1" in second
    assert re.search(r"pages: http://127\.0\.0\.1:[0-9]+/ui/jobs \(docs/ui\.md\)$", second.rstrip())


async def test_a_second_served_demo_leaves_the_first_ones_token_alone(
    settings: Settings, tmp_path: Path
) -> None:
    """Its new token would have replaced the file the first one's callers read."""
    with socket.socket() as first:
        first.bind(("127.0.0.1", 0))
        first.listen()
        port = first.getsockname()[1]
        (tmp_path / demodata.TOKEN_FILE).write_text("the first one's\n")
        served = settings.model_copy(
            update={
                "api": settings.api.model_copy(update={"port": port}),
                "embedded": settings.embedded.model_copy(update={"data_dir": tmp_path}),
            }
        )

        with pytest.raises(StartupError, match=f"MPIJC_API__PORT: 127.0.0.1:{port} is in use"):
            await serve_demo(served)

    assert (tmp_path / demodata.TOKEN_FILE).read_text() == "the first one's\n"
