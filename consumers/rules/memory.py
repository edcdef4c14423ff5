"""Rules ``oom`` and ``gpu-oom``: a container ran out of memory, in RAM or on the GPU.

``oom`` trusts the kubelet's ``OOMKilled`` reason. Exit code 137 alone only says SIGKILL
(a deliberate ``kill -9``, a failed liveness probe, a preemption), so it counts as an OOM
kill only when the container had a memory limit *and* something else says memory ran out:
an OOM Kubernetes Event about the pod or its node, or an OOM message on the container.
A container that failed with any other code counts too when the kernel's OOM killer shows
in its own log (``Memory cgroup out of memory: Killed process 1234 (python)``: a rank or a
data-loader worker was killed, and the program died of it), or when its node reported a
kernel OOM kill (``SystemOOM``, ``OOMKilling`` Events about the Node) within
:data:`NODE_OOM_WINDOW_S` of the failure. Open MPI's "rank 5 … exited on signal 9 (Killed)"
about that worker is then evidence of the OOM, not a second problem. When the pod's usage was
read (:mod:`consumers.rules.usage`), its memory curve up to the last reading is evidence too, and
the sentence says whether its working-set trend foresaw the kill and how early
(:func:`consumers.rules.forecast.foreseen_text`, the judgement of ``oom-predicted`` replayed).
The kubelet's ``Evicted`` Event for the node's memory (``The node was low on resource: memory. …``) is
the host's memory running out too, judged by the run's outcome as every Event is, with the eviction's
own steps (a pod whose status says it was evicted is the rule ``evicted``'s).

``gpu-oom`` reads the failed container's log tail, whatever framework said it (PyTorch,
TensorFlow, JAX/XLA, cuBLAS, cuDNN, NCCL). In an MPIJob the ranks' output reaches the
launcher through mpirun, so a CUDA OOM usually shows in the launcher's log, tagged with the
rank; the rank is mapped to its worker by ``slotsPerWorker`` (ranks fill each worker's slots
in order, as mpi-operator's hostfile asks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from consumers.rules.disks import told_by_events
from consumers.rules.facts import (
    ContainerEnd,
    memory_limit,
    other_workers,
    pod_text,
    pods_with_hits,
    terminations,
)
from consumers.rules.forecast import foreseen_text
from consumers.rules.nodes import eviction
from consumers.rules.rule import Context, Detection, Rule, container_fact, event_fact, log_facts, pod_fact
from consumers.rules.signatures import Hit, kernel_oom
from consumers.rules.state import PodState, RunState, event_time
from consumers.rules.tails import (
    CAFFE_OOM,
    CHECKED_CALL_OOM,
    CUPY_OOM,
    FRACTION_OOM,
    JULIA_GPU_OOM,
    LEVEL_ZERO_OOM,
    MIOPEN_OOM,
    MPS_OOM,
    PADDLE_BADALLOC_OOM,
    PADDLE_RESERVE_OOM,
    ROCCLR_OOM,
    TF_INIT_OOM,
    THEANO_OOM,
    VULKAN_OOM,
    GpuOom,
    gpu_oom_lines,
    rank_failures,
)
from consumers.rules.usage import memory_curve_fact
from consumers.rules.wording import also, host_label, rank_subject, who
from controller.contract.events import K8sEventObserved
from controller.contract.findings import Evidence

OOM_EVENT_REASONS = frozenset({"OOMKilling", "OOMKilled", "SystemOOM", "CgroupOOM"})
"""The OOM killer as Events tell it: node-problem-detector's ``OOMKilling`` and the kubelet's
``SystemOOM`` about a Node, the kubelet's ``CgroupOOM`` about the Pod whose cgroup ran out (its
message names the victim process, ``Cgroup OOM encountered, victim process: stress, pid: 470521``)."""
_OOM_TEXT = re.compile(r"out of memory|oom[-_ ]?kill|\bOOM\b", re.IGNORECASE)
_VICTIM = re.compile(r"(?:victim process: |Kill(?:ed)? process \d{1,10} \()(?P<victim>[\w.-]{1,64})")
_SIGKILL_EXIT = 137
NODE_OOM_WINDOW_S = 300.0
"""How far apart a node's OOM Event and a pod's failure may be and still be one story."""

OomWhere = Literal["limit", "node", "scheduler", "runtime"]


@dataclass(frozen=True)
class OomKill:
    """One container of one pod killed for memory, and why we believe it."""

    pod: PodState
    termination: ContainerEnd
    evidence: tuple[Evidence, ...]
    where: OomWhere = "limit"
    victim: str | None = None
    """The process the kernel killed, or for ``scheduler`` the batch scheduler that killed the job."""
    killer: str = "the kernel"
    """Who killed the victim: the kernel's OOM killer, or a userspace one (systemd-oomd)."""


