"""The Python client (``controller.client``) against the API served for real (uvicorn on a loopback
port) over this test's PostgreSQL and NATS: the sync and the async client give the same typed
answers as the API's JSON; ``logs`` iterates merged lines and, with ``follow``, resumes after an API
restart with ``Last-Event-ID``; ``wait`` ends with the run, :class:`RunFailed` carrying its root
cause, or :class:`TimedOut`; errors are mapped to the commands' exit statuses (401/403 refused, 404
not found, a closed port unreachable)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.logs import RunLogs
from controller.client import (
    AsyncClient,
    Client,
    ClientError,
    Comparison,
    Exit,
    NotFound,
    Refused,
    RunDetail,
    RunFailed,
    Settled,
    TimedOut,
    Unreachable,
    UsageError,
    WaitEvent,
)
from controller.testing.ports import free_port
from controller.testing.waits import until
from tests.api_fixtures import ADMIN, T0, fire, job_story, oom_failed, store
from tests.conftest import Stage
from tests.live_events import GUARD_S, Served, Writer, serving
from tests.log_fixtures import log_batch, run_with_logs

OOM = "Worker 1 failed: out of memory (limit 16Gi)."
T = TypeVar("T")


class Both:
    """One client of either kind, called the same way from the test's event loop: the async one
    awaited, the sync one in a thread (it blocks, and the API serves on this loop)."""

    def __init__(self, kind: str, url: str, token: str = "token-alice") -> None:
        self.kind = kind
        self.sync = Client(url, token=token) if kind == "sync" else None
        self.aio = AsyncClient(url, token=token) if kind == "async" else None

    async def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.aio is not None:
            call: Callable[..., Awaitable[Any]] = getattr(self.aio, method)
            return await call(*args, **kwargs)
        assert self.sync is not None
        return await asyncio.to_thread(getattr(self.sync, method), *args, **kwargs)

    async def lines(self, ref: str, **kwargs: Any) -> list[str]:
        if self.aio is not None:
            return [entry.text async for entry in self.aio.logs(ref, **kwargs)]
        assert self.sync is not None
        sync = self.sync
        return await asyncio.to_thread(lambda: [entry.text for entry in sync.logs(ref, **kwargs)])

    async def close(self) -> None:
        if self.aio is not None:
            await self.aio.aclose()
        if self.sync is not None:
            await asyncio.to_thread(self.sync.close)


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def api(engine: AsyncEngine) -> AsyncIterator[Served]:
    async with serving(engine) as served:
        yield served


@pytest.fixture
async def client(api: Served, kind: str) -> AsyncIterator[Both]:
    both = Both(kind, api.url)
    yield both
    await both.close()


async def api_json(api: Served, path: str, **params: str) -> Any:
    async with httpx.AsyncClient(base_url=api.url, headers=ADMIN, timeout=GUARD_S) as http:
        response = await http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


async def two_attempts(engine: AsyncEngine) -> tuple[str, str]:
    """Attempt 1 of team-a/train OOM-killed (its finding fired), attempt 2 with more memory succeeded."""
    failed, story = job_story("train", workers=2, memory="16Gi", outcome="Failed", oom_worker=1)
    await store(engine, story)
    await fire(engine, failed, "team-a", "train", "oom", OOM, T0)
    succeeded, story = job_story("train", workers=3, memory="32Gi", start=T0 + timedelta(hours=1))
    await store(engine, story)
    return failed, succeeded


async def test_runs_run_findings_and_compare_are_the_apis_answers_typed(
    engine: AsyncEngine, api: Served, client: Both
) -> None:
    failed, succeeded = await two_attempts(engine)

    page = await client("runs", "team-a", phase="Failed")
    detail: RunDetail = await client("run", "team-a/train@1")
    newest: RunDetail = await client("run", "team-a/train")
    findings = await client("findings", failed)
    comparison: Comparison = await client("compare", "team-a/train@1", "team-a/train")

    assert [run.uid for run in page.items] == [failed] and page.next_cursor is None
    assert detail.uid == failed and detail.phase == "Failed" and newest.uid == succeeded
    assert [(f.rule, f.status, f.root_cause) for f in findings] == [("oom", "firing", OOM)]
    assert findings[0].remediation == ["Increase worker memory."]
    assert [column.outcome for column in comparison.runs] == ["Failed", "Succeeded"]
    assert "worker.resources.limits.memory" in comparison.differences
    assert detail.model_dump(mode="json") == await api_json(api, f"/api/v1/runs/{failed}")
    compared = await api_json(api, "/api/v1/compare", runs=f"{failed},{succeeded}")
    assert comparison.model_dump(mode="json") == compared


async def test_runs_follow_the_pages_up_to_the_limit_and_hand_back_the_cursor(
    engine: AsyncEngine, client: Both
) -> None:
    for hour in range(3):
        _, story = job_story(f"job-{hour}", start=T0 + timedelta(hours=hour))
        await store(engine, story)

    first = await client("runs", limit=2)
    rest = await client("runs", limit=2, cursor=first.next_cursor)

    assert [run.name for run in first.items] == ["job-2", "job-1"] and first.next_cursor is not None
    assert [run.name for run in rest.items] == ["job-0"] and rest.next_cursor is None


@pytest.mark.parametrize(
    ("call", "token", "error", "status", "says"),
    [
        (("run", "team-a/none"), "token-alice", NotFound, Exit.NOT_FOUND, "no run of team-a/none"),
        (("run", "0123-no-such-uid"), "token-alice", NotFound, Exit.NOT_FOUND, "HTTP 404"),
        (("runs", "team-a"), "token-bob", Refused, Exit.REFUSED, "HTTP 403"),
        (("runs",), "token-unknown", Refused, Exit.REFUSED, "HTTP 401"),
        (("compare", "team-a/train"), "token-alice", ClientError, Exit.USAGE, "2 to 5 runs"),
        (("run", "not a run"), "token-alice", ClientError, Exit.USAGE, "is not a run"),
    ],
    ids=["no-such-job", "no-such-uid", "forbidden", "unknown-token", "one-run-compared", "malformed"],
)
async def test_errors_carry_the_commands_exit_status(
    api: Served,
    kind: str,
    call: tuple[str, ...],
    token: str,
    error: type[ClientError],
    status: Exit,
    says: str,
) -> None:
    client = Both(kind, api.url, token)
    try:
        with pytest.raises(error, match=says) as raised:
            await client(*call)
    finally:
        await client.close()
    assert raised.value.status == status


async def test_an_api_that_is_not_there_is_unreachable(kind: str) -> None:
    client = Both(kind, f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(Unreachable, match="cannot reach the API") as raised:
            await client("runs")
    finally:
        await client.close()
    assert raised.value.status == Exit.REFUSED


def test_a_token_is_refused_over_plain_http_to_another_machine(tmp_path: Path) -> None:
    with Client("http://api.example:8480", token="secret") as api, pytest.raises(Refused, match="plain http"):
        api.runs()
    with pytest.raises(ClientError, match="CA_FILE: cannot load") as raised:
        Client("https://api.example:8480", token="secret", ca_file=str(tmp_path / "absent.pem"))
    assert raised.value.status == Exit.USAGE


async def test_logs_are_merged_and_a_follow_resumes_after_an_api_restart(stage: Stage, kind: str) -> None:
    uid = await run_with_logs(stage)
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = Both(kind, api.url)
        try:
            stored = await client.lines("team-a/llm")
            grepped = await client.lines("team-a/llm", grep="cuda", ignore_case=True)
            followed, notices = await _follow_across_restart(client, api, stage, uid)
        finally:
            await client.close()
    assert stored == [
        "sshd: accepted",
        "[1,0]<stdout>:step 1 loss 2.0",
        "sshd: accepted",
        "CUDA error: an illegal memory access",
        "[1,1]<stdout>:step 2 NCCL WARN retry",
        "orted started",
    ]
    assert grepped == ["CUDA error: an illegal memory access"]
    assert followed == [*stored, "step 3", "step 4"], "every line once, none lost across the restart"
    assert any("reconnecting" in line for line in notices)


async def _follow_across_restart(
    client: Both, api: Served, stage: Stage, uid: str
) -> tuple[list[str], list[str]]:
    """Follow team-a/llm's lines while the API stops, the job logs on, and the API comes back."""
    texts: list[str] = []
    notices: list[str] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def take(text: str) -> bool:
        texts.append(text)
        if text == "step 4":
            loop.call_soon_threadsafe(done.set)
            return True
        return False

    async def follow_async() -> None:
        assert client.aio is not None
        async for entry in client.aio.logs("team-a/llm", follow=True, notice=notices.append):
            if take(entry.text):
                return

    def follow_sync() -> None:
        assert client.sync is not None
        for entry in client.sync.logs("team-a/llm", follow=True, notice=notices.append):
            if take(entry.text):
                return

    task = asyncio.ensure_future(follow_async() if client.aio is not None else asyncio.to_thread(follow_sync))
    await until(lambda: len(texts) == 6, GUARD_S, lambda: str(texts))
    await api.stop()  # the API goes away while the job logs on
    later = log_batch(uid, "llm-worker-0", "worker", [(4.0, None, "step 3"), (5.0, None, "step 4")])
    await stage.publish_logs([later])
    await until(lambda: any("reconnecting" in n for n in notices), GUARD_S, lambda: str(notices))
    await api.start()  # on the same port, as a restarted pod behind its Service
    await asyncio.wait_for(done.wait(), GUARD_S)
    await asyncio.wait_for(task, GUARD_S)
    return texts, notices


