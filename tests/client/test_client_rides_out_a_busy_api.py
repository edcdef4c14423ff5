"""A busy API (429, or 503 with ``Retry-After``, as the API answers while it reviews a caller's
access across many namespaces) is asked again, after the pause it asks for, and its answer then
returned; a busy answer without ``Retry-After``, or one busy answer too many, is
:class:`Unreachable`. Against a real HTTP server on loopback, answering over a real socket."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controller.client import AsyncClient, Exit, RunPage, Unreachable

PAGE = {"items": [], "next_cursor": None}


class Busy(ThreadingHTTPServer):
    """Answers each ``GET`` with the next of ``answers`` (status, ``Retry-After`` or None), then
    with 200 and an empty page of runs; remembers when each request came and what it asked."""

    daemon_threads = True

    def __init__(self, answers: list[tuple[int, str | None]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.asked: list[tuple[float, str, str | None]] = []
        """(monotonic time, path with query, Authorization header) of each request."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Busy

    def do_GET(self) -> None:
        self.server.asked.append((time.monotonic(), self.path, self.headers.get("Authorization")))
        status, after = self.server.answers.pop(0) if self.server.answers else (200, None)
        body = json.dumps(PAGE if status == 200 else {"detail": "reviewing access; retry"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if after is not None:
            self.send_header("Retry-After", after)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads :attr:`Busy.asked`."""


@pytest.fixture
def busy(request: pytest.FixtureRequest) -> Iterator[Busy]:
    server = Busy(list(request.param))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("busy", [[(429, "1"), (503, "1")]], indirect=True)
async def test_busy_answers_are_asked_again_after_the_pause_asked_and_the_answer_returned(busy: Busy) -> None:
    async with AsyncClient(busy.url, token="token-alice") as api:
        page = await api.runs("team-a", phase="Failed")

    assert page == RunPage.model_validate(PAGE)
    assert len(busy.asked) == 3
    assert {(path, auth) for _, path, auth in busy.asked} == {
        ("/api/v1/runs?namespace=team-a&phase=Failed&limit=100", "Bearer token-alice")
    }
    times = [at for at, _, _ in busy.asked]
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times)), times


@pytest.mark.parametrize("busy", [[(503, "0")] * 4], indirect=True)
async def test_an_api_busy_at_every_try_is_unreachable_with_its_retry_after(busy: Busy) -> None:
    async with AsyncClient(busy.url, token="token-alice") as api:
        with pytest.raises(Unreachable) as raised:
            await api.runs("team-a")

    assert len(busy.asked) == 4  # the tries the client makes
    assert raised.value.after == 0.0 and raised.value.status == Exit.REFUSED
    assert str(raised.value) == "HTTP 503: reviewing access; retry"


@pytest.mark.parametrize("busy", [[(503, None)]], indirect=True)
async def test_a_failure_without_retry_after_is_not_asked_again(busy: Busy) -> None:
    async with AsyncClient(busy.url, token="token-alice") as api:
        with pytest.raises(Unreachable, match="HTTP 503"):
            await api.runs("team-a")

    assert len(busy.asked) == 1