def oom_kill(state: RunState, pod: PodState, ctx: Context) -> OomKill | None:
    """The memory kill that still describes ``pod``, if any."""
    failed = [t for t in terminations(pod, ctx) if t.reason == "OOMKilled" or t.exit_code not in (None, 0)]
    for t in failed:
        exit_fact = container_fact(pod, t.container, f"{t.field}.exitCode", t.exit_code)
        if t.reason == "OOMKilled":
            reason_fact = container_fact(pod, t.container, f"{t.field}.reason", t.reason)
            return OomKill(pod, t, (reason_fact, exit_fact) if t.exit_code is not None else (reason_fact,))
        if t.exit_code == _SIGKILL_EXIT and memory_limit(state, pod) is not None:
            signs = _oom_signs(state, pod, t)
            if signs:
                return OomKill(pod, t, (exit_fact, *signs))
    if not failed:
        return None
    first = failed[0]
    exit_fact = container_fact(pod, first.container, f"{first.field}.exitCode", first.exit_code)
    hits = kernel_oom(pod_text(pod))
    if hits:
        facts = (exit_fact, *log_facts(pod, [h.line for h in hits]))
        scheduler = next((_SCHEDULERS[k] for h in hits for k, _ in h.groups if k in _SCHEDULERS), None)
        if scheduler is not None:  # the job's grant, not the kernel: the scheduler is who killed it
            return OomKill(pod, first, facts, "scheduler", scheduler)
        where: OomWhere = "limit" if any(_in_a_cgroup(h) for h in hits) else "node"
        if (oomd := next((h for h in hits if h.name == "systemd-oomd"), None)) is not None:
            unit, pid = oomd.group("unit"), oomd.group("victim")
            killed = f"cgroup {unit}" if unit else f"process {pid}"
            return OomKill(pod, first, facts, "node", killed, "systemd-oomd")
        if early := [h for h in hits if h.name == "earlyoom"]:
            victim = next((f'process "{v}"' for h in early if (v := h.group("victim")) is not None), None)
            return OomKill(pod, first, facts, "node", victim or "a process", _EARLYOOM)
        if any(h.name == "dask-nanny" for h in hits):
            return OomKill(pod, first, facts, "limit", "the worker over its memory budget", _DASK_NANNY)
        if all(h.name in _RUNTIMES for h in hits):  # no kill: the program's runtime refused it memory
            refused = hits[0].signature
            return OomKill(pod, first, facts, "runtime", refused.what, refused.library)
        if (told := next((h for h in hits if h.name in _TOLD_BY), None)) is not None:
            teller, told_of = _TOLD_BY[told.name]
            return OomKill(pod, first, facts, where, told_of, teller)
        if any(h.name == "ray" for h in hits):  # Ray's raylet killed workers before the kernel had to
            return OomKill(pod, first, facts, "node", "workers (tasks / actors)", _RAY_MONITOR)
        return OomKill(pod, first, facts, where, _victim(hits))
    own = [e for e in state.events_about(pod) if e.reason in OOM_EVENT_REASONS and _near(e, first, pod)]
    if own:  # the pod's cgroup ran out and the kernel killed one of its processes: the program died of it
        victim = next((m.group("victim") for e in own if (m := _VICTIM.search(e.message))), None)
        return OomKill(pod, first, (exit_fact, *(event_fact(e) for e in own)), "limit", victim)
    events = node_oom_events(state, pod, first)
    if events:
        victim = next((m.group("victim") for e in events if (m := _VICTIM.search(e.message))), None)
        return OomKill(pod, first, (exit_fact, *(event_fact(e) for e in events)), "node", victim)
    return None


_SCHEDULERS = {
    "pbs": "PBS",
    "pbs_server": "the PBS server",
    "lsf": "LSF",
    "sge": "Grid Engine",
    "slurm": "Slurm's accounting",
    "moab": "Moab (TORQUE's scheduler)",
    "yarn": "YARN's NodeManager",
    "flux": "Flux's job shell (its oom plugin on the job's memory cgroup)",
    "condor": "HTCondor",
}
"""The batch scheduler a ``scheduler`` hit names, by the group its wording matched."""


def _in_a_cgroup(hit: Hit) -> bool:
    """The kill was a memory cgroup's: its own line, Slurm's step, the kubelet's ``OOMKilled`` as kubectl
    lists it, the memcg report's usage at its limit, or ``mem_cgroup_out_of_memory`` in a call trace."""
    return hit.name in (
        "cgroup",
        "memcg-usage-at-limit",
        "slurm",
        "listed-oomkilled",
        "listed-oomkilled-row",
        "containerd-oom",
        "spark-k8s-oom",
        "batch-oom",
        "openpai-oom",
        "openvz-oom",
        "hf-space-oom",
    ) or (hit.name == "trace" and "mem_cgroup" in hit.line)


def _victim(hits: tuple[Hit, ...]) -> str | None:
    return next((v for h in hits if (v := h.group("victim")) is not None), None)


def node_oom_events(state: RunState, pod: PodState, t: ContainerEnd) -> list[K8sEventObserved]:
    """OOM Events about the pod's node from around the time the container ended."""
    return [
        e
        for e in state.events_about_node(pod.node)
        if (e.reason in OOM_EVENT_REASONS or _OOM_TEXT.search(e.message)) and _near(e, t, pod)
    ]


def _near(event: K8sEventObserved, t: ContainerEnd, pod: PodState) -> bool:
    """Whether ``event`` came within :data:`NODE_OOM_WINDOW_S` of the container's end."""
    ended = t.finished_at or pod.changed_at
    return abs((event_time(event) - ended).total_seconds()) <= NODE_OOM_WINDOW_S


def _oom_signs(state: RunState, pod: PodState, t: ContainerEnd) -> tuple[Evidence, ...]:
    """What besides SIGKILL says memory ran out."""
    signs = [
        event_fact(e)
        for e in state.events_about(pod)
        if e.reason in OOM_EVENT_REASONS or _OOM_TEXT.search(e.message)
    ]
    signs.extend(event_fact(e) for e in node_oom_events(state, pod, t))
    message = t.container.message if t.field == "state.terminated" else None
    if message and _OOM_TEXT.search(message):
        signs.append(container_fact(pod, t.container, f"{t.field}.message", message))
    return tuple(signs)


