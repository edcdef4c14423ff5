"""Rules ``gpu-fault`` and ``gpu-throttled``: what DCGM says of the GPUs a run's pods hold.

Read from the :class:`~controller.contract.events.GpuHealth` curves of each pod's latest usage
reading (only the pod's own GPUs, over its own life: DCGM's pod mapping labels a GPU with the
pod that holds it, and the reading keeps the points of the pod's life):

- ``gpu-fault``: during the pod's life the GPU reported an Xid (the last-Xid gauge changed to a
  new non-zero code), double-bit ECC errors or rows remapped for uncorrectable errors (those
  counters rose), a failed row remapping, or NVLink errors (their counters rose). Counters are
  cumulative and the last Xid stays set: a value already there at the pod's first point is
  from before the job and says nothing about it. An Xid the catalogue gives to the program
  (13, 31, 43: an illegal access on a healthy GPU) is no fault of the GPU: the program's own
  error (``gpu-error``, ``failed``) tells it. The finding names the worker, the node, the
  GPU, says what the Xid or counter means (:mod:`controller.contract.xids`) and whether it came
  before the job's failure. A CUDA or NCCL error in the same pod's log is shown as evidence:
  the hardware is the root cause (``gpu-error`` and the communication symptoms are explained
  by it, see the catalog). Xid lines in Events about the pod's node (the kernel log relayed by
  node-problem-detector or the GPU operator) count too, when their PCI address is one of the
  pod's GPUs (DCGM's ``pci_bus_id``). A GPU condition of the pod's node (a GPU health monitor's:
  :mod:`consumers.rules.nodeconditions`) that went bad during the pod's life, and held for
  ``node_condition_s`` or while the job failed, counts too, for the node's GPUs as a whole. Once
  seen it holds while the run lives, though a later reading's window no longer reaches back to it.
- ``gpu-throttled``: a GPU of a running worker has had its clocks held down by the hardware
  (slowdown, thermal, power brake) for ``gpu_throttle_s`` without a break. A throttle of a few
  seconds is normal and stays quiet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from consumers.rules.facts import pod_text
from consumers.rules.nodeconditions import failed_at, spells_of, timing
from consumers.rules.rule import Context, Detection, Rule, log_facts, pod_fact
from consumers.rules.signatures import gpu_errors, transport_failures
from consumers.rules.state import PodState, RunState
from consumers.rules.usage import curve_text
from consumers.rules.wording import also, clock_time, duration, who
from controller.contract.events import GpuHealth, GpuUsage, PodUsage, Sample
from controller.contract.findings import Evidence
from controller.contract.xids import THROTTLE_REASONS, THROTTLING, parse_xid_lines, pci_slot, xid

__all__ = [
    "GPU_FAULT",
    "GPU_THROTTLED",
    "THROTTLE_REASONS",
    "Fault",
    "faults_of",
    "reasons_text",
    "throttled_for",
    "throttled_within",
]


@dataclass(frozen=True)
class Fault:
    """One health event of one GPU during a pod's life."""

    at: datetime
    series: str
    words: str
    hardware: bool
    advice: str
    value: str


def _new_codes(curve: tuple[Sample, ...]) -> list[tuple[datetime, int, int]]:
    """Each time a gauge changed to a new non-zero value (the last Xid: a new code), with the
    value and the one before, in time order."""
    return [
        (at, int(value), int(before))
        for (_, before), (at, value) in pairwise(curve)
        if value not in (before, 0)
    ]


def _rise(curve: tuple[Sample, ...]) -> tuple[datetime, float] | None:
    """When a cumulative counter first rose within the curve, and by how much in all."""
    if len(curve) < 2 or curve[-1][1] <= curve[0][1]:
        return None
    first = next(at for (_, before), (at, value) in pairwise(curve) if value > before)
    return first, curve[-1][1] - curve[0][1]


_COUNTERS = (
    (
        "ecc_dbe",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "double-bit (uncorrectable) ECC error{s}: the GPU's memory is failing",
        48,
    ),
    (
        "remapped_rows",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "row{s} of GPU memory remapped after uncorrectable errors: reset the GPU to use its spare rows",
        63,
    ),
    (
        "nvlink_errors",
        "DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL",
        "NVLink error{s}: a link between GPUs is failing",
        74,
    ),
)


def faults_of(health: GpuHealth) -> list[Fault]:
    """The faults one GPU reported within its curves, earliest first."""
    found: list[Fault] = []
    for at, code, before in _new_codes(health.xid):
        entry = xid(code)
        was = f" (was {before})" if before else ""
        found.append(
            Fault(
                at,
                "DCGM_FI_DEV_XID_ERRORS",
                f"Xid {code}: {entry.meaning}",
                entry.hardware,
                entry.advice,
                f"{code} at {clock_time(at)}{was}",
            )
        )
    for field, series, words, like in _COUNTERS:
        curve: tuple[Sample, ...] = getattr(health, field)
        if (rise := _rise(curve)) is not None:
            at, by = rise
            count = f"{by:.0f} {words.format(s='' if by == 1 else 's')}"
            found.append(
                Fault(
                    at,
                    series,
                    count,
                    True,
                    xid(like).advice,
                    f"{curve[0][1]:.0f} at {clock_time(curve[0][0])} → "
                    f"{curve[-1][1]:.0f} at {clock_time(curve[-1][0])}",
                )
            )
    failed = next(iter(_new_codes(health.remap_failure)), None)
    if failed is not None:
        found.append(
            Fault(
                failed[0],
                "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                "row remapping failed: the GPU's memory cannot be repaired",
                True,
                xid(64).advice,
                f"1 at {clock_time(failed[0])}",
            )
        )
    return sorted(found, key=lambda f: f.at)


