"""Sentence helpers: durations, lists of pods and host names read the same everywhere."""

from __future__ import annotations

import pytest

from consumers.rules.state import RunState
from consumers.rules.wording import duration, host_label, listing, short_host
from controller.contract.events import BusEvent
from controller.testing.events import job, launcher, worker


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (30.9, "30s"),
        (60, "1m"),
        (1199, "19m"),
        (1200, "20m"),
        (3600, "1h"),
        (3900, "1h5m"),
        (-3, "0s"),
    ],
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("items", "text"),
    [([], ""), (["a"], "a"), (["a", "b"], "a and b"), (["a", "b", "c"], "a, b and c")],
    ids=["none", "one", "two", "three"],
)
def test_listing(items: list[str], text: str) -> None:
    assert listing(items) == text


@pytest.mark.parametrize(
    ("host", "short"),
    [
        ("pi-worker-1.pi.team-a.svc", "pi-worker-1"),
        ("10.4.2.17", "10.4.2.17"),
        ("(pi-worker-2)", "pi-worker-2"),
    ],
)
def test_short_host(host: str, short: str) -> None:
    assert short_host(host) == short


@pytest.mark.parametrize(
    ("host", "label"),
    [
        ("pi-worker-1.pi.team-a.svc", "worker-1"),
        ("gpu-node-2", "worker-2"),
        ("pi-launcher", "launcher"),
        ("elsewhere-7", "elsewhere-7"),
    ],
    ids=["pod-hostname", "node-name", "launcher", "unknown"],
)
def test_host_label(host: str, label: str) -> None:
    state = RunState.for_event(job("Running"))
    events: list[BusEvent] = [job("Running"), launcher(), *(worker(i) for i in range(4))]
    for event in events:
        state.apply(event)

    assert host_label(host, state) == label
