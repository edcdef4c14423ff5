"""A ResourceQuota or LimitRange refusing a pod of the run is a finding at once, not a hang later.

The refusal is an Event about whatever tried to create the pod — mpi-operator records it on
the MPIJob ("worker pod created failed: pods … is forbidden: exceeded quota: …"), the Job
controller on the launcher's Job or a TrainJob's Jobs (``FailedCreate``). The finding names
the quota and what would go over; it is observed as soon as the Event arrives (pending: the
operator retries), is the verdict once the job fails or stays refused past ``live_silence_s``,
clears once the run's pods all exist, and a run that succeeds never fires it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import pytest

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent, job_of
from controller.contract.findings import ACTIVE
from controller.testing import objects as k
from controller.testing.events import at, job, k8s_event, launcher, replay, worker
from watchers.correlating import Correlator, Observation

GPU_QUOTA = (
    'worker pod created failed: pods "pi-worker-3" is forbidden: exceeded quota: team-a-gpus, '
    "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=24, limited: requests.nvidia.com/gpu=24"
)
GPU_SENTENCE = (
    "Kubernetes refused to create pod pi-worker-3: ResourceQuota team-a-gpus is exhausted for "
    "requests.nvidia.com/gpu (requested 8, used 24 of 24)"
)


def _refused(at_minute: float = 0.1) -> BusEvent:
    return k8s_event("MPIJobFailed", GPU_QUOTA, kind="MPIJob", involved="pi", observed_at=at(at_minute))


def test_the_refusal_is_observed_the_moment_it_arrives() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending"), *(worker(i) for i in range(3))])

    (finding,) = engine.observe(_refused(), at(0.1))

    assert (finding.rule, finding.status, finding.severity) == ("quota", "pending", "warning")
    assert finding.root_cause == (
        "Kubernetes refused to create pod pi-worker-3 at 10:00:06 UTC: ResourceQuota team-a-gpus is "
        "exhausted for requests.nvidia.com/gpu (requested 8, used 24 of 24); the operator is still trying"
    )
    assert finding.evidence[0].source == "mpijob/pi" and finding.evidence[0].field == "event[MPIJobFailed]"
    assert (
        finding.remediation[0]
        == "See the quota and what uses it: kubectl -n team-a describe resourcequota team-a-gpus"
    )


def test_the_refusal_is_the_verdict_when_the_job_fails() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending"), *(worker(i) for i in range(3)), _refused()])

    (finding,) = [f for f in replay(engine, [job("Failed", observed_at=at(1))]) if f.rule == "quota"]

    assert (finding.status, finding.severity, finding.root_cause) == ("firing", "critical", GPU_SENTENCE)


def test_the_refusal_is_the_verdict_once_the_run_stays_refused_past_the_silence() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending"), *(worker(i) for i in range(3)), _refused()])

    assert replay(engine, [], at(4)) == []  # refused for four minutes: still the operator's retries
    (finding,) = replay(engine, [], at(5, 10))

    assert (finding.rule, finding.status, finding.root_cause) == ("quota", "firing", GPU_SENTENCE)


def test_a_refusal_in_a_run_that_then_succeeds_never_fires() -> None:
    engine = RuleEngine()
    changes = replay(engine, [job("Pending"), *(worker(i) for i in range(3)), _refused()])

    changes += replay(engine, [job("Running", observed_at=at(2)), job("Succeeded", observed_at=at(3))], at(9))

    assert [(f.rule, f.status) for f in changes] == [("quota", "pending"), ("quota", "resolved")]
    assert engine.firing() == []


def test_a_long_wait_behind_the_quota_is_the_quota() -> None:
    engine = RuleEngine()

    replay(engine, [job("Pending"), *(worker(i) for i in range(3)), _refused()], at(20), at(40))

    assert [f.rule for f in engine.firing()] == ["quota"]


def test_it_clears_once_every_pod_is_created() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending"), *(worker(i) for i in range(3)), _refused()])

    changes = replay(
        engine,
        [worker(3, created_at=at(2), observed_at=at(2)), launcher(created_at=at(2), observed_at=at(2))],
    )

    assert [(f.rule, f.status) for f in changes] == [("quota", "resolved")]


@pytest.mark.parametrize(
    ("message", "sentence"),
    [
        (
            'Error creating: pods "pi-launcher-x7k2p" is forbidden: failed quota: compute: must specify '
            "limits.memory for: launcher,ssh-init; requests.memory for: launcher",
            "Kubernetes refused to create pod pi-launcher-x7k2p: ResourceQuota compute requires limits.memory "
            "and requests.memory on every container and containers launcher and ssh-init do not set them",
        ),
        (
            'Error creating: pods "pi-worker-0" is forbidden: maximum memory usage per Container is 64Gi, but limit is 128Gi',
            "Kubernetes refused to create pod pi-worker-0: the namespace's LimitRange allows at most 64Gi memory "
            "per Container, but the limit is 128Gi",
        ),
        (
            'Error creating: pods "pi-worker-0" is forbidden: memory max limit to request ratio per Container '
            "is 2, but provided ratio is 4.000000",
            "Kubernetes refused to create pod pi-worker-0: the namespace's LimitRange allows a memory limit/request "
            "ratio of at most 2 per Container, but it is 4.000000",
        ),
    ],
    ids=["must-specify", "limit-range", "limit-ratio"],
)
def test_the_refusal_is_said_in_words(message: str, sentence: str) -> None:
    engine = RuleEngine()
    refused = k8s_event("FailedCreate", message, kind="Job", involved="pi-launcher")

    replay(engine, [job("Pending"), refused], at(6))

    assert [(f.rule, f.status, f.root_cause) for f in engine.firing()] == [("quota", "firing", sentence)]


def test_other_events_about_the_job_are_no_refusal() -> None:
    engine = RuleEngine()
    created = k8s_event(
        "SuccessfulCreate", "Created pod: pi-worker-0", kind="MPIJob", involved="pi", event_type="Normal"
    )

    assert replay(engine, [job("Pending"), created], at(5)) == []


# ------------------------------------------------------------ through the watcher's correlator


def _observe(correlator: Correlator, engine: RuleEngine, observations: Iterable[Observation]) -> list[str]:
    fired: list[str] = []
    for observation in observations:
        for event in correlator.observe(observation):
            fired += [f.rule for f in engine.observe(event, event.observed_at) if f.status in ACTIVE]
    return fired


def _raw_event(about: k.Obj, reason: str, message: str) -> Observation:
    now = datetime(2026, 11, 20, 10, 0, 5, tzinfo=UTC)
    return Observation("event", "ADDED", k.event(about, reason, message), now)


def test_mpi_operators_refusal_on_the_mpijob_reaches_the_rules() -> None:
    mpijob = k.mpijob()
    correlator = Correlator(30, lambda: 0.0)
    engine = RuleEngine()
    created = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)

    fired = _observe(
        correlator,
        engine,
        [Observation("job", "ADDED", mpijob, created), _raw_event(mpijob, "MPIJobFailed", GPU_QUOTA)],
    )

    assert fired == ["quota"]


def test_the_job_controllers_refusal_on_the_launchers_job_reaches_the_rules() -> None:
    mpijob = k.mpijob()
    launcher_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi-launcher", "namespace": "team-a", "uid": "uid-launcher-job"},
    }
    correlator = Correlator(30, lambda: 0.0)
    engine = RuleEngine()
    created = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    refused = 'Error creating: pods "pi-launcher-x7k2p" is forbidden: ' + GPU_QUOTA.split("forbidden: ", 1)[1]

    fired = _observe(
        correlator,
        engine,
        [Observation("job", "ADDED", mpijob, created), _raw_event(launcher_job, "FailedCreate", refused)],
    )

    assert fired == ["quota"]


def batch_job(name: str, namespace: str) -> k.Obj:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}


def test_a_refusal_on_a_job_of_a_trainjobs_jobset_reaches_that_trainjob() -> None:
    short, long = trainjob("llama"), trainjob("llama-node")  # both prefix "llama-node-node-0"
    correlator = Correlator(30, lambda: 0.0)
    engine = RuleEngine()
    created = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    refused = (
        'Error creating: pods "llama-node-node-0-0-x7k2p" is forbidden: '
        + GPU_QUOTA.split("forbidden: ", 1)[1]
    )
    refusal = _raw_event(batch_job("llama-node-node-0", "team-b"), "FailedCreate", refused)

    events = [
        e for job in (short, long) for e in correlator.observe(Observation("job", "ADDED", job, created))
    ]
    events += correlator.observe(refusal)

    (placed,) = [e for e in events if e.type == "event"]
    assert placed.job.name == "llama-node"  # the longest TrainJob name that prefixes the Job's
    assert [f.rule for e in events for f in engine.observe(e, e.observed_at) if f.status in ACTIVE] == [
        "quota"
    ]


def test_a_refusal_before_its_trainjob_is_held_until_the_trainjob_arrives() -> None:
    correlator = Correlator(30, lambda: 0.0)
    refusal = _raw_event(batch_job("llama-node-0", "team-b"), "FailedCreate", GPU_QUOTA)

    assert correlator.observe(refusal) == [] and correlator.held == 1
    created = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    events = correlator.observe(Observation("job", "ADDED", trainjob("llama"), created))

    assert [(e.type, job_of(e).name) for e in events] == [("job", "llama"), ("event", "llama")]
    assert correlator.held == 0


def test_a_refusal_about_a_batch_job_of_nobody_is_dropped_after_the_grace_period() -> None:
    now = [0.0]
    correlator = Correlator(30, lambda: now[0])
    correlator.observe(_raw_event(batch_job("nightly-backup", "team-a"), "FailedCreate", "quota"))
    correlator.observe(Observation("job", "ADDED", k.mpijob(), datetime(2026, 11, 20, 10, 0, tzinfo=UTC)))
    assert correlator.held == 1  # still waiting: some TrainJob of team-a may yet claim it

    now[0] = 31.0
    assert correlator.expire() == 1 and correlator.held == 0 and correlator.dropped == 1


def trainjob(name: str) -> k.Obj:
    """A TrainJob as Kubeflow Trainer v2 stores it, in namespace team-b."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": "team-b",
            "uid": f"uid-{name}",
            "resourceVersion": "4001",
            "creationTimestamp": "2026-11-20T10:00:00Z",
        },
        "spec": {
            "runtimeRef": {"name": "mpi-distributed", "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}},
        },
    }
