"""What a real Prometheus cannot be made to do on cue — answer 503, time out, refuse a query,
hand back partial data — and what the usage reading does then: bounded retries, a metric, no
exception, the watcher goes on; unconfigured, nothing runs at all."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from prometheus_client import CollectorRegistry

from controller.bus.publishing import Publisher
from controller.contract.events import MAX_PODS_PER_READING, message_id
from controller.contract.settings import UsageSettings
from controller.kube.resources import MPI_PODS
from controller.metrics import PipelineMetrics
from controller.prometheus import PrometheusReader, PrometheusRejectedError, PrometheusUnavailableError
from controller.testing.objects import with_container_state
from tests.usage_fixtures import correlator, running_job
from watchers.metrics import UsageMetrics
from watchers.usage import FINAL_TRIES, UsageProbe, reading_usage
from watchers.watching import WatchChange

Handler = Callable[[httpx.Request], httpx.Response]
SETTINGS = UsageSettings(url="http://prometheus.test:9090", retries=2, retry_backoff_s=0.001, step_s=30)


def _answer(series: list[dict[str, Any]]) -> httpx.Response:
    return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": series}})


def _reader(handler: Handler, settings: UsageSettings = SETTINGS) -> tuple[PrometheusReader, UsageMetrics]:
    metrics = UsageMetrics(CollectorRegistry())
    return PrometheusReader(
        settings, observe=metrics.observe, transport=httpx.MockTransport(handler)
    ), metrics


async def test_a_query_answered_503_is_retried_until_answered() -> None:
    answers = [httpx.Response(503), httpx.Response(503), _answer([])]
    reader, metrics = _reader(lambda request: answers.pop(0))
    async with reader:
        assert await reader.query("up", datetime.now(UTC)) == []
    assert metrics.sample("mpijc_usage_queries_total", outcome="retried") == 2
    assert metrics.sample("mpijc_usage_queries_total", outcome="ok") == 1


async def test_a_query_that_keeps_timing_out_is_given_up_after_the_retries() -> None:
    asked = 0

    def slow(request: httpx.Request) -> httpx.Response:
        nonlocal asked
        asked += 1
        raise httpx.ReadTimeout("timed out", request=request)

    reader, metrics = _reader(slow)
    async with reader:
        with pytest.raises(PrometheusUnavailableError, match="timed out"):
            await reader.query("up", datetime.now(UTC))
    assert asked == 3  # the first try and two retries, no more
    assert metrics.sample("mpijc_usage_queries_total", outcome="unavailable") == 1


async def test_a_refused_query_is_not_retried() -> None:
    asked: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        asked.append(parse_qs(request.content.decode())["query"][0])
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"})

    reader, metrics = _reader(refuse)
    async with reader:
        with pytest.raises(PrometheusRejectedError, match="bad_data: parse error"):
            await reader.query("up{", datetime.now(UTC))
    assert asked == ["up{"]
    assert metrics.sample("mpijc_usage_queries_total", outcome="rejected") == 1


async def test_the_bearer_token_is_read_again_for_every_query(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    seen: list[str | None] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return _answer([])

    reader, _ = _reader(record, SETTINGS.model_copy(update={"bearer_token_file": token}))
    async with reader:
        await reader.query("up", datetime.now(UTC))
        token.write_text("rotated\n")
        await reader.query("up", datetime.now(UTC))
    assert seen == ["Bearer first", "Bearer rotated"]


def _probe(handler: Handler) -> tuple[UsageProbe, UsageMetrics, Any]:
    known = correlator()
    run = running_job(known, "pi", "team-a", workers=2, started=datetime.now(UTC) - timedelta(minutes=5))
    reader, metrics = _reader(handler)
    probe = UsageProbe(SETTINGS, known, metrics, reader)
    for obj in run.pods.values():
        probe.track(WatchChange(MPI_PODS, "ADDED", obj))
    return probe, metrics, run


async def test_prometheus_down_costs_a_metric_and_a_warning_per_refresh_not_the_watcher(
    caplog: pytest.LogCaptureFixture,
) -> None:
    probe, metrics, run = _probe(lambda request: httpx.Response(503))
    ended = with_container_state(
        run.pods["pi-worker-1"], {"terminated": {"reason": "Error", "exitCode": 1}}, phase="Failed"
    )
    probe.track(WatchChange(MPI_PODS, "MODIFIED", ended))
    probe._clock = lambda: datetime.now(UTC) + timedelta(minutes=1)  # a step after the end
    async with asyncio.timeout(10):
        try:
            for refresh in range(FINAL_TRIES):
                assert await probe.read() == []
                assert metrics.sample("mpijc_usage_prometheus_up") == 0
                if refresh < FINAL_TRIES - 1:  # the final reading waits for Prometheus to come back …
                    assert run.pods["pi-worker-1"]["metadata"]["uid"] in probe.pods
        finally:
            await probe.aclose()
    assert run.pods["pi-worker-1"]["metadata"]["uid"] not in probe.pods  # … a bounded number of times
    assert run.pods["pi-worker-0"]["metadata"]["uid"] in probe.pods
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == FINAL_TRIES  # one per refresh, not one per run or pod


async def test_partial_answers_fill_what_they_hold(caplog: pytest.LogCaptureFixture) -> None:
    now = time.time()

    def partial(request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.content.decode())["query"][0]
        if "container_memory_working_set_bytes" in query:  # worker 0's series ends early; worker 1 has none
            points = [[now - 120 + 30 * i, str(2**30 * (i + 1))] for i in range(3)]
            return _answer([{"metric": {"pod": "pi-worker-0"}, "values": points}])
        return _answer([])  # no DCGM series at all, no CPU

    probe, metrics, _ = _probe(partial)
    try:
        readings = await probe.read()
    finally:
        await probe.aclose()
    (reading,) = readings
    pods = {p.name: p for p in reading.pods}
    assert pods["pi-worker-0"].memory_max_bytes == 3 * 2**30
    assert [v for _, v in pods["pi-worker-0"].memory_curve] == [2**30, 2 * 2**30, 3 * 2**30]
    assert pods["pi-worker-1"].memory_max_bytes is None and pods["pi-worker-1"].memory_curve == ()
    assert all(p.gpus is None and p.cpu_mean_cores is None for p in reading.pods)
    assert pods["pi-worker-1"].memory_limit_bytes == 16 * 2**30  # from the pod's spec all the same
    assert metrics.sample("mpijc_usage_prometheus_up") == 1
    assert not [r for r in caplog.records if r.levelname in {"WARNING", "ERROR"}]


async def test_without_a_prometheus_nothing_is_read_and_nothing_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    followed: list[WatchChange] = []
    loops, track = reading_usage(
        UsageSettings(),
        correlator(),
        Publisher.__new__(Publisher),  # never used: nothing is read
        PipelineMetrics(),
        asyncio.Event(),
        followed.append,
    )
    run = running_job(correlator(), "pi", "team-a", workers=1)
    for obj in run.pods.values():
        track(WatchChange(MPI_PODS, "ADDED", obj))
    assert loops == []
    assert len(followed) == 2  # the other probes still follow every pod
    assert not caplog.records


def _finished_at(obj: dict[str, Any], when: datetime) -> dict[str, Any]:
    done = {
        "terminated": {
            "reason": "Completed",
            "exitCode": 0,
            "finishedAt": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    }
    return with_container_state(obj, done, phase="Succeeded")


async def test_a_relist_after_a_change_of_leader_reads_only_the_pods_that_ended_lately() -> None:
    """A new leader's relist shows every finished pod that still exists: one that ended within the
    window gets its final reading (its predecessor may not have read it), older ones are left."""
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(parse_qs(request.content.decode())["query"][0])
        return _answer([])

    known = correlator()
    now = datetime.now(UTC)
    lately = running_job(known, "lately", "team-a", workers=1, started=now - timedelta(hours=2))
    long_ago = running_job(known, "long-ago", "team-a", workers=1, started=now - timedelta(days=2))
    reader, _ = _reader(answer)
    probe = UsageProbe(SETTINGS, known, UsageMetrics(CollectorRegistry()), reader)
    for run, ended in ((lately, now - timedelta(minutes=5)), (long_ago, now - timedelta(days=1))):
        for obj in run.pods.values():
            probe.track(WatchChange(MPI_PODS, "ADDED", _finished_at(obj, ended)))
    try:
        readings = await probe.read()
    finally:
        await probe.aclose()

    assert {p.name for p in probe.pods.values()} == set()  # read once, then let go
    (reading,) = readings
    assert reading.job.name == "lately" and all(p.final for p in reading.pods)
    assert all("long-ago" not in query for query in asked)


async def test_a_run_of_hundreds_of_pods_is_read_in_messages_of_bounded_size() -> None:
    known = correlator()
    run = running_job(known, "big", "team-a", workers=300)
    reader, _ = _reader(lambda request: _answer([]))
    probe = UsageProbe(SETTINGS, known, UsageMetrics(CollectorRegistry()), reader)
    for obj in run.pods.values():
        probe.track(WatchChange(MPI_PODS, "ADDED", obj))
    try:
        readings = await probe.read()
    finally:
        await probe.aclose()

    assert [len(r.pods) for r in readings] == [MAX_PODS_PER_READING, 301 - MAX_PODS_PER_READING]
    assert len({message_id(r) for r in readings}) == 2  # two messages, neither a duplicate of the other
