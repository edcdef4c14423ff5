"""Access reviews cost per identity, not per token, expire on time, and one request's are bounded.

TokenReview and SubjectAccessReview are answered by the simulated API server through the real
gateway, as ``api.auth=kubernetes`` runs them; the API counts as it does in production
(:class:`~controller.api.access.CachedAccess` over :class:`~controller.kube.reviews.KubeAccessReviewer`).
A service account's tokens differ only in the attributes that name the token (its id, the pod
it was minted for), as the TokenReviews of freshly minted tokens do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import CachedAccess
from controller.api.app import create_app
from controller.api.limits import ApiLimits
from controller.contract.settings import ApiSettings
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import LISTED, KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from tests.api_fixtures import T0, bearer, insert_runs, run_row
from tests.clocks import ManualClock

NAMESPACES = [f"ns-{i:02}" for i in range(12)]
SERVICE_ACCOUNT = "system:serviceaccount:ml:trainer"
GRANTS = [(SERVICE_ACCOUNT, "mpijobs", "ns-00"), ("group:system:serviceaccounts:ml", "trainjobs", "ns-01")]
TOKENS = [f"sa-token-{n}" for n in range(5)]
KINDS = len(LISTED)
ONE_IDENTITY = KINDS + 1 + 2 + KINDS * (len(NAMESPACES) - 2)
"""SubjectAccessReviews of one cold list: cluster-wide (every kind denied), ns-00 (allowed by
MPIJobs, the first: one), ns-01 (allowed by TrainJobs, the second: two), ten denied namespaces
(every kind each)."""


def minted(n: int) -> dict[str, Any]:
    """The TokenReview user of the service account's ``n``-th token."""
    return {
        "username": SERVICE_ACCOUNT,
        "uid": "0b7c5f0e-sa",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:ml", "system:authenticated"],
        "extra": {
            "authentication.kubernetes.io/credential-id": [f"JTI=jti-{n}"],
            "authentication.kubernetes.io/pod-name": [f"trainer-{n}"],
            "authentication.kubernetes.io/pod-uid": [f"pod-uid-{n}"],
        },
    }


