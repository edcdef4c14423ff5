"""Every failure of the real client becomes the most specific of our own errors, raised from the original."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from controller.kube.errors import (
    APIConflictError,
    APIError,
    APIForbiddenError,
    APIGoneError,
    APINotFoundError,
    APIUnavailableError,
    KubeConfigError,
)
from controller.kube.gateway import NO_RETRIES, KubeGateway
from controller.kube.resources import MPI_PODS, MPIJOBS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, APIError),
        (401, APIError),
        (403, APIForbiddenError),
        (404, APINotFoundError),
        (409, APIConflictError),
        (410, APIGoneError),
        (422, APIError),
        (429, APIUnavailableError),
        (500, APIUnavailableError),
        (503, APIUnavailableError),
    ],
    ids=lambda value: str(value) if isinstance(value, int) else value.__name__,
)
def test_an_http_status_maps_to_its_own_error_class(
    sim: SimCluster, gateway: KubeGateway, status: int, expected: type[APIError]
) -> None:
    sim.fail_next(1, status)
    with pytest.raises(APIError) as raised:
        gateway.list(MPIJOBS, None)
    assert type(raised.value) is expected
    assert raised.value.status == status
    assert raised.value.message == f"injected failure {status}"
    assert isinstance(raised.value.__cause__, ApiException)


def test_a_missing_object_is_not_found_with_the_server_message(gateway: KubeGateway) -> None:
    with pytest.raises(
        APINotFoundError, match=re.escape('leases.coordination.k8s.io "nope" not found')
    ) as raised:
        gateway.get_lease("mpijc", "nope")
    assert raised.value.reason == "NotFound"
    assert raised.value.body is not None and raised.value.body["details"]["name"] == "nope"


def test_an_unknown_resource_is_not_found(gateway: KubeGateway) -> None:
    with pytest.raises(APINotFoundError, match="could not find the requested resource"):
        gateway.request("GET", "/apis/example.com/v1/widgets")


def test_creating_an_existing_object_conflicts(sim: SimCluster, gateway: KubeGateway) -> None:
    job = sim.create(k.mpijob("pi"))
    with pytest.raises(APIConflictError, match=re.escape('mpijobs.kubeflow.org "pi" already exists')):
        gateway.create(MPIJOBS, "team-a", job)


def test_an_unreachable_server_is_unavailable(gateway: KubeGateway) -> None:
    with SimCluster() as gone:
        url = gone.url
    with (
        KubeGateway.for_url(url, retries=NO_RETRIES) as unreachable,
        pytest.raises(APIUnavailableError) as raised,
    ):
        unreachable.list(MPI_PODS, None)
    assert raised.value.status == 0
    assert isinstance(raised.value.__cause__, urllib3.exceptions.HTTPError)


def test_a_410_error_event_in_a_watch_stream_is_gone(sim: SimCluster, gateway: KubeGateway) -> None:
    for name in ("pi", "e"):
        sim.create(k.mpijob(name))
    sim.compact()
    with pytest.raises(APIGoneError, match="too old resource version") as raised:
        next(gateway.watch(MPIJOBS, None, "1", timeout_s=5))
    assert raised.value.reason == "Expired"
    assert raised.value.status == 410
    assert raised.value.__cause__ is None, "no client exception: the stream itself said so"


def test_all_errors_share_the_base_class() -> None:
    for cls in (APIForbiddenError, APINotFoundError, APIConflictError, APIGoneError, APIUnavailableError):
        assert issubclass(cls, APIError)
    assert not issubclass(KubeConfigError, APIError)


def test_a_missing_kubeconfig_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="no usable Kubernetes configuration"):
        KubeGateway.from_config(tmp_path / "absent-kubeconfig")


def test_a_kubeconfig_context_reaches_its_cluster(sim: SimCluster, tmp_path: Path) -> None:
    sim.create(k.mpijob("pi"))
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {{server: "{sim.url}"}}
- name: elsewhere
  cluster: {{server: "http://127.0.0.1:9"}}
users:
- name: dev
  user: {{token: "t0ken"}}
contexts:
- name: sim
  context: {{cluster: sim, user: dev}}
- name: elsewhere
  context: {{cluster: elsewhere, user: dev}}
current-context: elsewhere
"""
    )
    with KubeGateway.from_config(kubeconfig, context="sim") as gateway:
        items, _ = gateway.list(MPIJOBS, None)
    assert [i["metadata"]["name"] for i in items] == ["pi"]
    assert sim.requests[-1].authorization == "Bearer t0ken"
