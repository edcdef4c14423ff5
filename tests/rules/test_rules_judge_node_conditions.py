"""Node conditions judged: node-degraded names the worker, the node and the condition and when
it came against the job's failure; a GPU condition of the node is gpu-fault's and is the root
cause of the pod's CUDA error; quiet for a node no worker uses, for a condition already bad
before the pod, and for one that flips for seconds — unless the job failed while it held."""

from __future__ import annotations

from datetime import datetime

from consumers.rules import RuleEngine, RuleThresholds
from controller.contract.events import BusEvent, K8sEventObserved
from controller.contract.findings import Finding
from controller.testing.events import REF, at, job, running_run, terminated, worker
from watchers.nodes import ConditionSeen, condition_event

CUDA = "RuntimeError: CUDA error: unspecified launch failure"


def cond(
    kind: str, status: str, since: datetime, *, node: str = "gpu-node-1", reason: str = "", message: str = ""
) -> K8sEventObserved:
    """The watcher's event for a change of ``node``'s condition (:mod:`watchers.nodes`)."""
    seen = ConditionSeen(
        node, f"uid-{node}", str(int(since.timestamp())), kind, status, reason, message, since
    )
    return condition_event(seen, REF, since)


def _judge(events: list[BusEvent], now: datetime, **thresholds: float) -> dict[str, Finding]:
    rules = RuleEngine(RuleThresholds(**thresholds))
    found: dict[str, Finding] = {}
    for event in events:
        for finding in rules.observe(event, event.observed_at):
            found[finding.rule] = finding
    for finding in rules.tick(now):
        found[finding.rule] = finding
    return {rule: f for rule, f in found.items() if f.status == "firing"}


def _failed_with_cuda_error(when: datetime) -> list[BusEvent]:
    ended = terminated("Error", 1).model_copy(update={"finished_at": when})
    return [
        worker(1, phase="Failed", containers=(ended,), log_tail=(CUDA,), observed_at=when),
        job("Failed", observed_at=when),
    ]


def test_a_kernel_deadlock_during_the_run_names_worker_node_and_condition() -> None:
    deadlock = cond("KernelDeadlock", "True", at(5), reason="KernelHasDeadlock", message="task blocked")
    found = _judge([*running_run(), deadlock], at(10))

    finding = found["node-degraded"]
    assert finding.severity == "critical"
    assert finding.root_cause.startswith(
        "Worker 1's node gpu-node-1 reported KernelDeadlock=True (KernelHasDeadlock) at 10:05:00 UTC for 5m"
    )
    assert "the job has not failed" in finding.root_cause
    assert {e.field for e in finding.evidence} >= {"spec.nodeName", "event[KernelDeadlock]"}


def test_a_degraded_node_before_the_failure_is_the_cause_and_says_so() -> None:
    readonly = cond("ReadonlyFilesystem", "True", at(5), reason="FilesystemIsReadOnly")
    found = _judge([*running_run(), readonly, *_failed_with_cuda_error(at(7))], at(8))

    assert "2m before the job failed at 10:07:00 UTC" in found["node-degraded"].root_cause


def test_a_gpu_condition_of_the_node_is_the_root_cause_of_the_pods_cuda_error() -> None:
    fallen = cond("SysLogsGPUFallenOff", "True", at(5), reason="GPUFallenOffBus", message="GPU 0000:3b:00.0")
    found = _judge([*running_run(), fallen, *_failed_with_cuda_error(at(5, 30))], at(8))

    fault = found["gpu-fault"]
    assert fault.root_cause.startswith("Worker 1's GPUs on node gpu-node-1 reported SysLogsGPUFallenOff=True")
    assert "30s before the job failed" in fault.root_cause and CUDA in fault.root_cause
    assert "gpu-error" not in found and "node-degraded" not in found and "failed" not in found
    assert any(e.value == CUDA for e in fault.evidence)


def test_a_condition_on_a_node_no_worker_uses_says_nothing() -> None:
    elsewhere = cond("KernelDeadlock", "True", at(5), node="gpu-node-9", reason="KernelHasDeadlock")
    found = _judge([*running_run(), elsewhere], at(10))
    assert "node-degraded" not in found and "gpu-fault" not in found


def test_a_condition_already_bad_before_the_pod_says_nothing() -> None:
    standing = cond("DiskPressure", "True", at(-60), reason="KubeletHasDiskPressure")
    found = _judge([*running_run(), standing], at(10))
    assert "node-degraded" not in found


def test_a_condition_that_flips_for_seconds_says_nothing() -> None:
    flip = [
        cond("MemoryPressure", "True", at(5), reason="KubeletHasInsufficientMemory"),
        cond("MemoryPressure", "False", at(5, 8), reason="KubeletHasSufficientMemory"),
    ]
    found = _judge([*running_run(), *flip], at(10))
    assert "node-degraded" not in found
    # still bad, but for less than node_condition_s: not yet
    assert "node-degraded" not in _judge([*running_run(), flip[0]], at(5, 30))


def test_a_short_spell_while_the_job_failed_is_told() -> None:
    flip = [
        cond("KernelDeadlock", "True", at(5), reason="KernelHasDeadlock"),
        cond("KernelDeadlock", "False", at(5, 20), reason="KernelHasNoDeadlock"),
    ]
    found = _judge([*running_run(), *flip, *_failed_with_cuda_error(at(5, 10))], at(10))
    assert "10s before the job failed" in found["node-degraded"].root_cause
