"""The SSRF guard: loopback, private, link-local and other non-public addresses are refused at
subscription time (422 naming the reason) and again at send time, every resolved address
checked, unless the operator allowlisted the range; a checked address is the one connected to."""

from __future__ import annotations

import ipaddress

import pytest
from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.egress import EgressPolicy, EgressRefusedError
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing.notify import (
    api_client,
    job,
    notify_running,
    publish_jobs,
    settled_log,
    with_notify,
)
from controller.testing.receivers import Receiver

PUBLIC = "93.184.216.34"


class FakeDns:
    """A resolver the test controls: host → addresses (a missing host does not resolve)."""

    def __init__(self, **hosts: list[str]) -> None:
        self.hosts = {name.replace("_", "."): found for name, found in hosts.items()}

    async def __call__(self, host: str, port: int) -> list[str]:
        if host not in self.hosts:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return self.hosts[host]


DNS = FakeDns(
    public_example_com=[PUBLIC],
    localhost=["127.0.0.1", "::1"],
    split_example_com=[PUBLIC, "10.0.0.7"],
    metadata_example_com=["169.254.169.254"],
)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback address"),
        ("http://localhost/hook", "127.0.0.1 is a loopback address; ::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]/hook", "is a loopback address"),
        ("http://10.1.2.3/hook", "10.1.2.3 is a private address"),
        ("http://192.168.1.10/hook", "is a private address"),
        ("http://100.64.0.1/hook", "100.64.0.1 is a"),
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address"),
        ("http://metadata.example.com/", "169.254.169.254 is a link-local address"),
        ("http://split.example.com/hook", "10.0.0.7 is a private address"),
        ("http://0.0.0.0/hook", "0.0.0.0 is an unspecified address"),
        ("http://[fd00::1]/hook", "is a private address"),
        ("http://nowhere.invalid/hook", "does not resolve"),
        ("ftp://public.example.com/hook", "must be http or https"),
        ("http://user:pw@public.example.com/hook", "may not carry credentials"),
        ("http:///hook", "has no host"),
    ],
    ids=[
        "loopback",
        "localhost-name",
        "ipv4-mapped-loopback",
        "rfc1918-10",
        "rfc1918-192",
        "cgnat",
        "metadata-ip",
        "metadata-name",
        "one-private-answer-of-two",
        "unspecified",
        "ipv6-ula",
        "unresolvable",
        "not-http",
        "credentials",
        "no-host",
    ],
)
async def test_a_non_public_url_is_refused(url: str, reason: str) -> None:
    with pytest.raises(EgressRefusedError) as refused:
        await EgressPolicy([], DNS).check(url)
    assert reason in str(refused.value)


async def test_the_api_refuses_a_private_url_with_a_clear_422(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings, allow_cidrs=[])
    async with api_client(settings, engine, metrics, resolver=DNS) as api:
        response = await api.post("/api/v1/webhooks", json={"url": "http://169.254.169.254/latest/meta-data"})
        listed = (await api.get("/api/v1/webhooks")).json()["items"]
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "http://169.254.169.254/latest/meta-data may not be called: 169.254.169.254 is a link-local "
        "address; webhooks go to public addresses only unless the operator allowlists the range "
        "(notify.allow_cidrs)"
    )
    assert listed == []


async def test_public_and_allowlisted_urls_are_accepted(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings, allow_cidrs=["10.0.0.0/8"])
    async with api_client(settings, engine, metrics, resolver=DNS) as api:
        public = await api.post("/api/v1/webhooks", json={"url": "https://public.example.com/hook"})
        split = await api.post("/api/v1/webhooks", json={"url": "http://split.example.com/hook"})
        loopback = await api.post("/api/v1/webhooks", json={"url": "http://127.0.0.1/hook"})
    assert (public.status_code, split.status_code, loopback.status_code) == (201, 201, 422)


def test_an_invalid_allowlist_is_a_startup_error() -> None:
    with pytest.raises(ValueError, match=r"notify\.allow_cidrs"):
        EgressPolicy(["10.0.0.0/33"])


async def test_the_checked_address_is_the_one_connected_to() -> None:
    policy = EgressPolicy(["127.0.0.0/8"], FakeDns(hooks_example_test=["127.0.0.1"]))
    target = await policy.check("http://hooks.example.test:8080/a/b?x=1")
    assert target.addresses == (ipaddress.ip_address("127.0.0.1"),)
    assert target.pinned_url() == "http://127.0.0.1:8080/a/b?x=1"
    assert target.host_header == "hooks.example.test:8080"
    with pytest.raises(EgressRefusedError, match="fragment"):
        await policy.check("http://hooks.example.test/#frag")


async def test_a_name_that_turns_private_after_subscription_is_refused_at_send_time(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> None:
    """DNS rebinding: public when the subscription was made, loopback when the webhook goes out."""
    with_notify(settings, allow_cidrs=[])
    dns = FakeDns(rebind_example_com=[PUBLIC])
    async with Receiver() as rx, api_client(settings, engine, metrics, resolver=dns) as api:
        created = await api.post(
            "/api/v1/webhooks", json={"url": f"http://rebind.example.com:{rx.port}/hook"}
        )
        assert created.status_code == 201
        dns.hosts["rebind.example.com"] = ["127.0.0.1"]
        async with notify_running(settings, topology, js, engine, metrics, resolver=dns):
            await publish_jobs(js, topology, job("Pending", change="ADDED"))
            (refused,) = await settled_log(api, created.json()["id"], 1)

    assert rx.requests == []
    assert (refused["status"], refused["attempts"]) == ("failed", 1)
    assert "refused" in refused["last_error"] and "127.0.0.1 is a loopback address" in refused["last_error"]


async def test_an_allowlisted_name_is_called_on_its_checked_address_with_its_own_host_header(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> None:
    with_notify(settings)  # loopback allowlisted
    dns = FakeDns(hooks_internal_test=["127.0.0.1"])
    async with Receiver() as rx, api_client(settings, engine, metrics, resolver=dns) as api:
        created = await api.post(
            "/api/v1/webhooks", json={"url": f"http://hooks.internal.test:{rx.port}/hook"}
        )
        rx.secrets["hook"] = created.json()["secret"]
        async with notify_running(settings, topology, js, engine, metrics, resolver=dns):
            await publish_jobs(js, topology, job("Pending", change="ADDED"))
            (request,) = await rx.wait_for("hook", 1)

    assert request.headers["host"] == f"hooks.internal.test:{rx.port}"
    assert request.verified