def _ranks_killed_on(state: RunState, pod: PodState) -> list[str]:
    """The launcher's lines about ranks on ``pod`` killed by signal 9: the OOM kill seen by mpirun."""
    launcher = state.launcher()
    if launcher is None or pod.role != "worker" or pod.index is None:
        return []
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    label = f"worker-{pod.index}"
    lines: list[str] = []
    for failure in rank_failures(launcher.log_tail):
        if failure.how != "killed" or (failure.signal or "").split(" ")[0] != "9":
            continue
        on_host = failure.host is not None and host_label(failure.host, state) == label
        by_slot = (
            failure.host is None and failure.rank is not None and slots and failure.rank // slots == pod.index
        )
        if on_host or by_slot:
            lines.extend(failure.lines)
    return lines


MEMORY_EVICTION = re.compile(
    r"The node was low on resource: memory\.(?: Threshold quantity: [^\n]{0,120}?)?"
    r"(?:\s{1,4}Container (?P<container>[\w.-]{1,253}) was using (?P<using>\w{1,30}),\s{1,8}"
    r"(?:which\s{0,2}e\s{0,2}xceeds its request of|request is) (?P<request>[\w.]{1,30}?)[.,])?"
    # admission on a node under MemoryPressure (``The node had condition: [MemoryPressure].``)
    r"|The node (?:had condition|was low on resource): \[(?:\w{1,30}, ?){0,3}MemoryPressure\b"
)
"""The kubelet's eviction manager evicting a pod because its node ran short of memory, with the container
it found over its request (``… Container x was using 35505620Ki, which exceeds its request of 12Gi.``, or
since 1.21 ``Threshold quantity: 100Mi, available: 51200Ki. Container x was using 15Gi, request is 16Gi``),
where a kubectl listing wrapped it anywhere."""


LISTED_OOM_KILLED = re.compile(
    r"(?m)^\s{0,12}Reason:\s{1,12}OOMKilled\s{0,4}$"
    r"|^\s{0,8}(?:pods?/)?[a-z0-9][\w.-]{0,252}\s{1,16}\d{1,3}/\d{1,3}\s{1,16}OOMKilled\s{1,16}\d{1,7}\b"
)
"""A container's end as kubectl shows it, where a listing reached the watcher as an Event's message (a
``kubectl describe pod`` block's ``Last State: Terminated`` / ``Reason: OOMKilled``, or ``kubectl get
pods``' STATUS column ``OOMKilled`` with its READY and RESTARTS columns around it): the kubelet's own
``OOMKilled``, read as text."""
_EXIT_CODE_LISTED = re.compile(r"(?m)^\s{0,12}Exit Code:\s{1,12}(?P<code>\d{1,3})\s{0,4}$")


LISTED_OOM_EVENT = re.compile(
    r"\b(?P<reason>OOMKilling|SystemOOM|CgroupOOM)\b:?(?: {1,16}(?:node|pod)/[\w.-]{1,253})? {1,16}"
    r"(?:Memory cgroup out of memory: Kill(?:ed)? process \d{1,10} \((?P<victim>[^)\n]{1,64})\)"
    r"|(?:System|Cgroup) OOM encountered(?:, victim process: (?P<victim2>[\w.-]{1,64}))?"
    r"|Out of memory: Kill(?:ed)? process \d{1,10} \((?P<victim3>[^)\n]{1,64})\))"
)
"""The OOM killer's Event where it reached the watcher without its reason, listed with it as a column
(``1 OOMKilling: Memory cgroup out of memory: Kill process 605624 (pause) score 0 or sacrifice child``):
node-problem-detector's ``OOMKilling``, the kubelet's ``SystemOOM`` and ``CgroupOOM``."""


def _listed_oom_event(state: RunState, ctx: Context) -> Detection | None:
    """The kernel's OOM killer as an Event listing without its reason tells it (:data:`LISTED_OOM_EVENT`),
    judged as :func:`~consumers.rules.disks.as_seen` says."""
    events = sorted(
        (e for e in state.events.values() if e.reason == "" and LISTED_OOM_EVENT.search(e.message)),
        key=event_time,
    )
    if not events:
        return None
    match = LISTED_OOM_EVENT.search(events[0].message)
    if match is None:
        return None
    victim = match["victim"] or match["victim2"] or match["victim3"]
    if victim == "pause":
        killed = (
            "killed the pod's pause container (its sandbox): the pod's memory cgroup as a whole was out of "
            "memory"
        )
    elif victim:
        killed = f"killed {victim} in a memory cgroup that was out of memory"
    else:
        killed = "killed a process: memory ran out"
    sentence = f"The kernel's OOM killer {killed} (as its {match['reason']} event, listed, says)"
    return told_by_events(state, ctx, sentence, events, ("listed-oom-event", match["reason"]))


def _listed_oom_killed(state: RunState, ctx: Context) -> Detection | None:
    """A container of the run OOMKilled as a kubectl listing read as an Event's message shows it, judged
    as :func:`~consumers.rules.disks.as_seen` says."""
    events = sorted(
        (e for e in state.events.values() if e.reason == "" and LISTED_OOM_KILLED.search(e.message)),
        key=event_time,
    )
    if not events:
        return None
    first = events[0]
    code = _EXIT_CODE_LISTED.search(first.message)
    exit_code = f", exit code {code['code']}" if code is not None else ""
    subject = f"{first.involved.kind.lower()}/{first.involved.name}"
    sentence = (
        f"A container of {subject} was OOMKilled{exit_code}: it went over its memory limit and the kernel "
        f"killed it (as kubectl lists it)"
    )
    return told_by_events(state, ctx, sentence, events, ("listed-oom", subject))


