"""One namespace cannot take every event stream: the probe of ten service accounts of one
namespace opening 100 streams (ten each, the most one caller may) leaves another namespace its
log follow and its events stream, under the shipped caps (100 per process, 10 per caller, 25
per namespace). Each service account connects from an address of its own, as pods do."""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter

import httpx

from controller.api.access import StaticAccess
from controller.api.logs import RunLogs
from controller.api.streaming import StreamLimits
from controller.contract.settings import StaticUser
from tests.api_fixtures import T0, USERS, bearer, insert_runs, run_row
from tests.conftest import Stage
from tests.live_events import GUARD_S, serving

ACCOUNTS = {
    f"token-sa-{n}": StaticUser(username=f"system:serviceaccount:team-a:sa-{n}", namespaces=["team-a"])
    for n in range(10)
}
CALM = StreamLimits(poll_s=0.5, heartbeat_s=5.0)
"""The shipped caps; polls slow enough that a hundred streams cost the test machine little."""


async def opened(stream: contextlib.AbstractAsyncContextManager[httpx.Response]) -> int:
    """The stream's status; a 200 is counted once its first line came."""
    async with stream as response:
        if response.status_code == 200:
            assert await anext(response.aiter_lines()) == "retry: 2000"
        return response.status_code


async def test_one_namespaces_100_streams_leave_another_namespace_its_follow_and_events(stage: Stage) -> None:
    theirs = str(uuid.uuid4())
    await insert_runs(stage.engine, [run_row("team-b", "eval", T0, uid=theirs, phase="Running")])
    reviewer = StaticAccess({**USERS, **ACCOUNTS})
    async with (
        serving(stage.engine, CALM, run_logs=RunLogs(stage.js, stage.topology), reviewer=reviewer) as api,
        contextlib.AsyncExitStack() as held,
    ):
        answers: Counter[int] = Counter()
        for n, token in enumerate(ACCOUNTS):
            pod = httpx.AsyncHTTPTransport(local_address=f"127.0.0.{10 + n}")
            client = await held.enter_async_context(
                httpx.AsyncClient(base_url=api.url, timeout=GUARD_S, transport=pod)
            )
            for _ in range(10):
                url = "/api/v1/namespaces/team-a/jobs/never/events"
                response = await held.enter_async_context(client.stream("GET", url, headers=bearer(token)))
                answers[response.status_code] += 1
                if response.status_code != 200:
                    refusal = (await response.aread()).decode()
        async with httpx.AsyncClient(base_url=api.url, timeout=GUARD_S, headers=bearer("token-bob")) as bob:
            follow = await opened(bob.stream("GET", f"/api/v1/runs/{theirs}/logs", params={"follow": "true"}))
            events = await opened(bob.stream("GET", "/api/v1/namespaces/team-b/jobs/eval/events"))
    assert (follow, events) == (200, 200), "another namespace's streams were refused"
    assert answers == {200: 25, 429: 75}
    assert "namespace 'team-a' has 25 event streams open, the most one namespace may" in refusal
