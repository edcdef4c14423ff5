"""straggler names a node shared with another job as the likely reason when the reading shows
the other pods of the worker's node using a good part of it: which job, how many pods, what
they use. Its near-misses give no such reason: a co-tenant that is idle or small, DaemonSets,
static and system pods every node runs, and the run's own other workers on the same node."""

from __future__ import annotations

import pytest

from consumers.rules import RuleEngine, RuleThresholds
from consumers.rules.cotenants import co_tenants
from consumers.rules.state import RunState
from controller.contract.events import BusEvent, Neighbour, UsageObserved
from controller.contract.findings import Finding
from controller.testing.events import REF, at, pod_usage, running_run, usage

BUSY = [92.0] * 20
SLOW = [50.0] * 20


def _straggler(neighbours: tuple[Neighbour, ...], thresholds: RuleThresholds | None = None) -> Finding | None:
    """The straggler finding of a run whose worker 1 runs behind, its node holding ``neighbours``."""
    end = at(30)
    pods = [
        pod_usage(i, util=u, memory_gib=[8.0] * 20, end=end) for i, u in enumerate([BUSY, SLOW, BUSY, BUSY])
    ]
    pods[1] = pods[1].model_copy(update={"neighbours": neighbours})
    reading: BusEvent = usage(*pods, observed_at=end)
    rules = RuleEngine(thresholds or RuleThresholds())
    found = {f.rule: f for event in [*running_run(), reading] for f in rules.observe(event, end)}
    return found.get("straggler")


def _pod(
    namespace: str, name: str, kind: str | None, owner: str | None, cores: float, **more: float
) -> Neighbour:
    return Neighbour(
        namespace=namespace,
        pod=name,
        owner_kind=kind,
        owner_name=owner,
        cpu_mean_cores=cores,
        gpus=int(more.get("gpus", 0)),
        gpu_util_mean_pct=more.get("util"),
    )


BERT = tuple(
    _pod("team-b", f"bert-large-worker-{i}", "MPIJob", "bert-large", c) for i, c in enumerate([4.0, 4.5, 3.0])
)
SYSTEM = (
    _pod("monitoring", "node-exporter-7xk2p", "DaemonSet", "node-exporter", 3.0),
    _pod(
        "gpu-operator",
        "nvidia-dcgm-exporter-x7k2p",
        "DaemonSet",
        "nvidia-dcgm-exporter",
        2.5,
        gpus=8,
        util=92.0,
    ),
    _pod("kube-system", "kube-proxy-gpu-node-1", "Node", "gpu-node-1", 2.5),
    _pod("kube-system", "coredns-5d78c9869d-abcde", "ReplicaSet", "coredns-5d78c9869d", 2.5),
    _pod("gpu-operator", "gpu-operator-7c9f5d-2k4mn", "ReplicaSet", "gpu-operator-7c9f5d", 2.5),
)


def test_another_jobs_pods_on_the_node_are_the_likely_reason_with_what_they_use() -> None:
    finding = _straggler(BERT)
    assert finding is not None
    assert finding.root_cause.endswith(
        "; its node gpu-node-1 also runs 3 pods of team-b/bert-large (MPIJob), using 11.5 CPU cores"
    )


def test_busy_gpus_of_a_co_tenant_count_and_the_busiest_come_first() -> None:
    gpus = _pod("team-c", "render-0", None, None, 0.5, gpus=4, util=95.0)
    etl = _pod("team-d", "etl-7d9f8c-x2k9q", "ReplicaSet", "etl-7d9f8c", 2.0)
    finding = _straggler((etl, *SYSTEM, gpus, *BERT))
    assert finding is not None
    assert finding.root_cause.endswith(
        "; its node gpu-node-1 also runs 3 pods of team-b/bert-large (MPIJob), using 11.5 CPU cores; "
        "pod team-c/render-0, using 0.5 CPU cores and 4 GPUs at 95 %; "
        "and a pod of team-d/etl-7d9f8c (ReplicaSet), using 2.0 CPU cores"
    )


def test_the_cores_a_co_tenant_must_use_are_a_setting_per_namespace() -> None:
    small = (_pod("team-b", "notebook-0", "StatefulSet", "notebook", 1.5),)
    assert _straggler(small, RuleThresholds(straggler_neighbour_cores=2.0)).root_cause.endswith(  # type: ignore[union-attr]
        "(since 10:15 UTC)"
    )
    lower = RuleThresholds.model_validate({"overrides": {"team-a": {"straggler_neighbour_cores": 1.0}}})
    named = _straggler(small, lower)
    assert named is not None
    assert named.root_cause.endswith(
        "; its node gpu-node-1 also runs a pod of team-b/notebook (StatefulSet), using 1.5 CPU cores"
    )


@pytest.mark.parametrize(
    "neighbours",
    [
        pytest.param(
            (_pod("team-b", "idle-0", "Job", "idle", 0.05, gpus=2, util=1.0),), id="an-idle-co-tenant"
        ),
        pytest.param(
            tuple(_pod("team-b", f"web-{i}", "ReplicaSet", "web-5f6", 0.6) for i in range(3)),
            id="a-small-co-tenant-under-the-cores",
        ),
        pytest.param(SYSTEM, id="daemonsets-static-and-system-pods"),
        pytest.param(
            (
                _pod("team-a", "pi-worker-3", "MPIJob", "pi", 30.0, gpus=8, util=92.0),
                _pod("team-a", "pi-launcher", "MPIJob", "pi", 4.0),
            ),
            id="the-runs-own-pods-on-the-node",
        ),
        pytest.param((), id="nothing-else-on-the-node"),
    ],
)
def test_near_misses_of_a_shared_node_give_no_such_reason(neighbours: tuple[Neighbour, ...]) -> None:
    finding = _straggler(neighbours)
    assert finding is not None  # the straggler is still named, without a reason it does not have
    assert finding.root_cause.endswith("(since 10:15 UTC)")
    assert "also runs" not in finding.root_cause


def test_a_co_tenant_is_grouped_by_its_owner_and_an_unowned_pod_stands_alone() -> None:
    run = RunState(ref=REF)
    reading = usage(pod_usage(1, util=SLOW, end=at(30)), observed_at=at(30))
    assert isinstance(reading, UsageObserved)
    mixed = (*BERT, _pod("team-b", "debug", None, None, 2.0), _pod("team-b", "other", None, None, 2.0))
    pod = reading.pods[0].model_copy(update={"neighbours": mixed})
    tenants = co_tenants(run, pod, RuleThresholds())
    assert [(t.owner, t.pods, round(t.cpu_cores, 1)) for t in tenants] == [
        ("bert-large", ("bert-large-worker-0", "bert-large-worker-1", "bert-large-worker-2"), 11.5),
        (None, ("debug",), 2.0),
        (None, ("other",), 2.0),
    ]