def _evicted_for_memory(state: RunState, ctx: Context) -> Detection | None:
    """The kubelet evicted a pod of the run for its node's memory, by its ``Evicted`` Event (or a listing,
    ``describe`` output or status read as an Event's message): the host's memory, judged as
    :func:`~consumers.rules.disks.as_seen` says. A pod of the run known evicted (its status, or its Event
    while it is not ready) is the rule ``evicted``'s."""
    events = sorted(
        (
            e
            for e in state.events.values()
            if e.reason in ("Evicted", "") and MEMORY_EVICTION.search(e.message)
        ),
        key=event_time,
    )
    if not events or any(eviction(state, pod) is not None for pod in state.current_pods()):
        return None  # a pod of the run is known evicted: the rule ``evicted`` says so, with its pod
    first = events[0]
    match = MEMORY_EVICTION.search(first.message)
    used = ""
    if match is not None and match["container"]:
        asked = "none" if match["request"] == "0" else match["request"]
        used = f"; container {match['container']} used {match['using']}, more than it requested ({asked})"
    subject = f"{first.involved.kind.lower()}/{first.involved.name}"
    sentence = f"The kubelet evicted {subject}: its node was low on memory{used}"
    return told_by_events(state, ctx, sentence, events, ("evicted-memory", subject), _EVICTED_STEPS)


def _detect_oom(state: RunState, ctx: Context) -> Detection | None:
    kills = [k for pod in state.current_pods() if (k := oom_kill(state, pod, ctx)) is not None]
    if not kills:
        if state.phase == "Succeeded":  # the kubelet's words are judged by the run's outcome
            return None
        return (
            _evicted_for_memory(state, ctx) or _listed_oom_killed(state, ctx) or _listed_oom_event(state, ctx)
        )
    first = kills[0]
    evidence: list[Evidence] = []
    for kill in kills:
        evidence.extend(kill.evidence)
        pod_limit = memory_limit(state, kill.pod)
        if pod_limit:
            evidence.append(pod_fact(kill.pod, "resources.limits.memory", pod_limit))
        if (curve := memory_curve_fact(kill.pod, state.usage_of(kill.pod))) is not None:
            evidence.append(curve)  # the working set up to the last reading before the kill
        if kill.where == "node" and kill.pod.node:
            evidence.append(pod_fact(kill.pod, "spec.nodeName", kill.pod.node))
        launcher = state.launcher()
        if launcher is not None:
            evidence.extend(log_facts(launcher, _ranks_killed_on(state, kill.pod)))
    return Detection(
        root_cause=f"{who(first.pod)} failed: out of memory{_detail(state, first)}"
        f"{foreseen_text(state.usage_of(first.pod), ctx.thresholds, first.termination.finished_at)}"
        f"{also([k.pod for k in kills[1:]])}",
        evidence=tuple(dict.fromkeys(evidence)),
        key=tuple(f"{k.pod.uid}/{k.termination.container.name}" for k in kills),
        remediation=_remediation(first),
    )


def _remediation(kill: OomKill) -> tuple[str, ...] | None:
    """The steps of who killed the job, where it is not the kernel on the pod's limit or its node."""
    if kill.where == "scheduler":
        return _YARN_STEPS if kill.victim == _SCHEDULERS["yarn"] else _SCHEDULER_STEPS
    return _KILLER_STEPS.get(kill.killer)


_RAY_MONITOR = "Ray's memory monitor"
_RAY_STEPS = (
    "Ray's memory monitor (in each node's raylet) killed workers when the node's memory use passed its "
    "threshold (RAY_memory_usage_threshold, 0.95 of the node by default), before the kernel's OOM killer: "
    "the raylet's log names the tasks or actors it killed (ray logs raylet.out).",
    "Run fewer tasks per node (ask for more CPUs or memory per task: num_cpus=, memory=) or give the "
    "Ray pods more memory; RAY_memory_monitor_refresh_ms=0 turns the monitor off, leaving the kernel and "
    "the pod's limit to kill instead.",
)


_OOMD_STEPS = (
    "systemd-oomd killed the cgroup for its memory pressure (or swap use), not for a limit: on the node, "
    "oomctl lists the cgroups it watches and their limits (ManagedOOMMemoryPressure= / "
    "ManagedOOMMemoryPressureLimit= of the slice's unit, ManagedOOMSwap=).",
    "Lower the job's memory use or give it a node with more memory; on a Kubernetes node the kubelet's "
    "eviction is the memory policy, so the admins can exclude the kubelet's slices from systemd-oomd "
    "(ManagedOOMMemoryPressure=auto) or disable it.",
)


_SCHEDULER_STEPS = (
    "Ask the batch scheduler for more memory for the job: PBS/TORQUE -l mem= (and vmem / pvmem where "
    'the site enforces them), LSF -M with -R "rusage[mem=…]", Grid Engine -l h_vmem= (per slot), Slurm '
    "--mem= or --mem-per-cpu=, Flux the cores or nodes whose memory the job's cgroup is given "
    "(flux run / flux batch -c / -N: its memory.max follows the resources it holds), HTCondor "
    "request_memory in the submit file (condor_q -hold shows the reason; condor_qedit the request and "
    "condor_release the job).",
    "Read the job's peak use from the scheduler (qstat -fx / tracejob, checkjob -v under Moab, bjobs -l / "
    "bhist -l, qacct -j, "
    "sacct -j <job> -o JobID,MaxRSS,ReqMem, Flux's memory.peak line after its oom report) "
    "and size the request above it, or lower per-rank memory: batch size, data-loader workers.",
    "Where the pod has its own memory limit too, keep it at or above the scheduler's grant.",
)


