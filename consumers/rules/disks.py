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

And its eviction manager evicts a running pod for ephemeral storage (the ``Evicted`` event, or the
pod's status ``reason: Evicted``, in any of the shapes ``kubectl`` prints it), in one of four
wordings: the node low on ``ephemeral-storage`` (or ``inodes``: ``The node was low on resource:
ephemeral-storage. Threshold quantity: …, available: …. Container x was using …``), the pod's
ephemeral local storage over its containers' total limit, a container over its own
``ephemeral-storage`` limit, or an ``emptyDir`` volume over its ``sizeLimit``. An eviction for
memory or PIDs is no full disk (the rule ``evicted`` says it). An event that reached the watcher
without its reason (a ``kubectl get events`` or ``describe`` listing pasted whole) is read by the
kubelet's own words: the eviction manager's sentences, ``MountVolume.SetUp failed``, a reason named
as a column (:func:`kubelet_reason`, :func:`is_eviction`). The kubelet's events are judged by
the run's outcome, as a printed line is (``quota`` does the same): while the run goes on they are a
``pending`` finding, the verdict once the job fails or they have stood for the stated silence of live
evidence, and a run that succeeded (the mount retried, the evicted pod replaced) keeps nothing of
them. A pod whose own status says it was evicted has ended: that is a verdict at once.
"""

from __future__ import annotations

import re
from datetime import datetime

from consumers.rules.facts import other_workers, pod_text, pods_with_hits
from consumers.rules.rule import Context, Detection, Rule, event_fact, log_facts, pod_fact
from consumers.rules.signatures import disk_full, disk_write, is_dataloader_shm, quoted_in_prose
from consumers.rules.state import RunState, event_time
from consumers.rules.wording import also, clock_time, rank_subject, who
from controller.contract.events import K8sEventObserved
from controller.contract.findings import Evidence

KUBELET_REASONS = frozenset(
    {
        "FailedMount",
        "FailedAttachVolume",
        "FailedCreatePodSandBox",
        "FailedCreatePodContainer",
        "Failed",
        "FailedSync",
    }
)
"""The reasons of the kubelet's Warning events about a pod it could not start (its volumes, its
sandbox, its containers, its image; older kubelets' ``FailedSync``, ``Error syncing pod, skipping: failed
to "StartContainer" … with ErrImagePull: …``, for any of them)."""

_KUBELET_SAID = re.compile(
    r"\b(?P<reason>FailedMount|FailedAttachVolume|FailedCreatePodSandBox|FailedCreatePodContainer|FailedSync)\b"
    r"|(?P<mount>MountVolume\.(?:SetUp|MountDevice|WaitForAttach) failed|AttachVolume\.Attach failed)"
    r"|(?P<sandbox>Failed to create pod sandbox)"
)
"""The kubelet's own words for a pod it could not start, where the event reached the watcher without
its reason (a ``kubectl describe`` or ``get events`` listing pasted whole): the reason as a column, or
the volume manager's ``MountVolume.SetUp failed``."""


EPHEMERAL_EVICTION = re.compile(
    # (nodefs: the kubelet's name for the node's root filesystem before ephemeral-storage)
    r"The node was low on resource: (?P<node>ephemeral-storage|inodes|nodefs)\b"
    r"|Pod ephemeral local storage usage exceeds the total limit of containers (?P<pod>[\w.]{1,20})"
    r"|Container (?P<container>[\w.-]{1,253}) exceeded its local ephemeral storage limit "
    r"\\?\"?(?P<limit>[\w.]{1,20})"
    r"|Usage of EmptyDir volume \\?\"?(?P<volume>[\w.-]{1,253})\\?\"? exceeds the limit "
    r"\\?\"?(?P<size>[\w.]{1,20})"
    r"|The node (?:had condition|was low on resource): \[(?:\w{1,30}, ?){0,3}(?P<pressure>DiskPressure)\b"
    r"|Attempting to reclaim (?P<reclaim>ephemeral-storage|inodes|nodefs|imagefs)\b"
)
"""The kubelet's eviction manager evicting a pod for ephemeral storage, in each of its wordings; its
admission refusing a pod on a node under ``DiskPressure`` (``Evicted: Pod The node had condition:
[DiskPressure].``, older kubelets' ``The node was low on resource: [DiskPressure].``), and its
``EvictionThresholdMet`` event as it starts reclaiming the disk (``Attempting to reclaim
ephemeral-storage``)."""


