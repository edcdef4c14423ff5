"""Each rule fires on its signal, alone, with its root cause in the user's words.

Every case is a short run (typed bus events with their ``observed_at``) ending at ``now``;
the engine must report exactly one firing finding, of the expected rule, with exactly
the expected sentence — a scenario of one failure must not raise a second alarm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import pytest

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent
from controller.contract.findings import RuleId
from controller.testing.events import (
    T0,
    at,
    failed_launcher,
    job,
    k8s_event,
    launcher,
    pending_worker,
    replay,
    running,
    running_run,
    terminated,
    waiting,
    worker,
)

GPU_SHORTAGE = (
    "0/12 nodes are available: 3 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/12 nodes are available: 12 No preemption victims found for incoming pod."
)
IMAGE = "registry.example.com/team-a/pi:v2"


@dataclass(frozen=True)
class Case:
    rule: RuleId
    sentence: str
    events: Callable[[], list[BusEvent]]
    now: datetime = T0


def _worker_failed(index: int, *containers_: object, **kw: object) -> BusEvent:
    return worker(index, phase="Failed", ready=False, containers=containers_, observed_at=at(1), **kw)


def _pull_failure(registry_answer: str) -> Callable[[], list[BusEvent]]:
    def events() -> list[BusEvent]:
        back_off = waiting("ImagePullBackOff", f'Back-off pulling image "{IMAGE}"')
        return [
            job("Pending"),
            launcher(
                phase="Pending", ready=False, containers=(waiting("ContainerCreating", name="launcher"),)
            ),
            *(
                worker(i, phase="Pending", ready=False, containers=(back_off,), observed_at=at(1))
                for i in range(4)
            ),
            k8s_event("Failed", f'Failed to pull image "{IMAGE}": {registry_answer}', observed_at=at(1)),
        ]

    return events


OMPI_SSH_REFUSED = """
ssh: connect to host pi-worker-1.pi.team-a.svc port 22: Connection refused
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes.
--------------------------------------------------------------------------
"""
PRRTE_DAEMON_LOST = """
--------------------------------------------------------------------------
PRTE has lost communication with a remote daemon.

  HNP daemon   : [prterun-pi-launcher-12@0,0] on node pi-launcher
  Remote daemon: [prterun-pi-launcher-12@0,2] on node pi-worker-2

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
--------------------------------------------------------------------------
"""
HYDRA_NO_ROUTE = """
[mpiexec@pi-launcher] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from "pi-launcher" to "pi-worker-3" (No route to host)
[mpiexec@pi-launcher] main (ui/mpich/mpiexec.c:340): error launching_proxies
"""
SSH_PUBLICKEY = """
mpiuser@pi-worker-0.pi.team-a.svc: Permission denied (publickey,password).
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
"""
SSH_UNRESOLVED = """
ssh: Could not resolve hostname pi-worker-3.pi.team-a.svc: Name or service not known
"""
OMPI_ABORT = """
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 13 in communicator MPI_COMM_WORLD
with errorcode 1.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
prterun has exited due to process rank 13 with PID 0 on node pi-worker-1 calling
"abort". This may have caused other processes in the application to be
terminated by signals sent by prterun (as reported here).
--------------------------------------------------------------------------
"""
OMPI_ABORT_NO_HOST = """
MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD
with errorcode 3.
"""
OMPI_SIGNAL = """
--------------------------------------------------------------------------
mpirun noticed that process rank 3 with PID 0 on node pi-worker-0 exited on signal 6 (Aborted).
--------------------------------------------------------------------------
"""
OMPI_SEGFAULT = """
[pi-worker-0:4242:0:4242] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)
==== backtrace (tid:   4242) ====
 0 0x0000000000042520 __sigaction()  ???:0
 1 0x000000000067af0e fused_adam_step()  adam.cpp:0
