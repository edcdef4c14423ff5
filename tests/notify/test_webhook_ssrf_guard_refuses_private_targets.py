"""The SSRF guard: loopback, private, link-local and other non-public addresses — IPv6 forms
carrying one included (mapped, compatible, 6to4, Teredo, NAT64), site-local too — are refused at
subscription time (422 that never names the address a host resolves to) and again at send time,
every resolved address checked, unless the operator allowlisted the range; ports other than 80
and 443 only towards allowlisted ranges; a checked address is the one connected to."""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.egress import REFUSED, EgressPolicy, EgressRefusedError
from controller.contract.settings import Settings
from controller.metrics import PipelineMetrics
from controller.testing.notify import (
    api_client,
    job,
    settled_log,
    with_notify,
)
from controller.testing.receivers import Receiver
from tests.audit_helpers import make_certificate
from tests.notify_fixtures import Notifying

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
    sixtofour_example_com=["2002:a00:1::1"],
    kube_example_com=["10.96.0.1"],
)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/hook", REFUSED),
        ("http://localhost/hook", REFUSED),
        ("http://[::ffff:127.0.0.1]/hook", REFUSED),
        ("http://10.1.2.3/hook", REFUSED),
        ("http://192.168.1.10/hook", REFUSED),
        ("http://100.64.0.1/hook", REFUSED),
        ("http://169.254.169.254/latest/meta-data", REFUSED),
        ("http://metadata.example.com/", REFUSED),
        ("http://split.example.com/hook", REFUSED),
        ("http://0.0.0.0/hook", REFUSED),
        ("http://[fd00::1]/hook", REFUSED),
        ("http://[2002:a00:1::1]/hook", REFUSED),
        ("http://[2002:a9fe:a9fe::]/hook", REFUSED),
        ("http://sixtofour.example.com/hook", REFUSED),
        ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook", REFUSED),
        ("http://[64:ff9b::a00:1]/hook", REFUSED),
        ("http://[64:ff9b::a9fe:a9fe]/hook", REFUSED),
        ("http://[64:ff9b:1::5db8:d822]/hook", REFUSED),
        ("http://[fec0::1]/hook", REFUSED),
        ("http://[::ffff:10.0.0.1]/hook", REFUSED),
        ("http://[::ffff:169.254.169.254]/hook", REFUSED),
        ("http://[::10.0.0.1]/hook", REFUSED),
        ("http://[::127.0.0.1]/hook", REFUSED),
        ("http://public.example.com:8080/hook", "port 8080 is not allowed"),
        ("https://public.example.com:22/hook", "port 22 is not allowed"),
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
        "6to4-of-rfc1918",
        "6to4-of-metadata",
        "6to4-by-name",
        "teredo",
        "nat64-of-rfc1918",
        "nat64-of-metadata",
        "nat64-local-use",
        "site-local",
        "ipv4-mapped-rfc1918",
        "ipv4-mapped-metadata",
        "ipv4-compatible-rfc1918",
        "ipv4-compatible-loopback",
        "public-odd-port",
        "public-ssh-port",
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


@pytest.mark.parametrize(
    "url",
    [
        "https://public.example.com/hook",
        "http://public.example.com:80/hook",
        "https://[2002:5db8:d822::1]/hook",
        "https://[64:ff9b::5db8:d822]/hook",
        "https://[::ffff:93.184.216.34]/hook",
    ],
    ids=["https", "http-80", "6to4-of-public", "nat64-of-public", "ipv4-mapped-public"],
)
async def test_public_addresses_on_web_ports_are_accepted(url: str) -> None:
    target = await EgressPolicy([], DNS).check(url)
    assert target.port in (80, 443)


async def test_an_allowlisted_range_may_use_any_port() -> None:
    target = await EgressPolicy(["10.0.0.0/8"], DNS).check("http://kube.example.com:8080/hook")
    assert target.pinned_url() == "http://10.96.0.1:8080/hook"


async def test_the_refusal_never_says_what_a_name_resolves_to() -> None:
    for url in ("http://kube.example.com/hook", "http://sixtofour.example.com/", "http://split.example.com/"):
        with pytest.raises(EgressRefusedError) as refused:
            await EgressPolicy([], DNS).check(url)
        message = str(refused.value)
        assert REFUSED in message
        assert not any(a in message for a in ("10.96.0.1", "2002:a00:1::1", "10.0.0.7", PUBLIC)), message


