"""The webhook's input is bounded: big, slow and deeply nested bodies get a JSON answer, not a stall.

Anyone who can reach the Service can talk to the webhook (unless mutual TLS is on), so each
of these is answered with a well-formed JSON error (or the connection is dropped) without
reading the body whole, without waiting on a slow client, and without recursing; reviews
from the API server meanwhile are answered as usual. Raw TLS sockets send exactly the bytes
an attacker would.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from controller.contract.audit import parse_audit_record
from controller.contract.settings import AdmissionSettings
from tests.admission.rawtls import Bus, RawClient, serving
from tests.audit_helpers import T0, Certificate, a_mpijob, admission_review
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.reviews import json_depth, review
from watchers.admission.webhook import AdmissionWebhook

LIMIT = 64 << 10
DEADLINE_S = 1.0


@pytest.fixture
def bus() -> Bus:
    return Bus()


@pytest.fixture
async def webhook(certificate: Certificate, bus: Bus) -> AsyncIterator[AdmissionWebhook]:
    async with serving(
        certificate, bus, publish_timeout_s=0.2, max_body_bytes=LIMIT, request_timeout_s=DEADLINE_S
    ) as hook:
        yield hook


@pytest.fixture
async def default_webhook(certificate: Certificate, bus: Bus) -> AsyncIterator[AdmissionWebhook]:
    """The webhook with its default limits (3 MiB bodies, 10,000 JSON items, depth 200)."""
    async with serving(certificate, bus) as hook:
        yield hook


def head(length: int | None = None, chunked: bool = False) -> bytes:
    lines = ["POST /validate HTTP/1.1", "host: localhost", "content-type: application/json"]
    if length is not None:
        lines.append(f"content-length: {length}")
    if chunked:
        lines.append("transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_a_declared_oversized_body_is_refused_before_a_byte_of_it_is_read(
    webhook: AdmissionWebhook, certificate: Certificate
) -> None:
    raw = await RawClient.open(webhook, certificate)
    try:
        await raw.send(head(length=3 << 30))  # 3 GiB announced, nothing sent
        status, headers, answer = await raw.answer(within_s=DEADLINE_S / 2)
        assert status == 413
        assert headers["connection"] == "close"
        assert f"at most {LIMIT}" in answer["error"]
    finally:
        await raw.close()


async def test_a_chunked_body_is_counted_as_it_streams(
    webhook: AdmissionWebhook, certificate: Certificate
) -> None:
    raw = await RawClient.open(webhook, certificate)
    try:
        await raw.send(head(chunked=True))
        chunk = b" " * 8192
        for _ in range(LIMIT // len(chunk) + 1):  # just over the limit, and no final chunk
            await raw.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        status, _, answer = await raw.answer(within_s=DEADLINE_S / 2)
        assert status == 413
        assert f"over {LIMIT} bytes" in answer["error"]
        assert await raw.closed(within_s=2)
    finally:
        await raw.close()


async def trickle(raw: RawClient, stop: asyncio.Event) -> None:
    """Send a review's headers, then its body one byte per 0.1 s, until told or disconnected."""
    body = json.dumps(admission_review("CREATE", a_mpijob())).encode()
    await raw.send(head(length=len(body)))
    for byte in body:
        if stop.is_set():
            return
        try:
            await raw.send(bytes([byte]))
        except (ConnectionError, ssl.SSLError):
            return
        await asyncio.sleep(0.1)


async def test_a_slow_upload_gets_408_and_is_dropped(
    webhook: AdmissionWebhook, certificate: Certificate
) -> None:
    raw = await RawClient.open(webhook, certificate)
    stop = asyncio.Event()
    sender = asyncio.create_task(trickle(raw, stop))
    try:
        status, headers, answer = await raw.answer(within_s=DEADLINE_S + 1.5)
        assert status == 408
        assert headers["connection"] == "close"
        assert "did not arrive within 1 s" in answer["error"]
        assert await raw.closed(within_s=2)
    finally:
        stop.set()
        await sender
        await raw.close()


async def test_slow_headers_are_timed_out_too(webhook: AdmissionWebhook, certificate: Certificate) -> None:
    raw = await RawClient.open(webhook, certificate)
    try:
        await raw.send(b"POST /validate HTTP/1.1\r\nhost: local")  # and nothing more
        status, _, _ = await raw.answer(within_s=DEADLINE_S + 1.5)
        assert status == 408
    finally:
        await raw.close()


@pytest.mark.parametrize("deadline_s", [4.0])
async def test_twelve_stalled_uploads_neither_block_reviews_nor_stay(
    certificate: Certificate, bus: Bus, deadline_s: float
) -> None:
    settings = AdmissionSettings(
        host="127.0.0.1",
        port=0,
        cert_file=certificate.cert,
        key_file=certificate.key,
        request_timeout_s=deadline_s,
    )
    async with AdmissionWebhook(
        settings, bus, AdmissionMetrics(CollectorRegistry()), clock=lambda: T0
    ) as webhook:
        await twelve_stalled_uploads(webhook, certificate, bus, deadline_s)