_EARLYOOM = "earlyoom (a userspace OOM killer on the node)"
_EARLYOOM_STEPS = (
    "earlyoom killed the process when the node's available memory (and free swap) fell to its minimum "
    "(-m / -s, 10% by default), before the kernel's OOM killer would have: the job, or what shares its "
    "node, used the node's memory; lower what each process holds (batch size, data-loader workers, a "
    "dataset read in chunks) or give the job a node with more memory.",
    "On the node, journalctl -u earlyoom lists what it killed and why; its --avoid / --prefer regexes (or "
    "lower -m / -s) decide whom it picks, and the pod's memory limit should keep the job under the node's "
    "share so the kubelet, not earlyoom, acts first.",
)
_DASK_NANNY = "Dask's nanny"
_DASK_STEPS = (
    "Dask's nanny restarted the worker when its memory passed distributed.worker.memory.terminate (95% of "
    "its memory_limit by default): give each worker more (dask worker --memory-limit, or fewer workers / "
    "threads per pod with the pod's memory limit raised to match), or split the work into smaller "
    "partitions (repartition, smaller chunks).",
    "Watch the workers' memory on the dashboard's Workers page while it runs; unmanaged memory that keeps "
    "growing is a leak or a library's cache, spilled memory the data itself.",
)
_JVM_STEPS = (
    "The JVM's heap (-Xmx) is smaller than the task needs: for Spark raise spark.executor.memory (and "
    "spark.driver.memory for the driver), for Hadoop mapreduce.map.java.opts / mapreduce.reduce.java.opts, "
    "keeping the container's or the pod's memory above the heap plus its overhead.",
    "Or let each task hold less: more partitions (spark.sql.shuffle.partitions, repartition), fewer cores "
    "per executor, no collect() of a large result to the driver.",
)
_BAD_ALLOC_STEPS = (
    "The program's allocation threw std::bad_alloc: the container's or the node's memory (or the process's "
    "ulimit -v) was smaller than it asked for; give the pod a larger memory limit, or run the case on fewer "
    "ranks' worth of data per process.",
    "Check the size it asked for is sane: a negative or huge size from a bad input also throws it "
    "(gdb -ex 'catch throw' shows the call).",
)
_YARN_STEPS = (
    "YARN's NodeManager killed the container for the memory it was granted: for Spark raise "
    "spark.executor.memoryOverhead (spark.yarn.executor.memoryOverhead before Spark 2.3) or "
    "spark.executor.memory, for MapReduce mapreduce.map.memory.mb / mapreduce.reduce.memory.mb.",
    "Where it counts virtual memory ('virtual memory used'), the cluster admins can raise "
    "yarn.nodemanager.vmem-pmem-ratio or turn yarn.nodemanager.vmem-check-enabled off; the NodeManager's "
    "log names the container it killed.",
)
_ALPS = "the kernel's OOM killer (as Cray ALPS reported it)"
_SPARK_K8S = "the kernel (as Spark's Kubernetes backend reported it: exit code 137, SIGKILL)"
_AWS_BATCH = "the kernel (as AWS Batch reported it: OutOfMemoryError)"
_VERTEX = "the kernel (as Vertex AI reported it: the replica ran out of memory)"
_OPENPAI = "the container's runtime (docker, or YARN's NodeManager, as OpenPAI's exit reason reported it)"
_SYSTEMD = "the kernel's OOM killer (as systemd reported it for the unit)"
_HECC = "the kernel (as the PBS epilogue of NASA's HECC systems reported it: the node rebooted)"
_OPENVZ = "the kernel's OOM killer (as OpenVZ reported it for the container's user beancounter)"
_HF_SPACE = "Hugging Face Spaces"
_TOLD_BY = {
    "openvz-oom": (_OPENVZ, "a process of the container"),
    "hf-space-oom": (_HF_SPACE, "the Space's container at its hardware's memory"),
    "systemd-oom-kill": (_SYSTEMD, "a process of a systemd unit (its slice, service or scope)"),
    "hecc-oom": (_HECC, "the job's processes on a node that ran out of memory"),
    "batch-oom": (_AWS_BATCH, "the job's container at the memory its job definition gave it"),
    "vertex-oom": (_VERTEX, "a replica of the training job at its machine's memory"),
    "alps-oom": (_ALPS, "a rank of the application"),
    "spark-k8s-oom": (_SPARK_K8S, "an executor's container at its memory limit"),
    "openpai-oom": (_OPENPAI, "a task's container over the memory it requested"),
}
"""A launcher or a framework telling of the kernel's kill (Cray ALPS, Spark's Kubernetes backend): the
killer, named with the one that told of it, and what it says was killed."""
_AWS_BATCH_STEPS = (
    "AWS Batch: raise the job definition's memory (resourceRequirements MEMORY, or containerOverrides at "
    "submit), below what the instance type leaves for containers; the job's CloudWatch log stream shows how "
    "far it got.",
    "Or lower the job's memory use (batch size, data-loader workers), or choose a compute environment with "
    "larger instances.",
)
_OPENVZ_STEPS = (
    "OpenVZ: the container (its UB, the number in 'Out of memory in UB N') used the memory its beancounters "
    "allow; on the host, cat /proc/user_beancounters shows the one whose failcnt rose (physpages, "
    "privvmpages, oomguarpages), and vzctl set <CTID> --ram … --swap … --save raises it.",
    "Or lower what the container's processes hold (the killed one's vm and rss are in the line).",
)
_HF_SPACE_STEPS = (
    "Hugging Face Spaces: the Space used more memory than its hardware has (16 GB on the free CPU tier); "
    "load less at once (a smaller or quantized model, low_cpu_mem_usage=True, fewer workers or a smaller "
    "batch) or choose a larger hardware tier in the Space's Settings, then restart it.",
    "The Space's Logs tab (Container) shows how far it got before the limit.",
)
_SYSTEMD_STEPS = (
    "systemd saw the kernel kill a process in the unit's cgroup (its memory.events oom_kill count rose): "
    "systemctl status <unit> and journalctl -k around that time name the process and whether the unit's "
    "own MemoryMax= or the whole node ran out.",
    "Raise the unit's MemoryMax= / MemoryHigh= (or its slice's) or lower what it holds; a service's "
    "OOMPolicy= (stop, continue, kill) decides whether the unit goes on after the kill.",
)
_HECC_STEPS = (
    "The node ran out of memory, so NASA's HECC rebooted it and PBS ended the job: run fewer MPI processes "
    "per node (mpiprocs= in the select statement, leaving cores idle) or ask for a node model with more "
    "memory per core.",
    "Read each rank's peak memory (qstat -fx's resources_used.mem, or the job's epilogue) and lower "
    "per-rank memory: the domain split over more nodes, smaller buffers.",
)
_VERTEX_STEPS = (
    "Vertex AI: give the worker pool a machine type with more memory (workerPoolSpecs machineSpec."
    "machineType, a highmem one), or split the work over more replicas.",
    "Or lower each replica's memory use (batch size, data-loader workers, prefetching); the job's logs in "
    "Cloud Logging show the replica's last lines before the kill.",
)
_ALPS_STEPS = (
    "ALPS placed more memory on the compute node than it has: run fewer PEs per node (aprun -N, or -S per "
    "NUMA node) or more threads per PE (-d), so each node holds less of the problem.",
    "Read the node's memory use of the application (apstat / the job's RUR report) and lower per-rank "
    "memory, or ask for the nodes with more memory.",
)
_SPARK_K8S_STEPS = (
    "Spark's executor pod went over its memory limit (the JVM heap plus its overhead): raise "
    "spark.executor.memoryOverhead (or spark.kubernetes.memoryOverheadFactor), or spark.executor.memory "
    "with the limit above it.",
    "Or let each task hold less: more partitions (spark.sql.shuffle.partitions), fewer cores per executor; "
    "kubectl -n {namespace} describe pod <executor pod> shows its Last State: OOMKilled.",
)
_OPENPAI_STEPS = (
    "OpenPAI's task used more memory than its taskRole requested: raise resourcePerInstance's memoryMB in "
    "the job's protocol (within the virtual cluster's share), or lower what each task holds (batch size, "
    "data-loader workers, a dataset read in chunks).",
    "Or split the work over more task instances (a larger instances count), so each holds less; the job's "
    "page in OpenPAI's web portal shows each task's memory over time.",
)
_JVM_NATIVE_STEPS = (
    "The JVM asked the OS for native memory (its metaspace, thread stacks, direct buffers, the code cache) "
    "and the container had none left: the heap (-Xmx) plus that overhead is over the pod's memory limit; "
    "lower -Xmx or -XX:MaxRAMPercentage, or raise the limit (spark.executor.memoryOverhead for Spark).",
    "Read the hs_err_pid<N>.log the JVM wrote in its working directory: its 'Native memory allocation' line "
    "says what it could not map.",
)
_JVM_OFFHEAP_STEPS = (
    "The JVM ran out of the memory it keeps off its heap: for Metaspace (classes loaded) raise "
    "-XX:MaxMetaspaceSize or look for a class-loader leak; for Direct buffer memory (NIO, Netty, Spark's "
    "shuffle) raise -XX:MaxDirectMemorySize (spark.executor.memoryOverhead / spark.memory.offHeap.size "
    "for Spark).",
    "Keep the pod's memory limit above the heap plus these off-heap limits, or the kernel kills the JVM "
    "instead.",
)
_JULIA_STEPS = (
    "Julia's allocator could not get memory for an array: give the pod a larger memory limit, or hold less "
    "at once (process the data in chunks, views instead of copies, GC.gc() between large steps).",
    "Under MPI each rank holds its own copy: run fewer ranks per pod, or distribute the array "
    "(DistributedArrays, MPI's own scatter).",
)
_R_ALLOC_STEPS = (
    "R could not allocate the vector it names (its size after 'of size'): give the pod a larger memory "
    "limit, or read and process the data in chunks (data.table::fread with select, arrow's datasets).",
    "Remove large objects you no longer need (rm() then gc()), and under parallel / future keep the workers "
    "from each copying the whole data.",
)
_V8_STEPS = (
    "Node's heap is capped below the container's memory: raise it with --max-old-space-size=<MiB> "
    "(NODE_OPTIONS), keeping it under the pod's memory limit, or raise the limit.",
    "If it keeps growing, take a heap snapshot (node --heapsnapshot-near-heap-limit=1) to find what holds "
    "the memory.",
)
_DOTNET_OOM_STEPS = (
    "The .NET runtime could not allocate: give the pod a larger memory limit, and check the GC sees it "
    "(DOTNET_GCHeapHardLimit / GCHeapHardLimitPercent, server GC's heaps per core).",
    "A dump (dotnet-dump collect, or DOTNET_DbgEnableMiniDump=1 on the crash) shows what holds the memory.",
)
_NUMPY_STEPS = (
    "NumPy could not allocate the array it names (its size and shape after 'Unable to allocate'): check the "
    "shape is what you meant (a broadcast or an outer product gone wrong asks for terabytes).",
    "Otherwise hold less at once: memory-map the data (np.memmap, np.load(mmap_mode='r')), a smaller dtype, "
    "or chunks; or give the pod a larger memory limit.",
)
_GFORTRAN_STEPS = (
    "An ALLOCATE asked for more memory than the process could get: give the pod a larger memory limit, or "
    "run more ranks over the same domain so each allocates less.",
    "Check the size it computed (a dimension read from a bad input, an integer overflow in the extent); "
    "build with -fcheck=all -g -fbacktrace so the runtime names the line.",
)
_RUNTIMES = frozenset(
    {"jvm-heap", "bad-alloc", "jvm-native", "jvm-offheap", "julia-oom", "r-alloc", "v8-heap", "dotnet-oom"}
    | {"numpy-alloc", "gfortran-alloc"}
)
"""Hits of a runtime that refused the program memory of its own (not a kill)."""
_KILLER_STEPS: dict[str, tuple[str, ...]] = {
    "systemd-oomd": _OOMD_STEPS,
    _EARLYOOM: _EARLYOOM_STEPS,
    _RAY_MONITOR: _RAY_STEPS,
    _DASK_NANNY: _DASK_STEPS,
    "the JVM": _JVM_STEPS,
    "the C++ runtime": _BAD_ALLOC_STEPS,
    "the JVM (native memory)": _JVM_NATIVE_STEPS,
    "the JVM (off its heap)": _JVM_OFFHEAP_STEPS,
    "Julia": _JULIA_STEPS,
    "R": _R_ALLOC_STEPS,
    "Node.js (V8's heap)": _V8_STEPS,
    ".NET": _DOTNET_OOM_STEPS,
    "NumPy": _NUMPY_STEPS,
    "the GNU Fortran runtime": _GFORTRAN_STEPS,
    _ALPS: _ALPS_STEPS,
    _OPENPAI: _OPENPAI_STEPS,
    _SPARK_K8S: _SPARK_K8S_STEPS,
    _AWS_BATCH: _AWS_BATCH_STEPS,
    _VERTEX: _VERTEX_STEPS,
    _SYSTEMD: _SYSTEMD_STEPS,
    _OPENVZ: _OPENVZ_STEPS,
    _HF_SPACE: _HF_SPACE_STEPS,
    _HECC: _HECC_STEPS,
}
"""The steps of a killer other than the kernel, by its name."""


