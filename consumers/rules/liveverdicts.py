"""What a line seen in a running job's output is worth, judged at each evaluation.

A signature line starts ``pending`` and is ``confirmed`` or ``recovered`` as the run goes on
(:class:`~consumers.rules.state.LiveLine` says when); :func:`judge_live` brings a run's lines to
what they are worth now and sets each pod's confirmed text (read like a failure-time tail) and
its pending text. The engine reads a run as it is, :func:`with_pending` (as if every pending
line were confirmed: the causes shown as ``pending`` findings) and :func:`without_live` (which
causes hold on lines seen live alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from consumers.rules.state import LiveLine, LiveStatus, PodState, RunState
from controller.contract.events import LogMark
from controller.contract.findings import Evidence
from controller.contract.thresholds import RuleThresholds

__all__ = ["has_live_text", "has_pending", "judge_live", "pending_mark", "with_pending", "without_live"]


def judge_live(state: RunState, now: datetime, thresholds: RuleThresholds) -> None:
    """Bring every pending live line to what it is worth at ``now`` (see :class:`LiveLine`)."""
    for pod in state.pods.values():
        if not pod.live:
            continue
        for line in pod.live:
            if line.mark.signature is not None and line.status == "pending":
                line.status = _verdict(state, pod, line.mark, now, thresholds)
        pod.live_text, pod.live_pending = _live_texts(pod.live)


def _verdict(
    state: RunState, pod: PodState, mark: LogMark, now: datetime, thresholds: RuleThresholds
) -> LiveStatus:
    if mark.fatal or pod.errored or state.phase == "Failed":
        return "confirmed"
    output = state.live_output_at
    if output is not None and (output - mark.at).total_seconds() >= thresholds.live_recovery_s:
        return "recovered"
    if (now - max(mark.at, output or mark.at)).total_seconds() >= thresholds.live_silence_s:
        return "confirmed"
    return "pending"


def pending_mark(state: RunState, evidence: Sequence[Evidence]) -> tuple[PodState, LogMark] | None:
    """The pending signature line a finding read from ``evidence`` rests on: one the evidence
    quotes, else one of a pod it names, else the run's earliest; ``None`` without any."""
    pending = [
        (pod, line.mark)
        for pod in state.pods.values()
        for line in pod.live
        if line.status == "pending" and line.mark.signature is not None
    ]
    if not pending:
        return None
    quoted = {e.value for e in evidence if e.field == "log"}
    named = {e.source.removeprefix("pod/") for e in evidence if e.source.startswith("pod/")}
    chosen = (
        [(pod, mark) for pod, mark in pending if mark.line in quoted]
        or [(pod, mark) for pod, mark in pending if pod.name in named]
        or pending
    )
    return min(chosen, key=lambda item: item[1].at)


def with_pending(state: RunState) -> RunState:
    """This run as the rules would see it if every pending live line were confirmed."""
    pods = {
        uid: replace(pod, live_text=pod.live_pending) if pod.live_pending != pod.live_text else pod
        for uid, pod in state.pods.items()
    }
    return state.with_pods(pods)


def without_live(state: RunState) -> RunState:
    """This run as the rules would see it without any line seen live."""
    pods = {uid: replace(pod, live_text=()) if pod.live_text else pod for uid, pod in state.pods.items()}
    return state.with_pods(pods)


def has_live_text(state: RunState) -> bool:
    """Some live line is read as a failure's account now."""
    return any(pod.live_text for pod in state.pods.values())


def has_pending(state: RunState) -> bool:
    """Some live line is still pending."""
    return any(pod.live_pending != pod.live_text for pod in state.pods.values())


def _live_texts(lines: list[LiveLine]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(confirmed lines, confirmed and pending lines), each a signature line's with the lines
    following it."""
    confirmed: list[str] = []
    pending: list[str] = []
    status: LiveStatus | None = None
    for line in lines:
        if line.mark.signature is not None:
            status = line.status
        if status == "confirmed":
            confirmed.append(line.mark.line)
        if status in ("confirmed", "pending"):
            pending.append(line.mark.line)
    return tuple(confirmed), tuple(pending)