async def twelve_stalled_uploads(
    webhook: AdmissionWebhook, certificate: Certificate, bus: Bus, deadline_s: float
) -> None:
    stalled = [await RawClient.open(webhook, certificate) for _ in range(12)]
    stop = asyncio.Event()
    senders = [asyncio.create_task(trickle(raw, stop)) for raw in stalled]
    try:
        await asyncio.sleep(0.3)  # all twelve are mid-upload
        loop = asyncio.get_running_loop()
        context = certificate.trusted()
        async with httpx.AsyncClient(base_url=f"https://localhost:{webhook.port}", verify=context) as client:
            for _ in range(3):
                body = admission_review("CREATE", a_mpijob())
                started = loop.time()
                response = await client.post("/validate", json=body)
                assert response.status_code == 200
                assert response.json()["response"] == {"uid": body["request"]["uid"], "allowed": True}
                assert loop.time() - started < deadline_s / 3, "answered while the stalled ones wait"
        assert len(bus.records) == 3
        answers = await asyncio.gather(*(raw.answer(within_s=deadline_s + 2) for raw in stalled))
        assert [status for status, _, _ in answers] == [408] * 12
        for _ in range(100):  # the server let go of every one of them
            if not webhook._connections:
                break
            await asyncio.sleep(0.02)
        assert not webhook._connections
    finally:
        stop.set()
        await asyncio.gather(*senders)
        for raw in stalled:
            await raw.close()


DEEP = 100_000


@pytest.mark.parametrize(
    "content",
    [
        b"[" * DEEP + b"]" * DEEP,
        b'{"a":' * DEEP + b"1" + b"}" * DEEP,
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":'
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}}",
        b"[" * DEEP,  # unterminated too
    ],
    ids=["arrays", "objects", "inside-a-review", "unterminated"],
)
async def test_deep_nesting_is_refused_before_it_is_parsed(
    default_webhook: AdmissionWebhook, certificate: Certificate, bus: Bus, content: bytes
) -> None:
    """100,000 levels are 100,000 items: over the item budget, refused by counting bytes."""
    async with certificate.client(default_webhook.port) as client:
        response = await client.post(
            "/validate", content=content, headers={"content-type": "application/json"}
        )
        assert response.status_code == 413
        assert re.search(r"has 10000\d JSON items .*; at most 10000 are read", response.json()["error"])
        assert (await client.get("/healthz")).text == "ok\n", "the server is still there"
    assert bus.records == []


@pytest.mark.parametrize(
    ("depth", "message"),
    [
        (300, "JSON nested 303 deep; at most 200 is accepted"),
        (5000, "JSON nested deeper than the parser goes"),
    ],
)
async def test_deep_nesting_within_the_item_budget_gets_a_400_not_a_recursion_error(
    default_webhook: AdmissionWebhook, certificate: Certificate, bus: Bus, depth: int, message: str
) -> None:
    body = admission_review("UPDATE", a_mpijob(), old=a_mpijob())
    deep: Any = 1
    for _ in range(depth):
        deep = {"k": deep}
    body["request"]["object"]["spec"] = deep
    async with certificate.client(default_webhook.port) as client:
        content = json.dumps(body).encode() if depth < 900 else _deep_json(body, depth)
        response = await client.post(
            "/validate", content=content, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400
        assert message in response.json()["error"]
    assert bus.records == []


def _deep_json(body: dict[str, Any], depth: int) -> bytes:
    """``body`` with its object's spec ``depth`` objects deep (json.dumps would recurse that deep)."""
    body["request"]["object"]["spec"] = "SPEC"
    return json.dumps(body).encode().replace(b'"SPEC"', b'{"k":' * depth + b"1" + b"}" * depth)


def test_brackets_inside_strings_are_text() -> None:
    job = a_mpijob()
    plain = json_depth(admission_review("CREATE", job))
    job["metadata"]["labels"]["note"] = "[" * 2000 + '\\"{' * 2000  # 4,000 items counted, none nested
    body = json.dumps(admission_review("CREATE", job)).encode()
    assert json_depth(json.loads(body)) == plain == 12
    reviewed = review(body, T0)
    assert reviewed.outcome == "recorded"


@pytest.mark.parametrize(
    "content",
    [b"", b"null", b"\xff\xfe", b"1" * 5000, b'{"kind": "AdmissionReview"', b'"' + b"\\" * 3],
    ids=["empty", "null", "not-utf8", "long-number", "truncated", "open-string"],
)
async def test_every_malformed_body_gets_a_json_400(
    webhook: AdmissionWebhook, certificate: Certificate, content: bytes
) -> None:
    context = certificate.trusted()
    async with httpx.AsyncClient(base_url=f"https://localhost:{webhook.port}", verify=context) as client:
        response = await client.post(
            "/validate", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"].startswith("not an AdmissionReview")


def test_records_without_a_caller_still_parse() -> None:
    """Records published before ``caller`` existed (lifecycle ones never have one)."""
    record = review(json.dumps(admission_review("CREATE", a_mpijob())).encode(), T0).record
    assert record is not None
    old = record.model_dump(mode="json")
    del old["caller"]
    assert parse_audit_record(json.dumps(old)).caller is None
