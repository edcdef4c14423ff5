"""How long each time-based rule waits before it fires, globally and per namespace.

Thresholds trade alert latency for false alarms, and teams differ: a research namespace
that queues for hours behind Kueue wants a longer ``hang_pending_s`` than a production
namespace. :class:`RuleThresholds` holds the defaults plus ``overrides`` keyed by
namespace, each a partial set of the same fields; :meth:`RuleThresholds.for_namespace`
resolves them. It is a plain pydantic model so the process settings can nest it
(``MPIJC_RULES__HANG_PENDING_S=1200``, ``MPIJC_RULES__OVERRIDES='{"research": {...}}'``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ThresholdOverride(BaseModel):
    """A partial set of thresholds for one namespace; unset fields keep the global value."""

    model_config = ConfigDict(extra="forbid")

    hang_pending_s: float | None = Field(default=None, gt=0)
    hang_init_s: float | None = Field(default=None, gt=0)
    hang_progress_s: float | None = Field(default=None, gt=0)
    failure_propagation_s: float | None = Field(default=None, gt=0)
    settle_s: float | None = Field(default=None, ge=0)
    gpu_idle_s: float | None = Field(default=None, gt=0)
    gpu_throttle_s: float | None = Field(default=None, gt=0)
    node_condition_s: float | None = Field(default=None, gt=0)
    memory_near_limit_ratio: float | None = Field(default=None, gt=0, le=1)
    oom_horizon_s: float | None = Field(default=None, gt=0)
    straggler_s: float | None = Field(default=None, gt=0)
    straggler_neighbour_cores: float | None = Field(default=None, gt=0)
    live_recovery_s: float | None = Field(default=None, gt=0)
    live_silence_s: float | None = Field(default=None, gt=0)
    culprit_gap_s: float | None = Field(default=None, gt=0)


class RuleThresholds(BaseModel):
    """Thresholds of the time-based rules and the engine's memory bounds."""

    model_config = ConfigDict(extra="forbid")

    hang_pending_s: float = Field(
        default=900.0,
        gt=0,
        description="Seconds a job may stay Pending or Suspended before hang-pending fires; "
        "15 min covers image pulls and a cluster-autoscaler scale-up.",
    )
    hang_init_s: float = Field(
        default=300.0,
        gt=0,
        description="Seconds the launcher may run while workers are not all ready before "
        "hang-init fires; 5 min covers sshd start and DNS propagation of worker hostnames.",
    )
    hang_progress_s: float = Field(
        default=1800.0,
        gt=0,
        description="Seconds a Running job may go without a pod transition or new log output "
        "before hang-progress fires; 30 min is longer than a typical checkpoint or eval pause.",
    )
    failure_propagation_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds after a worker failed by which the job should be Failed; the "
        "operator normally reacts within a few seconds, 30 s is the platform's goal.",
    )
    settle_s: float = Field(
        default=300.0,
        ge=0,
        description="Seconds a restarted container's failure still counts, and a crash loop must "
        "stay cleared before its finding resolves: CrashLoopBackOff alternates with short "
        "Running spells, and the kubelet's restart back-off caps at 5 min.",
    )
    gpu_idle_s: float = Field(
        default=600.0,
        gt=0,
        description="Seconds one worker's GPUs may sit idle while the other workers' are busy before "
        "gpu-idle fires; 10 min is longer than a data-loader stall or an uneven evaluation step.",
    )
    gpu_idle_pct: float = Field(
        default=5.0,
        ge=0,
        le=100,
        description="Mean GPU utilization (%) at or below which a worker's GPUs count as idle.",
    )
    gpu_busy_pct: float = Field(
        default=40.0,
        ge=0,
        le=100,
        description="Mean GPU utilization (%) the other workers must keep for the idle one to stand out; "
        "when every worker is idle (a checkpoint, an evaluation on the launcher) nothing fires.",
    )
    gpu_throttle_s: float = Field(
        default=120.0,
        gt=0,
        description="Seconds a running worker's GPU may have its clocks held down by the hardware "
        "(slowdown, thermal, power brake) without a break before gpu-throttled fires; a throttle "
        "of seconds is normal under load.",
    )
    node_condition_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a bad condition of a worker's node (not Ready, pressure, a kernel "
        "deadlock, a GPU condition) must hold before node-degraded or gpu-fault tells it, unless "
        "the job failed while it held; a condition that flips for seconds says nothing.",
    )
    memory_near_limit_ratio: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="Share of its memory limit a pod's working set must exceed, while still rising, for "
        "memory-near-limit to fire.",
    )
    memory_rise_ratio: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="Growth over the curve read (share of the limit, first third to last third) that "
        "counts as rising; a working set flat near its limit (page cache, a steady state) stays quiet.",
    )
    oom_horizon_s: float = Field(
        default=600.0,
        gt=0,
        description="oom-predicted warns when a pod's working set, at its current steady rate, reaches its "
        "memory limit within this many seconds of the reading: 10 min leaves time to checkpoint or resize.",
    )
    oom_trend_s: float = Field(
        default=900.0,
        gt=0,
        description="Seconds of the memory curve (ending at the reading) the working-set trend is fitted "
        "over; at least five points of it are needed (usage.window_s / usage.curve_points apart).",
    )
    oom_trend_tau: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="How steadily the working set must climb over that span (Kendall's tau: 1 for a "
        "curve that only grows); a plateau or a sawtooth of allocations and frees stays well under it.",
    )
    straggler_s: float = Field(
        default=900.0,
        gt=0,
        description="Seconds one worker's GPU utilization must stay below its peers' for straggler to fire: "
        "longer than warm-up, a checkpoint pause or a periodic evaluation.",
    )
    straggler_gap_pct: float = Field(
        default=20.0,
        gt=0,
        le=100,
        description="Points of GPU utilization (%) by which a straggler's GPUs run below the median of "
        "its peers' at the same step.",
    )
    straggler_slower_ratio: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="How much slower than its peers' median a rank's progress counters must climb over "
        "straggler_s (0.2: at most 80 % of their rate) for straggler to name it from its progress lines.",
    )
    straggler_share: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Share of the steps of the window (those where the peers are busy) in which the "
        "worker must be that far below them: consistently slower, not once.",
    )
    straggler_neighbour_cores: float = Field(
        default=2.0,
        gt=0,
        description="CPU cores the pods of another job (or workload) on a straggler's node must use "
        "together, on average over the span read, for straggler to name that shared node as its likely "
        "reason; a co-tenant whose GPUs are busy (gpu_busy_pct) counts too. Smaller, idle ones, "
        "DaemonSets, static and system pods (kube-*, the GPU operator) and the run's own pods never count.",
    )
    failed_hold_s: float = Field(
        default=10.0,
        ge=0,
        description="Seconds the catch-all waits, once a job is Failed, for the end of pods still "
        "seen running: the job and its pods come on separate watches, and the pod update that "
        "says why (an OOM kill, with its log tail) often arrives a moment after the job's "
        "condition. It speaks as soon as every pod's end is seen; 0 speaks at once.",
    )
    live_recovery_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds the run's output must go on after a failure signature seen in a running "
        "job's output (a CUDA OOM caught by a batch-size search, a retried NCCL connection) for it to "
        "count as recovered: its warning resolves and it is no longer evidence. A rank that dies "
        "blocks the others in their next collective, so a run that still prints a minute later "
        "went on without it failing.",
    )
    live_silence_s: float = Field(
        default=300.0,
        gt=0,
        description="Seconds of silence from the run after a signature seen live (not yet recovered) "
        "after which the line is the verdict: the rank stopped, and with it the run. Until then, "
        "or until its pod ends non-zero or the job fails, it is a pending observation, never "
        "announced as firing. A quota refusal (a Kubernetes Event the operator retries) is the "
        "verdict once the run has stayed refused this long: five minutes outlast the operator's "
        "retries of a quota another job frees as it ends.",
    )
    live_activity_s: float = Field(
        default=30.0,
        gt=0,
        description="How often the rules' log reader tells the rules that a followed container's ranks "
        "are still printing (batches with a signature line are told at once); the precision of "
        "live_recovery_s, live_silence_s and of the rank a hang names as stopped first.",
    )
    culprit_gap_s: float = Field(
        default=60.0,
        gt=0,
        description="How much earlier than every other rank one rank's output must have stopped for a "
        "hang finding to name it as the rank that stopped first.",
    )
    progress_needs_log_feed: bool = Field(
        default=True,
        description="Judge hang-progress only for runs whose watcher reports log output of running "
        "pods; without that feed a quiet healthy job and a hung one look the same.",
    )
    forget_after_s: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds a finished or deleted run (or one never seen as a job) is kept in "
        "memory after its last event; late pod deletions and events arrive within minutes.",
    )
    max_runs: int = Field(
        default=20_000,
        gt=0,
        description="Runs held in memory at most; the least recently updated finished run goes "
        "first. A run costs about 8 KiB per pod held (measured: 1,000 runs of 17 pods, 150 MiB "
        "over the process's own 60): size this and the rules' memory limit by the pods of the "
        "runs finished within forget_after_s plus those running.",
    )
    max_pods: int = Field(
        default=10_000,
        gt=0,
        description="Pods held in memory at most, summed over the runs of one partition's engine; "
        "the least recently updated finished run goes first, then (with a warning) the least "
        "recently updated live run. A run costs about 8 KiB per pod held, and one replica may hold "
        "all 8 partitions (MPIJC_CONSUMER__RULES_PARTITIONS): 8 x 10,000 pods is about 625 MiB, "
        "which with the process's own 60 MiB and room for snapshots and bus buffers fits the "
        "rules Deployment's 1 GiB limit (deploy/base/consumers.yaml). Scale it with that limit "
        "and inversely with the partitions.",
    )
    overrides: dict[str, ThresholdOverride] = Field(
        default_factory=dict, description="Per-namespace thresholds, keyed by namespace."
    )

    def for_namespace(self, namespace: str) -> RuleThresholds:
        """The thresholds that apply in ``namespace`` (overrides applied, none left over)."""
        override = self.overrides.get(namespace)
        changes = override.model_dump(exclude_none=True) if override is not None else {}
        return self.model_copy(update={**changes, "overrides": {}})
