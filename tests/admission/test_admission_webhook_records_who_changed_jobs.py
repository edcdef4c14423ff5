"""The admission webhook over real HTTPS: it always allows, echoes the uid, and records who did what.

AdmissionReview bodies are in the shapes the API server sends (``tests.audit_helpers``);
the certificate is a fresh self-signed one per test, made with the ``openssl`` CLI.
"""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.js import JetStreamContext
from prometheus_client import CollectorRegistry

from controller.bus.publishing import Publisher
from controller.contract.audit import AuditRecord, ServiceAccount, parse_audit_record
from controller.contract.settings import AdmissionSettings
from controller.contract.subjects import Topology
from controller.testing.waits import until
from tests.audit_helpers import T0, Certificate, a_mpijob, admission_review, make_certificate, trainjob
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.reviews import review
from watchers.admission.webhook import AdmissionWebhook


class Bus:
    """Stands in for JetStream: keeps what is published, or fails, or hangs, as told."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.failing: BaseException | None = None
        self.hanging = False
        self.refused = 0
        """Publishes that raised ``failing``."""

    async def __call__(self, records: Sequence[AuditRecord]) -> int:
        if self.hanging:
            await asyncio.sleep(3600)
        if self.failing is not None:
            self.refused += 1
            raise self.failing
        self.records += records
        return len(records)


@pytest.fixture
def bus() -> Bus:
    return Bus()


def webhook_settings(certificate: Certificate) -> AdmissionSettings:
    return AdmissionSettings(
        host="127.0.0.1",
        port=0,
        cert_file=certificate.cert,
        key_file=certificate.key,
        publish_timeout_s=0.2,
        cert_reload_s=0.05,
    )


@pytest.fixture
async def webhook(certificate: Certificate, bus: Bus) -> AsyncIterator[AdmissionWebhook]:
    metrics = AdmissionMetrics(CollectorRegistry())
    async with AdmissionWebhook(webhook_settings(certificate), bus, metrics, clock=lambda: T0) as hook:
        yield hook


@pytest.fixture
async def client(webhook: AdmissionWebhook, certificate: Certificate) -> AsyncIterator[httpx.AsyncClient]:
    async with certificate.client(webhook.port) as c:
        yield c


async def post(client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await client.post("/validate", json=body)


def allows(response: httpx.Response, body: dict[str, Any]) -> bool:
    return response.status_code == 200 and response.json() == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": body["request"]["uid"], "allowed": True},
    }


async def test_create_is_allowed_and_records_the_user(client: httpx.AsyncClient, bus: Bus) -> None:
    job = a_mpijob("pi", "team-a", uid="6c2b1f04-pi")
    body = admission_review("CREATE", job, user="alice")

    response = await post(client, body)

    assert allows(response, body)
    (record,) = bus.records
    assert (record.id, record.source, record.verb, record.at) == (
        f"admission/{body['request']['uid']}",
        "admission",
        "create",
        T0,
    )
    assert (record.namespace, record.outcome, record.request_uid) == (
        "team-a",
        "allowed",
        body["request"]["uid"],
    )
    assert record.caller == "unverified", "no client certificate was asked for: anyone could have sent it"
    assert record.object is not None
    assert record.object.model_dump() == {
        "api_group": "kubeflow.org",
        "api_version": "v2beta1",
        "kind": "MPIJob",
        "name": "pi",
        "uid": "6c2b1f04-pi",
    }
    assert record.actor is not None
    assert record.actor.model_dump() == {
        "username": "alice@example.com",
        "uid": "4f6c1d2e-alice",
        "groups": ("team-a", "system:authenticated"),
        "extra": {
            "authentication.kubernetes.io/credential-id": ("JTI=3c9b",),
            "scopes": ("openid", "groups"),
        },
        "service_account": None,
    }


async def test_a_service_account_is_recognised(client: httpx.AsyncClient, bus: Bus) -> None:
    body = admission_review("CREATE", trainjob("bert", "team-b", uid="uid-bert"), user="pipeline")
    assert allows(await post(client, body), body)
    (record,) = bus.records
    assert record.actor is not None
    assert record.actor.service_account == ServiceAccount(namespace="team-b", name="pipeline-runner")
    assert record.object is not None
    assert (record.object.kind, record.object.api_group, record.object.api_version) == (
        "TrainJob",
        "trainer.kubeflow.org",
        "v1alpha1",
    )


async def test_delete_takes_the_object_from_old_object(client: httpx.AsyncClient, bus: Bus) -> None:
    body = admission_review("DELETE", trainjob("bert", "team-b", uid="uid-bert"), user="alice")
    assert body["request"]["object"] is None
    assert allows(await post(client, body), body)
    (record,) = bus.records
    assert record.verb == "delete"
    assert record.object is not None and (record.object.name, record.object.uid) == ("bert", "uid-bert")


async def test_update_names_the_fields_that_changed(client: httpx.AsyncClient, bus: Bus) -> None:
    old = a_mpijob("pi", "team-a")
    new = copy.deepcopy(old)
    new["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 8
    new["spec"]["runPolicy"]["suspend"] = True
    new["metadata"]["labels"]["priority"] = "high"
    new["metadata"]["resourceVersion"] = "99999"  # bookkeeping: not a change anyone made
    new["metadata"]["generation"] = 2
    new["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    body = admission_review("UPDATE", new, old=old)

    assert allows(await post(client, body), body)
    (record,) = bus.records
    assert record.changes == (
        "metadata.labels.priority",
        "spec.mpiReplicaSpecs.Worker.replicas",
        "spec.runPolicy.suspend",
    )


def test_a_long_list_of_changes_is_cut_short() -> None:
    old = a_mpijob()
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {f"label-{i:03}": "x" for i in range(80)}
    reviewed = review(json.dumps(admission_review("UPDATE", new, old=old)).encode(), T0)
    assert reviewed.record is not None
    changes = reviewed.record.changes
    assert len(changes) == 50
    assert changes[:2] == ("metadata.labels.label-000", "metadata.labels.label-001")
    assert changes[-1] == "…"


async def test_a_dry_run_is_allowed_and_not_recorded(
    client: httpx.AsyncClient, bus: Bus, webhook: AdmissionWebhook
) -> None:
    body = admission_review("CREATE", a_mpijob(), dry_run=True)
    assert allows(await post(client, body), body)
    assert bus.records == []
    assert sample(webhook, "mpijc_admission_reviews_total", operation="CREATE", outcome="dry_run") == 1


@pytest.mark.parametrize(
    "body",
    [
        admission_review(
            "CREATE", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}
        ),
        admission_review("CONNECT", a_mpijob()),
    ],
    ids=["another-kind", "connect"],
)
async def test_what_is_not_audited_is_allowed_and_ignored(
    client: httpx.AsyncClient, bus: Bus, body: dict[str, Any]
) -> None:
    assert allows(await post(client, body), body)
    assert bus.records == []


def _without(path: tuple[str, ...]) -> dict[str, Any]:
    body = admission_review("CREATE", a_mpijob())
    node = body
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return body


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not an AdmissionReview: body is not JSON"),
        (b"[1, 2]", "body is not a JSON object"),
        (
            json.dumps(
                {**admission_review("CREATE", a_mpijob()), "apiVersion": "admission.k8s.io/v1beta1"}
            ).encode(),
            "expected kind AdmissionReview, apiVersion admission.k8s.io/v1; got kind 'AdmissionReview', "
            "apiVersion 'admission.k8s.io/v1beta1'",
        ),
        (json.dumps(_without(("request", "uid"))).encode(), "request.uid is missing"),
        (json.dumps(_without(("request",))).encode(), "request.uid is missing"),
    ],
    ids=["not-json", "not-an-object", "v1beta1", "no-uid", "no-request"],
)
async def test_unanswerable_bodies_get_a_clear_400(
    client: httpx.AsyncClient, bus: Bus, content: bytes, message: str
) -> None:
    response = await client.post("/validate", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert bus.records == []


@pytest.mark.parametrize(
    "broken",
    [("request", "userInfo"), ("request", "kind"), ("request", "oldObject")],
    ids=["no-user-info", "no-kind", "delete-without-old-object"],
)
async def test_a_readable_review_with_broken_parts_is_still_allowed(
    client: httpx.AsyncClient, bus: Bus, webhook: AdmissionWebhook, broken: tuple[str, ...]
) -> None:
    body = admission_review("DELETE", a_mpijob())
    del body[broken[0]][broken[1]]
    assert allows(await post(client, body), body)
    assert bus.records == []
    assert sample(webhook, "mpijc_admission_reviews_total", operation="DELETE", outcome="malformed") == 1


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "message"),
    [
        ("GET", "/validate", {}, 405, "GET is not allowed"),
        ("POST", "/mutate", {"content-type": "application/json"}, 404, "no such path '/mutate'"),
        ("POST", "/validate", {"content-type": "text/yaml"}, 415, "content-type must be application/json"),
    ],
    ids=["method", "path", "content-type"],
)
async def test_wrong_requests_get_4xx_that_say_why(
    client: httpx.AsyncClient, method: str, path: str, headers: dict[str, str], status: int, message: str
) -> None:
    response = await client.request(method, path, headers=headers, content=b"{}")
    assert response.status_code == status
    assert message in response.json()["error"]


async def test_an_oversized_body_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/validate", content=b" " * (3 << 20 | 1), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert "at most 3145728" in response.json()["error"]


async def test_health_and_metrics_are_served(client: httpx.AsyncClient) -> None:
    body = admission_review("CREATE", a_mpijob())
    await post(client, body)
    assert (await client.get("/healthz")).text == "ok\n"
    metrics = (await client.get("/metrics")).text
    assert 'mpijc_admission_reviews_total{operation="CREATE",outcome="recorded"} 1.0' in metrics


async def test_a_bus_outage_never_holds_the_api_server_up(
    client: httpx.AsyncClient, bus: Bus, webhook: AdmissionWebhook
) -> None:
    bus.hanging = True
    body = admission_review("CREATE", a_mpijob())
    started = asyncio.get_running_loop().time()
    response = await post(client, body)
    assert allows(response, body)
    assert asyncio.get_running_loop().time() - started < 1.0, "answered after publish_timeout_s (0.2 s)"
    assert webhook.publisher.pending == 1

    bus.hanging = False
    bus.failing = OSError("nats: no servers available")
    await until(lambda: bus.refused >= 1, what=lambda: f"{bus.refused} publishes refused")
    assert webhook.publisher.pending == 1, "kept while publishing fails"

    bus.failing = None
    # The bus stores the record before the publisher hears its acknowledgement: the backlog
    # empties a moment after ``bus.records`` fills, so wait for the backlog itself.
    await until(lambda: webhook.publisher.pending == 0, what=lambda: webhook.publisher.pending)
    assert [r.request_uid for r in bus.records] == [body["request"]["uid"]]


async def test_a_renewed_certificate_is_served_without_a_restart(
    webhook: AdmissionWebhook, certificate: Certificate, tmp_path: Path
) -> None:
    (tmp_path / "renewed").mkdir()
    renewed = make_certificate(tmp_path / "renewed", name="renewed")
    certificate.key.write_bytes(renewed.key.read_bytes())
    certificate.cert.write_bytes(renewed.cert.read_bytes())
    context = renewed.trusted()
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", webhook.port, ssl=context, server_hostname="localhost"
            )
        except ssl.SSLCertVerificationError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError("the renewed certificate was never served")


async def test_with_a_client_ca_only_the_api_server_gets_in(
    certificate: Certificate, bus: Bus, tmp_path: Path
) -> None:
    (tmp_path / "apiserver").mkdir()
    apiserver = make_certificate(tmp_path / "apiserver", name="kube-apiserver")
    settings = webhook_settings(certificate).model_copy(update={"client_ca_file": apiserver.cert})
    with_cert = certificate.trusted()
    with_cert.load_cert_chain(apiserver.cert, apiserver.key)
    body = admission_review("CREATE", a_mpijob())
    async with AdmissionWebhook(
        settings, bus, AdmissionMetrics(CollectorRegistry()), clock=lambda: T0
    ) as hook:
        url = f"https://localhost:{hook.port}/validate"
        async with httpx.AsyncClient(verify=with_cert) as client:
            assert allows(await client.post(url, json=body), body)
        async with httpx.AsyncClient(verify=certificate.trusted()) as client:
            with pytest.raises(httpx.HTTPError):
                await client.post(url, json=admission_review("DELETE", a_mpijob()))
    assert [(r.verb, r.caller) for r in bus.records] == [("create", "mtls")]


async def test_records_reach_the_audit_stream(
    js: JetStreamContext, topology: Topology, certificate: Certificate
) -> None:
    async def publish(records: Sequence[AuditRecord]) -> int:
        return await Publisher(js, topology).publish_records(records)

    metrics = AdmissionMetrics(CollectorRegistry())
    async with (
        AdmissionWebhook(webhook_settings(certificate), publish, metrics, clock=lambda: T0) as hook,
        httpx.AsyncClient(base_url=f"https://127.0.0.1:{hook.port}", verify=certificate.trusted()) as client,
    ):
        body = admission_review("DELETE", trainjob("bert", "team-b"), user="pipeline")
        assert allows(await post(client, body), body)
        assert allows(await post(client, body), body)  # the API server retried: stored once

    sub = await js.pull_subscribe(topology.wildcard("audit"), stream=topology.stream("audit"))
    (msg,) = await sub.fetch(1, timeout=5)
    assert msg.subject == topology.audit("team-b")
    record = parse_audit_record(msg.data)
    assert (record.verb, record.request_uid) == ("delete", body["request"]["uid"])
    info = await js.stream_info(topology.stream("audit"))
    assert info.state.messages == 1
    await sub.unsubscribe()


def sample(webhook: AdmissionWebhook, name: str, **labels: str) -> float:
    return webhook.metrics.registry.get_sample_value(name, labels) or 0.0
