"""A run's state as JSON-able data and back: the form the rules snapshot keeps it in
(:mod:`consumers.rules.snapshot`). Events keep their bus form, so a snapshot reads like the stream.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Required

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from consumers.rules.state import LiveLine, LiveStatus, PodState, RunState
from controller.contract.events import JobObserved, JobRef, K8sEventObserved, LogMark, PodObserved, PodUsage

__all__ = ["RunStateData", "run_state_from_data", "run_state_from_dict", "run_state_to_dict"]


class _LiveData(TypedDict, total=False):
    mark: Required[LogMark]
    status: object


class _PodData(TypedDict, total=False):
    """A pod as :func:`run_state_to_dict` writes it, its observation a model (times stay text)."""

    observed: Required[PodObserved]
    changed_at: object
    deleted: object
    log_tail: list[str]
    log_changed_at: object
    log_from_failure: object
    failed_since: object
    live: list[_LiveData]
    rank_output: list[Any]
    progress: list[Any]
    live_text: list[str]
    live_pending: list[str]


class RunStateData(TypedDict, total=False):
    """A run's state as :func:`run_state_to_dict` writes it, with its bus events validated: what a
    :class:`~pydantic.TypeAdapter` over it reads from JSON in one pass (:mod:`consumers.rules.snapshot`)."""

    ref: Required[JobRef]
    job: JobObserved | None
    phase_since: object
    finished_since: object
    deleted: object
    pods: list[_PodData]
    events: list[K8sEventObserved]
    last_pod_change_at: object
    last_log_at: object
    log_feed: object
    mesh_wait_since: object
    live_output_at: object
    usage: list[PodUsage]


_STATE_DATA: TypeAdapter[RunStateData] = TypeAdapter(RunStateData)


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse_when(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def run_state_to_dict(state: RunState) -> dict[str, object]:
    """``state`` as JSON-able data; :func:`run_state_from_dict` reverses it."""
    return {
        "ref": state.ref.model_dump(mode="json"),
        "job": state.job.model_dump(mode="json") if state.job is not None else None,
        "phase_since": _when(state.phase_since),
        "finished_since": _when(state.finished_since),
        "deleted": state.deleted,
        "pods": [
            {
                "observed": pod.observed.model_dump(mode="json"),
                "changed_at": _when(pod.changed_at),
                "deleted": pod.deleted,
                "log_tail": list(pod.log_tail),
                "log_changed_at": _when(pod.log_changed_at),
                "log_from_failure": pod.log_from_failure,
                "failed_since": _when(pod.failed_since),
                "live": [
                    {"mark": line.mark.model_dump(mode="json"), "status": line.status} for line in pod.live
                ],
                "rank_output": [[rank, _when(at)] for rank, at in pod.rank_output.items()],
                "progress": [
                    [rank, [[_when(at), step] for at, step in points]]
                    for rank, points in pod.progress.items()
                ],
                "live_text": list(pod.live_text),
                "live_pending": list(pod.live_pending),
            }
            for pod in state.pods.values()
        ],
        "events": [event.model_dump(mode="json") for event in state.events.values()],
        "last_pod_change_at": _when(state.last_pod_change_at),
        "last_log_at": _when(state.last_log_at),
        "log_feed": state.log_feed,
        "mesh_wait_since": _when(state.mesh_wait_since),
        "live_output_at": _when(state.live_output_at),
        "usage": [usage.model_dump(mode="json") for usage in state.usage.values()],
    }


def _status(value: object) -> LiveStatus:
    return value if value in ("pending", "confirmed", "recovered") else "pending"


def run_state_from_dict(data: dict[str, Any]) -> RunState:
    """The :class:`RunState` :func:`run_state_to_dict` wrote."""
    return run_state_from_data(_STATE_DATA.validate_python(data))


def run_state_from_data(data: RunStateData) -> RunState:
    """The :class:`RunState` of ``data`` (validated as :class:`RunStateData`)."""
    job = data.get("job")
    state = RunState(
        ref=data["ref"],
        job=job,
        phase_since=_parse_when(data.get("phase_since")),
        finished_since=_parse_when(data.get("finished_since")),
        deleted=bool(data.get("deleted")),
        last_pod_change_at=_parse_when(data.get("last_pod_change_at")),
        last_log_at=_parse_when(data.get("last_log_at")),
        log_feed=bool(data.get("log_feed")),
        mesh_wait_since=_parse_when(data.get("mesh_wait_since")),
        live_output_at=_parse_when(data.get("live_output_at")),
    )
    for raw in data.get("pods", ()):
        observed = raw["observed"]
        state.pods[observed.uid] = PodState(
            observed=observed,
            changed_at=_parse_when(raw.get("changed_at")) or observed.observed_at,
            deleted=bool(raw.get("deleted")),
            log_tail=tuple(raw.get("log_tail", ())),
            log_changed_at=_parse_when(raw.get("log_changed_at")),
            log_from_failure=bool(raw.get("log_from_failure")),
            failed_since=_parse_when(raw.get("failed_since")),
            live=[LiveLine(line["mark"], _status(line.get("status"))) for line in raw.get("live", ())],
            rank_output={
                rank: at for rank, when in raw.get("rank_output", ()) if (at := _parse_when(when)) is not None
            },
            progress={
                rank: [(at, int(step)) for when, step in points if (at := _parse_when(when)) is not None]
                for rank, points in raw.get("progress", ())
            },
            live_text=tuple(raw.get("live_text", ())),
            live_pending=tuple(raw.get("live_pending", ())),
        )
    for event in data.get("events", ()):
        state.events[event.uid] = event
    for usage in data.get("usage", ()):
        state.usage[usage.uid] = usage
    return state
