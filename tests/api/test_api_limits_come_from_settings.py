"""Operators set the API's limits and the subscription quotas through settings
(``MPIJC_API__MAX_BODY_BYTES``, ``MPIJC_API__RATE_PER_S``…, ``MPIJC_NOTIFY__MAX_SUBSCRIPTIONS_PER_USER``…,
``MPIJC_NOTIFY__ALLOW_PORTS``), and the API and the SSRF guard enforce what was set."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.limits import DEFAULT_LIMITS, DEFAULT_QUOTAS, ApiLimits, Rate, SubscriptionQuotas
from controller.contract.egress import EgressPolicy, EgressRefusedError
from controller.contract.settings import ApiSettings, NotifySettings, Settings
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from tests.api_fixtures import USERS, bearer
from tests.notify.test_webhook_ssrf_guard_refuses_private_targets import PUBLIC, FakeDns

NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


def test_the_defaults_are_the_settings_defaults() -> None:
    assert ApiLimits(64 << 10, Rate(50.0, 200), Rate(1.0, 30), 10_000, 1000, 64, 30.0, 256) == DEFAULT_LIMITS
    assert SubscriptionQuotas(per_user=50, per_namespace=200, recipients=50) == DEFAULT_QUOTAS


def test_settings_from_the_environment_become_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "MPIJC_API__MAX_BODY_BYTES": "4096",
        "MPIJC_API__RATE_PER_S": "0",  # off
        "MPIJC_API__AUTH_FAILURE_RATE_PER_S": "2.5",
        "MPIJC_API__AUTH_FAILURE_BURST": "5",
        "MPIJC_NOTIFY__MAX_SUBSCRIPTIONS_PER_USER": "1",
        "MPIJC_NOTIFY__MAX_RECIPIENTS": "3",
        "MPIJC_NOTIFY__ALLOW_PORTS": "[443, 8443]",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]

    limits = ApiLimits.from_settings(settings.api)
    quotas = SubscriptionQuotas.from_settings(settings.notify)

    assert (limits.max_body_bytes, limits.per_token, limits.per_address_failures) == (
        4096,
        None,
        Rate(2.5, 5),
    )
    assert (quotas.per_user, quotas.per_namespace, quotas.recipients) == (1, 200, 3)
    assert settings.notify.allow_ports == [443, 8443]


async def test_a_body_over_the_configured_limit_is_413() -> None:
    limits = ApiLimits.from_settings(ApiSettings(max_body_bytes=2048))
    app = create_app(make_engine(NOWHERE), PipelineMetrics(), StaticAccess(USERS), limits=limits)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        small = await api.post("/api/v1/webhooks", json={"colour": "blue"}, headers=bearer("token-admin"))
        large = await api.post(
            "/api/v1/webhooks", content=b"x" * 4096, headers={"content-type": "application/json"}
        )
    assert small.status_code == 422
    assert large.status_code == 413 and "larger than 2048 bytes" in large.json()["detail"]


async def test_a_configured_quota_of_one_subscription_refuses_the_second(engine: AsyncEngine) -> None:
    notify = NotifySettings(allow_cidrs=["127.0.0.0/8"], max_subscriptions_per_user=1)
    app = create_app(
        engine,
        PipelineMetrics(),
        StaticAccess(USERS),
        notify=notify,
        quotas=SubscriptionQuotas.from_settings(notify),
    )
    hook = {"url": "http://127.0.0.1:9/hook", "namespace": "team-a"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        first = await api.post("/api/v1/webhooks", json=hook, headers=bearer("token-alice"))
        second = await api.post("/api/v1/webhooks", json=hook, headers=bearer("token-alice"))
    assert first.status_code == 201, first.text
    assert second.status_code == 429
    assert "the most one user may have (1)" in second.json()["detail"]


async def test_allowed_ports_admit_what_they_name_and_nothing_else() -> None:
    dns = FakeDns(hooks_example_com=[PUBLIC])
    default, configured = EgressPolicy([], dns), EgressPolicy([], dns, allow_ports=[443, 8443])

    with pytest.raises(
        EgressRefusedError, match="port 8443 is not allowed; webhooks go to ports 80, 443 only"
    ):
        await default.check("https://hooks.example.com:8443/ci")
    assert (await configured.check("https://hooks.example.com:8443/ci")).port == 8443
    with pytest.raises(EgressRefusedError, match="port 80 is not allowed; webhooks go to ports 443, 8443"):
        await configured.check("http://hooks.example.com/ci")