def _detail(state: RunState, kill: OomKill) -> str:
    victim = f"{kill.killer} killed {kill.victim}" if kill.victim else None
    if kill.where == "scheduler":
        killed = (
            "a container (a Spark executor or a task)" if kill.victim == _SCHEDULERS["yarn"] else "the job"
        )
        return f" — {kill.victim} killed {killed} for using more memory than it was granted"
    if kill.where == "runtime":
        return f" — {kill.victim}"
    if kill.where == "node":
        node = f"node {kill.pod.node}" if kill.pod.node else "its node"
        return f" — {node} ran out of memory" + (f" ({victim})" if victim else "")
    limit = memory_limit(state, kill.pod)
    parts = [part for part in (f"limit {limit}" if limit else None, victim) if part]
    return f" ({'; '.join(parts)})" if parts else ""


def gpu_oom_subject(state: RunState, pod: PodState, hit: GpuOom) -> str:
    """Who ran out of GPU memory: the worker pod, or the rank named in the launcher log."""
    return rank_subject(state, pod, hit.rank)


def _detect_gpu_oom(state: RunState, ctx: Context) -> Detection | None:
    found = pods_with_hits(state, gpu_oom_lines)
    if not found:
        return None
    pod, hits = found[0]
    subject = gpu_oom_subject(state, pod, hits[0])
    others = other_workers(found)
    evidence = tuple(e for p, h in found for e in log_facts(p, dict.fromkeys(hit.line for hit in h)))
    own = _OWN_OOM_STEPS.get(hits[0].what)
    return Detection(
        root_cause=f"{subject} failed: {hits[0].what}{also(others)}",
        evidence=evidence,
        key=(subject, *(p.uid for p, _ in found)),
        remediation=(own, *GPU_OOM.remediation) if own else None,
    )


