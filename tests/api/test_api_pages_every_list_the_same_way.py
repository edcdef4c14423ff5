"""Every list pages one way: ``limit`` (1 to 500) and ``cursor`` in, ``items`` and ``next_cursor`` out.

Cursors are versioned and name their list: one of another list, of an older encoding, or
made up is a 400 that says to pass ``next_cursor`` unchanged. (The walks themselves are in the
runs, audit and subscriptions tests.)
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.audit import AUDIT
from controller.api.paging import MAX_LIMIT
from controller.api.visible_runs import RUNS
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from tests.api_fixtures import ADMIN, USERS

ENGINE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.fixture
async def api() -> AsyncIterator[httpx.AsyncClient]:
    """Cursors are read before the database is: it goes nowhere here."""
    app = create_app(make_engine(ENGINE), PipelineMetrics(), StaticAccess(USERS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


def _old_runs_cursor() -> str:
    """A runs cursor as the API handed them out before cursors were versioned."""
    raw = json.dumps(["2026-11-20T10:00:00+00:00", "abc"], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.parametrize(
    ("path", "cursor"),
    [
        ("/api/v1/runs", AUDIT.encode(7)),
        ("/api/v1/audit", RUNS.encode((datetime(2026, 11, 20, tzinfo=UTC), "abc"))),
        ("/api/v1/runs", _old_runs_cursor()),
        ("/api/v1/audit", base64.urlsafe_b64encode(b"seq:7").decode()),
        ("/api/v1/audit", base64.urlsafe_b64encode(b'[2,"audit",7]').decode()),
        ("/api/v1/audit", base64.urlsafe_b64encode(b'[1,"audit",-7]').decode()),
        ("/api/v1/audit", base64.urlsafe_b64encode(b'[true,"audit",7]').decode()),
    ],
    ids=[
        "audit-on-runs",
        "runs-on-audit",
        "unversioned-runs",
        "old-audit",
        "future-version",
        "negative",
        "bool",
    ],
)
async def test_a_cursor_of_another_list_or_version_is_400(
    api: httpx.AsyncClient, path: str, cursor: str
) -> None:
    answer = await api.get(path, params={"cursor": cursor}, headers=ADMIN)
    assert answer.status_code == 400
    assert answer.json()["detail"] == (
        "cursor is not valid: pass the next_cursor of a previous page of this list, unchanged"
    )


def test_cursors_round_trip() -> None:
    key = (datetime(2026, 11, 20, 10, 0, 0, 123456, tzinfo=UTC), "b1fdb6b8-4d6d-4c82-a330-d3513782520d")
    assert RUNS.decode(RUNS.encode(key)) == key
    assert AUDIT.decode(AUDIT.encode(2**63 - 1)) == 2**63 - 1
    assert "=" not in RUNS.encode(key), "unpadded: nothing to escape in a URL"


def test_every_list_takes_limit_and_cursor_and_answers_items_and_next_cursor() -> None:
    spec = create_app(make_engine(ENGINE), PipelineMetrics()).openapi()
    schemas = spec["components"]["schemas"]
    lists: dict[str, Any] = {}
    for path, operations in spec["paths"].items():
        get = operations.get("get")
        if not get or not any(p["name"] == "cursor" for p in get.get("parameters", [])):
            continue
        params = {p["name"]: p["schema"] for p in get["parameters"]}
        answer = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        lists[path] = answer
        assert params["limit"]["maximum"] == MAX_LIMIT, path
        assert {"items", "next_cursor"} <= set(schemas[answer]["properties"]), path
    assert lists == {
        "/api/v1/runs": "RunPage",
        "/api/v1/namespaces/{namespace}/jobs/{name}/runs": "RunPage",
        "/api/v1/webhooks": "SubscriptionPage",
        "/api/v1/webhooks/{subscription_id}/deliveries": "DeliveryPage",
        "/api/v1/audit": "AuditPage",
        "/api/v1/runs/{uid}/logs": "LogPage",
    }