def kubelet_reason(event: K8sEventObserved) -> str | None:
    """The reason of a kubelet's event about a pod it could not start: its own, or where it has none
    (a listing or ``describe`` output read as the message) the one its message names."""
    # the kubelet before 1.2 wrote its reasons in lower camel case (``failedMount``, ``failedSync``)
    reason = event.reason[:1].upper() + event.reason[1:]
    if reason in KUBELET_REASONS:
        return reason
    if reason:
        return None
    said = _KUBELET_SAID.search(event.message)
    if said is None:
        return None
    if said["reason"]:
        return said["reason"]
    return "FailedMount" if said["mount"] else "FailedCreatePodSandBox"


def is_eviction(event: K8sEventObserved) -> bool:
    """Whether ``event`` is the eviction manager's for ephemeral storage: an ``Evicted`` event, or one
    without a reason (a listing, ``describe`` output or a status read as its message) whose words are
    the eviction manager's alone, not quoted in a sentence of prose."""
    if event.reason not in ("Evicted", "") or (match := EPHEMERAL_EVICTION.search(event.message)) is None:
        return False
    return event.reason == "Evicted" or not quoted_in_prose(event.message, match.start())


def _detect_disk_full(state: RunState, ctx: Context) -> Detection | None:
    found = pods_with_hits(state, disk_full)
    if not found:
        if state.phase == "Succeeded":  # the kubelet's events are judged by the run's outcome
            return None
        return _kubelet_disk_full(state, ctx) or _evicted_for_storage(state, ctx)
    pod, hits = found[0]
    shm = next((h for h in hits if is_dataloader_shm(h)), None)
    hit = shm or hits[0]
    subject = rank_subject(state, pod, hit.rank)
    others = other_workers(found)
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
        remediation=_OWN_STEPS.get(hit.name),
    )


def as_seen(state: RunState, ctx: Context, sentence: str, first: datetime) -> tuple[str, bool]:
    """The sentence of what the kubelet's events said, and whether it is not yet a verdict: it is
    once the run failed, or the events have stood for the stated silence of live evidence."""
    verdict = state.phase == "Failed" or ctx.age(first) >= ctx.thresholds.live_silence_s
    if verdict:
        return sentence, False
    return f"{sentence} (at {clock_time(first)}; the job is still running)", True


def told_by_events(
    state: RunState,
    ctx: Context,
    sentence: str,
    events: list[K8sEventObserved],
    key: tuple[str, ...],
    remediation: tuple[str, ...] | None = None,
) -> Detection:
    """The finding ``sentence`` tells from ``events`` (the earliest first, at least one), judged as
    :func:`as_seen` says, with the first six as its evidence."""
    told, tentative = as_seen(state, ctx, sentence, event_time(events[0]))
    return Detection(
        root_cause=told,
        evidence=tuple(event_fact(e) for e in events[:6]),
        key=key,
        remediation=remediation,
        tentative=tentative,
    )


def _kubelet_disk_full(state: RunState, ctx: Context) -> Detection | None:
    """The kubelet could not start a pod of the run because the node's disk is full."""
    events = sorted(
        (
            e
            for e in state.events.values()
            if e.event_type == "Warning" and kubelet_reason(e) is not None and disk_full((e.message,))
        ),
        key=event_time,
    )
    if not events:
        return None
    first = events[0]
    reason = kubelet_reason(first) or first.reason
    what = {
        "FailedMount": "set up a volume",
        "FailedAttachVolume": "attach a volume",
        "Failed": "pull or start a container's image",
        "FailedSync": "pull or start a container's image"
        if "ErrImagePull" in first.message or "register layer" in first.message
        else "start the pod",
    }.get(reason, "create the pod's sandbox or container")
    sentence = (
        f"The kubelet could not {what} for {first.involved.kind.lower()}/{first.involved.name}: "
        f"no space left on device on the node ({reason})"
    )
    return told_by_events(
        state, ctx, sentence, events, ("kubelet", reason, first.involved.name), _NODE_DISK_STEPS
    )


