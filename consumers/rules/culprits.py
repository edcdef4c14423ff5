"""Which rank a hang is waiting for, where the output tells.

When a distributed run stops making progress, every rank but one is usually blocked in a
collective, waiting for the one that stopped. These accounts name it, tried in this order:

- Horovod's stall inspector: after ``One or more tensors were submitted to be reduced, gathered
  or broadcasted by subset of ranks and are waiting for remainder of ranks for more than N
  seconds`` it lists the ranks in the format of its version — ``Missing ranks:`` then one
  ``<rank>: [tensor, …]`` line each (0.21 on), ``Stalled ranks:`` then ``<rank>: [...]`` or
  ``<rank>!: [...]`` for a rank already shut down (0.16-0.20), or ``Stalled ops:`` then
  ``<tensor> [missing ranks: 1, 2]`` per tensor (0.13-0.15), or, in its earliest versions,
  ``Stalled ops:`` then ``<tensor> [ready ranks: 0, 2]`` per tensor, the ranks that did submit it
  (the others are missing) (horovod/horovod
  ``horovod/common/stall_inspector.cc``, ``horovod/common/operations.cc``);
- torch's monitored barrier (``torch.distributed.monitored_barrier``, ProcessGroupGloo.cpp):
  ``[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms``, or ``Ranks 1, 3 failed …``
  with ``wait_all_ranks``;
- PyTorch's NCCL watchdog counters: each rank whose collective timed out prints ``Timeout at NCCL
  work: W, last enqueued NCCL work: E, last completed NCCL work: C`` (or ``… detected by watchdog
  at work: W, …``; the flight recorder, when another rank signals a dump, ``Received a dump signal
  due to a collective timeout from rank N … Last enqueued NCCL work: E, last completed NCCL work:
  C.``). The rank that stopped enqueued nothing new and has nothing to time out: it is the rank of
  the run missing from those lines; where every rank printed them, the one whose ``last
  enqueued`` (then ``last completed``) is lowest is behind the others;
- torch's heartbeat monitor: ``[PG … Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds
  without making progress in monitoring enqueued collectives`` names the rank where an NCCL / CUDA
  call hangs, when not every rank of the run prints it;
- torch elastic's timer server: ``Reaping worker_pid=[4242]. Expired timers: ['train_step']`` names a
  process, not a rank — the rank where the output gives it (the line's rank tag, or torch elastic's
  ``Root Cause`` block pairing ``rank : 3`` with ``(pid: 4242)``), else ``process 4242``;
- the live output itself: the rank whose last line came first, at least ``culprit_gap_s`` before
  every other rank's (:attr:`~consumers.rules.state.PodState.rank_output`, from the live reader).

The ranks of the run are those seen printing plus, where the spec says it, every rank of
``workers x slotsPerWorker``. Lines are read from what was seen live and from failure-time tails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from consumers.rules.live import (
    ELASTIC_TIMER,
    HOROVOD_STALL,
    MONITORED_BARRIER,
    NCCL_COUNTERS,
    WATCHDOG_STUCK,
)
from consumers.rules.rule import Context, log_facts, pod_fact
from consumers.rules.signatures import message_rank
from consumers.rules.state import PodState, RunState
from consumers.rules.tails import bounded, output_rank, strip_tag
from consumers.rules.wording import listing
from controller.contract.findings import Evidence

_MAX_MISSING = 8
"""Ranks named as missing from the counters at most (a worker's worth): more missing means the
output shows only part of the ranks, not which one stopped."""
# Horovod's stall inspector, three formats (horovod/horovod): ``Missing ranks:`` then ``1: [tensor, …]``
# per rank (0.21 on, common/stall_inspector.cc); ``Stalled ranks:`` then ``1: [...]``, ``1!: [...]`` for a
# rank already shut down (0.16-0.20, common/operations.cc then stall_inspector.cc); ``Stalled ops:``
# then ``tensor [missing ranks: 1, 2]`` per tensor (0.13-0.15, common/operations.cc); before that,
# ``tensor [ready ranks: 1, 3]`` per tensor, the ranks that *did* submit it (the others are missing).
_MISSING_HEAD = re.compile(r"^\s{0,8}(?:Missing|Stalled) ranks:")
_MISSING_RANK = re.compile(r"^\s{0,8}(?P<rank>\d{1,7})!?: \[")
_MISSING_LIST = re.compile(r" \[missing ranks: (?P<ranks>\d{1,7}(?:,? \d{1,7}){0,63})\]")
_READY_LIST = re.compile(r" \[ready ranks: (?P<ranks>\d{1,7}(?:,? \d{1,7}){0,63})\]")
_NUMBER = re.compile(r"\d{1,7}")


@dataclass(frozen=True)
class Culprit:
    """The rank(s) a hang waits for, how we know, and the lines or times that say it."""

    ranks: tuple[int, ...]
    words: str
    evidence: tuple[Evidence, ...]


def _lines(pod: PodState) -> tuple[str, ...]:
    return tuple(line.mark.line for line in pod.live) + pod.log_tail


def _world(state: RunState) -> set[int]:
    ranks = {rank for pod in state.pods.values() for rank in pod.rank_output if rank is not None}
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    if slots:
        ranks |= set(range(state.expected_workers() * slots))
    return ranks


def _horovod(state: RunState) -> Culprit | None:
    for pod in state.current_pods():
        lines = bounded(_lines(pod))
        starts = [i for i, line in enumerate(lines) if HOROVOD_STALL.search(line)]
        if not starts:
            continue
        start = starts[-1]
        missing: list[int] = []
        ready: set[int] = set()
        evidence = [lines[start]]
        listed = False
        for line in lines[start : start + 12]:
            text = strip_tag(line)
            if (old := _MISSING_LIST.search(text)) is not None:
                missing.extend(int(rank) for rank in _NUMBER.findall(old.group("ranks")))
                if line not in evidence:
                    evidence.append(line)
            elif (oldest := _READY_LIST.search(text)) is not None:
                ready.update(int(rank) for rank in _NUMBER.findall(oldest.group("ranks")))
                if line not in evidence:
                    evidence.append(line)
            elif _MISSING_HEAD.match(text):
                listed = True
            elif listed and (m := _MISSING_RANK.match(text)) is not None:
                missing.append(int(m.group("rank")))
                evidence.append(line)
            elif listed:
                break
        if ready and not missing:
            others = _world(state) - ready
            missing = sorted(others) if len(others) <= _MAX_MISSING else []
        if missing:
            ranks = tuple(sorted(set(missing)))
            words = f"Horovod's stall inspector names {_ranks(ranks)} as missing from the collective"
            return Culprit(ranks, words, log_facts(pod, evidence))
    return None


def _monitored_barrier(state: RunState) -> Culprit | None:
    for pod in state.current_pods():
        for line in reversed(bounded(_lines(pod))):
            if (match := MONITORED_BARRIER.search(line)) is not None:
                ranks = tuple(sorted({int(rank) for rank in match.group("ranks").split(", ")}))
                seconds = int(match.group("ms")) // 1000
                words = f"{_ranks(ranks)} did not reach torch's monitored barrier within {seconds}s"
                return Culprit(ranks, words, log_facts(pod, [line]))
    return None


def _nccl(state: RunState) -> Culprit | None:
    counters: dict[int, tuple[int, int, str, PodState]] = {}
    for pod in state.current_pods():
        for line in bounded(_lines(pod)):
            match = NCCL_COUNTERS.search(line)
            if match is None:
                continue
            rank = message_rank(line)
            rank = rank if rank is not None else output_rank(line)
            if rank is not None:
                counters[rank] = (int(match.group("enqueued")), int(match.group("completed")), line, pod)
    if not counters:
        return None
    missing = tuple(sorted(_world(state) - counters.keys()))
    shown = [(counters[r][3], counters[r][2]) for r in sorted(counters)][:4]
    evidence = tuple(e for pod, line in shown for e in log_facts(pod, [line]))
    if missing and len(missing) <= _MAX_MISSING and len(missing) < len(counters):
        words = (
            f"{_ranks(missing)} never reported the collective that {_ranks(tuple(sorted(counters)))} "
            "timed out on (missing from NCCL's watchdog counters)"
        )
        return Culprit(missing, words, evidence)
    behind = min(counters.values(), key=lambda c: (c[0], c[1]))[:2]
    lowest = tuple(r for r, c in sorted(counters.items()) if c[:2] == behind)
    if len(lowest) == 1 and len(counters) > 1:
        enqueued, completed = behind
        words = (
            f"rank {lowest[0]} is behind the others in NCCL's watchdog counters "
            f"(last enqueued work {enqueued}, last completed {completed})"
        )
        return Culprit(lowest, words, evidence)
    return None


def _stuck_watchdog(state: RunState) -> Culprit | None:
    """The ranks whose NCCL watchdog got stuck, when not every rank of the run says so."""
    stuck: dict[int, tuple[str, str, PodState]] = {}
    for pod in state.current_pods():
        for line in bounded(_lines(pod)):
            if (match := WATCHDOG_STUCK.search(line)) is not None:
                rank = message_rank(line)
                rank = rank if rank is not None else output_rank(line)
                if rank is not None:
                    stuck[rank] = (match.group("seconds"), line, pod)
    world = _world(state)
    if not stuck or len(stuck) > _MAX_MISSING or (world and len(stuck) >= len(world)):
        return None
    ranks = tuple(sorted(stuck))
    seconds = stuck[ranks[0]][0]
    words = (
        f"the NCCL watchdog of {_ranks(ranks)} got stuck for {seconds}s: an NCCL / CUDA call hangs there "
        "(or another thread holds the GIL)"
    )
    shown = [stuck[r] for r in ranks][:4]
    return Culprit(ranks, words, tuple(e for _, line, pod in shown for e in log_facts(pod, [line])))


_ELASTIC_PID_RANK = re.compile(r"rank\s{0,10}: (?P<rank>\d{1,7}) \(local_rank")


def _pid_rank(lines: tuple[str, ...], pid: str) -> int | None:
    """The rank torch elastic's ``Root Cause`` block gives process ``pid`` (``rank : 3 (local_rank: 1)``
    a line or two above ``exitcode : -9 (pid: 4242)``)."""
    for i, line in enumerate(lines):
        if f"(pid: {pid})" in line:
            for above in reversed(lines[max(0, i - 3) : i]):
                if (match := _ELASTIC_PID_RANK.search(above)) is not None:
                    return int(match.group("rank"))
    return None


def _elastic_timer(state: RunState) -> Culprit | None:
    """torch elastic's timer server reaping a process whose timer expired: its rank where the output
    gives it, else the process, honestly."""
    for pod in state.current_pods():
        lines = bounded(_lines(pod))
        for line in reversed(lines):
            if (match := ELASTIC_TIMER.search(line)) is None:
                continue
            pid = match.group("pid")
            rank = message_rank(line)
            rank = rank if rank is not None else output_rank(line)
            rank = rank if rank is not None else _pid_rank(lines, pid)
            scopes = match.group("scopes").strip()
            timers = f" (expired timers: {scopes})" if scopes else ""
            who = (
                f"rank {rank} (process {pid})"
                if rank is not None
                else f"process {pid} (its rank is not in the output)"
            )
            words = f"torch elastic's timer server reaped {who}{timers}: it ran past its timer"
            return Culprit((rank,) if rank is not None else (), words, log_facts(pod, [line]))
    return None


def _stopped_first(state: RunState, ctx: Context) -> Culprit | None:
    last: dict[int, tuple[datetime, PodState]] = {}
    for pod in state.current_pods():
        for rank, at in pod.rank_output.items():
            if rank is not None and (rank not in last or at > last[rank][0]):
                last[rank] = (at, pod)
    if len(last) < 2:
        return None
    ordered = sorted(last.items(), key=lambda item: item[1][0])
    (rank, (at, pod)), (_, (next_at, _)) = ordered[0], ordered[1]
    if (next_at - at).total_seconds() < ctx.thresholds.culprit_gap_s:
        return None
    words = (
        f"rank {rank}'s output stopped first (its last line at {at:%H:%M:%S}, "
        f"the other ranks' at {next_at:%H:%M:%S} or later)"
    )
    return Culprit((rank,), words, (pod_fact(pod, f"rank {rank} last output", at.isoformat()),))


def culprit(state: RunState, ctx: Context) -> Culprit | None:
    """The rank(s) the run's hang waits for, where its output tells (see the module)."""
    return (
        _horovod(state)
        or _monitored_barrier(state)
        or _nccl(state)
        or _stuck_watchdog(state)
        or _elastic_timer(state)
        or _stopped_first(state, ctx)
    )


def _ranks(ranks: tuple[int, ...]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + listing([str(r) for r in ranks])
