"""The admission webhook tells the submitter at once when a job cannot fit its namespace's quota.

The webhook runs over real HTTPS; the ResourceQuotas and LimitRanges come from the simulated API
server (``SimCluster``) through the real Kubernetes gateway, or from an API server that accepts
connections and never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from decimal import Decimal
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from controller.contract.audit import AuditRecord
from controller.contract.settings import AdmissionSettings
from controller.kube.gateway import NO_RETRIES, KubeGateway
from controller.testing.simcluster import SimCluster
from tests.audit_helpers import T0, Certificate, admission_review
from watchers.admission.demand import demand
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.quota import QuotaCheck, gateway_lookup
from watchers.admission.webhook import AdmissionWebhook

Obj = dict[str, Any]


class Bus:
    """Stands in for JetStream: keeps what is published."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def __call__(self, records: Sequence[AuditRecord]) -> int:
        self.records += records
        return len(records)


def gpu_mpijob(workers: int = 16, gpus: int = 4, *, suspend: bool = False, name: str = "llm") -> Obj:
    """An MPIJob of one CPU-only launcher and ``workers`` workers of ``gpus`` GPUs (limits only,
    as GPUs are usually asked for) and 8 CPUs, 64Gi each."""
    worker = {
        "name": "worker",
        "image": "registry.example.com/team-a/llm:2.1",
        "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)},
            "requests": {"cpu": "8", "memory": "64Gi"},
        },
    }
    launcher = {"name": "launcher", "image": "registry.example.com/team-a/llm:2.1",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}  # fmt: skip
    job: Obj = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "slotsPerWorker": gpus,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [launcher]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [worker]}}},
            },
        },
    }
    if suspend:
        job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a-queue"}
        job["spec"]["runPolicy"]["suspend"] = True
    return job


def resource_quota(name: str, hard: dict[str, str], used: dict[str, str], namespace: str = "team-a") -> Obj:
    """A ResourceQuota as the quota controller keeps it: ``status`` says what is used."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used},
    }


def limit_range(name: str, limits: list[Obj], namespace: str = "team-a") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": limits},
    }


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster() as cluster:
        yield cluster


class Hook:
    """A running webhook with a client, its bus and its metrics."""

    def __init__(self, webhook: AdmissionWebhook, client: httpx.AsyncClient, bus: Bus) -> None:
        self.webhook, self.client, self.bus = webhook, client, bus

    async def create(self, job: Obj, **options: Any) -> Obj:
        """Post the CREATE review of ``job``; the answer's ``response``, checked to be for its uid."""
        body = admission_review("CREATE", job, **options)
        answer = await self.client.post("/validate", json=body)
        assert answer.status_code == 200, answer.text
        response: Obj = answer.json()["response"]
        assert response["uid"] == body["request"]["uid"]
        return response

    def checks(self, outcome: str) -> float:
        value = self.webhook.metrics.registry.get_sample_value(
            "mpijc_admission_quota_checks_total", {"outcome": outcome}
        )
        return value or 0.0


@contextlib.asynccontextmanager
async def running(certificate: Certificate, api_url: str, **settings: Any) -> AsyncIterator[Hook]:
    admission = AdmissionSettings(
        host="127.0.0.1", port=0, cert_file=certificate.cert, key_file=certificate.key, **settings
    )
    metrics = AdmissionMetrics(CollectorRegistry())
    bus = Bus()
    with KubeGateway.for_url(api_url, retries=NO_RETRIES) as gateway:
        quota = QuotaCheck.from_settings(admission, gateway_lookup(gateway), metrics)
        async with (
            AdmissionWebhook(admission, bus, metrics, clock=lambda: T0, quota=quota) as webhook,
            certificate.client(webhook.port) as client,
        ):
            yield Hook(webhook, client, bus)


@pytest.fixture
async def hook(certificate: Certificate, sim: SimCluster) -> AsyncIterator[Hook]:
    async with running(certificate, sim.url) as running_hook:
        yield running_hook


GPU_QUOTA = {"requests.nvidia.com/gpu": "32", "requests.cpu": "512", "requests.memory": "4Ti", "pods": "50"}


async def test_a_job_over_its_gpu_quota_is_allowed_with_a_warning_naming_the_quota_and_the_numbers(
    hook: Hook, sim: SimCluster
) -> None:
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "24", "pods": "6"}))

    response = await hook.create(gpu_mpijob(workers=16, gpus=4))

    assert response["allowed"] is True
    assert response["warnings"] == [
        "ResourceQuota team-a/gpu-quota: this MPIJob requests 64 nvidia.com/gpu (16 Workers x 4), "
        "8 of 32 are left"
    ]
    assert hook.checks("warned") == 1
    assert len(hook.bus.records) == 1, "the creation is still recorded"


async def test_each_resource_over_quota_is_named_cpu_memory_and_pods_included(
    hook: Hook, sim: SimCluster
) -> None:
    sim.create(
        resource_quota(
            "compute",
            {"cpu": "64", "memory": "512Gi", "count/pods": "10"},
            {"cpu": "60", "memory": "0", "count/pods": "10"},
        )
    )

    response = await hook.create(gpu_mpijob(workers=8, gpus=1))

    assert response["warnings"] == [
        "ResourceQuota team-a/compute: this MPIJob requests 64.5 cpu (1 Launcher x 500m + 8 Workers x 8), "
        "4 of 64 are left",
        "ResourceQuota team-a/compute: this MPIJob requests 513Gi memory (1 Launcher x 1Gi + 8 Workers x "
        "64Gi), 512Gi of 512Gi are left",
        "ResourceQuota team-a/compute: this MPIJob creates 9 pods (1 Launcher + 8 Workers), none of 10 is left",
    ]


