"""Rules for jobs without a launcher (PyTorchJob and the other training-operator kinds): the
failing replica is named by type and index, torch elastic's root cause and rendezvous timeouts
are told, a job whose replicas never all get ready hangs in init, a failed replica the job does
not notice propagates, and a restart is told once per restart, not as a new failure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from consumers.rules import RuleEngine
from controller.contract.events import Condition, JobSpecSummary, PodObserved
from controller.contract.findings import Finding
from controller.testing.events import (
    TORCH,
    at,
    job,
    k8s_event,
    ref,
    replay,
    replica,
    running,
    terminated,
    torch_run,
    waiting,
    worker,
)

ELASTIC_TAIL = """\
Traceback (most recent call last):
  File "/workspace/train.py", line 88, in <module>
RuntimeError: shape mismatch in batch 1200
E1120 10:09:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 57) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-20_10:09:00
  host      : bert-worker-1
  rank      : 3 (local_rank: 1)
  exitcode  : 1 (pid: 57)
  error_file: <N/A>
============================================================"""


def firing(findings: list[Finding]) -> dict[str, str]:
    """The newest root cause per firing rule."""
    latest: dict[str, Finding] = {}
    for finding in findings:
        latest[finding.rule] = finding
    return {rule: f.root_cause for rule, f in latest.items() if f.status == "firing"}


def failed_worker(
    index: int, when: datetime, *, tail: str = "", code: int = 1, reason: str = "Error"
) -> PodObserved:
    return replica(
        "Worker",
        index,
        phase="Failed",
        ready=False,
        containers=(terminated(reason, code, name="pytorch"),),
        log_tail=tail.splitlines(),
        observed_at=when,
    )


def test_torch_elastic_root_cause_names_the_replica_rank_and_exit_code() -> None:
    run = torch_run()
    failed = failed_worker(1, at(1), tail=ELASTIC_TAIL)
    found = firing(replay(RuleEngine(), [*run, failed], at(1, 10)))
    assert (
        found["mpi-abort"]
        == "Rank 3 on Worker-1 exited with code 1: RuntimeError: shape mismatch in batch 1200"
    )


@pytest.mark.parametrize(
    ("tail", "said"),
    [
        (
            "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
            "192.0.0.1:1234\ntorch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection "
            "to the C10d store has failed. See inner exception for details.",
            "Worker-1 could not reach the c10d store at 192.0.0.1:1234 within 60s: the processes never all met",
        ),
        (
            "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
            "Worker-1 waited 1801s for the others at its c10d store and only 1 of 3 joined: "
            "the processes never all met",
        ),
        (
            '    "message": "RendezvousTimeoutError: ",',
            "Worker-1 timed out waiting at the rendezvous: the processes never all met",
        ),
    ],
    ids=["client-timeout", "store-waited", "elastic-timeout"],
)
def test_rendezvous_timeouts_name_the_replica_and_the_endpoint(tail: str, said: str) -> None:
    run = torch_run()
    failed = failed_worker(1, at(1), tail=tail)
    found = firing(replay(RuleEngine(), [*run, failed], at(1, 10)))
    assert found["rendezvous"] == said
    assert "mpi-abort" not in found and "failed" not in found


def test_a_peer_that_cannot_start_explains_the_rendezvous() -> None:
    run = torch_run()
    pulling = replica(
        "Worker",
        0,
        phase="Pending",
        ready=False,
        containers=(waiting("ImagePullBackOff", 'Back-off pulling image "bert:9"', name="pytorch"),),
        observed_at=at(1),
    )
    timeout = failed_worker(
        1,
        at(16),
        tail="torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/3 clients joined.",
    )
    found = firing(replay(RuleEngine(), [*run, pulling, timeout], at(16, 10)))
    assert "image-pull" in found and "rendezvous" not in found


def test_replicas_that_never_all_get_ready_hang_in_init() -> None:
    master, *workers = torch_run()[1:]
    starting = replica(
        "Worker", 1, phase="Pending", ready=False, containers=(waiting("ContainerCreating", name="pytorch"),)
    )
    spec = JobSpecSummary(workers=3, replicas={"Master": 1, "Worker": 2})
    events = [job("Running", job=TORCH, job_spec=spec), master, workers[0], starting]
    found = firing(replay(RuleEngine(), events, at(20)))
    assert found["hang-init"] == "Process group not formed after 20m: 2 of 3 workers ready"


def test_a_failed_replica_the_job_does_not_notice_propagates() -> None:
    run = torch_run()
    found = firing(replay(RuleEngine(), [*run, failed_worker(0, at(1), code=2)], at(2)))
    assert found["failure-propagation"] == "Worker-0 failed 1m ago but the job is still Running"


def restarting(since: datetime) -> Condition:
    return Condition(
        type="Restarting",
        status="True",
        reason="PyTorchJobRestarting",
        message="PyTorchJob bert is restarting because 1 Worker replica(s) failed.",
        last_transition_time=since,
    )


def test_each_restart_is_told_once_and_is_not_a_failure_that_did_not_propagate() -> None:
    engine = RuleEngine()
    spec = JobSpecSummary(workers=3, replicas={"Master": 1, "Worker": 2})
    run = torch_run()
    first_failure = failed_worker(1, at(1), code=1)
    first = job("Running", job=TORCH, job_spec=spec, conditions=(restarting(at(1)),), observed_at=at(1))
    changes = replay(engine, [*run, first_failure, first], at(2), at(3), at(4))
    restarts = [f for f in changes if f.rule == "restarting"]
    assert [(f.status, f.root_cause) for f in restarts] == [
        ("firing", "PyTorchJob bert is restarting after Worker-1 exited with code 1")
    ]
    assert not [f for f in changes if f.rule == "failure-propagation"]

    recreated = replica("Worker", 1, containers=(running("pytorch"),), observed_at=at(5))
    again = job("Running", job=TORCH, job_spec=spec, observed_at=at(5))
    second_failure = failed_worker(1, at(9), code=137, reason="OOMKilled")
    second = job("Running", job=TORCH, job_spec=spec, conditions=(restarting(at(9)),), observed_at=at(9))
    changes = replay(engine, [recreated, again, second_failure, second], at(10), at(11))
    told = [(f.rule, f.status) for f in changes if f.rule == "restarting"]
    assert told == [("restarting", "resolved"), ("restarting", "firing")]  # once per restart
    assert firing(changes)["oom"] == "Worker-1 failed: out of memory (limit 16Gi)"


def test_a_jobset_hostname_in_the_root_cause_names_its_worker() -> None:
    """JobSet pods are named after their hostname plus a random suffix (``llm-node-0-1-x7k2p``):
    the host torch elastic names is that worker, not a stranger."""
    trainjob = ref(name="llm", uid="0b7c5d1e-4f2a-4c1b-9d3e-00000000tj01")
    trainjob = trainjob.model_copy(update={"kind": "TrainJob"})
    run = [
        job("Running", job=trainjob),
        *(worker(i, job=trainjob, name=f"llm-node-0-{i}-x7k2p") for i in (0, 1)),
    ]
    tail = ELASTIC_TAIL.replace("host      : bert-worker-1", "host      : llm-node-0-1.llm")
    failed = worker(
        1,
        job=trainjob,
        name="llm-node-0-1-x7k2p",
        phase="Failed",
        ready=False,
        containers=(terminated("Error", 1, name="node"),),
        log_tail=tail.splitlines(),
        observed_at=at(1),
    )
    found = firing(replay(RuleEngine(), [*run, failed], at(1, 10)))
    assert found["mpi-abort"].startswith("Rank 3 on worker-1 exited with code 1")  # not "node-0-1"


GPU_OOM_TAIL = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.12 GiB is free."
)


def _failed(kind: str, index: int, **overrides: Any) -> Callable[[], PodObserved]:
    """A replica that failed a second into the run, not ready (built after the run: newer)."""
    return lambda: replica(
        kind, index, **{"phase": "Failed", "ready": False, "observed_at": at(1), **overrides}
    )


POD_CAUSES: dict[str, Callable[[], PodObserved]] = {
    "oom": _failed("Worker", 1, containers=(terminated("OOMKilled", 137, name="pytorch"),)),
    "gpu-oom": _failed(
        "Worker", 0, containers=(terminated("Error", 1, name="pytorch"),), log_tail=(GPU_OOM_TAIL,)
    ),
    "evicted": _failed(
        "PS",
        0,
        containers=(terminated("ContainerStatusUnknown", 137, name="tensorflow"),),
        reason="Evicted",
        message="The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki.",
    ),
    "node-lost": _failed(
        "Chief",
        0,
        phase="Unknown",
        reason="NodeLost",
        message="Node gpu-node-0 which was running pod bert-chief-0 is unresponsive",
    ),
    "crashloop": lambda: replica(
        "Master",
        0,
        ready=False,
        containers=(waiting("CrashLoopBackOff", restarts=5, last_reason="Error", last_exit_code=1),),
        observed_at=at(3),
    ),
}
"""Each pod cause (the rule it fires) and the replica that fails of it."""


@pytest.mark.parametrize("rule, failing", POD_CAUSES.items(), ids=POD_CAUSES.keys())
def test_every_pod_cause_names_the_replica_of_a_launcherless_job(
    rule: str, failing: Callable[[], PodObserved]
) -> None:
    engine = RuleEngine()
    run = torch_run()
    failed = failing()

    replay(engine, [*run, failed], failed.observed_at)

    causes = {f.rule: f for f in engine.firing()}
    named = f"{failed.replica}-{failed.index}"
    assert rule in causes, {r: f.root_cause for r, f in causes.items()}
    assert causes[rule].root_cause.startswith(named), causes[rule].root_cause
    assert causes[rule].job.kind == "PyTorchJob"


def test_a_quota_refusal_of_the_training_operator_is_the_quota() -> None:
    # training-operator records its pod creation failures on the job (reason FailedCreatePod)
    refusal = k8s_event(
        "FailedCreatePod",
        'Error creating: pods "bert-worker-1" is forbidden: exceeded quota: team-a-gpus, requested: '
        "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16",
        kind="PyTorchJob",
        involved="bert",
        job=TORCH,
        observed_at=at(0.1),
    )
    engine = RuleEngine()

    replay(engine, [job("Pending", job=TORCH), replica("Master", 0), refusal], at(0.1))

    (finding,) = engine.firing()
    assert finding.rule == "quota" and finding.job.kind == "PyTorchJob"
    assert "bert-worker-1" in finding.root_cause and "team-a-gpus" in finding.root_cause
