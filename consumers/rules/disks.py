"""Rule ``disk-full``: a write failed because a filesystem was full.

Read from the failed container's log tail: ``No space left on device`` (``OSError: [Errno
28]``, Rust's ``StorageFull``, ``ENOSPC``), ``Disk quota exceeded``, PyTorch's
``PytorchStreamWriter failed writing file`` — most often while saving a checkpoint, which
the sentence says when the traceback shows it. PyTorch DataLoader workers hand batches over
through ``/dev/shm``; when it fills up (``unable to write to file </torch_…>``, "bus error
encountered in worker … insufficient shared memory") the device that is full is the
container's 64 MiB ``/dev/shm``, and the remedy is a memory-backed emptyDir there. NCCL's
own ``/dev/shm`` segments failing is a communication failure (``mpi-comm``).

The kubelet says it in its Warning events when the node's disk is full before a container
runs: a volume it could not set up (``FailedMount``: ``MountVolume.SetUp failed … write …: no
space left on device``), a pod sandbox or container it could not create, an image it could not
pull and unpack — the node's disk, not the program's.
"""

from __future__ import annotations

from consumers.rules.facts import pod_text
from consumers.rules.rule import Context, Detection, Rule, event_fact, log_facts
from consumers.rules.signatures import disk_full, disk_write, is_dataloader_shm
from consumers.rules.state import RunState, event_time
from consumers.rules.wording import also, rank_subject

KUBELET_REASONS = frozenset(
    {"FailedMount", "FailedAttachVolume", "FailedCreatePodSandBox", "FailedCreatePodContainer", "Failed"}
)
"""The reasons of the kubelet's Warning events about a pod it could not start (its volumes, its
sandbox, its containers, its image)."""


def _detect_disk_full(state: RunState, ctx: Context) -> Detection | None:
    found = [(pod, hits) for pod in state.current_pods() if (hits := disk_full(pod_text(pod)))]
    if not found:
        return _kubelet_disk_full(state)
    found.sort(key=lambda item: item[0].role == "launcher")
    pod, hits = found[0]
    shm = next((h for h in hits if is_dataloader_shm(h)), None)
    hit = shm or hits[0]
    subject = rank_subject(state, pod, hit.rank)
    others = [p for p, _ in found[1:] if p.role != "launcher"]
    evidence = tuple(e for p, h in found for e in log_facts(p, dict.fromkeys(x.line for x in h[:6])))
    if shm is not None:
        return Detection(
            root_cause=f"{subject} failed: /dev/shm is full — PyTorch DataLoader workers hand batches "
            f"over through shared memory and the container's /dev/shm (64 MiB by default) is too small"
            f"{also(others)}",
            evidence=evidence,
            key=("shm", *(p.uid for p, _ in found)),
            remediation=_SHM_STEPS,
        )
    writing, path = disk_write(pod_text(pod))
    detail = hit.signature.what
    if writing and hit.name != "torch-write":
        detail += f" while writing {writing}"
    if path:
        detail += f" ({path})"
    return Detection(
        root_cause=f"{subject} failed: {detail}{also(others)}",
        evidence=evidence,
        key=(hit.name, *(p.uid for p, _ in found)),
    )


def _kubelet_disk_full(state: RunState) -> Detection | None:
    """The kubelet could not start a pod of the run because the node's disk is full."""
    events = sorted(
        (
            e
            for e in state.events.values()
            if e.event_type == "Warning" and e.reason in KUBELET_REASONS and disk_full((e.message,))
        ),
        key=event_time,
    )
    if not events:
        return None
    first = events[0]
    what = {
        "FailedMount": "set up a volume",
        "FailedAttachVolume": "attach a volume",
        "Failed": "pull or start a container's image",
    }.get(first.reason, "create the pod's sandbox or container")
    return Detection(
        root_cause=f"The kubelet could not {what} for {first.involved.kind.lower()}/{first.involved.name}: "
        f"no space left on device on the node ({first.reason})",
        evidence=tuple(event_fact(e) for e in events[:6]),
        key=("kubelet", first.reason, first.involved.name),
        remediation=_NODE_DISK_STEPS,
    )


_NODE_DISK_STEPS = (
    "The node's disk (/var/lib/kubelet, the container runtime's images and writable layers) is full: "
    "find the node (kubectl -n {namespace} get pods -o wide | grep {job}) and check its DiskPressure "
    "condition: kubectl describe node <node>.",
    "Free it (unused images: crictl rmi --prune) or give the pods' ephemeral storage requests so the "
    "scheduler places them where there is room.",
)
_SHM_STEPS = (
    "Mount a memory-backed emptyDir at /dev/shm in the pod template — volumes: [{{name: dshm, "
    "emptyDir: {{medium: Memory, sizeLimit: 8Gi}}}}], volumeMounts: [{{name: dshm, mountPath: /dev/shm}}] "
    "— and raise the memory limit by its size (it is RAM).",
    "Or pass fewer or smaller batches through it: lower DataLoader num_workers / prefetch_factor.",
)

DISK_FULL = Rule(
    id="disk-full",
    kind="cause",
    severity="critical",
    summary="A write failed because a filesystem (or /dev/shm) was full: no space left on device.",
    remediation=(
        "See which filesystem is full: kubectl -n {namespace} exec <pod> -- df -h (while it runs); "
        "checkpoints on the container's writable layer count against the node's ephemeral storage.",
        "Write checkpoints to a volume sized for them (a PersistentVolumeClaim, or an emptyDir with "
        "sizeLimit and resources.requests.ephemeral-storage), and keep only the last few.",
        "For /dev/shm, mount an emptyDir with medium: Memory at /dev/shm.",
    ),
    detect=_detect_disk_full,
)
