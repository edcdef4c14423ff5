"""The Xid catalogue and the GPU health rules on DCGM's curves: what each Xid a training job
meets means and what to do, Xid lines read from kernel-log text, gpu-fault naming the worker,
node and GPU of a fault during the run (never for a program's own Xid),
gpu-throttled for a throttle that lasts and not for one of seconds, nor for old values."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from consumers.rules import RuleThresholds
from consumers.rules.signatures import gpu_error_words, gpu_errors
from controller.contract.events import BusEvent, GpuHealth, GpuUsage, Sample
from controller.contract.xids import XIDS, parse_xid_lines, pci_slot, xid
from controller.testing.events import at, job, k8s_event, pod_usage, running_run, terminated, usage, worker
from tests.rules.judging import firing

TRAINING_XIDS = (13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 121)


def _curve(values: list[float], end: datetime, step_s: float = 60.0) -> tuple[Sample, ...]:
    return tuple((end - timedelta(seconds=step_s * (len(values) - 1 - i)), v) for i, v in enumerate(values))


def _reading(worker: int, health: GpuHealth) -> BusEvent:
    """A reading of the default run at 20 minutes: every worker busy, ``worker``'s GPU 0 with
    ``health``."""
    end = at(20)
    pods = []
    for index in range(4):
        plain = pod_usage(index, util=[90.0] * 10, memory_gib=[8.0] * 10, end=end)
        if index == worker:
            plain = plain.model_copy(update={"gpus": (GpuUsage(gpu="0", uuid="GPU-abc", health=health),)})
        pods.append(plain)
    return usage(*pods, observed_at=end)


@pytest.mark.parametrize("code", TRAINING_XIDS)
def test_every_xid_a_training_job_meets_is_catalogued_with_what_to_do(code: int) -> None:
    entry = XIDS[code]
    assert entry.meaning and entry.advice
    assert entry.hardware == (code not in {13, 31, 43, 45, 68, 69})


def test_an_unknown_xid_is_judged_as_hardware() -> None:
    assert xid(9999).hardware and xid(9999).action == "contact-support"


def test_xid_lines_are_read_from_kernel_log_text() -> None:
    text = (
        "[ 269.51] NVRM: GPU at PCI:0000:3b:00: GPU-0b11d014\n"
        "[ 269.52] NVRM: Xid (PCI:0000:3b:00): 79, pid=1896, GPU has fallen off the bus.\n"
        "[ 270.00] NVRM: Xid (PCI:0000:5e:00): 45, pid=2001, Ch 00000010, caused by previous Xid 94\n"
        "kernel: eth0: link up\n"
    )
    first, second = parse_xid_lines(text)
    assert (first.pci, first.code, first.pid, first.cause.code) == ("0000:3b:00", 79, 1896, 79)
    assert first.cause.action == "reboot-node"
    assert (second.code, second.previous, second.cause.code) == (45, 94, 94)
    assert len(parse_xid_lines(text * 100, most=5)) == 5


def test_gpu_error_words_come_from_the_catalogue() -> None:
    (hit,) = gpu_errors(("NVRM: Xid (PCI:0000:3b:00): 95, pid=1, uncontained ECC",))
    words, hardware = gpu_error_words(hit)
    assert words == f"Xid 95: {XIDS[95].meaning}" and hardware


def test_an_xid_during_the_run_names_worker_node_and_gpu() -> None:
    health = GpuHealth(hostname="gpu-node-2", xid=_curve([0, 0, 0, 79, 79], at(20)))
    found = firing([*running_run(), _reading(2, health)], at(20))

    fault = found["gpu-fault"]
    assert fault.severity == "critical"
    assert fault.root_cause.startswith("Worker 2's GPU 0 (GPU-abc) on node gpu-node-2 reported Xid 79: ")
    assert "the job has not failed" in fault.root_cause
    values = {e.field: e.value for e in fault.evidence}
    assert values["spec.nodeName"] == "gpu-node-2"
    assert values["gpus[0].DCGM_FI_DEV_XID_ERRORS"].endswith(f": 79 at {at(19):%H:%M:%S} UTC")


@pytest.mark.parametrize(
    "health",
    [
        GpuHealth(xid=_curve([79, 79, 79, 79], at(20))),  # an Xid from before the job
        GpuHealth(ecc_dbe=_curve([4, 4, 4, 4], at(20)), remapped_rows=_curve([2, 2, 2, 2], at(20))),
        GpuHealth(remap_failure=_curve([1, 1, 1], at(20)), nvlink_errors=_curve([80, 80, 80], at(20))),
        GpuHealth(nvlink_errors=_curve([5], at(20))),  # one point: no rise to judge
        GpuHealth(temperature_c=_curve([88, 90, 91, 90], at(20))),  # hot, not throttled
    ],
    ids=["old-xid", "old-counters", "old-remap-failure-and-nvlink", "one-point", "hot"],
)
def test_old_values_and_harmless_series_stay_quiet(health: GpuHealth) -> None:
    found = firing([*running_run(), _reading(2, health)], at(20))
    assert "gpu-fault" not in found and "gpu-throttled" not in found


@pytest.mark.parametrize(
    ("reasons", "fires"),
    [
        ([0, 0, 0, 0, 0, 0x40, 0x40, 0x40, 0x40, 0x40], True),  # 4 minutes of thermal slowdown
        ([0x40, 0x40, 0x40, 0x40, 0x40, 0, 0, 0, 0, 0x40], False),  # ended; seconds at the end
        ([0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x40], False),  # 1 minute: under gpu_throttle_s
        ([0x4] * 10, False),  # software power cap: not a fault
        ([0x1] * 10, False),  # idle
    ],
    ids=["lasting", "over", "short", "power-cap", "idle"],
)
def test_a_throttle_fires_only_when_it_lasts(reasons: list[float], fires: bool) -> None:
    health = GpuHealth(
        throttle_reasons=_curve(reasons, at(20)), temperature_c=_curve([80.0] * len(reasons), at(20))
    )
    found = firing([*running_run(), _reading(3, health)], at(20), RuleThresholds(gpu_throttle_s=120))
    assert ("gpu-throttled" in found) == fires
    if fires:
        assert found["gpu-throttled"].root_cause.startswith(
            "Worker 3's GPU 0 (GPU-abc) on node gpu-node-3 has been throttled (hardware thermal slowdown) for 4m"
        )


@pytest.mark.parametrize(
    ("pci", "minutes", "fires"),
    [
        ("0000:3b:00", 15, True),  # the worker's GPU, during the run
        ("0000:5e:00", 15, False),  # another GPU of the node, which no worker of the run holds
        ("0000:3b:00", -5, False),  # before the pod was created
    ],
    ids=["its-gpu", "another-gpu", "before-the-pod"],
)
def test_an_xid_in_a_node_event_counts_on_a_gpu_the_pod_holds(pci: str, minutes: int, fires: bool) -> None:
    health = GpuHealth(pci_bus_id="00000000:3B:00.0", xid=_curve([0, 0, 0], at(20)))
    event = k8s_event(
        "GPUXidError",
        f"NVRM: Xid (PCI:{pci}): 48, pid=2201, An uncorrectable double bit error (DBE) has been detected",
        kind="Node",
        involved="gpu-node-2",
        observed_at=at(minutes),
    )
    found = firing([*running_run(), event, _reading(2, health)], at(20))
    assert ("gpu-fault" in found) == fires
    if fires:
        fault = found["gpu-fault"]
        assert fault.root_cause.startswith(
            "Worker 2's GPU 0 (GPU-abc) on node gpu-node-2 reported Xid 48: double-bit"
        )
        assert any("Xid (PCI:0000:3b:00): 48" in e.value for e in fault.evidence)


def test_pci_addresses_match_however_they_are_written() -> None:
    assert pci_slot("0000:3b:00") == pci_slot("00000000:3B:00.0") == ("3b", "00")
    assert pci_slot("0000:5e:00") != pci_slot("00000000:3B:00.0")
    assert pci_slot("garbage") is None


def test_a_programs_own_xid_is_no_gpu_fault_and_its_cuda_error_is_the_verdict() -> None:
    health = GpuHealth(xid=_curve([0, 0, 31, 31], at(20)))
    assert "gpu-fault" not in firing([*running_run(), _reading(1, health)], at(20))
    run = running_run()
    crashed = worker(
        1,
        phase="Failed",
        ready=False,
        containers=(terminated("Error", 1),),
        log_tail=("RuntimeError: CUDA error: an illegal memory access was encountered",),
        observed_at=at(21),
    )
    found = firing([*run, _reading(1, health), crashed, job("Failed", observed_at=at(22))], at(22))
    assert "gpu-fault" not in found
    assert found["gpu-error"].severity == "critical"


def test_a_hardware_xid_after_a_programs_own_is_still_found() -> None:
    health = GpuHealth(xid=_curve([0, 13, 13, 79, 79], at(20)))
    fault = firing([*running_run(), _reading(0, health)], at(20))["gpu-fault"]
    assert "reported Xid 79: the GPU has fallen off the bus" in fault.root_cause
    assert "Xid 13" not in fault.root_cause