async def test_wait_returns_the_run_that_succeeded(engine: AsyncEngine, api: Served, client: Both) -> None:
    uid, story = job_story("train")
    writer = Writer(engine)
    await writer.write(story[:-1])
    waiting = asyncio.ensure_future(client("wait", "team-a/train", timeout_s=GUARD_S))
    await writer.write(story[-1:])

    run = await asyncio.wait_for(waiting, GUARD_S)

    assert (run.uid, run.phase) == (uid, "Succeeded")


async def test_wait_raises_run_failed_with_its_root_cause(
    engine: AsyncEngine, api: Served, client: Both
) -> None:
    uid = await oom_failed(engine, OOM)

    line = f"team-a/train attempt 1 is Failed: root cause (oom, critical): {OOM}"
    with pytest.raises(RunFailed, match=re.escape(line)) as raised:
        await client("wait", "team-a/train", timeout_s=GUARD_S)
    finished: RunDetail = await client("wait", "team-a/train", goal="finished", timeout_s=GUARD_S)

    assert raised.value.status == Exit.FAILED
    assert raised.value.run.uid == uid and [f.rule for f in raised.value.run.findings] == ["oom"]
    assert finished.phase == "Failed", "waiting for the end, a failure is the answer"


async def test_wait_gives_up_at_its_timeout_or_when_the_job_is_not_recorded(
    engine: AsyncEngine, api: Served, client: Both
) -> None:
    _, story = job_story("train")
    await store(engine, story[:-1])  # running, and it will not end

    with pytest.raises(TimedOut, match=r"did not reach succeeded within 0\.5 s") as timed_out:
        await client("wait", "team-a/train", timeout_s=0.5)
    with pytest.raises(NotFound, match="no run of team-a/absent that this token may read") as missing:
        await client("wait", "team-a/absent", created_within_s=0.0, timeout_s=GUARD_S)

    assert timed_out.value.status == Exit.TIMED_OUT and missing.value.status == Exit.NOT_FOUND


