"""A log read's CPU is bounded and off the event loop: an RE2 expression whose compiled program is
over the bound is a 400 naming it; a read that spends its budget answers a partial page whose
cursor walks the rest (no line lost, none twice); while searches hold every search thread,
``/healthz`` and another request are answered; the metrics port answers ``/healthz`` from its
own thread even while the API's loop is blocked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, ParamSpec, TypeVar

import httpx
import pytest
import uvicorn

from controller.api.app import metrics_app
from controller.api.logs import Searching, SearchLimits
from controller.api.server import serve_in_thread, server_config
from controller.contract.settings import ApiSettings
from controller.testing.ports import free_port
from controller.testing.waits import until
from tests.api_fixtures import ADMIN, T0, insert_runs, run_row
from tests.conftest import Stage
from tests.log_fixtures import in_process, log_batch, logs_api

P = ParamSpec("P")
R = TypeVar("R")
GUARD_S = 30.0
"""Longest a step may take before the test fails (a hang guard, not a measure)."""
HOSTILE = "(a?){1000}a{1000}c"
"""18 characters, 5,005 instructions: 8.8 s per 256 KiB batch of `a` lines on the loop, before."""
COSTLY = "(a?){150}a{150}c"
"""Allowed (755 instructions), and still the dearest kind of search over `a` lines."""


async def long_a_run(stage: Stage) -> str:
    """A run of team-a whose three pods wrote lines of `a` (and a few `step n`) in 9 batches, their
    timestamps interleaved across batches and pods."""
    import uuid

    uid = str(uuid.uuid4())
    await insert_runs(stage.engine, [run_row("team-a", "llm", T0, uid=uid, phase="Running")])
    batches = []
    for round_ in range(3):
        for p, (pod, role) in enumerate(
            [("llm-launcher", "launcher"), ("llm-worker-0", "worker"), ("llm-worker-1", "worker")]
        ):
            lines = [
                (round_ + 0.1 * i + 0.01 * p, None, f"step {round_}.{i} " + "a" * 2000) for i in range(8)
            ]
            batches.append(log_batch(uid, pod, role, lines))
    await stage.publish_logs(batches)
    return uid


@pytest.fixture
async def run_uid(stage: Stage) -> str:
    return await long_a_run(stage)


@pytest.mark.parametrize("expression", [HOSTILE, "(a?){400}a{400}c"], ids=["issue", "2005"])
async def test_an_expression_over_the_program_bound_is_400_naming_it(
    stage: Stage, run_uid: str, expression: str
) -> None:
    async with in_process(logs_api(stage, SearchLimits(max_program=1000))) as http:
        answer = await http.get(
            f"/api/v1/runs/{run_uid}/logs", headers=ADMIN, params={"q": expression, "regex": "true"}
        )
    assert answer.status_code == 400, answer.text
    assert (
        "1000" in answer.json()["detail"] and "MPIJC_API__LOG_SEARCH_MAX_PROGRAM" in answer.json()["detail"]
    )
    assert ("5005" if expression == HOSTILE else "2005") in answer.json()["detail"]


@pytest.mark.parametrize("expression", ["NCCL|CUDA", r"rank \d+ .*timeout", r"step 1\.\d", COSTLY])
async def test_ordinary_expressions_are_searched(stage: Stage, run_uid: str, expression: str) -> None:
    async with in_process(logs_api(stage, SearchLimits())) as http:
        answer = await http.get(
            f"/api/v1/runs/{run_uid}/logs", headers=ADMIN, params={"q": expression, "regex": "true"}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["partial"] is False
    assert len(answer.json()["items"]) == (24 if expression == r"step 1\.\d" else 0)


def seen(page: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(x["at"], x["pod"], x["text"][:12]) for x in page["items"]]


@pytest.mark.parametrize("limit", [5, 200], ids=["pages-within-a-stretch", "one-page-a-stretch"])
@pytest.mark.parametrize("q", [None, "step", r"step [02]\."], ids=["all", "keyword", "regex"])
async def test_a_read_over_its_budget_is_partial_and_its_cursor_walks_the_rest_once(
    stage: Stage, run_uid: str, q: str | None, limit: int
) -> None:
    params = {"limit": str(limit)} | ({} if q is None else {"q": q, "regex": str(q.startswith("step ["))})
    url = f"/api/v1/runs/{run_uid}/logs"
    async with in_process(logs_api(stage, SearchLimits(budget_s=60.0))) as http:
        whole: list[tuple[str, str, str]] = []
        cursor = None
        for _ in range(100):
            page = (
                await http.get(url, headers=ADMIN, params=params | ({"cursor": cursor} if cursor else {}))
            ).json()
            assert page["partial"] is False
            whole += seen(page)
            if (cursor := page["next_cursor"]) is None:
                break
    async with in_process(logs_api(stage, SearchLimits(budget_s=1e-9))) as http:  # a batch a read
        first = (await http.get(url, headers=ADMIN, params=params)).json()
        assert first["partial"] is True and first["scanned_until"] is not None
        assert first["next_cursor"] is not None
        walked = seen(first)
        cursor = first["next_cursor"]
        for _ in range(200):
            answer = await http.get(url, headers=ADMIN, params=params | {"cursor": cursor})
            assert answer.status_code == 200, answer.text
            assert answer.json()["partial"] is True
            walked += seen(answer.json())
            if (cursor := answer.json()["next_cursor"]) is None:
                break
    assert cursor is None
    expected = 72 if q in (None, "step") else 48
    assert len(whole) == expected
    assert len(walked) == len(set(walked)) == expected  # none twice
    assert sorted(walked) == sorted(whole)  # none lost


class Held(Searching):
    """The search threads, each holding its work until released (once every thread has some)."""

    def __init__(self, limits: SearchLimits) -> None:
        super().__init__(limits)
        self.holding = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    async def run(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        def held() -> R:
            with self.lock:
                self.holding += 1
            self.release.wait(GUARD_S)
            return work(*args, **kwargs)

        return await super().run(held)


async def test_health_and_another_request_are_answered_while_searches_hold_every_search_thread(
    stage: Stage, run_uid: str
) -> None:
    app = logs_api(stage, SearchLimits(threads=2, budget_s=60.0))
    held = app.state.log_search = Held(app.state.log_search.limits)
    url = f"/api/v1/runs/{run_uid}/logs"
    async with in_process(app) as http:
        searches = [
            asyncio.create_task(http.get(url, headers=ADMIN, params={"q": COSTLY, "regex": "true"}))
            for _ in range(4)
        ]
        await until(lambda: held.holding >= 2, GUARD_S, lambda: "the searches did not reach their threads")
        try:
            health = await asyncio.wait_for(http.get("/healthz"), GUARD_S)
            other = await asyncio.wait_for(http.get(f"/api/v1/runs/{run_uid}", headers=ADMIN), GUARD_S)
            assert not any(search.done() for search in searches)  # answered while every search ran
        finally:
            held.release.set()
        answers = await asyncio.wait_for(asyncio.gather(*searches), GUARD_S)
    assert health.status_code == 200
    assert other.status_code == 200, other.text
    assert [answer.status_code for answer in answers] == [200] * 4


@pytest.fixture
async def metrics_port(stage: Stage) -> AsyncIterator[str]:
    app = metrics_app(logs_api(stage, SearchLimits()), asyncio.get_running_loop())
    port = free_port()
    server = uvicorn.Server(server_config(app, ApiSettings(shutdown_grace_s=0.1), port, capped=False))
    task = asyncio.create_task(serve_in_thread(server, "metrics-port"))
    await until(lambda: server.started or task.done(), GUARD_S, lambda: "uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, GUARD_S)


async def test_the_metrics_port_answers_liveness_while_the_api_loop_is_blocked(metrics_port: str) -> None:
    statuses: list[int] = []
    answered = threading.Event()

    def probe() -> None:
        statuses.append(httpx.get(f"{metrics_port}/healthz", timeout=GUARD_S).status_code)
        answered.set()

    threading.Thread(target=probe, daemon=True).start()
    assert answered.wait(GUARD_S)  # blocks this loop, the API's: the probe is answered all the same
    assert statuses == [200]
    async with httpx.AsyncClient(base_url=metrics_port) as http:  # the store, asked on the API's loop
        assert (await http.get("/readyz")).status_code == 200
        assert (await http.get("/metrics")).status_code == 200