_OWN_OOM_STEPS: dict[str, str] = {
    MPS_OOM: "MPS: the GPU shares the Mac's unified memory and PyTorch stops at its high watermark (the "
    "'max allowed' of the message); lower the batch size or the sequence length, free tensors between "
    "steps (torch.mps.empty_cache()), or raise the limit with PYTORCH_MPS_HIGH_WATERMARK_RATIO (below "
    "1.0; 0.0 removes it and may freeze the machine).",
    CUPY_OOM: "CuPy: its memory pool keeps the blocks it freed for reuse, so 'allocated so far' counts them "
    "too; lower the batch size, free the pool between phases "
    "(cupy.get_default_memory_pool().free_all_blocks()), and check set_limit / CUPY_GPU_MEMORY_LIMIT is "
    "not below what the model needs (Chainer: its arrays are CuPy's).",
    ROCCLR_OOM: "ROCm: the line after 'Allocation failed' gives required / free / total device memory; lower "
    "the batch size, check rocm-smi --showmeminfo vram for another process on the GPU, and on an APU or a "
    "card with little VRAM raise its carve-out (HSA_XNACK and the BIOS UMA size) or run on a larger GPU.",
    MIOPEN_OOM: "MIOpen: its convolutions ask for workspace buffers on top of the model; lower the batch "
    "size, "
    "or limit the workspace it searches with (MIOPEN_FIND_MODE=FAST / torch.backends.cudnn.benchmark=False).",
    PADDLE_BADALLOC_OOM: "PaddlePaddle: lower the batch size, and set FLAGS_fraction_of_gpu_memory_to_use or "
    "FLAGS_allocator_strategy=auto_growth so another process's share of the GPU is left free "
    "(nvidia-smi shows who holds it).",
    CAFFE_OOM: "Caffe: lower batch_size in the data layers of the net's prototxt (train and test) and raise "
    "the solver's iter_size to keep the effective batch; with several GPUs (-gpu all) each one holds the "
    "whole net, so check nvidia-smi for another process on them; with several processes per node "
    "(CaffeOnSpark's executors, mpirun) give each its own GPU (-devices, CUDA_VISIBLE_DEVICES).",
    VULKAN_OOM: "Vulkan: the back end asks the driver for device-local memory block by block; offload fewer "
    "layers to the GPU (llama.cpp's -ngl / --n-gpu-layers), lower the context or batch size, and check "
    "vulkaninfo's memory heaps for the card's device-local size (an integrated GPU's is what the BIOS "
    "gives it).",
    FRACTION_OOM: "PyTorch's memory fraction: the process was capped below the GPU's size "
    "(torch.cuda.set_per_process_memory_fraction, a UI's reserve or --gpu-only setting); raise the "
    "fraction or remove the cap, or lower the batch size to fit it ('Device limit' in the message).",
    LEVEL_ZERO_OOM: "Intel GPU: lower the batch size, check xpu-smi (or sycl-ls) for another process on the "
    "device, and free the cache between phases (torch.xpu.empty_cache()); with IPEX, its version must match "
    "torch's and the driver's.",
    PADDLE_RESERVE_OOM: "PaddlePaddle reserves FLAGS_fraction_of_gpu_memory_to_use of the GPU at start and "
    "found less free: another process (or another trainer on the same GPU) holds the rest, nvidia-smi on "
    "the node shows who; give each trainer its own GPU (CUDA_VISIBLE_DEVICES, FLAGS_selected_gpus), lower "
    "the fraction, or set FLAGS_allocator_strategy=auto_growth to reserve as it goes.",
    TF_INIT_OOM: "TensorFlow: another process (or another rank on the same GPU) already holds its memory: "
    "nvidia-smi on the node shows who; give each process its own GPU (CUDA_VISIBLE_DEVICES) and let "
    "TensorFlow grow its share (allow_growth / per_process_gpu_memory_fraction).",
    JULIA_GPU_OOM: "Julia (CUDA.jl, Knet): the memory pool keeps freed arrays until the GC runs; lower the "
    "batch size, free large arrays as soon as they are done (CUDA.unsafe_free!, then GC.gc(); "
    "CUDA.reclaim()), check CUDA.memory_status() for what the pool holds, and JULIA_CUDA_HARD_MEMORY_LIMIT / "
    "JULIA_CUDA_SOFT_MEMORY_LIMIT are not below what the model needs.",
    CHECKED_CALL_OOM: "A library's CUDA call ran out (XGBoost's GPU hist, thrust): lower what it holds at "
    "once (XGBoost: max_bin, max_depth, the rows per worker — more workers, or QuantileDMatrix / external "
    "memory), and check nvidia-smi for another process on the GPU.",
    THEANO_OOM: "Theano: lower the batch size, or let it keep a pool it grows "
    "(THEANO_FLAGS=gpuarray.preallocate "
    "or lib.cnmem below 1.0) instead of a fixed share another process may already hold.",
}
"""The first step for a backend whose memory is not a discrete GPU's, or an allocator's own."""