def _evicted_for_storage(state: RunState, ctx: Context) -> Detection | None:
    """The kubelet evicted a pod of the run for its ephemeral storage (or the node's): a verdict
    where the pod's status says so (it ended), else its Event, judged as :func:`as_seen` says."""
    said: list[tuple[str, str, Evidence]] = []
    for pod in state.current_pods():
        message = pod.observed.message or ""
        if pod.observed.reason == "Evicted" and EPHEMERAL_EVICTION.search(message):
            said.append((who(pod), message, pod_fact(pod, "status.message", message)))
    ended = bool(said)
    events = sorted(
        (e for e in state.events.values() if is_eviction(e)),
        key=event_time,
    )
    said.extend((f"{e.involved.kind.lower()}/{e.involved.name}", e.message, event_fact(e)) for e in events)
    if not said:
        return None
    subject, message, _ = said[0]
    match = EPHEMERAL_EVICTION.search(message)
    if match is None:  # pragma: no cover - each message in ``said`` matched
        return None
    sentence, tentative = f"The kubelet evicted {subject}: {_storage_reason(match)}", False
    if not ended:
        sentence, tentative = as_seen(state, ctx, sentence, event_time(events[0]))
    return Detection(
        root_cause=sentence,
        evidence=tuple(dict.fromkeys(fact for _, _, fact in said))[:6],
        key=("evicted-storage", subject),
        remediation=_EPHEMERAL_STEPS,
        tentative=tentative,
    )


def _storage_reason(match: re.Match[str]) -> str:
    quantity = (match["pod"] or match["limit"] or match["size"] or "").rstrip(".")
    if match["node"] == "inodes":
        return "the node ran out of inodes on its disk (its ephemeral storage)"
    if match["node"]:
        return (
            "the node was low on ephemeral storage (its disk, where containers' writable layers, logs "
            "and emptyDir volumes live), and the pod used more of it than it requested"
        )
    if match["pressure"]:
        return "its node had DiskPressure (its disk nearly full), so the kubelet would not run the pod there"
    if match["reclaim"]:
        return (
            f"its node's disk crossed the kubelet's eviction threshold (EvictionThresholdMet: attempting to "
            f"reclaim {match['reclaim']}), and the kubelet evicts pods to free it"
        )
    if match["pod"]:
        return f"its ephemeral local storage exceeded its containers' total limit ({quantity})"
    if match["container"]:
        return f"container {match['container']} exceeded its ephemeral-storage limit ({quantity})"
    return f"emptyDir volume {match['volume']} exceeded its sizeLimit ({quantity})"