def reviews(sim: SimCluster, plural: str) -> int:
    return sum(1 for r in sim.requests if r.method == "POST" and r.path.endswith(f"/{plural}"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def reviewer(sim: SimCluster, clock: ManualClock) -> Iterator[CachedAccess]:
    sim.set_access({token: minted(n) for n, token in enumerate(TOKENS)}, GRANTS)
    with KubeGateway.for_url(sim.url) as gateway:
        yield CachedAccess(KubeAccessReviewer(gateway), ttl_s=30, clock=clock, denied_ttl_s=60)


@pytest.fixture
async def runs(engine: AsyncEngine) -> None:
    await insert_runs(
        engine, [run_row(ns, "pi", T0 + timedelta(minutes=i)) for i, ns in enumerate(NAMESPACES)]
    )


async def client_for(
    engine: AsyncEngine, reviewer: CachedAccess, **api: Any
) -> AsyncIterator[httpx.AsyncClient]:
    limits = ApiLimits.from_settings(ApiSettings(**api))
    app = create_app(engine, PipelineMetrics(), reviewer, limits=limits)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


@pytest.fixture
async def api(engine: AsyncEngine, reviewer: CachedAccess, runs: None) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(engine, reviewer):
        yield client


async def listed(api: httpx.AsyncClient, token: str) -> set[str]:
    answer = await api.get("/api/v1/runs", headers=bearer(token))
    assert answer.status_code == 200, answer.text
    return {run["namespace"] for run in answer.json()["items"]}


async def test_five_fresh_tokens_of_one_service_account_cost_one_set_of_reviews(
    api: httpx.AsyncClient, sim: SimCluster
) -> None:
    for token in TOKENS:
        assert await listed(api, token) == {"ns-00", "ns-01"}

    assert reviews(sim, "tokenreviews") == len(TOKENS), "each new token is authenticated once"
    assert reviews(sim, "subjectaccessreviews") == ONE_IDENTITY, "its identity is authorized once"


async def test_every_token_of_the_account_is_one_principal(reviewer: CachedAccess) -> None:
    """The attributes that name the token are left out: they made every token a new principal."""
    principals = {await reviewer.review_token(token) for token in TOKENS}
    assert len(principals) == 1
    (principal,) = principals
    assert principal is not None and (principal.username, principal.uid, principal.extra) == (
        SERVICE_ACCOUNT,
        "0b7c5f0e-sa",
        (),
    )


async def test_a_revoked_grant_stops_working_after_the_allowed_ttl_a_new_one_after_the_denied_ttl(
    api: httpx.AsyncClient, sim: SimCluster, clock: ManualClock
) -> None:
    async def status(namespace: str, token: str) -> int:
        answer = await api.get(f"/api/v1/runs?namespace={namespace}", headers=bearer(token))
        return answer.status_code

    assert (await status("ns-00", TOKENS[0]), await status("ns-05", TOKENS[0])) == (200, 403)
    revoked = [g for g in GRANTS if g[2] != "ns-00"] + [(SERVICE_ACCOUNT, "mpijobs", "ns-05")]
    sim.set_access({token: minted(n) for n, token in enumerate(TOKENS)}, revoked)

    clock.now = 29  # both answers are still the cached ones, for every token of the account
    assert (await status("ns-00", TOKENS[1]), await status("ns-05", TOKENS[1])) == (200, 403)
    clock.now = 31  # the grant was kept 30 s: revoked now; the denial is kept 60 s
    assert (await status("ns-00", TOKENS[2]), await status("ns-05", TOKENS[2])) == (403, 403)
    clock.now = 61
    assert (await status("ns-00", TOKENS[3]), await status("ns-05", TOKENS[3])) == (403, 200)


async def test_one_request_asks_at_most_its_budget_and_the_retry_goes_on(
    engine: AsyncEngine, reviewer: CachedAccess, runs: None, sim: SimCluster
) -> None:
    budget = 8  # decisions: the cluster-wide one and 12 namespaces are 13
    answers, costs = [], []
    async for api in client_for(engine, reviewer, max_reviews_per_request=budget):
        for _ in range(3):
            before = reviews(sim, "subjectaccessreviews")
            answer = await api.get("/api/v1/runs", headers=bearer(TOKENS[0]))
            costs.append(reviews(sim, "subjectaccessreviews") - before)
            answers.append(answer)

    assert [a.status_code for a in answers] == [503, 200, 200]
    assert answers[0].headers["retry-after"] == "1"
    assert answers[0].json()["detail"] == (
        "cannot check access in one go: this request needs more than 8 access reviews "
        "(api.max_reviews_per_request); the answers it got are kept, retry"
    )
    assert {run["namespace"] for run in answers[1].json()["items"]} == {"ns-00", "ns-01"}
    assert all(cost <= KINDS * budget for cost in costs), costs  # a decision asks each kind at most
    assert sum(costs) == ONE_IDENTITY and costs[2] == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/api/v1/webhooks"), ("GET", "/api/v1/audit/verify")],
    ids=["cluster-wide-subscription", "audit-verify"],
)
async def test_a_cluster_wide_question_asks_only_the_cluster_wide_review(
    api: httpx.AsyncClient, sim: SimCluster, method: str, path: str
) -> None:
    """Refusing what needs every namespace costs the cluster-wide review, not one per namespace."""
    body = {"url": "https://hooks.example.com/x"} if method == "POST" else None
    answer = await api.request(method, path, json=body, headers=bearer(TOKENS[0]))
    assert answer.status_code == 403
    # MPIJobs, then each other kind in turn, in every namespace
    assert reviews(sim, "subjectaccessreviews") == len(LISTED)
