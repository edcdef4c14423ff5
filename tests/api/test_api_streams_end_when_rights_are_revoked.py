"""An open stream re-checks its caller every ``review_ttl_s`` and ends, with a last ``denied``
event saying why, once its token is revoked or its RoleBinding removed: in ``kubernetes`` mode,
TokenReview and SubjectAccessReview answered by the simulated API server through the real
gateway, cached as the API caches them (:class:`~controller.api.access.CachedAccess`). Both kinds
of stream go through the same door: a run's events and a run's log follow.

The review TTL is short here (0.3 s), so a test waits for the re-check it causes, never sleeps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from controller.api.access import CachedAccess
from controller.api.logs import RunLogs
from controller.api.streaming import StreamLimits
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import KubeAccessReviewer
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.api_fixtures import bearer
from tests.conftest import Stage
from tests.live_events import GUARD_S, serving
from tests.log_fixtures import BASE, S, run_with_logs

TTL_S = 0.3
ALICE = {"username": "alice", "uid": "u-alice", "groups": ["team-a", "system:authenticated"]}
TOKENS = {"token-alice": ALICE}
BINDINGS = [("alice", "mpijobs", "team-a"), ("alice", "pods", "team-a", "get")]
"""alice's RoleBinding in team-a: list MPIJobs, get pods/log."""
LIMITS = StreamLimits(poll_s=0.05, heartbeat_s=0.2, recheck_s=TTL_S)


def token_reviews(sim: SimCluster) -> int:
    return sum(1 for r in sim.requests if r.method == "POST" and r.path.endswith("/tokenreviews"))


@pytest.fixture
def reviewer(sim: SimCluster) -> Iterator[CachedAccess]:
    sim.set_access(TOKENS, BINDINGS)
    with KubeGateway.for_url(sim.url) as gateway:
        yield CachedAccess(KubeAccessReviewer(gateway), ttl_s=TTL_S, denied_ttl_s=TTL_S)


NO_LIST = "alice may no longer list MPIJobs or TrainJobs in namespace 'team-a'"
NO_LOGS = "alice may no longer get pods/log in namespace 'team-a'"
REVOCATIONS: dict[str, tuple[Callable[[SimCluster], None], frozenset[str]]] = {
    "revoked-token": (
        lambda sim: sim.set_access({}, BINDINGS),
        frozenset({"the bearer token is no longer accepted"}),
    ),
    # each decision is cached from when it was asked: a follow may find either right gone first
    "removed-rolebinding": (lambda sim: sim.set_access(TOKENS, []), frozenset({NO_LIST, NO_LOGS})),
    "removed-pods-log-only": (lambda sim: sim.set_access(TOKENS, BINDINGS[:1]), frozenset({NO_LOGS})),
}


@pytest.mark.parametrize(
    ("stream", "revocation"),
    [
        ("events", "revoked-token"),
        ("events", "removed-rolebinding"),
        ("logs", "revoked-token"),
        ("logs", "removed-rolebinding"),
        ("logs", "removed-pods-log-only"),
    ],
    ids=str,
)
async def test_an_open_stream_ends_with_a_denied_event_once_its_rights_are_gone(
    stage: Stage,
    sim: SimCluster,
    reviewer: CachedAccess,
    stream: str,
    revocation: str,
) -> None:
    revoke, reasons = REVOCATIONS[revocation]
    if stream == "events":
        reasons -= {NO_LOGS}  # an events stream does not need pods/log
    uid = await run_with_logs(stage)
    url = f"/api/v1/runs/{uid}/events"
    params = {}
    if stream == "logs":
        url = f"/api/v1/runs/{uid}/logs"
        params = {"follow": "true", "since": datetime.fromtimestamp(BASE / S, UTC).isoformat()}
    async with (
        serving(stage.engine, LIMITS, run_logs=RunLogs(stage.js, stage.topology), reviewer=reviewer) as api,
        httpx.AsyncClient(base_url=api.url, timeout=GUARD_S) as client,
        client.stream("GET", url, params=params, headers=bearer("token-alice")) as response,
    ):
        assert response.status_code == 200
        lines = response.aiter_lines()
        before = token_reviews(sim)
        # while allowed, the stream asks again and goes on
        await until(lambda: token_reviews(sim) >= before + 2, GUARD_S, lambda: "no re-check was asked")
        revoke(sim)
        async with asyncio.timeout(GUARD_S):  # heartbeats would keep a stream that never ends going
            received = [line async for line in lines]  # to the stream's end
    denied = received.index("event: denied")
    (reason,) = json.loads(received[denied + 1].removeprefix("data: ")).values()
    assert reason in reasons
    assert received[denied + 2 :] == [""], "the denied event is the last"