async def test_a_job_within_its_quota_gets_no_warning(hook: Hook, sim: SimCluster) -> None:
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "24", "pods": "6"}))

    response = await hook.create(gpu_mpijob(workers=2, gpus=4))

    assert response == {"uid": response["uid"], "allowed": True}
    assert hook.checks("fits") == 1


async def test_denial_mode_refuses_a_job_over_quota_with_the_numbers(
    certificate: Certificate, sim: SimCluster
) -> None:
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "24"}))
    async with running(certificate, sim.url, quota_check="deny") as hook:
        refused = await hook.create(gpu_mpijob(workers=16, gpus=4))
        within = await hook.create(gpu_mpijob(workers=2, gpus=4, name="small"))

        assert refused["allowed"] is False
        assert refused["status"] == {
            "code": 403,
            "reason": "Forbidden",
            "message": "ResourceQuota team-a/gpu-quota: this MPIJob requests 64 nvidia.com/gpu "
            "(16 Workers x 4), 8 of 32 are left",
        }
        assert "warnings" not in refused
        assert within["allowed"] is True
        assert (hook.checks("denied"), hook.checks("fits")) == (1, 1)


async def test_a_suspended_job_is_not_judged_kueue_decides(hook: Hook, sim: SimCluster) -> None:
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "32"}))

    response = await hook.create(gpu_mpijob(workers=16, gpus=4, suspend=True))

    assert response == {"uid": response["uid"], "allowed": True}
    assert hook.checks("suspended") == 1
    assert not [r for r in sim.requests if r.path.endswith("/resourcequotas")], "nothing was looked up"


async def test_a_container_over_the_limit_range_maximum_is_warned(hook: Hook, sim: SimCluster) -> None:
    sim.create(limit_range("per-container", [{"type": "Container", "max": {"nvidia.com/gpu": "4"}}]))

    response = await hook.create(gpu_mpijob(workers=2, gpus=8))

    assert response["warnings"] == [
        "LimitRange team-a/per-container: container 'worker' of the Worker pods asks for 8 nvidia.com/gpu, "
        "at most 4 per container"
    ]


async def test_a_trainjob_is_judged_by_its_nodes_and_resources_per_node(hook: Hook, sim: SimCluster) -> None:
    sim.create(
        resource_quota("gpu-quota", {"requests.nvidia.com/gpu": "16"}, {"requests.nvidia.com/gpu": "0"})
    )
    trainjob: Obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "bert", "namespace": "team-a"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}},
        },
    }

    response = await hook.create(trainjob)
    suspended = copy.deepcopy(trainjob) | {"spec": {**trainjob["spec"], "suspend": True}}
    queued = await hook.create(suspended)

    assert response["warnings"] == [
        "ResourceQuota team-a/gpu-quota: this TrainJob requests 32 nvidia.com/gpu (4 nodes x 8), "
        "16 of 16 are left"
    ]
    assert "warnings" not in queued


async def test_a_namespace_is_looked_up_once_for_reviews_close_together(hook: Hook, sim: SimCluster) -> None:
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "24"}))

    answers = await asyncio.gather(*(hook.create(gpu_mpijob(name=f"llm-{n}")) for n in range(5)))

    assert all(a["warnings"] for a in answers)
    assert len([r for r in sim.requests if r.path.endswith("/resourcequotas")]) == 1


async def test_an_api_server_that_does_not_answer_in_the_budget_lets_the_job_through_unwarned(
    certificate: Certificate,
) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (the backlog), never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        async with running(certificate, url, quota_budget_s=0.2) as hook:
            response = await hook.create(gpu_mpijob(workers=16, gpus=4))

            assert response == {"uid": response["uid"], "allowed": True}
            assert hook.checks("timeout") == 1
            assert len(hook.bus.records) == 1
    finally:
        silent.close()


async def test_an_unavailable_api_server_lets_the_job_through_unwarned(hook: Hook, sim: SimCluster) -> None:
    sim.create(resource_quota("gpu-quota", GPU_QUOTA, {"requests.nvidia.com/gpu": "32"}))
    sim.outage()

    response = await hook.create(gpu_mpijob(workers=16, gpus=4))

    assert response == {"uid": response["uid"], "allowed": True}
    assert hook.checks("failed") == 1


def test_a_pod_requests_its_containers_and_sidecars_or_its_largest_init_container() -> None:
    pod = {
        "initContainers": [
            {"name": "fetch", "resources": {"requests": {"cpu": "6"}}},
            {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "3", "memory": "2Gi"}}},
            {"name": "c"},  # the LimitRange's default request
        ],
    }
    job = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3, "template": {"spec": pod}}}}}

    needs = demand("MPIJob", job, {"defaultRequest": {"cpu": Decimal("0.5")}})

    (worker,) = needs.groups
    assert worker.per_pod == {"cpu": Decimal("6.5"), "memory": Decimal(3 * 2**30)}
    assert needs.total == {"cpu": Decimal("19.5"), "memory": Decimal(9 * 2**30)}
    assert needs.pods == 3
