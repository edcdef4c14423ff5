"""One cause, one finding: the symptoms a failure leaves elsewhere are its evidence, not alarms.

A rank OOM-killed makes mpirun report "exited on signal 9"; a rank that runs out of GPU
memory leaves its peers timing out in NCCL collectives; a kernel OOM kill is reported by the
node, not the pod; a segfault and a GPU error reach the launcher through mpirun's abort
summary or NCCL's watchdog. Each is reported once, as its cause — and where the peer's own
cause is unknown, the survivors' timeout points at it.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from consumers.rules import RuleEngine
from controller.contract.events import (
    BusEvent,
    ContainerState,
    JobRef,
    JobSpecSummary,
    Resources,
    RoleSpec,
    message_id,
)
from controller.testing import objects as k
from controller.testing.events import (
    at,
    failed_launcher,
    job,
    k8s_event,
    replay,
    running,
    running_run,
    terminated,
    worker,
)
from watchers.correlating import Correlator, Observation

TRAINJOB = JobRef(uid="uid-trainjob-pi", kind="TrainJob", namespace="team-a", name="pi")
LIMITS = {"memory": "64Gi", "nvidia.com/gpu": "8"}
TORCH = JobSpecSummary(
    workers=2,
    slots_per_worker=8,
    runtime="torch-distributed",
    worker=RoleSpec(replicas=2, resources=Resources(limits=LIMITS, requests=LIMITS)),
)
NCCL_TIMEOUT = (
    "[rank3]:[E1026 04:01:29.510593654 ProcessGroupNCCL.cpp:683] [Rank 3] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=55485, OpType=_REDUCE_SCATTER_BASE, NumelIn=2560, NumelOut=160, "
    "Timeout(ms)=600000) ran for 600087 milliseconds before timing out."
)
_LATER = itertools.count(10**9)


def _torch_run() -> list[BusEvent]:
    return [
        job("Running", job=TRAINJOB, job_spec=TORCH),
        *(worker(i, job=TRAINJOB, limits=LIMITS) for i in range(2)),
    ]


def _node_ended(index: int, code: int, log: str, minute: float, *, finished: float | None = None) -> BusEvent:
    ended = ContainerState(
        name="node", state="terminated", reason="Error", exit_code=code, finished_at=at(finished or minute)
    )
    return worker(
        index,
        job=TRAINJOB,
        phase="Failed",
        ready=False,
        containers=(ended,),
        log_tail=tuple(log.splitlines()),
        observed_at=at(minute),
        limits=LIMITS,
        resource_version=str(next(_LATER)),
    )


def _rules(engine: RuleEngine) -> list[str]:
    return sorted(f.rule for f in engine.firing())


def _timed_out_after(peer_log: str) -> RuleEngine:
    """An engine that saw worker 1 fail with ``peer_log``, then worker 0 time out in NCCL and the job fail."""
    engine = RuleEngine()
    replay(
        engine,
        [
            *_torch_run(),
            _node_ended(1, 1, peer_log, 1),
            _node_ended(0, 1, NCCL_TIMEOUT, 11),
            job("Failed", job=TRAINJOB, job_spec=TORCH, observed_at=at(11, 5)),
        ],
    )
    return engine


def test_an_nccl_timeout_after_a_peer_ran_out_of_gpu_memory_is_the_gpu_oom() -> None:
    engine = _timed_out_after(
        "[rank11]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.35 GiB."
    )

    assert [(f.rule, f.root_cause) for f in engine.firing()] == [
        ("gpu-oom", "Worker 1 (rank 11) failed: CUDA out of memory")
    ]


def test_an_nccl_timeout_points_at_the_peer_that_failed_first() -> None:
    engine = _timed_out_after(
        'Traceback (most recent call last):\n  File "train.py", line 9\nValueError: shard 7 is empty'
    )

    (finding,) = engine.firing()
    assert (finding.rule, finding.root_cause) == (
        "mpi-comm",
        "Worker 0 (rank 3): communication failure (NCCL) — collective REDUCE_SCATTER_BASE timed out after 10m: "
        "a peer rank stopped taking part; worker 1 had already exited with code 1 — look there first",
    )
    assert [e.value for e in finding.evidence if e.source == "pod/pi-worker-1"] == [
        "1",
        "ValueError: shard 7 is empty",
    ]


def test_an_nccl_shared_memory_failure_says_how_to_enlarge_dev_shm() -> None:
    engine = RuleEngine()
    shm = (
        "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-2 (size 9637888)"
    )

    replay(
        engine,
        [
            *_torch_run(),
            _node_ended(0, 1, shm, 1),
            job("Failed", job=TRAINJOB, job_spec=TORCH, observed_at=at(2)),
        ],
    )

    (finding,) = engine.firing()
    assert finding.rule == "mpi-comm"
    assert finding.root_cause.endswith(
        "/dev/shm is too small for NCCL's shared-memory transport; mount an emptyDir with medium: Memory at "
        "/dev/shm to enlarge it"
    )
    assert "emptyDir: {medium: Memory, sizeLimit: 16Gi}" in finding.remediation[0]


def test_the_rank_mpirun_saw_killed_on_an_oom_killed_worker_is_evidence_of_the_oom() -> None:
    engine = RuleEngine()
    killed = "mpirun noticed that process rank 17 with PID 0 on node pi-worker-2 exited on signal 9 (Killed)."
    run = running_run()
    launcher_failed = failed_launcher(killed, observed_at=at(1), exit_code=137)
    oom = worker(
        2, phase="Failed", ready=False, containers=(terminated("OOMKilled", 137),), observed_at=at(1, 2)
    )

    changes = replay(engine, [*run, launcher_failed, oom])

    assert [(f.rule, f.status) for f in changes] == [
        ("mpi-abort", "firing"),
        ("oom", "firing"),
        ("mpi-abort", "resolved"),
    ]
    (finding,) = engine.firing()
    assert (finding.rule, finding.root_cause) == ("oom", "Worker 2 failed: out of memory (limit 16Gi)")
    assert ("pod/pi-launcher", "log", killed) in [(e.source, e.field, e.value) for e in finding.evidence]


def test_a_segfault_seen_after_the_abort_supersedes_it() -> None:
    engine = RuleEngine()
    summary = (
        "mpirun noticed that process rank 9 with PID 0 on node pi-worker-1 exited on signal 6 (Aborted)."
    )
    (abort,) = replay(engine, [*running_run(), failed_launcher(summary, observed_at=at(1))])
    assert abort.rule == "mpi-abort"

    crashed = worker(
        1,
        phase="Failed",
        ready=False,
        containers=(terminated("Error", 139),),
        observed_at=at(1, 5),
        resource_version=str(next(_LATER)),
    )
    changes = engine.observe(crashed, at(1, 5))

    assert [(f.rule, f.status, f.superseded_by) for f in changes] == [
        ("segfault", "firing", None),
        ("mpi-abort", "resolved", "segfault"),
    ]
    assert changes[0].root_cause == "Worker 1 crashed with a segmentation fault (SIGSEGV, exit code 139)"


def test_a_gpu_error_the_watchdog_reraised_is_the_gpu_error() -> None:
    engine = RuleEngine()
    log = (
        "[rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 2 Rank 3] Process group watchdog thread terminated with "
        "exception: CUDA error: an illegal memory access was encountered"
    )

    replay(
        engine,
        [
            *_torch_run(),
            _node_ended(0, 134, log, 1),
            job("Failed", job=TRAINJOB, job_spec=TORCH, observed_at=at(2)),
        ],
    )

    assert _rules(engine) == ["gpu-error"]


# ------------------------------------------------------------------- the node's OOM killer

SYSTEM_OOM = "System OOM encountered, victim process: python, pid: 1234"


def _node_oom(
    message: str = SYSTEM_OOM, *, node: str = "gpu-node-0", minute: float = 1, reason: str = "SystemOOM"
) -> BusEvent:
    return k8s_event(reason, message, kind="Node", involved=node, job=TRAINJOB, observed_at=at(minute))


def test_the_nodes_oom_kill_is_the_oom_of_the_pod_that_failed_there() -> None:
    engine = RuleEngine()
    run = _torch_run()

    replay(
        engine,
        [
            *run,
            _node_oom(),
            _node_ended(0, 1, "", 1),
            job("Failed", job=TRAINJOB, job_spec=TORCH, observed_at=at(2)),
        ],
    )

    (finding,) = engine.firing()
    assert (finding.rule, finding.root_cause) == (
        "oom",
        "Worker 0 failed: out of memory — node gpu-node-0 ran out of memory (the kernel killed python)",
    )
    assert ("node/gpu-node-0", "event[SystemOOM]", SYSTEM_OOM) in [
        (e.source, e.field, e.value) for e in finding.evidence
    ]


def test_a_cgroup_oom_reported_by_the_node_confirms_an_exit_137() -> None:
    engine = RuleEngine()
    run = _torch_run()
    kill = _node_oom("Memory cgroup out of memory: Killed process 1234 (python)", reason="OOMKilling")

    replay(
        engine,
        [
            *run,
            kill,
            _node_ended(0, 137, "", 1),
            job("Failed", job=TRAINJOB, job_spec=TORCH, observed_at=at(2)),
        ],
    )

    assert [(f.rule, f.root_cause) for f in engine.firing()] == [
        ("oom", "Worker 0 failed: out of memory (limit 64Gi)")
    ]


@pytest.mark.parametrize(
    "event",
    [lambda: _node_oom(node="gpu-node-7"), lambda: _node_oom(minute=-30)],
    ids=["another-node", "half-an-hour-before"],
)
def test_a_node_oom_elsewhere_or_long_before_is_not_this_runs_oom(event: object) -> None:
    engine = RuleEngine()
    run = _torch_run()
    assert callable(event)

    replay(
        engine,
        [
            *run,
            event(),
            _node_ended(0, 1, "", 1),
            job("Failed", job=TRAINJOB, job_spec=TORCH, observed_at=at(2)),
        ],
    )

    assert _rules(engine) == ["failed"]


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-node-a1", "namespace": "", "uid": "uid-node"},
}


def _node_oom_reaches(*jobs_and_nodes: tuple[dict[str, object], str]) -> dict[str, list[BusEvent]]:
    """Through the correlator: each MPIJob with a worker on its node, then a SystemOOM on gpu-node-a1;
    the events each run received about the node."""
    correlator = Correlator(30, lambda: 0.0)
    created = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    events: list[BusEvent] = []
    for mpijob, node in jobs_and_nodes:
        events += correlator.observe(Observation("job", "ADDED", mpijob, created))
        events += correlator.observe(
            Observation("pod", "ADDED", k.pod(mpijob, "worker", 0, node=node), created)
        )
    events += correlator.observe(
        Observation("event", "ADDED", k.event(NODE, "SystemOOM", SYSTEM_OOM), created)
    )
    about: dict[str, list[BusEvent]] = {}
    for event in events:
        if event.type == "event":
            about.setdefault(event.job.uid, []).append(event)
    return about


def test_a_raw_node_oom_event_reaches_the_run_of_the_pod_on_that_node() -> None:
    mpijob = k.mpijob()
    correlator = Correlator(30, lambda: 0.0)
    engine = RuleEngine()
    created = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    oom = k.event(NODE, "SystemOOM", SYSTEM_OOM)

    events = correlator.observe(Observation("job", "ADDED", mpijob, created))
    events += correlator.observe(
        Observation("pod", "ADDED", k.pod(mpijob, "worker", 0, node="gpu-node-a1"), created)
    )
    events += correlator.observe(Observation("event", "ADDED", oom, created))
    for event in events:
        engine.observe(event, event.observed_at)

    state = engine.state(mpijob["metadata"]["uid"])
    assert state is not None and [e.reason for e in state.events.values()] == ["SystemOOM"]


def test_a_node_oom_reaches_only_runs_on_that_node_each_with_its_own_copy() -> None:
    here, also_here, elsewhere = (k.mpijob(name) for name in ("here", "also-here", "elsewhere"))
    about = _node_oom_reaches((here, "gpu-node-a1"), (also_here, "gpu-node-a1"), (elsewhere, "gpu-node-b7"))

    uid = lambda job: job["metadata"]["uid"]  # noqa: E731
    assert set(about) == {uid(here), uid(also_here)}
    (first,), (second,) = about[uid(here)], about[uid(also_here)]
    assert first.reason == second.reason == "SystemOOM"
    assert first.uid != second.uid and message_id(first) != message_id(second)


def test_a_node_oom_on_a_node_without_pods_of_ours_is_not_ours() -> None:
    assert _node_oom_reaches((k.mpijob(), "gpu-node-b7")) == {}


# ------------------------------------------------------------------- a mesh without launcher


def _one_worker_not_ready() -> list[BusEvent]:
    """A launcherless TrainJob running, worker 0 ready and worker 1 not."""
    return [
        job("Running", job=TRAINJOB, job_spec=TORCH),
        worker(0, job=TRAINJOB, limits=LIMITS),
        worker(1, job=TRAINJOB, limits=LIMITS, ready=False, containers=(running("node", ready=False),)),
    ]


def test_workers_of_a_launcherless_trainjob_that_never_all_get_ready_are_a_hang_init() -> None:
    engine = RuleEngine()
    replay(engine, _one_worker_not_ready(), at(4, 59))
    assert engine.firing() == []
    (finding,) = engine.tick(at(5))

    assert (finding.rule, finding.root_cause) == (
        "hang-init",
        "Process group not formed after 5m: 1 of 2 workers ready",
    )


def test_a_launcherless_trainjob_whose_workers_get_ready_in_time_is_no_hang() -> None:
    engine = RuleEngine()
    events = [*_one_worker_not_ready(), worker(1, job=TRAINJOB, limits=LIMITS, observed_at=at(4))]

    assert replay(engine, events, at(5), at(30)) == []