_EPHEMERAL_STEPS = (
    "Ephemeral storage is the node's disk under the containers' writable layers, their logs and emptyDir "
    "volumes: set resources.requests and limits of ephemeral-storage to what the job writes there, so the "
    "scheduler places it where there is room.",
    "Give an emptyDir a sizeLimit it fits in, and write checkpoints and datasets to a PersistentVolumeClaim "
    "(not the container's filesystem or an emptyDir), keeping only the last few.",
    "See the node's disk: kubectl describe node <node> (DiskPressure, ephemeral-storage allocatable).",
)
_NODE_DISK_STEPS = (
    "The node's disk (/var/lib/kubelet, the container runtime's images and writable layers) is full: "
    "find the node (kubectl -n {namespace} get pods -o wide | grep {job}) and check its DiskPressure "
    "condition: kubectl describe node <node>.",
    "Free it (unused images: crictl rmi --prune) or give the pods' ephemeral storage requests so the "
    "scheduler places them where there is room.",
)
_IMAGE_GC_STEPS = (
    "The kubelet deletes unused images when the node's image filesystem passes "
    "--image-gc-high-threshold (85%) and could not free enough: the rest of the disk is images in use, "
    "containers' writable layers, logs and emptyDir volumes. The admins can see what holds it on the node "
    "(crictl images, crictl ps -a, du -sh /var/lib/containerd /var/lib/kubelet /var/log/pods) and give the "
    "node a larger disk or a separate image filesystem.",
)
_SQLITE_STEPS = (
    "SQLite could not grow its database file: find the file the program writes (an experiment tracker's "
    "store, a job queue's, a cache's: its path is in the program's settings) and check the filesystem under "
    "it: kubectl -n {namespace} exec <pod> -- df -h <its directory>; a database on the container's writable "
    "layer or /tmp counts against the node's ephemeral storage.",
    "Put the database on a volume sized for it (a PersistentVolumeClaim), and check the program sets no "
    "PRAGMA max_page_count below what it needs (SQLite says the same words when that cap is reached).",
)
_SHM_STEPS = (
    "Mount a memory-backed emptyDir at /dev/shm in the pod template — volumes: [{{name: dshm, "
    "emptyDir: {{medium: Memory, sizeLimit: 8Gi}}}}], volumeMounts: [{{name: dshm, mountPath: /dev/shm}}] "
    "— and raise the memory limit by its size (it is RAM).",
    "Or pass fewer or smaller batches through it: lower DataLoader num_workers / prefetch_factor.",
)

_AZUREML_DISK_STEPS = (
    "Azure ML: the job's data and outputs filled the compute node's local disk; read inputs as a mounted "
    "datastore (ro_mount) instead of a download, write outputs and checkpoints to a mounted output "
    "(rw_mount) rather than the node's disk, and delete what the job no longer needs as it runs.",
    "Or run on a VM size with a larger temporary disk (its SKU's temp storage).",
)
_HF_SPACE_STORAGE_STEPS = (
    "Hugging Face Spaces: the Space's disk is its hardware's (50 GB on the free CPU tier) and is not kept "
    "across restarts; download models and datasets to the persistent storage (/data, with HF_HOME pointing "
    "there) or stream them, delete what the app no longer needs, and restart the Space.",
    "Or give the Space more: a hardware tier or a persistent storage tier in its Settings.",
)
_PBS_JOBFS_STEPS = (
    "PBS on NCI Gadi: the job's node-local disk ($PBS_JOBFS) is what it asked for with -l jobfs= (100 MB "
    "by default); request more (up to the node's, about 400 GB on most queues), or point large temporary "
    "files (TMPDIR, a framework's cache) at /scratch instead.",
    "qstat -f <job> (resources_used.jobfs) or the job's Resource Usage summary shows how much it wrote.",
)
_WINDOWS_DISK_STEPS = (
    "Windows: the drive the program wrote to is full (ERROR_DISK_FULL, os error 112); the path in the "
    "message names it (a download cache under %LOCALAPPDATA% sits on C:). Free it (Disk Cleanup, delete "
    "old models or caches), or point the program's download or cache directory at a drive with room.",
    "On a Windows node of a cluster, the container's writable layer and emptyDir volumes sit on the node's "
    "disk: give the pod ephemeral-storage requests, or write to a volume sized for the data.",
)
_OWN_STEPS: dict[str, tuple[str, ...]] = {
    "windows-disk-full": _WINDOWS_DISK_STEPS,
    "pbs-jobfs": _PBS_JOBFS_STEPS,
    "hf-space-storage": _HF_SPACE_STORAGE_STEPS,
    "image-gc": (*_IMAGE_GC_STEPS, *_NODE_DISK_STEPS),
    "sqlite-full": _SQLITE_STEPS,
    "evicted-storage-limit": _EPHEMERAL_STEPS,
    "azureml-disk": _AZUREML_DISK_STEPS,
}
"""The steps of a writer with its own remedy, instead of the rule's general ones."""

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
