"""A review the API server would never send cannot make the quota check look elsewhere, fail, or
storm the API server: its namespace is an RFC 1123 label before anything is looked up, its
quantities are read capped as the API server caps them, a value the check cannot read is said to
be unjudged (never a 500), and lookups start at a bounded rate over all namespaces.

The webhook runs over real HTTPS; quotas come from the simulated API server through the real
Kubernetes gateway (whose requests it records)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from controller.contract.quantities import LARGEST, SMALLEST, quantity
from controller.contract.settings import AdmissionSettings
from controller.kube.gateway import NO_RETRIES, KubeGateway
from controller.kube.resources import RESOURCEQUOTAS
from controller.testing.simcluster import SimCluster
from tests.admission.test_admission_webhook_checks_quota import (
    GPU_QUOTA,
    Bus,
    gpu_mpijob,
    resource_quota,
)
from tests.audit_helpers import T0, Certificate, admission_review
from tests.clocks import ManualClock
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.quota import QuotaCheck, gateway_lookup
from watchers.admission.webhook import AdmissionWebhook

Obj = dict[str, Any]


class Hook:
    """A running webhook, its client, bus, metrics and the clock of its quota check."""

    def __init__(
        self, webhook: AdmissionWebhook, client: httpx.AsyncClient, bus: Bus, clock: ManualClock
    ) -> None:
        self.webhook, self.client, self.bus, self.clock = webhook, client, bus, clock

    async def post(self, body: Obj) -> httpx.Response:
        return await self.client.post("/validate", json=body)

    async def create(self, job: Obj) -> Obj:
        body = admission_review("CREATE", job)
        answer = await self.post(body)
        assert answer.status_code == 200, answer.text
        response: Obj = answer.json()["response"]
        return response

    def count(self, name: str, **labels: str) -> float:
        return self.webhook.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster() as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def running(certificate: Certificate, sim: SimCluster, **settings: Any) -> AsyncIterator[Hook]:
    admission = AdmissionSettings(
        host="127.0.0.1", port=0, cert_file=certificate.cert, key_file=certificate.key, **settings
    )
    metrics = AdmissionMetrics(CollectorRegistry())
    bus, clock = Bus(), ManualClock(1000.0)
    with KubeGateway.for_url(sim.url, retries=NO_RETRIES) as gateway:
        quota = QuotaCheck(
            gateway_lookup(gateway),
            metrics,
            mode="deny" if admission.quota_check == "deny" else "warn",
            budget_s=admission.quota_budget_s,
            cache_s=admission.quota_cache_s,
            lookups_per_s=admission.quota_lookups_per_s,
            clock=clock,
        )
        async with (
            AdmissionWebhook(admission, bus, metrics, clock=lambda: T0, quota=quota) as webhook,
            certificate.client(webhook.port) as client,
        ):
            yield Hook(webhook, client, bus, clock)


def lists(sim: SimCluster) -> list[str]:
    """The paths of the LISTs the simulated API server answered."""
    return [r.path for r in sim.requests if r.path.endswith(("/resourcequotas", "/limitranges"))]


@pytest.mark.parametrize("where", ["request", "object"], ids=["request-namespace", "object-namespace"])
async def test_a_namespace_of_dot_segments_is_malformed_and_nothing_is_listed(
    certificate: Certificate, sim: SimCluster, where: str
) -> None:
    sim.create(resource_quota("secret-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "31"}, "team-b"))
    job = gpu_mpijob(workers=16, gpus=4)
    body = admission_review("CREATE", job)
    if where == "request":
        body["request"]["namespace"] = ".."
    else:
        body["request"]["namespace"] = ""
        body["request"]["object"]["metadata"]["namespace"] = ".."

    async with running(certificate, sim, quota_check="deny") as hook:
        answer = await hook.post(body)

        assert answer.status_code == 200
        assert answer.json()["response"] == {"uid": body["request"]["uid"], "allowed": True}
        assert lists(sim) == [], "nothing listed, and no other namespace's quota quoted"
        assert hook.bus.records == []
        assert hook.count("mpijc_admission_reviews_total", operation="CREATE", outcome="malformed") == 1


@pytest.mark.parametrize(
    "namespace",
    ["..", ".", "Team-A", "team_a", "-team", "a" * 64, "team-a/../kube-system", "team-a%2F.."],
    ids=["dotdot", "dot", "upper", "underscore", "leading-dash", "too-long", "traversal", "encoded"],
)
def test_the_gateway_builds_no_path_from_a_namespace_that_is_not_a_label(namespace: str) -> None:
    with pytest.raises(ValueError, match="not a namespace"):
        RESOURCEQUOTAS.path(namespace)


def test_a_name_of_dot_segments_builds_no_path() -> None:
    with pytest.raises(ValueError, match="not an object name"):
        RESOURCEQUOTAS.path("team-a", "..")


async def test_a_hostile_quantity_is_capped_and_denied_not_a_server_error(
    certificate: Certificate, sim: SimCluster
) -> None:
    sim.create(resource_quota("compute", {"requests.cpu": "512"}, {"requests.cpu": "0"}))
    job = gpu_mpijob(workers=4, gpus=1)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "cpu"
    ] = "1e9999999"
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 10**100

    async with running(certificate, sim, quota_check="deny") as hook:
        response = await hook.create(job)

    assert response["allowed"] is False, "as the API server caps it, 1e9999999 cpu fits no quota"
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith("ResourceQuota team-a/compute: this MPIJob requests ")
    assert "2147483647 Workers x 9223372036854775807" in message
    assert hook.count("mpijc_admission_quota_checks_total", outcome="denied") == 1


async def test_a_value_that_is_not_a_quantity_is_unjudged_with_a_warning_even_in_deny_mode(
    certificate: Certificate, sim: SimCluster
) -> None:
    sim.create(resource_quota("compute", {"requests.cpu": "512"}, {"requests.cpu": "0"}))
    job = gpu_mpijob(workers=4, gpus=1)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["requests"]["cpu"] = "lots"

    async with running(certificate, sim, quota_check="deny") as hook:
        response = await hook.create(job)

    assert response["allowed"] is True
    assert response["warnings"] == [
        "the quota check cannot judge this MPIJob: cpu 'lots' not read as quantities"
    ]
    assert hook.count("mpijc_admission_quota_checks_total", outcome="unjudged") == 1


async def test_reviews_of_many_namespaces_start_lookups_at_a_bounded_rate(
    certificate: Certificate, sim: SimCluster
) -> None:
    """200 reviews of 200 namespaces made 400 LISTs (two per namespace) as fast as they came; now
    at most ``quota_lookups_per_s`` lookups start a second (10 at once: 20 LISTs)."""
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "24"}, "ns-0"))

    def job(n: int) -> Obj:
        created = gpu_mpijob(workers=16, gpus=4, name=f"llm-{n}")
        created["metadata"]["namespace"] = f"ns-{n}"
        return created

    async with running(certificate, sim) as hook:  # the clock stands still: no refill
        answers = [await hook.create(job(n)) for n in range(200)]

        assert len(lists(sim)) == 20
        assert hook.count("mpijc_admission_quota_checks_total", outcome="throttled") == 190
        assert answers[0]["warnings"][0].startswith("ResourceQuota ns-0/gpu-quota: ")
        assert all(a["allowed"] for a in answers)

        hook.clock.now += 1.0  # a second later, ten more may start
        for n in range(200, 215):
            await hook.create(job(n))
        assert len(lists(sim)) == 40

        hook.clock.now += 60.0  # ns-0's answer is stale, and a throttled review still uses it
        for n in range(300, 310):
            await hook.create(job(n))
        before = len(lists(sim))
        again = await hook.create(job(0))
        assert len(lists(sim)) == before, "no token left: no LIST"
        assert again["warnings"][0].startswith("ResourceQuota ns-0/gpu-quota: "), "the kept answer judges it"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1E", Decimal(10**18)),
        ("1E3", Decimal(1000)),
        ("1.5e-3", Decimal("0.0015")),
        (".5", Decimal("0.5")),
        ("+2k", Decimal(2000)),
        ("100n", Decimal("1e-7")),
        ("1e9999999", LARGEST),
        ("-1e9999999", -LARGEST),
        ("99999999999999999999", LARGEST),
        ("1e-9999999", SMALLEST),
        ("0e999999", Decimal(0)),
        (10**400, LARGEST),
        (1e308, LARGEST),
        (3, Decimal(3)),
    ],
    ids=lambda v: str(v)[:20],
)
def test_quantities_are_read_capped_as_the_api_server_caps_them(text: object, value: Decimal) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "lots",
        "1e",
        "NaN",
        "inf",
        " 1",
        "1 ",
        "1Ki2",
        "1e1.5",
        "1" * 65,
        "1e" + "9" * 19,
        True,
        None,
        float("inf"),
    ],
    ids=lambda v: repr(v)[:20],
)
def test_what_is_not_a_quantity_is_a_value_error(text: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        quantity(text)
