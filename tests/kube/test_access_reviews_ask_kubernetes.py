"""TokenReview and SubjectAccessReview through the real gateway, against the simulated API server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import CachedAccess, Principal, ReviewUnavailableError
from controller.api.app import create_app
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from tests.clocks import ManualClock

ALICE = {
    "username": "alice",
    "uid": "u-1",
    "groups": ["team-a", "system:authenticated"],
    "extra": {"scopes": ["x"]},
}


@pytest.fixture
def reviewer(sim: SimCluster) -> Iterator[KubeAccessReviewer]:
    sim.set_access(
        {"alice-token": ALICE, "bob-token": {"username": "bob"}},
        [("group:team-a", "mpijobs", "team-a"), ("bob", "trainjobs", "team-b"), ("ops", "mpijobs", "*")],
    )
    with KubeGateway.for_url(sim.url) as gateway:
        yield KubeAccessReviewer(gateway)


def reviews(sim: SimCluster, plural: str) -> int:
    return sum(1 for r in sim.requests if r.method == "POST" and r.path.endswith(f"/{plural}"))


async def test_token_review_gives_the_user_as_kubernetes_knows_it(reviewer: KubeAccessReviewer) -> None:
    assert await reviewer.review_token("alice-token") == Principal(
        "alice", ("team-a", "system:authenticated"), "u-1", (("scopes", ("x",)),)
    )
    assert await reviewer.review_token("stolen-token") is None
    assert await reviewer.review_token("") is None


@pytest.mark.parametrize(
    ("user", "namespace", "allowed"),
    [
        (Principal("alice", ("team-a",)), "team-a", True),  # through her group
        (Principal("alice", ("team-a",)), "team-b", False),
        (Principal("alice", ("team-a",)), None, False),  # no cluster-wide grant
        (Principal("bob"), "team-b", True),  # TrainJobs are enough
        (Principal("bob"), "team-a", False),
        (Principal("ops"), None, True),
        (Principal("ops"), "anywhere", True),
    ],
    ids=str,
)
async def test_subject_access_review_decides_per_namespace(
    reviewer: KubeAccessReviewer, user: Principal, namespace: str | None, allowed: bool
) -> None:
    assert await reviewer.can_list(user, namespace) is allowed


async def test_answers_are_reused_until_the_ttl_passes(reviewer: KubeAccessReviewer, sim: SimCluster) -> None:
    clock = ManualClock()
    cached = CachedAccess(reviewer, ttl_s=30, clock=clock)
    alice = await cached.review_token("alice-token")
    assert alice is not None
    for _ in range(3):
        assert await cached.review_token("alice-token") == alice
        assert await cached.review_token("stolen-token") is None  # denials are cached too
        assert await cached.can_list(alice, "team-a")
    assert (reviews(sim, "tokenreviews"), reviews(sim, "subjectaccessreviews")) == (2, 1)

    clock.now = 31
    assert await cached.review_token("alice-token") == alice
    assert await cached.can_list(alice, "team-a")
    assert (reviews(sim, "tokenreviews"), reviews(sim, "subjectaccessreviews")) == (3, 2)


async def test_concurrent_requests_share_one_review(reviewer: KubeAccessReviewer, sim: SimCluster) -> None:
    cached = CachedAccess(reviewer, ttl_s=30)
    answers = await asyncio.gather(*(cached.review_token("alice-token") for _ in range(20)))
    assert len(set(answers)) == 1 and answers[0] is not None
    assert reviews(sim, "tokenreviews") == 1


@pytest.mark.parametrize("code", [503, 403], ids=["api-down", "rbac-forbids-reviews"])
async def test_a_failed_review_is_neither_yes_nor_no_and_is_not_cached(
    reviewer: KubeAccessReviewer, sim: SimCluster, code: int
) -> None:
    cached = CachedAccess(reviewer, ttl_s=30)
    sim.fail_next(1, code, match="tokenreviews")
    with pytest.raises(ReviewUnavailableError, match=f"TokenReview failed: \\({code}"):
        await cached.review_token("alice-token")
    assert await cached.review_token("alice-token") is not None


async def test_the_api_answers_503_while_reviews_fail(
    reviewer: KubeAccessReviewer, sim: SimCluster, engine: AsyncEngine
) -> None:
    app = create_app(engine, PipelineMetrics(), CachedAccess(reviewer, ttl_s=30))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        sim.fail_next(1, 503, match="tokenreviews")
        down = await client.get("/api/v1/runs", headers={"Authorization": "Bearer alice-token"})
        assert down.status_code == 503
        assert down.json()["detail"].startswith("cannot check access right now: TokenReview failed: (503")
        sim.fail_next(1, 503, match="subjectaccessreviews")
        down = await client.get(
            "/api/v1/runs?namespace=team-a", headers={"Authorization": "Bearer alice-token"}
        )
        assert down.status_code == 503
        up = await client.get(
            "/api/v1/runs?namespace=team-a", headers={"Authorization": "Bearer alice-token"}
        )
        assert up.status_code == 200