=================================
--------------------------------------------------------------------------
mpirun noticed that process rank 3 with PID 0 on node pi-worker-0 exited on signal 11 (Segmentation fault).
--------------------------------------------------------------------------
"""
MPICH_ABORT = """
Abort(1) on node 12 (rank 12 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) - process 12
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   RANK 12 PID 4242 RUNNING AT pi-worker-1
=   EXIT STATUS: 1
===================================================================================
"""
LAUNCHER_CUDA_OOM = """
[1,17]<stderr>:Traceback (most recent call last):
[1,17]<stderr>:  File "/app/train.py", line 88, in <module>
[1,17]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total capacity)
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[40125,1],17]
  Exit code:    1
--------------------------------------------------------------------------
"""


def _launcher_log(log: str) -> Callable[[], list[BusEvent]]:
    return lambda: [*running_run(), failed_launcher(log, observed_at=at(1))]


CASES = {
    "oom-killed": Case(
        "oom",
        "Worker 2 failed: out of memory (limit 16Gi)",
        lambda: [*running_run(), _worker_failed(2, terminated("OOMKilled", 137))],
        at(1),
    ),
    "oom-exit-137-with-oom-event": Case(
        "oom",
        "Worker 1 failed: out of memory (limit 16Gi)",
        lambda: [
            *running_run(),
            k8s_event(
                "OOMKilling",
                "Memory cgroup out of memory: Killed process 4242 (python)",
                involved="pi-worker-1",
            ),
            _worker_failed(1, terminated("Error", 137)),
        ],
        at(1),
    ),
    "oom-seen-only-as-last-state": Case(
        "oom",
        "Worker 0 failed: out of memory (limit 16Gi)",
        lambda: [
            *running_run(),
            worker(
                0,
                observed_at=at(1),
                containers=(running(restarts=1, last_reason="OOMKilled", last_exit_code=137),),
            ),
        ],
        at(1),
    ),
    "gpu-oom-in-worker-log": Case(
        "gpu-oom",
        "Worker 2 failed: CUDA out of memory",
        lambda: [
            *running_run(),
            _worker_failed(
                2,
                terminated("Error", 1),
                log_tail=("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",),
            ),
        ],
        at(1),
    ),
    "gpu-oom-in-launcher-log": Case(
        "gpu-oom", "Rank 17 on worker-2 failed: CUDA out of memory", _launcher_log(LAUNCHER_CUDA_OOM), at(1)
    ),
    "mpi-comm-ssh-refused": Case(
        "mpi-comm",
        "MPI communication failure — workers unreachable: ssh to pi-worker-1 refused; "
        "check NetworkPolicies / sidecar injection",
        _launcher_log(OMPI_SSH_REFUSED),
        at(1),
    ),
    "mpi-comm-prrte-daemon-lost": Case(
        "mpi-comm",
        "MPI communication failure — workers unreachable: lost the MPI daemon on pi-worker-2; "
        "check NetworkPolicies / sidecar injection",
        _launcher_log(PRRTE_DAEMON_LOST),
        at(1),
    ),
    "mpi-comm-hydra-no-route": Case(
        "mpi-comm",
        "MPI communication failure — workers unreachable: cannot connect to pi-worker-3; "
        "check NetworkPolicies / sidecar injection",
        _launcher_log(HYDRA_NO_ROUTE),
        at(1),
    ),
    "mpi-comm-ssh-key-rejected": Case(
        "mpi-comm",
        "MPI communication failure — workers unreachable: ssh to pi-worker-0 rejected the key; "
        "check the SSH key Secret mounted in launcher and workers",
        _launcher_log(SSH_PUBLICKEY),
        at(1),
    ),
    "mpi-comm-host-unresolved": Case(
        "mpi-comm",
        "MPI communication failure — workers unreachable: cannot resolve pi-worker-3; "
        "check that the worker pods are running and the job's headless Service exists",
        _launcher_log(SSH_UNRESOLVED),
        at(1),
    ),
    "mpi-abort-openmpi": Case(
        "mpi-abort", "Rank 13 on worker-1 aborted (exit 1)", _launcher_log(OMPI_ABORT), at(1)
    ),
    "mpi-abort-host-from-slots": Case(
        "mpi-abort", "Rank 5 on worker-0 aborted (exit 3)", _launcher_log(OMPI_ABORT_NO_HOST), at(1)
    ),
    "mpi-abort-signal": Case(
        "mpi-abort",
        "Rank 3 on worker-0 was killed by signal 6 (Aborted)",
        _launcher_log(OMPI_SIGNAL),
        at(1),
    ),
    "segfault-through-mpirun": Case(
        "segfault",
        "Rank 3 on worker-0 crashed with a segmentation fault (SIGSEGV) in fused_adam_step()",
        _launcher_log(OMPI_SEGFAULT),
        at(1),
    ),
    "mpi-abort-mpich": Case(
        "mpi-abort", "Rank 12 on worker-1 aborted (exit 1)", _launcher_log(MPICH_ABORT), at(1)
    ),
    "image-pull-auth": Case(
        "image-pull",
        f"Failed to pull image '{IMAGE}': authentication required",
        _pull_failure(
            "rpc error: code = Unknown desc = failed to pull and unpack image: failed to resolve reference: "
            "unexpected status from HEAD request: 401 Unauthorized"
        ),
        at(2),
    ),
    "image-pull-not-found": Case(
        "image-pull",
        f"Failed to pull image '{IMAGE}': not found",
        _pull_failure(
            f'rpc error: code = NotFound desc = failed to resolve reference "{IMAGE}": {IMAGE}: not found'
        ),
        at(2),
    ),
    "image-pull-timeout": Case(
        "image-pull",
        f"Failed to pull image '{IMAGE}': timeout",
        _pull_failure('Get "https://registry.example.com/v2/": dial tcp 10.0.0.5:443: i/o timeout'),
        at(2),
    ),
    "unschedulable-gpus-some-placed": Case(
        "unschedulable",
        "Insufficient GPUs: requested 32, available 24",
        lambda: [
            job("Pending"),
            *(worker(i) for i in range(3)),
            pending_worker(3, GPU_SHORTAGE),
        ],
        at(1),  # no cluster autoscaler claimed the pod within its grace period
    ),
    "unschedulable-gpus-none-placed": Case(
        "unschedulable",
        "Insufficient GPUs: requested 32, no node has 8 free for one worker",
        lambda: [job("Pending"), *(pending_worker(i, GPU_SHORTAGE) for i in range(4))],
        at(1),
    ),
    "unschedulable-from-event-only": Case(
        "unschedulable",
        "Insufficient GPUs: requested 32, available 24",
        lambda: [
            job("Pending"),
            *(worker(i) for i in range(3)),
            worker(3, phase="Pending", ready=False, node=None, containers=(), conditions=()),
            k8s_event("FailedScheduling", GPU_SHORTAGE, involved="pi-worker-3"),
        ],
        at(1),
    ),
    "unschedulable-memory": Case(
        "unschedulable",
        "Worker 3 cannot be scheduled: 6 Insufficient memory",
        lambda: [
            job("Pending"),
            *(worker(i) for i in range(3)),
            pending_worker(3, "0/6 nodes are available: 6 Insufficient memory. preemption: not helpful."),
        ],
        at(1),
    ),
    "unschedulable-autoscaler-cannot-help": Case(
        "unschedulable",
        "Insufficient GPUs: requested 32, available 24",
        lambda: [
            job("Pending"),
            *(worker(i) for i in range(3)),
            pending_worker(3, GPU_SHORTAGE),
            k8s_event(
                "NotTriggerScaleUp",
                "pod didn't trigger scale-up: 1 max node group size reached",
                involved="pi-worker-3",
                event_type="Normal",
                observed_at=at(0, 11),
            ),
        ],
        at(0, 11),  # the autoscaler's "no" is a verdict at once, before the grace period ends
    ),
    "crashloop": Case(
        "crashloop",
        "Worker 1 is crash-looping: restarted 5 times, last exit code 1",
        lambda: [
            *running_run(),
            worker(
                1,
                ready=False,
                observed_at=at(3),
                containers=(waiting("CrashLoopBackOff", restarts=5, last_reason="Error", last_exit_code=1),),
            ),
        ],
        at(3),
    ),
    "evicted": Case(
        "evicted",
        "Worker 2 was evicted: the node was low on resource: memory",
        lambda: [
            *running_run(),
            _worker_failed(
                2,
                terminated("ContainerStatusUnknown", 137),
                reason="Evicted",
                message="The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
                "Container worker was using 15Gi, request is 16Gi, has larger consumption of memory.",
            ),
        ],
        at(1),
    ),
    "node-lost-not-ready": Case(
        "node-lost",
        "Worker 3 lost its node gpu-node-3: node not ready",
        lambda: [
            *running_run(),
            k8s_event("NodeNotReady", "Node is not ready", involved="pi-worker-3", observed_at=at(1)),
            worker(3, ready=False, observed_at=at(1)),
        ],
        at(1),
    ),
    "node-lost-reason": Case(
        "node-lost",
        "Worker 3 lost its node gpu-node-3: node is unresponsive",
        lambda: [
            *running_run(),
            worker(
                3,
                phase="Unknown",
                ready=False,
                reason="NodeLost",
                observed_at=at(1),
                message="Node gpu-node-3 which was running pod pi-worker-3 is unresponsive",
            ),
        ],
        at(1),
    ),
    "failure-propagation": Case(
        "failure-propagation",
        "Worker 2 failed 30s ago but the job is still Running",
        lambda: [*running_run(), _worker_failed(2, terminated("Error", 1))],
        at(1, 30),
    ),
    "hang-pending-waiting-for-gpus": Case(
        "hang-pending",
        "Pending 20m: waiting for 8 GPUs",
        lambda: [
            job("Pending"),
            *(worker(i) for i in range(3)),
            worker(3, phase="Pending", ready=False, node=None, containers=(), conditions=()),
        ],
        at(20),
    ),
    "hang-pending-autoscaler-backoff": Case(
        "hang-pending",
        "Pending 20m: waiting for 8 GPUs; the cluster autoscaler's scale-up failed and is in back-off",
        lambda: [
            job("Pending"),
            *(worker(i) for i in range(3)),
            pending_worker(
                3, "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
            ),
            k8s_event(
                "NotTriggerScaleUp",
                "pod didn't trigger scale-up: 1 in backoff after failed scale-up",
                involved="pi-worker-3",
                event_type="Normal",
                observed_at=at(14),
            ),
        ],
        at(20),
    ),
    "hang-pending-no-pods": Case(
        "hang-pending", "Pending 20m: no pods created yet", lambda: [job("Pending")], at(20)
    ),
    "hang-pending-kueue": Case(
        "hang-pending",
        "Suspended 20m: waiting for Kueue admission (queue 'team-a-gpu', 32 GPUs)",
        lambda: [job("Suspended", labels={"kueue.x-k8s.io/queue-name": "team-a-gpu"})],
        at(20),
    ),
    "hang-init": Case(
        "hang-init",
        "MPI mesh not formed after 5m: 3 of 4 workers ready",
        lambda: [
            job("Running"),
            launcher(),
            *(worker(i) for i in range(3)),
            worker(3, ready=False, containers=(running(ready=False),)),
        ],
        at(5),
    ),
    "hang-progress": Case(
        "hang-progress",
        "No progress for 30m: no pod changes and no new log output",
        lambda: [
            *running_run(),
            launcher(log_tail=("step 100 loss 2.31",), observed_at=at(1)),
            launcher(log_tail=("step 100 loss 2.31", "step 200 loss 2.02"), observed_at=at(5)),
        ],
        at(35),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_rule_fires_alone_with_its_sentence(case: Case) -> None:
    engine = RuleEngine()
    replay(engine, case.events(), case.now)

    firing = engine.firing()

    assert [(f.rule, f.root_cause) for f in firing] == [(case.rule, case.sentence)]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_finding_carries_evidence_remediation_and_doc_anchor(case: Case) -> None:
    engine = RuleEngine()
    replay(engine, case.events(), case.now)

    (finding,) = engine.firing()

    assert finding.evidence, "a finding must show what triggered it"
    assert finding.remediation
    assert not [step for step in finding.remediation if "{namespace}" in step or "{job}" in step]
    assert finding.doc_anchor == f"docs/troubleshooting.md#{case.rule}"
    assert finding.job.name == "pi" and finding.status == "firing"