def _event_faults(state: RunState, pod: PodState, usage: PodUsage) -> list[tuple[GpuUsage, Fault]]:
    """Xid lines in Kubernetes Events about the pod's node (a node-problem-detector or the GPU
    operator relaying the kernel log) since the pod was created, on a GPU the pod holds: matched
    by PCI address to DCGM's ``pci_bus_id`` (a line about another GPU of the node is no fault
    of this run)."""
    held = {
        slot: gpu
        for gpu in usage.gpus or ()
        if gpu.health is not None
        and gpu.health.pci_bus_id
        and (slot := pci_slot(gpu.health.pci_bus_id)) is not None
    }
    found: list[tuple[GpuUsage, Fault]] = []
    for event in state.events_about_node(pod.node) if held else ():
        when = event.last_timestamp or event.observed_at
        if when < pod.observed.created_at:
            continue
        for line in parse_xid_lines(event.message, most=8):
            gpu = held.get(pci_slot(line.pci) or ("", ""))
            if gpu is not None:
                entry = line.cause
                words = f"Xid {entry.code}: {entry.meaning}"
                found.append(
                    (
                        gpu,
                        Fault(when, f"event.{event.reason}", words, entry.hardware, entry.advice, line.line),
                    )
                )
    return found


def _gpu_name(gpu: GpuUsage | None) -> str:
    if gpu is None:
        return "GPUs"
    return f"GPU {gpu.gpu}" + (f" ({gpu.uuid})" if gpu.uuid else "")


def _condition_faults(state: RunState, ctx: Context) -> list[tuple[PodState, GpuUsage | None, Fault]]:
    """The GPU conditions of the pods' nodes that speak of the run, as faults of the node's GPUs."""
    return [
        (
            pod,
            None,
            Fault(
                spell.start,
                f"conditions[{spell.kind}]",
                f"{spell.words} on its node" + (f" ({spell.message[:160]})" if spell.message else ""),
                True,
                xid(79 if "fallen" in spell.kind.lower() else 0).advice,
                f"{spell.status} since {clock_time(spell.start)}",
            ),
        )
        for pod, spell in spells_of(state, ctx)
        if spell.gpu
    ]


def _detect_gpu_fault(state: RunState, ctx: Context) -> Detection | None:
    found: list[tuple[PodState, GpuUsage | None, Fault]] = _condition_faults(state, ctx)
    for pod in state.current_pods():
        usage = state.usage_of(pod)
        for held in (usage.gpus or ()) if usage is not None else ():
            if held.health is not None:
                found.extend((pod, held, fault) for fault in faults_of(held.health))
        if usage is not None:
            found.extend((pod, held, fault) for held, fault in _event_faults(state, pod, usage))
    # a program's own Xid (13, 31, 43) is no fault of the GPU: its error (gpu-error, failed) tells it
    found = sorted(((p, g, f) for p, g, f in found if f.hardware), key=lambda item: item[2].at)
    if not found:
        return None
    pod, gpu, fault = found[0]
    node = pod.node or (gpu.health.hostname if gpu is not None and gpu.health is not None else None)
    where = f"node {node}" if node else "its node"
    text = pod_text(pod)
    lines = [hit.line for hit in (*gpu_errors(text), *transport_failures(text))]
    followed = f"; the error in its log ({lines[0][:120]}) follows from it" if lines else ""
    others = list(dict.fromkeys(p for p, _, _ in found[1:] if p is not pod))
    evidence: list[Evidence] = []
    if node:
        evidence.append(pod_fact(pod, "spec.nodeName", node))
    for p, g, f in found[:6]:
        place = f"gpus[{g.gpu}]" if g is not None else "node"
        evidence.append(pod_fact(p, f"{place}.{f.series}", f"{f.words}: {f.value}"))
    evidence.extend(log_facts(pod, dict.fromkeys(lines[:4])))
    steps = (
        f"{fault.advice[0].upper()}{fault.advice[1:]}.",
        f"Take the node out of service until then: kubectl cordon {node or '<node>'}; "
        "nvidia-smi -q -d ECC,ROW_REMAPPER and dcgmi diag -r 3 show the GPU's state.",
        "Resubmit the job from its last checkpoint; with the node cordoned it lands elsewhere.",
    )
    return Detection(
        root_cause=f"{who(pod)}'s {_gpu_name(gpu)} on {where} reported {fault.words} at "
        f"{clock_time(fault.at)}, {timing(state, fault.at)}{followed}{also(others)}",
        evidence=tuple(evidence),
        key=(
            pod.uid,
            (gpu.uuid or gpu.gpu) if gpu is not None else "node",
            fault.series,
            fault.words,
            str(failed_at(state)),
            *lines[:1],
        ),
        remediation=steps,
    )


