"""Who sees what: every user, namespace and endpoint, with static tokens and with Kubernetes reviews.

The same matrix runs against both reviewers: static tokens with namespace allowlists, and
TokenReview + SubjectAccessReview answered by the simulated API server (through the real
gateway). The webhook and audit routers are mounted as the API mounts them and go through
the same seam.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import AccessReviewer, CachedAccess, OpenAccess
from controller.api.app import create_app, metrics_app
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from tests.api_fixtures import T0, USERS, bearer, insert_runs, run_row

NAMESPACES = ("team-a", "team-b", "shared")
ALLOWED = {
    "admin": set(NAMESPACES),
    "alice": {"team-a"},
    "bob": {"team-b", "shared"},
    "nobody": set(),
}
KUBE_GRANTS = [  # the same permissions, as RBAC bindings would give them
    ("admin", "mpijobs", "*"),
    ("group:team-a", "mpijobs", "team-a"),
    ("bob", "trainjobs", "team-b"),  # either kind of job is enough
    ("bob", "mpijobs", "shared"),
]


@pytest.fixture(params=["static", "kubernetes"])
def reviewer(request: pytest.FixtureRequest, sim: SimCluster) -> Iterator[AccessReviewer]:
    if request.param == "static":
        yield request.getfixturevalue("static_reviewer")
        return
    sim.set_access(
        {
            token: {"username": u.username, "uid": f"uid-{u.username}", "groups": u.groups}
            for token, u in USERS.items()
        },
        KUBE_GRANTS,
    )
    with KubeGateway.for_url(sim.url) as gateway:
        yield CachedAccess(KubeAccessReviewer(gateway), ttl_s=30)


@pytest.fixture
def static_reviewer() -> AccessReviewer:
    from controller.api.access import StaticAccess

    return StaticAccess(USERS)


@pytest.fixture
async def world(engine: AsyncEngine) -> dict[str, list[str]]:
    """Two runs of job `pi` in each namespace: uids by namespace."""
    rows = [
        run_row(ns, "pi", T0 + timedelta(minutes=i + 10 * n))
        for n, ns in enumerate(NAMESPACES)
        for i in range(2)
    ]
    await insert_runs(engine, rows)
    return {ns: [r["uid"] for r in rows if r["namespace"] == ns] for ns in NAMESPACES}


@pytest.fixture
async def client(engine: AsyncEngine, reviewer: AccessReviewer) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(engine, PipelineMetrics(), reviewer)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


OBJECTS = {"run", "timeline", "findings", "compare"}
"""Answer 404 for an unreadable namespace, exactly as for a run that does not exist; lists of a
namespace the caller named answer 403."""
ENDPOINTS: dict[str, Callable[[str, list[str]], str]] = {
    "runs?namespace": lambda ns, uids: f"/api/v1/runs?namespace={ns}",
    "run": lambda ns, uids: f"/api/v1/runs/{uids[0]}",
    "timeline": lambda ns, uids: f"/api/v1/runs/{uids[0]}/timeline",
    "findings": lambda ns, uids: f"/api/v1/runs/{uids[0]}/findings",
    "attempts": lambda ns, uids: f"/api/v1/namespaces/{ns}/jobs/pi/runs",
    "trends": lambda ns, uids: f"/api/v1/namespaces/{ns}/jobs/pi/trends",
    "compare": lambda ns, uids: f"/api/v1/compare?runs={uids[0]},{uids[1]}",
    "webhooks": lambda ns, uids: f"/api/v1/webhooks?namespace={ns}",
    "audit": lambda ns, uids: f"/api/v1/audit?namespace={ns}",
    "audit-export": lambda ns, uids: f"/api/v1/audit/export?namespace={ns}",
}


@pytest.mark.parametrize("user", sorted(ALLOWED))
async def test_each_user_reads_exactly_their_namespaces(
    client: httpx.AsyncClient, world: dict[str, list[str]], user: str
) -> None:
    token = next(t for t, u in USERS.items() if u.username == user)
    outcomes = {
        (endpoint, ns): (await client.get(path(ns, world[ns]), headers=bearer(token))).status_code
        for endpoint, path in ENDPOINTS.items()
        for ns in NAMESPACES
    }
    expected = {
        (endpoint, ns): 200 if ns in ALLOWED[user] else 404 if endpoint in OBJECTS else 403
        for endpoint in ENDPOINTS
        for ns in NAMESPACES
    }
    assert outcomes == expected

    listed = (await client.get("/api/v1/runs", headers=bearer(token))).json()["items"]
    assert {r["namespace"] for r in listed} == ALLOWED[user]
    assert len(listed) == 2 * len(ALLOWED[user])


async def test_a_forbidden_namespace_says_who_and_where(
    client: httpx.AsyncClient, world: dict[str, list[str]]
) -> None:
    response = await client.get("/api/v1/runs?namespace=team-b", headers=bearer("token-alice"))
    assert response.status_code == 403
    assert response.json()["detail"] == "alice may not list MPIJobs or TrainJobs in namespace 'team-b'"


async def test_comparing_across_namespaces_needs_all_of_them(
    client: httpx.AsyncClient, world: dict[str, list[str]]
) -> None:
    runs = f"{world['team-b'][0]},{world['shared'][0]}"
    assert (await client.get(f"/api/v1/compare?runs={runs}", headers=bearer("token-bob"))).status_code == 200
    runs = f"{world['team-a'][0]},{world['shared'][0]}"
    hidden = await client.get(f"/api/v1/compare?runs={runs}", headers=bearer("token-bob"))
    assert hidden.status_code == 404
    assert hidden.json()["detail"] == f"no run with uid {world['team-a'][0]!r}"


UNAUTHENTICATED = {
    "none": ({}, "a bearer token is required"),
    "basic": ({"Authorization": "Basic YWxpY2U6c2VjcmV0"}, "a bearer token is required"),
    "empty": ({"Authorization": "Bearer"}, "a bearer token is required"),
    "unknown": ({"Authorization": "Bearer not-a-token"}, "the bearer token was not accepted"),
}


async def test_no_or_bad_token_is_401(client: httpx.AsyncClient) -> None:
    for path in (
        "/api/v1/runs",
        "/api/v1/runs/x",
        "/api/v1/compare?runs=a,b",
        "/api/v1/audit",
        "/api/v1/webhooks",
    ):
        for case, (headers, detail) in UNAUTHENTICATED.items():
            response = await client.get(path, headers=headers)
            assert response.status_code == 401, (path, case)
            assert response.json()["detail"] == detail, (path, case)
            assert response.headers["www-authenticate"] == "Bearer", (path, case)


async def test_probes_need_no_token_and_metrics_are_not_on_the_api_port(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    for path in ("/healthz", "/readyz"):
        assert (await client.get(path)).status_code == 200, path
    assert (await client.get("/metrics")).status_code == 404, (
        "the namespaces with jobs stay off the public port"
    )
    on_metrics_port = metrics_app(create_app(engine, PipelineMetrics()))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=on_metrics_port), base_url="http://m"
    ) as m:
        scraped = await m.get("/metrics")
    assert scraped.status_code == 200 and "mpijc_jobs" in scraped.text


async def test_auth_off_lets_everyone_read_everything(
    engine: AsyncEngine, world: dict[str, list[str]]
) -> None:
    app = create_app(engine, PipelineMetrics(), OpenAccess())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        listed = (await c.get("/api/v1/runs")).json()["items"]
        assert {r["namespace"] for r in listed} == set(NAMESPACES)
        assert (await c.get(f"/api/v1/runs/{world['team-b'][0]}")).status_code == 200


async def test_no_reviewer_admits_nobody(engine: AsyncEngine) -> None:
    app = create_app(engine, PipelineMetrics())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        assert (await c.get("/api/v1/runs", headers=bearer("token-admin"))).status_code == 401
