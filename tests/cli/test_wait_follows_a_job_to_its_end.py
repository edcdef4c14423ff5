"""``mpijob-controller wait``: the one line a pipeline runs after ``kubectl apply``. It follows the
job through the API's live events and exits 0 succeeded, 1 failed (printing the root cause), 3
refused, 4 no such job or attempt (within seconds, unless told to wait for its creation), 5 timed
out; a run that already ended is judged by its outcome; it rides out an API restart without
printing anything twice."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import Principal, StaticAccess
from controller.cli import waiting
from controller.cli.exits import CommandError, Exit
from controller.cli.waiting import Goal
from controller.client import Refused
from controller.contract.settings import ClientSettings
from controller.testing.processes import run_cli
from controller.testing.waits import until
from tests.api_fixtures import T0, USERS, fire, job_story
from tests.live_events import FAST, GUARD_S, Served, Writer, serving

OOM = "Worker 1 was OOM-killed: its 16Gi limit is below what the job uses."


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("token-alice\n")  # a service account's projected token, as a file
    return path


class Waiting:
    """One ``wait`` running against ``api``, its output kept."""

    def __init__(self, api: Served, token_file: Path, target: str, **options: object) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        self.task = asyncio.create_task(
            waiting.wait(target, client, out=self.out, err=self.err, **options)  # type: ignore[arg-type]
        )

    async def status(self) -> int:
        return await asyncio.wait_for(self.task, GUARD_S)

    async def printed(self, text: str) -> None:
        await until(lambda: text in self.out.getvalue() or self.task.done(), GUARD_S, self.out.getvalue)


@contextlib.asynccontextmanager
async def waiting_on_an_oom(
    engine: AsyncEngine, token_file: Path
) -> AsyncIterator[tuple[Served, Waiting, Callable[[], Awaitable[None]]]]:
    """A ``wait`` started before its job is seen, the job recorded up to Running and printed so;
    the third: record the rest, its worker OOM-killed and the finding fired."""
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    writer = Writer(engine)

    async def fail() -> None:
        await writer.write(story[-2:])
        await fire(engine, uid, "team-a", "train", "oom", OOM, T0 + timedelta(seconds=600))

    # the finding is recorded after the phase Failed, as the rules do: the stream waits for it as
    # the API's own grace does (FAST's grace of 0 would end it between the two writes)
    async with serving(engine, dataclasses.replace(FAST, finding_grace_s=GUARD_S)) as api:
        wait = Waiting(api, token_file, "team-a/train", wait_for_creation=True)
        await writer.write(story[:-2])
        await wait.printed(": Running")
        yield api, wait, fail


async def test_a_job_that_fails_with_an_oom_exits_1_with_its_root_cause(
    engine: AsyncEngine, token_file: Path
) -> None:
    async with waiting_on_an_oom(engine, token_file) as (_, wait, fail):
        await fail()
        status = await wait.status()
    assert status == Exit.FAILED
    out, err = wait.out.getvalue(), wait.err.getvalue()
    assert [line.split(": ", 1)[1] for line in out.splitlines() if " attempt 1: " in line][:3] == [
        "Pending",
        "Running (MPIJobRunning)",
        "Failed (MPIJobFailed)",
    ]
    assert f"root cause (oom, critical): {OOM}" in err
    assert "  - Increase worker memory." in err


@pytest.mark.parametrize(("goal", "expected"), [("succeeded", Exit.OK), ("running", Exit.OK)])
async def test_a_job_that_succeeds_exits_0(
    engine: AsyncEngine, token_file: Path, goal: Goal, expected: int
) -> None:
    _, story = job_story("train")
    async with serving(engine) as api:
        wait = Waiting(api, token_file, "team-a/train", goal=goal, wait_for_creation=True)
        await Writer(engine).write(story)
        assert await wait.status() == expected
    assert ("is Succeeded" in wait.out.getvalue()) == (goal == "succeeded")


async def test_finished_is_met_by_a_failure_too(engine: AsyncEngine, token_file: Path) -> None:
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    await Writer(engine).write(story)
    await fire(engine, uid, "team-a", "train", "oom", OOM, T0 + timedelta(seconds=600))
    async with serving(engine) as api:
        wait = Waiting(api, token_file, "team-a/train", goal="finished")
        assert await wait.status() == Exit.OK
    assert OOM in wait.out.getvalue()


async def test_a_job_still_running_at_the_timeout_exits_5(engine: AsyncEngine, token_file: Path) -> None:
    _, story = job_story("train")
    await Writer(engine).write(story[:-1])
    async with serving(engine) as api:
        wait = Waiting(api, token_file, "team-a/train", timeout_s=0.5)
        assert await wait.status() == Exit.TIMED_OUT
    assert "did not reach succeeded within 0h00m00s" in wait.err.getvalue()


async def test_a_token_that_may_not_read_the_namespace_is_refused(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    bob = tmp_path / "bob"
    bob.write_text("token-bob")
    async with serving(engine) as api:
        with pytest.raises(Refused, match="HTTP 403"):
            await Waiting(api, bob, "team-a/train").status()
        with pytest.raises(Refused, match="MPIJC_CLIENT__TOKEN_FILE: cannot read"):
            await Waiting(api, tmp_path / "absent", "team-a/train").status()


@pytest.mark.parametrize("attempt", ["latest", "2"], ids=["no-such-job", "no-such-attempt"])
async def test_a_job_or_attempt_that_does_not_exist_is_not_found_within_seconds(
    engine: AsyncEngine, token_file: Path, attempt: str
) -> None:
    _, story = job_story("train")
    await Writer(engine).write(story[:-1])
    target = "team-a/typo" if attempt == "latest" else "team-a/train"
    async with serving(engine) as api:
        wait = Waiting(api, token_file, target, attempt=attempt, created_within_s=0.0)
        with pytest.raises(CommandError, match="--wait-for-creation waits for it") as raised:
            await wait.status()
    assert raised.value.status == Exit.NOT_FOUND


async def test_a_job_recorded_while_it_is_looked_for_is_followed(
    engine: AsyncEngine, token_file: Path
) -> None:
    _, story = job_story("train")
    async with serving(engine) as api:
        wait = Waiting(api, token_file, "team-a/train", created_within_s=GUARD_S)
        await Writer(engine).write(story)
        assert await wait.status() == Exit.OK


@pytest.mark.parametrize(
    ("goal", "expected"),
    [("running", Exit.FAILED), ("succeeded", Exit.FAILED), ("finished", Exit.OK)],
)
async def test_a_run_that_already_failed_is_judged_by_its_outcome(
    engine: AsyncEngine, token_file: Path, goal: Goal, expected: Exit
) -> None:
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    await Writer(engine).write(story)
    await fire(engine, uid, "team-a", "train", "oom", OOM, T0 + timedelta(seconds=600))
    async with serving(engine) as api:
        wait = Waiting(api, token_file, "team-a/train", goal=goal)
        assert await wait.status() == expected
    assert "is Running" not in wait.out.getvalue()
    assert "is Failed" in wait.out.getvalue() + wait.err.getvalue()


class Revocable(StaticAccess):
    """The static tokens, until :attr:`revoked`: then nobody may list anything."""

    revoked = False

    async def can_list(self, principal: Principal, namespace: str | None) -> bool:
        return not self.revoked and await super().can_list(principal, namespace)


async def test_a_wait_whose_access_is_removed_exits_3_with_the_reason(
    engine: AsyncEngine, token_file: Path
) -> None:
    _, story = job_story("train")
    await Writer(engine).write(story[:-1])  # running
    reviewer = Revocable(USERS)
    async with serving(engine, dataclasses.replace(FAST, recheck_s=0.1), reviewer=reviewer) as api:
        wait = Waiting(api, token_file, "team-a/train")
        await wait.printed(": Running")
        reviewer.revoked = True
        with pytest.raises(Refused) as refused:
            await wait.status()
    assert str(refused.value) == (
        "the API ended the stream: alice may no longer list MPIJobs or TrainJobs in namespace 'team-a'"
    )


async def test_wait_rides_out_an_api_restart_and_prints_every_change_once(
    engine: AsyncEngine, token_file: Path
) -> None:
    async with waiting_on_an_oom(engine, token_file) as (api, wait, fail):
        await api.stop()  # the API goes away while the job runs on
        await fail()
        await until(lambda: "reconnecting" in wait.err.getvalue(), GUARD_S, wait.err.getvalue)
        await api.start()  # on the same port, as a restarted pod behind its Service
        assert await wait.status() == Exit.FAILED
    lines = wait.out.getvalue().splitlines()
    assert len(lines) == len(set(lines))
    phases = [line.split(": ", 1)[1] for line in lines if " attempt 1: " in line and "finding" not in line]
    assert phases == ["Pending", "Running (MPIJobRunning)", "Failed (MPIJobFailed)"]
    assert OOM in wait.err.getvalue()


async def test_each_revision_of_a_finding_is_printed_with_its_own_words(
    engine: AsyncEngine, token_file: Path
) -> None:
    """A finding revised (a later look at the pod told more) keeps, in the replayed history, what
    each revision said: the first line is not rewritten with today's text."""
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    await Writer(engine).write(story)
    first = "Worker 1 was OOM-killed."
    await fire(engine, uid, "team-a", "train", "oom", first, T0 + timedelta(seconds=595))
    await fire(engine, uid, "team-a", "train", "oom", OOM, T0 + timedelta(seconds=600), revision=2)
    async with serving(engine) as api:
        wait = Waiting(api, token_file, "team-a/train", goal="finished")
        assert await wait.status() == Exit.OK
    said = [line for line in wait.out.getvalue().splitlines() if ": finding oom " in line]
    assert [line.rsplit("): ", 1)[1] for line in said] == [first, OOM]


def test_the_command_line_takes_its_settings_from_the_environment(tmp_path: Path) -> None:
    """The installed entry point: an API that cannot be reached is retried until the timeout (5);
    a token file that cannot be read is named by its variable (3)."""
    token = tmp_path / "token"
    token.write_text("token-alice")
    env = {
        **os.environ,
        "MPIJC_CLIENT__API_URL": "http://127.0.0.1:1",
        "MPIJC_CLIENT__TOKEN_FILE": str(token),
    }
    command = ["wait", "team-a/train", "--timeout", "1s"]
    unreachable = run_cli(command, env, timeout_s=60)
    env["MPIJC_CLIENT__TOKEN_FILE"] = str(tmp_path / "absent")
    no_token = run_cli(command, env, timeout_s=60)
    assert unreachable.returncode == Exit.TIMED_OUT, unreachable.stderr
    assert "reconnecting" in unreachable.stderr
    assert no_token.returncode == Exit.REFUSED
    assert no_token.stderr.strip().endswith(
        f"MPIJC_CLIENT__TOKEN_FILE: cannot read {tmp_path / 'absent'}: No such file or directory"
    )