def throttled_for(curve: tuple[Sample, ...]) -> tuple[float, datetime, int] | None:
    """How long the hardware has held the clocks down without a break at the curve's end, since
    when, and the reasons' bits in that spell."""
    if not curve or not int(curve[-1][1]) & THROTTLING:
        return None
    first = len(curve) - 1
    while first > 0 and int(curve[first - 1][1]) & THROTTLING:
        first -= 1
    reasons = 0
    for _, value in curve[first:]:
        reasons |= int(value) & THROTTLING
    return (curve[-1][0] - curve[first][0]).total_seconds(), curve[first][0], reasons


def throttled_within(curve: tuple[Sample, ...], since: datetime) -> tuple[float, int]:
    """The share of the curve's time from ``since`` to its end during which the hardware held
    the clocks down (each point holds until the next), and the reasons' bits seen then."""
    if not curve or curve[-1][0] <= since:
        return 0.0, 0
    held = 0.0
    reasons = 0
    for (at, value), (after, _) in pairwise(curve):
        start = max(at, since)
        if after > start and int(value) & THROTTLING:
            held += (after - start).total_seconds()
            reasons |= int(value) & THROTTLING
    return held / (curve[-1][0] - since).total_seconds(), reasons


def reasons_text(reasons: int) -> str:
    """The hardware throttle reasons of a bitmask, in words."""
    return ", ".join(words for bit, words in THROTTLE_REASONS.items() if reasons & bit)


def _detect_gpu_throttled(state: RunState, ctx: Context) -> Detection | None:
    if state.finished or state.phase != "Running":
        return None
    found: list[tuple[PodState, GpuUsage, GpuHealth, tuple[float, datetime, int]]] = []
    for pod in state.workers():
        usage = state.usage_of(pod)
        if pod.deleted or pod.phase != "Running" or usage is None or usage.final:
            continue
        for gpu in usage.gpus or ():
            health = gpu.health
            spell = throttled_for(health.throttle_reasons) if health is not None else None
            if health is not None and spell is not None and spell[0] >= ctx.thresholds.gpu_throttle_s:
                found.append((pod, gpu, health, spell))
    if not found:
        return None
    pod, gpu, health, (seconds, since, reasons) = found[0]
    why = reasons_text(reasons)
    hottest = max((v for _, v in health.temperature_c), default=None)
    heat = f"; up to {hottest:.0f} °C" if hottest is not None else ""
    where = f"node {pod.node}" if pod.node else "its node"
    evidence = [
        pod_fact(
            pod, f"gpus[{gpu.gpu}].DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", f"{why} since {clock_time(since)}"
        )
    ]
    if health.temperature_c:
        evidence.append(
            pod_fact(
                pod, f"gpus[{gpu.gpu}].DCGM_FI_DEV_GPU_TEMP", curve_text(health.temperature_c, "°C", digits=0)
            )
        )
    return Detection(
        root_cause=f"{who(pod)}'s {_gpu_name(gpu)} on {where} has been throttled ({why}) for "
        f"{duration(seconds)}{heat}: it runs slower than its peers and every collective waits for it"
        f"{also(list(dict.fromkeys(p for p, _, _, _ in found[1:] if p is not pod)))}",
        evidence=tuple(evidence),
        key=tuple(dict.fromkeys(f"{p.uid}/{g.gpu}" for p, g, _, _ in found)),
    )


GPU_FAULT = Rule(
    id="gpu-fault",
    kind="cause",
    severity="critical",
    summary="A GPU a pod of the run holds reported a fault to DCGM during the run: an Xid, "
    "uncorrectable ECC errors, remapped rows, a failed row remapping, NVLink errors.",
    remediation=(
        "Drain the node (kubectl cordon <node>) and have the GPU reset or the node repaired, as the "
        "finding says; re-run the job elsewhere from its last checkpoint.",
    ),
    detect=_detect_gpu_fault,
    settle_s=lambda _: math.inf,  # a fault stays a fact of the run after it leaves the window read
)

GPU_THROTTLED = Rule(
    id="gpu-throttled",
    kind="stall",
    severity="warning",
    summary="A running worker's GPU has had its clocks held down by the hardware (thermal, power "
    "brake, slowdown) for minutes: the whole run goes at its pace.",
    remediation=(
        "Check the node's cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE); a GPU that "
        "throttles alone among its peers is failing or badly cooled: report it.",
        "Move the job off the node (kubectl cordon <node>, resubmit from the last checkpoint) if "
        "the throttle does not clear.",
    ),
    detect=_detect_gpu_throttled,
)
