"""A batch's timeline rows for its pods are built once per dedup key (issue 40, the history
consumer's CPU per message): the later observations of a key (a pod's phase unchanged, a
container's termination told again) are skipped before their row is built. The rows written
are those of building every observation's rows and keeping each key's first, as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.contract.events import PodObserved
from controller.store.history import _pod_timeline, _unique_timeline
from controller.testing import events as eb

CONTAINER = st.one_of(
    st.builds(eb.running, restarts=st.integers(0, 2)),
    st.builds(eb.waiting, st.sampled_from(["ContainerCreating", "CrashLoopBackOff", "ImagePullBackOff"])),
    st.builds(
        eb.terminated, st.sampled_from(["OOMKilled", "Error", "Completed"]), st.sampled_from([0, 1, 137])
    ),
)
POD = st.builds(
    lambda index, phase, containers, change, reason, seconds: eb.worker(
        index,
        phase=phase,
        containers=containers,
        change=change,
        reason=reason,
        observed_at=eb.T0 + timedelta(seconds=seconds),
    ),
    st.integers(0, 2),
    st.sampled_from(["Pending", "Running", "Failed"]),
    st.lists(CONTAINER, min_size=1, max_size=2, unique_by=lambda c: c.state),
    st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
    st.sampled_from([None, "Evicted"]),
    st.integers(0, 600),
)


def every_row_built(pods: list[PodObserved]) -> list[dict[str, Any]]:
    """Each observation's rows built on their own, then the batch's first of each key."""
    return _unique_timeline([row for pod in pods for row in _pod_timeline(pod, set())])


@settings(max_examples=300, deadline=None)
@given(st.lists(POD, max_size=12))
def test_skipping_repeated_keys_writes_the_same_rows(pods: list[PodObserved]) -> None:
    seen: set[str] = set()
    skipping = _unique_timeline([row for pod in pods for row in _pod_timeline(pod, seen)])

    assert skipping == every_row_built(pods)
    assert seen == {row["dedup_key"] for row in skipping}