async def test_wait_for_the_next_attempt_tells_each_event_and_returns_it_running(
    engine: AsyncEngine, api: Served, client: Both
) -> None:
    """The rule the ``wait`` command prints through: a job name's stream, the attempt after the one
    recorded now, each event told as it comes, the goal ``running`` met by the new attempt."""
    first, story = job_story("train")
    await store(engine, story)  # attempt 1 succeeded: not the one waited for
    events: list[WaitEvent] = []
    waiting = asyncio.ensure_future(
        client(
            "wait", "team-a/train", attempt="next", goal="running", on_event=events.append, timeout_s=GUARD_S
        )
    )
    await until(lambda: [e.kind for e in events] == ["waiting"], GUARD_S, lambda: str(events))
    second, story = job_story("train", start=T0 + timedelta(hours=1))
    await Writer(engine).write(story[:-1])

    run: RunDetail = await asyncio.wait_for(waiting, GUARD_S)

    assert (run.uid, run.attempt) == (second, 2) and first != second
    phases = [(e.data["attempt"], e.phase) for e in events if e.kind == "phase"]
    assert phases == [(2, "Pending"), (2, "Running")]
    assert events[-1].settled == Settled(met=True, phase="Running")
    assert [e for e in events if e.settled is not None] == [events[-1]]


async def test_following_a_run_that_already_failed_settles_on_its_outcome(
    engine: AsyncEngine, api: Served
) -> None:
    uid = await oom_failed(engine, OOM)

    async with AsyncClient(api.url, token="token-alice") as aio:
        following = aio.follow("team-a/train@1", goal="running", timeout_s=GUARD_S)
        events = [event async for event in following]
        with pytest.raises(UsageError, match="is a uid"):
            aio.follow(uid)

    assert "Running" in [e.phase for e in events if e.kind == "phase"], "its history is told"
    settled = events[-1].settled
    assert events[-1].kind == "end" and settled is not None and not settled.met
    assert (settled.outcome, [f["rule"] for f in settled.findings or ()]) == ("is Failed", ["oom"])
    assert following.run == {"namespace": "team-a", "name": "train", "attempt": 1, "uid": uid}
    assert following.phase == "Failed" and list(following.findings) == ["oom"]
