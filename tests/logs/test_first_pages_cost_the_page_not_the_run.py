"""A page of a run's logs reads the stored batches only until every container passed it: a first
page of a long run costs about one batch per container, not the run, and is still merged by time
(a container whose old lines were stored late keeps the page open until they are read), and the
pages after it walk every line once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from controller.api.logs import Searching, SearchLimits
from tests.api_fixtures import ADMIN, T0, insert_runs, run_row
from tests.conftest import Stage
from tests.log_fixtures import in_process, log_batch, logs_api

P = ParamSpec("P")
R = TypeVar("R")
PODS = 4
ROUNDS = 12
LINES = 10


class Counted(Searching):
    """The search threads, counting the stored batches given to them to test."""

    def __init__(self, limits: SearchLimits) -> None:
        super().__init__(limits)
        self.batches = 0

    async def run(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        group = args[0]
        assert isinstance(group, list)
        self.batches += len(group)
        return await super().run(work, *args, **kwargs)


async def long_run(stage: Stage, late: bool) -> str:
    """A run whose pods wrote side by side, a batch per pod per round (times interleaved across
    pods); with ``late``, one more pod's lines, written first, stored after all the others."""
    uid = str(uuid.uuid4())
    await insert_runs(stage.engine, [run_row("team-a", "llm", T0, uid=uid, phase="Running")])
    batches = [
        log_batch(
            uid,
            f"llm-worker-{p}",
            "worker",
            [(r + 0.01 * i + 0.001 * p, None, f"w{p} r{r} l{i}") for i in range(LINES)],
        )
        for r in range(ROUNDS)
        for p in range(PODS)
    ]
    if late:  # a follow that resumed after an outage: stored last, written before every other line
        batches.append(
            log_batch(uid, "llm-launcher", "launcher", [(-1 + 0.1 * i, None, f"late {i}") for i in range(3)])
        )
    await stage.publish_logs(batches)
    return uid


def in_time_order() -> list[str]:
    """The pods' lines of :func:`long_run` merged by time."""
    return [f"w{p} r{r} l{i}" for r in range(ROUNDS) for i in range(LINES) for p in range(PODS)]


def app_of(stage: Stage, searching: Searching) -> Any:
    app = logs_api(stage)
    app.state.log_search = searching
    return app


async def test_a_first_page_reads_about_a_batch_per_container_not_the_run(stage: Stage) -> None:
    uid = await long_run(stage, late=False)
    searching = Counted(SearchLimits(budget_s=60.0))
    async with in_process(app_of(stage, searching)) as http:
        page = (await http.get(f"/api/v1/runs/{uid}/logs", headers=ADMIN, params={"limit": "5"})).json()
    assert page["partial"] is False
    assert [item["text"] for item in page["items"]] == in_time_order()[:5]
    assert page["next_cursor"] is not None
    assert searching.batches < PODS * ROUNDS // 2  # one pull, not the run's 48 batches


async def test_old_lines_stored_late_still_open_the_page_and_every_page_walks_each_line_once(
    stage: Stage,
) -> None:
    uid = await long_run(stage, late=True)
    searching = Counted(SearchLimits(budget_s=60.0))
    walked: list[str] = []
    async with in_process(app_of(stage, searching)) as http:
        cursor = None
        for _ in range(100):
            params = {"limit": "7"} | ({"cursor": cursor} if cursor else {})
            page = (await http.get(f"/api/v1/runs/{uid}/logs", headers=ADMIN, params=params)).json()
            assert page["partial"] is False
            walked += [item["text"] for item in page["items"]]
            if (cursor := page["next_cursor"]) is None:
                break
    assert cursor is None
    assert walked[:4] == ["late 0", "late 1", "late 2", "w0 r0 l0"]
    assert walked[3:] == in_time_order()  # merged by time, none lost, none twice
