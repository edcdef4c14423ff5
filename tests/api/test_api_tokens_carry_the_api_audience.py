"""With ``MPIJC_API__TOKEN_AUDIENCES`` the API accepts only tokens issued for it: a TokenReview
names the audience, so a pod's projected token of audience ``mpijob-controller`` is accepted and
its ordinary service-account token (the API server's audience, the one a thief could replay
against the kube-apiserver) is not; an authenticator that answers without audiences is not
trusted. The simulated API server checks audiences as the real one does."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import CachedAccess
from controller.api.app import create_app
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from tests.api_fixtures import T0, bearer, insert_runs, run_row

AUDIENCE = "mpijob-controller"
USER = {"username": "system:serviceaccount:team-a:ci", "uid": "u-ci", "groups": ["system:serviceaccounts"]}
PROJECTED, DEFAULT = "projected-token", "default-token"


@pytest.fixture
async def runs(engine: AsyncEngine) -> None:
    await insert_runs(engine, [run_row("team-a", "pi", T0)])


async def _api(
    engine: AsyncEngine, sim: SimCluster, audiences: list[str]
) -> AsyncIterator[httpx.AsyncClient]:
    sim.set_access(
        {PROJECTED: USER, DEFAULT: USER},
        [(USER["username"], "mpijobs", "team-a")],
        audiences={PROJECTED: [AUDIENCE]},
    )
    with KubeGateway.for_url(sim.url) as gateway:
        reviewer = CachedAccess(KubeAccessReviewer(gateway, audiences), ttl_s=30, denied_ttl_s=60)
        app = create_app(engine, PipelineMetrics(), reviewer)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            yield client


async def _status(api: httpx.AsyncClient, token: str) -> int:
    return (await api.get("/api/v1/runs", params={"namespace": "team-a"}, headers=bearer(token))).status_code


@pytest.mark.usefixtures("runs")
async def test_with_an_audience_only_tokens_issued_for_the_api_are_accepted(
    engine: AsyncEngine, sim: SimCluster
) -> None:
    async for api in _api(engine, sim, [AUDIENCE]):
        assert await _status(api, PROJECTED) == 200
        assert await _status(api, DEFAULT) == 401


@pytest.mark.usefixtures("runs")
async def test_without_an_audience_the_api_servers_own_tokens_are_accepted(
    engine: AsyncEngine, sim: SimCluster
) -> None:
    async for api in _api(engine, sim, []):
        assert await _status(api, DEFAULT) == 200
        assert await _status(api, PROJECTED) == 401  # as the kube-apiserver itself refuses it


@pytest.mark.usefixtures("runs")
async def test_an_answer_without_audiences_is_not_trusted(engine: AsyncEngine, sim: SimCluster) -> None:
    async for api in _api(engine, sim, [AUDIENCE]):
        sim.audience_blind = True
        assert await _status(api, DEFAULT) == 401
        assert await _status(api, PROJECTED) == 401