@pytest.fixture
async def refusing_api(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> AsyncIterator[httpx.AsyncClient]:
    """The API with no range allowlisted, names resolved by the test's DNS."""
    with_notify(settings, allow_cidrs=[])
    async with api_client(settings, engine, metrics, resolver=DNS) as api:
        yield api


async def test_the_api_refuses_a_private_url_with_a_clear_422(refusing_api: httpx.AsyncClient) -> None:
    response = await refusing_api.post(
        "/api/v1/webhooks", json={"url": "http://169.254.169.254/latest/meta-data"}
    )
    listed = (await refusing_api.get("/api/v1/webhooks")).json()["items"]
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "http://169.254.169.254/latest/meta-data may not be called: it resolves to a private, loopback "
        "or link-local address; webhooks go to public addresses only unless the operator allowlists "
        "the range (notify.allow_cidrs)"
    )
    assert listed == []


async def test_the_api_does_not_reveal_what_an_internal_name_resolves_to(
    refusing_api: httpx.AsyncClient,
) -> None:
    response = await refusing_api.post("/api/v1/webhooks", json={"url": "http://kube.example.com/hook"})
    assert response.status_code == 422
    assert REFUSED in response.json()["detail"] and "10.96.0.1" not in response.json()["detail"]


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
    notifying: Notifying,
) -> None:
    """DNS rebinding: public when the subscription was made, loopback when the webhook goes out."""
    with_notify(notifying.settings, allow_cidrs=[])
    dns = FakeDns(rebind_example_com=[PUBLIC])
    async with Receiver() as rx, notifying.api(resolver=dns) as api:
        created = await api.post("/api/v1/webhooks", json={"url": "http://rebind.example.com/hook"})
        assert created.status_code == 201
        dns.hosts["rebind.example.com"] = ["127.0.0.1"]
        async with notifying.running(resolver=dns):
            await notifying.publish(job("Pending", change="ADDED"))
            (refused,) = await settled_log(api, created.json()["id"], 1)

    assert rx.requests == []
    assert (refused["status"], refused["attempts"]) == ("failed", 1)
    assert "refused" in refused["last_error"] and REFUSED in refused["last_error"]
    assert "127.0.0.1" not in refused["last_error"]


async def test_an_allowlisted_name_is_called_on_its_checked_address_with_its_own_host_header(
    notifying: Notifying,
) -> None:
    with_notify(notifying.settings)  # loopback allowlisted
    dns = FakeDns(hooks_internal_test=["127.0.0.1"])
    async with Receiver() as rx, notifying.api(resolver=dns) as api:
        created = await api.post(
            "/api/v1/webhooks", json={"url": f"http://hooks.internal.test:{rx.port}/hook"}
        )
        rx.secrets["hook"] = created.json()["secret"]
        async with notifying.running(resolver=dns):
            await notifying.publish(job("Pending", change="ADDED"))
            (request,) = await rx.wait_for("hook", 1)

    assert request.headers["host"] == f"hooks.internal.test:{rx.port}"
    assert request.verified


async def test_an_https_endpoint_is_called_on_its_checked_address_with_its_own_name_for_tls(
    notifying: Notifying,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection goes to the checked address, the TLS handshake names the host (SNI) and
    verifies its certificate against the trusted CAs (here a private CA, as ``SSL_CERT_FILE``
    names it), and a proxy from the environment is not used: it would bypass the check."""
    cert = make_certificate(tmp_path, "hooks", names=("DNS:hooks.internal.test",))
    monkeypatch.setenv("SSL_CERT_FILE", str(cert.cert))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    server_names: list[str | None] = []
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert.cert, cert.key)
    tls.sni_callback = lambda _sock, name, _ctx: server_names.append(name)  # type: ignore[assignment,misc,return-value]
    with_notify(notifying.settings)  # loopback allowlisted
    dns = FakeDns(hooks_internal_test=["127.0.0.1"])
    async with (
        Receiver(tls=tls) as rx,
        notifying.api(resolver=dns) as api,
    ):
        created = await api.post(
            "/api/v1/webhooks", json={"url": f"https://hooks.internal.test:{rx.port}/hook"}
        )
        rx.secrets["hook"] = created.json()["secret"]
        async with notifying.running(resolver=dns):
            await notifying.publish(job("Pending", change="ADDED"), job("Running"))
            requests = await rx.wait_for("hook", 2)
            log = await settled_log(api, created.json()["id"], 2)

    assert [r.headers["host"] for r in requests] == [f"hooks.internal.test:{rx.port}"] * 2
    assert all(r.verified for r in requests)
    assert server_names and set(server_names) == {"hooks.internal.test"}
    assert len(server_names) == 1  # one handshake: the second request reused the connection
    assert [d["status"] for d in log] == ["delivered", "delivered"]