OOM = Rule(
    id="oom",
    kind="cause",
    severity="critical",
    summary="A container was killed for exceeding its memory limit, or its node ran out of memory.",
    remediation=(
        "Raise the memory limit of the role that failed (resources.limits.memory in its pod "
        "template), or lower per-rank memory use: batch size, data-loader workers, prefetching.",
        "All ranks on one worker share its limit: with slotsPerWorker > 1 size it for every rank.",
        "When the node ran out (SystemOOM), set memory requests equal to limits so the scheduler "
        "does not overcommit the node: kubectl describe node <node> (Allocated resources).",
        "Measure peak usage while it runs: kubectl -n {namespace} top pod -l "
        "training.kubeflow.org/job-name={job}",
    ),
    detect=_detect_oom,
)

_EVICTED_STEPS = (
    "Set each role's memory request equal to its limit (Guaranteed QoS): when a node runs short of memory "
    "the kubelet evicts first the pods using more than they request.",
    "See what else uses the node's memory: kubectl describe node <node> (Conditions: MemoryPressure, "
    "Allocated resources); the cluster admins can reserve memory for the system (kubelet "
    "--system-reserved, --eviction-hard).",
    "Measure the run's peak usage and request that much: kubectl -n {namespace} top pod -l "
    "training.kubeflow.org/job-name={job}",
)

GPU_OOM = Rule(
    id="gpu-oom",
    kind="cause",
    severity="critical",
    summary="A rank ran out of GPU memory (CUDA out of memory, or its TensorFlow / XLA / cuDNN / NCCL "
    "wording).",
    remediation=(
        "Lower the per-GPU batch size, or use gradient accumulation to keep the global batch.",
        "Enable activation checkpointing, mixed precision (bf16/fp16) or sharded optimizer states.",
        "Check that each rank uses its own GPU (CUDA_VISIBLE_DEVICES / local rank), not GPU 0.",
        "For JAX/XLA, check XLA_PYTHON_CLIENT_MEM_FRACTION / preallocation; for TensorFlow, "
        "memory growth (tf.config.experimental.set_memory_growth).",
    ),
    detect=_detect_gpu_oom,
)
