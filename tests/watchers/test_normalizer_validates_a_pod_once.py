"""``normalize_pod`` validates a pod's event in one call, its containers, conditions and resources
as plain fields: it builds the event the nested models built one by one before (issue 40, the
watcher's CPU per event), and refuses what they refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from controller.contract.events import Condition, ContainerState, JobRef, PodObserved, Resources
from controller.contract.redaction import scrub, scrub_lines
from controller.testing import objects as k
from watchers.normalizing import MalformedObject, normalize_pod, parse_time, pod_owner

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
JOB = k.mpijob("pi", workers=2)
REF = JobRef(uid=JOB["metadata"]["uid"], kind="MPIJob", namespace="team-a", name="pi")


def _text(value: Any) -> Any:
    return scrub(value) if isinstance(value, str) else value


def _container(status: dict[str, Any], init: bool) -> ContainerState:
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated") or {}
    which = next((w for w in ("terminated", "waiting", "running") if w in state), "unknown")
    detail = state.get(which) or {}
    return ContainerState(
        name=str(status.get("name", "")),
        init=init,
        ready=bool(status.get("ready")),
        restart_count=int(status.get("restartCount") or 0),
        state=which,
        reason=_text(detail.get("reason")),
        message=_text(detail.get("message")),
        exit_code=detail.get("exitCode"),
        signal=detail.get("signal"),
        started_at=parse_time(detail.get("startedAt")),
        finished_at=parse_time(detail.get("finishedAt")),
        last_reason=_text(last.get("reason")),
        last_exit_code=last.get("exitCode"),
        last_finished_at=parse_time(last.get("finishedAt")),
    )


def model_by_model(obj: dict[str, Any], tail: tuple[str, ...]) -> PodObserved:
    """The pod's event as ``normalize_pod`` built it before: each nested model on its own."""
    meta, status, spec = obj["metadata"], obj.get("status") or {}, obj.get("spec") or {}
    owner = pod_owner(obj)
    assert owner is not None
    container = (spec.get("containers") or [None])[0] or {}
    res = container.get("resources") or {}
    return PodObserved(
        change="MODIFIED",
        job=REF,
        uid=meta["uid"],
        name=meta["name"],
        namespace=meta.get("namespace", REF.namespace),
        resource_version=meta["resourceVersion"],
        role=owner["role"],
        replica=owner["replica"],
        index=owner["index"],
        phase=status.get("phase") or "Pending",
        reason=_text(status.get("reason")),
        message=_text(status.get("message")),
        node=spec.get("nodeName"),
        conditions=tuple(
            Condition(
                type=str(c.get("type", "")),
                status=str(c.get("status", "Unknown")),
                reason=_text(c.get("reason")),
                message=_text(c.get("message")),
                last_transition_time=parse_time(c.get("lastTransitionTime")),
            )
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        ),
        containers=(
            *(_container(s, init=True) for s in status.get("initContainerStatuses") or ()),
            *(_container(s, init=False) for s in status.get("containerStatuses") or ()),
        ),
        resources=Resources(
            requests={n: str(v) for n, v in (res.get("requests") or {}).items()},
            limits={n: str(v) for n, v in (res.get("limits") or {}).items()},
        ),
        log_tail=scrub_lines(tail),
        created_at=parse_time(meta.get("creationTimestamp")) or NOW,
        observed_at=NOW,
    )


TEXT = st.one_of(
    st.none(),
    st.sampled_from(["OOMKilled", "Error", "Completed", "CrashLoopBackOff", "token=hunter2", "a\x00b"]),
    st.text(max_size=20),
    st.integers(),  # not text: refused by both
)
NUMBER = st.one_of(st.none(), st.integers(-300, 300), st.sampled_from(["1", "x", 1.5, True]))
TIME = st.one_of(
    st.none(),
    st.just("2026-11-20T10:00:20Z"),
    st.just("2026-11-20T10:00:20.123456Z"),
    st.just("2026-11-20T10:00:20"),  # no zone: UTC
    st.just("yesterday"),  # refused by both
)
DETAIL = st.fixed_dictionaries(
    {},
    optional={
        "reason": TEXT,
        "message": TEXT,
        "exitCode": NUMBER,
        "signal": NUMBER,
        "startedAt": TIME,
        "finishedAt": TIME,
    },
)
STATUS = st.fixed_dictionaries(
    {"name": st.sampled_from(["worker", "init", ""])},
    optional={
        "ready": st.booleans(),
        "restartCount": st.integers(0, 5),
        "state": st.dictionaries(st.sampled_from(["waiting", "running", "terminated"]), DETAIL, max_size=2),
        "lastState": st.fixed_dictionaries({}, optional={"terminated": DETAIL}),
    },
)
CONDITION = st.fixed_dictionaries(
    {"type": st.sampled_from(["Ready", "PodScheduled", "DisruptionTarget"])},
    optional={
        "status": st.sampled_from(["True", "False"]),
        "reason": TEXT,
        "message": TEXT,
        "lastTransitionTime": TIME,
    },
)
QUANTITY = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from(["8", 8, "16Gi"])
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    containers=st.lists(STATUS, max_size=3),
    inits=st.lists(STATUS, max_size=2),
    conditions=st.lists(CONDITION, max_size=3),
    phase=st.sampled_from([None, "Running", "Failed", "Bogus"]),
    reason=TEXT,
    requests=QUANTITY,
    limits=QUANTITY,
    tail=st.lists(st.sampled_from(["step 1", "password=x", "\x1b[31mred"]), max_size=3),
)
def test_one_validation_builds_what_the_nested_models_built(
    containers: list[dict[str, Any]],
    inits: list[dict[str, Any]],
    conditions: list[dict[str, Any]],
    phase: str | None,
    reason: Any,
    requests: dict[str, Any],
    limits: dict[str, Any],
    tail: list[str],
) -> None:
    pod = k.pod(JOB, "worker", 1, node="gpu-1")
    pod["status"] = {
        "phase": phase,
        "reason": reason,
        "conditions": conditions,
        "containerStatuses": containers,
        "initContainerStatuses": inits,
    }
    pod["spec"]["containers"][0]["resources"] = {"requests": requests, "limits": limits}
    try:
        expected: PodObserved | None = model_by_model(pod, tuple(tail))
    except (ValidationError, MalformedObject):
        expected = None
    if expected is None:
        try:
            normalize_pod(pod, "MODIFIED", REF, NOW, tuple(tail))
        except MalformedObject:
            return
        raise AssertionError("the nested models refused this pod; normalize_pod took it")
    built = normalize_pod(pod, "MODIFIED", REF, NOW, tuple(tail))
    assert built == expected
    assert built.model_dump_json() == expected.model_dump_json()
    assert built.model_fields_set == expected.model_fields_set
    assert [c.model_fields_set for c in built.containers] == [c.model_fields_set for c in expected.containers]
