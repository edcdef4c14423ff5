"""The Kubernetes door retries what may pass: reads answered 429/5xx come back with one answer,
``Retry-After`` is honoured (capped), a persistent outage ends in APIUnavailableError after the
bound, and answers (403, 404) and writes are never repeated. Counted at the simulated API
server, never timed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from controller.contract.settings import KubeSettings
from controller.kube.errors import APIForbiddenError, APINotFoundError, APIUnavailableError
from controller.kube.gateway import KubeGateway, RetryPolicy
from controller.kube.resources import MPIJOBS
from controller.testing import objects as k
from controller.testing.simcluster import RecordedRequest, SimCluster

RETRIES = 3
QUICK = RetryPolicy(retries=RETRIES, backoff_s=0.01, retry_after_max_s=1)
"""The production shape with waits short enough for a test."""


@pytest.fixture
def retrying(sim: SimCluster) -> Iterator[KubeGateway]:
    with KubeGateway.for_url(sim.url, retries=QUICK) as kube:
        yield kube


def to(sim: SimCluster, path_end: str, method: str = "GET") -> list[RecordedRequest]:
    """The requests the server received whose path ends with ``path_end``."""
    return [r for r in sim.requests if r.method == method and r.path.endswith(path_end)]


def test_a_503_then_an_answer_is_one_answer(sim: SimCluster, retrying: KubeGateway) -> None:
    sim.create(k.mpijob("pi"))
    sim.fail_next(1, 503)

    items, _ = retrying.list(MPIJOBS, None)

    assert [i["metadata"]["name"] for i in items] == ["pi"]
    assert len(to(sim, "/mpijobs")) == 2 and len(sim.refused) == 1


def test_a_429_with_retry_after_is_waited_out_and_answered(sim: SimCluster, retrying: KubeGateway) -> None:
    job = sim.create(k.mpijob("pi"))
    sim.fail_next(2, 429, retry_after_s=1)

    got = retrying.get(MPIJOBS, "team-a", "pi")

    assert got["metadata"]["uid"] == job["metadata"]["uid"]
    assert len(to(sim, "/mpijobs/pi")) == 3 and len(sim.refused) == 2


def test_a_retry_after_longer_than_the_cap_is_cut_to_it(sim: SimCluster, retrying: KubeGateway) -> None:
    """An hour asked, one second waited: the read is answered (an uncapped wait would hang here)."""
    sim.create(k.mpijob("pi"))
    sim.fail_next(1, 503, retry_after_s=3600)

    assert retrying.get(MPIJOBS, "team-a", "pi")["metadata"]["name"] == "pi"
    assert len(to(sim, "/mpijobs/pi")) == 2
    assert QUICK.urllib3_retry().retry_after_max == 1


def test_a_persistent_503_is_unavailable_after_the_bound(sim: SimCluster, retrying: KubeGateway) -> None:
    sim.outage()

    with pytest.raises(APIUnavailableError) as raised:
        retrying.list(MPIJOBS, None)

    assert len(to(sim, "/mpijobs")) == 1 + RETRIES
    assert (raised.value.status, raised.value.reason) == (503, "ServiceUnavailable")
    assert isinstance(raised.value.__cause__, ApiException), "the last answer, with its Status body"


@pytest.mark.parametrize("code", [403, 404])
def test_an_answer_is_not_retried(sim: SimCluster, retrying: KubeGateway, code: int) -> None:
    sim.fail_next(5, code)

    with pytest.raises((APIForbiddenError, APINotFoundError)) as raised:
        retrying.list(MPIJOBS, None)

    assert raised.value.status == code
    assert len(to(sim, "/mpijobs")) == 1


def test_a_missing_object_is_asked_for_once(sim: SimCluster, retrying: KubeGateway) -> None:
    with pytest.raises(APINotFoundError):
        retrying.get_lease("mpijc", "nope")
    assert len(to(sim, "/leases/nope")) == 1


def test_writes_answered_503_are_not_sent_again(sim: SimCluster, retrying: KubeGateway) -> None:
    """An Event create or a Lease replace that reached the server is the caller's to judge."""
    job = sim.create(k.mpijob("pi"))
    sim.fail_next(2, 503)

    with pytest.raises(APIUnavailableError):
        retrying.create_event("team-a", k.event(job, "Failed", "no", type_="Warning"))
    with pytest.raises(APIUnavailableError):
        retrying.replace(MPIJOBS, "team-a", "pi", job)

    assert len(to(sim, "/events", "POST")) == 1 and len(to(sim, "/mpijobs/pi", "PUT")) == 1


def test_the_first_request_of_a_watch_is_retried(sim: SimCluster, retrying: KubeGateway) -> None:
    sim.create(k.mpijob("pi"))
    sim.fail_next(2, 503, match="watch=true")

    stream = retrying.watch(MPIJOBS, None, "0", timeout_s=5)
    try:
        first = next(stream)
    finally:
        stream.close()

    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "pi")
    assert len([r for r in to(sim, "/mpijobs") if r.query.get("watch") == "true"]) == 3


def test_the_policy_comes_from_the_settings() -> None:
    policy = RetryPolicy.from_settings(KubeSettings(read_retries=1, retry_backoff_s=0.5, retry_after_max_s=7))
    retry = policy.urllib3_retry()

    assert (retry.total, retry.backoff_factor, retry.retry_after_max) == (1, 0.5, 7)
    assert retry.allowed_methods == frozenset({"GET"}) and not retry.raise_on_status
