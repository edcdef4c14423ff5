"""``GET /api/v1/runs/{uid}/logs``: a run's launcher and worker lines merged by timestamp (also a
pod whose lines were stored late, and one whose clock is behind), labelled with pod and rank,
paged with the API's cursor, filtered by pod, rank and time, searched by keyword or RE2, followed
as Server-Sent Events, and read only by who may read the run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.logs import RunLogs
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from tests.api_fixtures import ADMIN, USERS, bearer
from tests.conftest import Stage
from tests.live_events import read_events, serving
from tests.log_fixtures import BASE, S, in_process, log_batch, logs_api, run_with_logs


@pytest.fixture
async def run_uid(stage: Stage) -> str:
    return await run_with_logs(stage)


@pytest.fixture
async def client(stage: Stage) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(logs_api(stage)) as http:
        yield http


MERGED = [
    ("llm-worker-1", None, "sshd: accepted"),
    ("llm-launcher", 0, "[1,0]<stdout>:step 1 loss 2.0"),
    ("llm-worker-0", None, "sshd: accepted"),
    ("llm-worker-1", None, "CUDA error: an illegal memory access"),
    ("llm-launcher", 1, "[1,1]<stdout>:step 2 NCCL WARN retry"),
    ("llm-worker-0", None, "orted started"),
]


def seen(page: dict[str, object]) -> list[tuple[object, object, object]]:
    return [(x["pod"], x["rank"], x["text"]) for x in page["items"]]  # type: ignore[attr-defined, index]


async def test_lines_of_every_pod_are_merged_by_timestamp_and_labelled(
    client: httpx.AsyncClient, run_uid: str
) -> None:
    answer = await client.get(f"/api/v1/runs/{run_uid}/logs", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert seen(answer.json()) == MERGED
    assert answer.json()["next_cursor"] is None
    assert answer.json()["items"][0]["at"] == "2026-11-20T10:00:00.500000000Z"


async def test_pages_walk_the_merged_lines_once_each(client: httpx.AsyncClient, run_uid: str) -> None:
    walked: list[tuple[object, object, object]] = []
    cursor: str | None = None
    for _ in range(10):
        params = {"limit": "4"} | ({"cursor": cursor} if cursor else {})
        page = (await client.get(f"/api/v1/runs/{run_uid}/logs", headers=ADMIN, params=params)).json()
        walked += seen(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert walked == MERGED


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"q": "sshd"}, [MERGED[0], MERGED[2]]),
        ({"q": "nccl warn"}, [MERGED[4]]),  # case-insensitive keyword
        ({"q": r"^\[1,\d+\]<stdout>:step \d+ loss", "regex": "true"}, [MERGED[1]]),
        ({"q": "CUDA error|NCCL WARN", "regex": "true"}, [MERGED[3], MERGED[4]]),
        ({"rank": "1"}, [MERGED[4]]),
        ({"pod": "llm-worker-0"}, [MERGED[2], MERGED[5]]),
        ({"since": "2026-11-20T10:00:02Z", "until": "2026-11-20T10:00:03Z"}, [MERGED[2], MERGED[3]]),
    ],
    ids=["keyword", "keyword-any-case", "regex", "regex-alternatives", "rank", "pod", "time-window"],
)
async def test_lines_are_filtered_and_searched(
    client: httpx.AsyncClient,
    run_uid: str,
    params: dict[str, str],
    expected: list[tuple[object, object, object]],
) -> None:
    answer = await client.get(f"/api/v1/runs/{run_uid}/logs", headers=ADMIN, params=params)
    assert answer.status_code == 200, answer.text
    assert seen(answer.json()) == expected


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [
        ({"q": "(unclosed", "regex": "true"}, 400, "not a valid RE2 expression: missing ): (unclosed"),
        ({"q": "(a+)+\\1", "regex": "true"}, 400, "not a valid RE2 expression"),  # backreference: not RE2
        ({"q": "x" * 257}, 422, "q"),
        ({"rank": "-1"}, 422, "rank"),
        ({"cursor": "bm90YWN1cnNvcg"}, 400, "cursor"),
        ({"pod": "Not_A_Pod"}, 422, "pod"),
    ],
    ids=["unclosed-group", "backreference", "long-query", "negative-rank", "bad-cursor", "bad-pod"],
)
async def test_bad_parameters_are_a_clear_4xx(
    client: httpx.AsyncClient, run_uid: str, params: dict[str, str], status: int, says: str
) -> None:
    answer = await client.get(f"/api/v1/runs/{run_uid}/logs", headers=ADMIN, params=params)
    assert answer.status_code == status
    assert says in answer.json()["detail"] if status == 400 else says in answer.text
    assert "b'" not in answer.text  # RE2's message as words, not a Python bytes repr


async def test_only_who_may_read_the_run_reads_its_logs(client: httpx.AsyncClient, run_uid: str) -> None:
    assert (await client.get(f"/api/v1/runs/{run_uid}/logs", headers=bearer("token-bob"))).status_code == 404
    assert (
        await client.get(f"/api/v1/runs/{run_uid}/logs", headers=bearer("token-alice"))
    ).status_code == 200
    assert (await client.get(f"/api/v1/runs/{run_uid}/logs")).status_code == 401


async def test_follow_streams_new_lines_as_server_sent_events(stage: Stage, run_uid: str) -> None:
    later = [(9.0, 3, "[1,3]<stdout>:step 9 loss 1.0")]
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        url = f"{api.url}/api/v1/runs/{run_uid}/logs"
        params = {
            "follow": "true",
            "since": datetime.fromtimestamp(BASE / S + 2.5, UTC).isoformat(),
            "q": "step",
        }
        reading = asyncio.create_task(
            read_events(url, ADMIN, lambda e: "step 9" in e.data["text"], params=params)
        )
        await asyncio.sleep(0.5)
        await stage.publish_logs([log_batch(run_uid, "llm-launcher", "launcher", later)])
        events = await reading
    assert [(e.event, e.data["rank"], e.data["text"]) for e in events] == [
        ("line", 1, "[1,1]<stdout>:step 2 NCCL WARN retry"),
        ("line", 3, "[1,3]<stdout>:step 9 loss 1.0"),
    ]


async def test_a_follow_resumes_after_the_last_line_received(stage: Stage, run_uid: str) -> None:
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        url = f"{api.url}/api/v1/runs/{run_uid}/logs"
        params = {"follow": "true", "since": datetime.fromtimestamp(BASE / S + 2.5, UTC).isoformat()}
        (first,) = await read_events(url, ADMIN, lambda e: True, params=params)
        later = [(9.0, 3, "[1,3]<stdout>:step 9 loss 1.0"), (9.5, 3, "[1,3]<stdout>:step 10 loss 0.9")]
        await stage.publish_logs([log_batch(run_uid, "llm-launcher", "launcher", later)])
        resumed = await read_events(
            url, {**ADMIN, "Last-Event-ID": first.id}, lambda e: "step 10" in e.data["text"], params=params
        )
        bad = await read_events_status(url, {**ADMIN, "Last-Event-ID": "not-a-cursor"}, params)

    stored_after = [e.data["text"] for e in resumed]
    assert first.data["text"] not in stored_after and stored_after[-2:] == [t for _, _, t in later]
    assert len(stored_after) == len(set(stored_after)), "a line sent twice"
    assert bad == 400


async def read_events_status(url: str, headers: dict[str, str], params: dict[str, str]) -> int:
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(url, headers=headers, params=params)).status_code


ESCAPED = [
    (9.0, None, 'launcher: say "hi"'),
    (9.5, None, "GPU Température 80°C"),
    (9.7, None, "saved to C:\\data\\ckpt"),
]
"""Lines JSON escapes (quotes, backslashes) or stores as Unicode, as a launcher prints them."""


@pytest.fixture
async def escaped(stage: Stage, run_uid: str) -> str:
    """``run_uid``, its launcher having printed ``ESCAPED`` too."""
    await stage.publish_logs([log_batch(run_uid, "llm-launcher", "launcher", ESCAPED)])
    return run_uid


async def found(client: httpx.AsyncClient, uid: str, **params: str) -> list[str]:
    """The texts of the lines of run ``uid`` a search with ``params`` finds."""
    answer = await client.get(f"/api/v1/runs/{uid}/logs", headers=ADMIN, params=params)
    return [x["text"] for x in answer.json()["items"]]


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ('say "hi"', ['launcher: say "hi"']),
        ("TEMP", ["GPU Température 80°C"]),
        ("80°c", ["GPU Température 80°C"]),
        ("c:\\data", ["saved to C:\\data\\ckpt"]),
    ],
    ids=["quotes", "ascii-keyword-in-unicode-line", "unicode-keyword", "backslash"],
)
async def test_keywords_that_json_escapes_or_unicode_lines_are_found(
    client: httpx.AsyncClient, escaped: str, q: str, expected: list[str]
) -> None:
    assert await found(client, escaped, q=q) == expected


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (r'say "h\w"$', ['launcher: say "hi"']),
        (r"C:\\data\\", ["saved to C:\\data\\ckpt"]),
        (r"Temp.rature \d+°C", ["GPU Température 80°C"]),
        (r"cap of \d+ bytes", ["log cap of 2000 bytes reached for this run: no more kept"]),
    ],
    ids=["quotes", "backslash", "unicode", "the-cap-note"],
)
async def test_expressions_find_what_json_escapes_and_the_cap_note(
    client: httpx.AsyncClient, stage: Stage, escaped: str, q: str, expected: list[str]
) -> None:
    capped = log_batch(escaped, "llm-worker-0", "worker", [(9.8, None, "not stored")]).model_copy(
        update={"lines": (), "note": "log cap of 2000 bytes reached for this run: no more kept"}
    )
    await stage.publish_logs([capped])
    assert await found(client, escaped, q=q, regex="true") == expected


async def test_in_kubernetes_mode_reading_logs_needs_get_pods_log_there(
    stage: Stage, run_uid: str, sim: SimCluster
) -> None:
    sim.set_access(
        {"alice-token": {"username": "alice"}, "carol-token": {"username": "carol"}},
        [("alice", "mpijobs", "team-a"), ("carol", "mpijobs", "team-a"), ("carol", "pods", "team-a", "get")],
    )
    with KubeGateway.for_url(sim.url) as gateway:
        app = create_app(
            stage.engine,
            PipelineMetrics(),
            KubeAccessReviewer(gateway),
            run_logs=RunLogs(stage.js, stage.topology),
        )
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
            alice = await http.get(f"/api/v1/runs/{run_uid}/logs", headers=bearer("alice-token"))
            carol = await http.get(f"/api/v1/runs/{run_uid}/logs", headers=bearer("carol-token"))
    assert (alice.status_code, alice.json()["detail"]) == (
        403,
        "reading logs needs get on pods/log in namespace 'team-a'",
    )
    assert carol.status_code == 200 and len(carol.json()["items"]) == len(MERGED)
    reviewed = [r for r in sim.requests if r.path.endswith("/subjectaccessreviews")]
    assert reviewed, "the API asked Kubernetes"


async def test_without_a_logs_stream_the_answer_is_503_saying_why(stage: Stage, run_uid: str) -> None:
    elsewhere = Topology(prefix=f"{stage.topology.prefix}x")  # an installation whose LOGS was never declared
    app = create_app(
        stage.engine, PipelineMetrics(), StaticAccess(USERS), run_logs=RunLogs(stage.js, elsewhere)
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
        answer = await http.get(f"/api/v1/runs/{run_uid}/logs", headers=ADMIN)
    assert answer.status_code == 503
    assert "does not exist (yet): the migrate Job declares it" in answer.json()["detail"]
