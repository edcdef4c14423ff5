"""No unauthenticated exhaustion of the admission webhook: what all connections hold together is
bounded, and so is what one review costs.

Without mutual TLS anyone who reaches the port can open connections, start uploads and send
costly bodies. Here the webhook (on a loopback port, raw TLS sockets sending what an attacker
would) keeps at most ``max_connections`` (a new one closes the one that waited longest for its
client; only when every connection is being answered is it refused), drops handshakes and idle
connections at their deadlines, holds large bodies within a pool and lets go of a stalled one at
its deadline, refuses a body of too many JSON items before parsing it, and keeps answering the
API server's reviews while costly bodies are being sent.
"""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
from typing import Any

import pytest

from controller.testing.waits import until
from tests.admission.rawtls import GUARD_S, Bus, RawClient, emptied, opened, serving
from tests.audit_helpers import T0, Certificate, a_mpijob, admission_review
from watchers.admission.reviews import MAX_PATH_CHARS, TooCostly, review
from watchers.admission.webhook import AdmissionWebhook

KIB = 1 << 10


@pytest.fixture
def bus() -> Bus:
    return Bus()


def counted(webhook: AdmissionWebhook, name: str) -> float | None:
    return webhook.metrics.registry.get_sample_value(name)


def post(body: bytes, *, length: int | None = None) -> bytes:
    head = (
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body) if length is None else length}\r\n\r\n"
    )
    return head.encode() + body


def a_review(uid: str | None = None) -> bytes:
    return json.dumps(admission_review("CREATE", a_mpijob(), uid=uid)).encode()


async def reviewed(webhook: AdmissionWebhook, certificate: Certificate, body: bytes) -> tuple[int, Any]:
    """Send one review on a new connection and read its answer."""
    client = await RawClient.open(webhook, certificate)
    try:
        await client.send(post(body))
        status, _, answer = await client.answer()
        return status, answer
    finally:
        await client.close()


def deep_update(fields: int, changed: int, depth: int = 185) -> bytes:
    """An MPIJob UPDATE whose spec nests ``depth`` objects over ``fields`` fields, the first
    ``changed`` of which differ between the old and the new object (the security review's
    probe had 116,000 of them, all changed, 190 levels deep: 2.75 MiB)."""

    def nest(leaf: dict[str, int]) -> dict[str, Any]:
        node: dict[str, Any] = leaf
        for _ in range(depth):
            node = {"k": node}
        return node

    old = a_mpijob()
    new = copy.deepcopy(old)
    old["spec"] = nest({f"f{i:06d}": 1 for i in range(fields)})
    new["spec"] = nest({f"f{i:06d}": 2 if i < changed else 1 for i in range(fields)})
    return json.dumps(admission_review("UPDATE", new, old=old), separators=(",", ":")).encode()


# --------------------------------------------------------------------------- connections


async def test_a_connection_beyond_the_cap_closes_the_one_that_waited_longest(
    certificate: Certificate, bus: Bus
) -> None:
    async with (
        serving(certificate, bus, max_connections=2) as webhook,
        opened(webhook, certificate, 2) as (oldest, younger),  # handshakes done, nothing sent: idle
    ):
        status, answer = await reviewed(webhook, certificate, a_review(uid="real"))
        assert (status, answer["response"]) == (200, {"uid": "real", "allowed": True})
        assert await oldest.closed(), "the longest-waiting connection made room"
        assert await younger.still_open()
        await younger.send(post(a_review(uid="younger")))
        assert (await younger.answer())[0] == 200
        assert [record.request_uid for record in bus.records] == ["real", "younger"]
        assert counted(webhook, "mpijc_admission_connections_evicted_total") == 1


async def test_when_every_connection_is_being_answered_a_new_one_is_refused(
    certificate: Certificate, bus: Bus
) -> None:
    bus.hold = True  # both reviews wait for NATS: their connections are being answered
    async with serving(certificate, bus, max_connections=2, publish_timeout_s=GUARD_S) as webhook:
        async with opened(webhook, certificate, 2) as (first, second):
            await first.send(post(a_review(uid="first")))
            await second.send(post(a_review(uid="second")))
            await until(lambda: bus.waiting == 2, what=lambda: f"{bus.waiting} reviews publishing")
            with pytest.raises((ConnectionError, ssl.SSLError)):  # closed before its TLS handshake
                await RawClient.open(webhook, certificate)
            assert counted(webhook, "mpijc_admission_connections_refused_total") == 1
            bus.release()
            assert (await first.answer())[2]["response"]["uid"] == "first"
            assert (await second.answer())[2]["response"]["uid"] == "second"
        await emptied(webhook)
        assert (await reviewed(webhook, certificate, a_review(uid="later")))[0] == 200


async def test_a_connection_that_does_not_finish_its_handshake_is_dropped(
    certificate: Certificate, bus: Bus
) -> None:
    async with (
        serving(certificate, bus, handshake_timeout_s=0.3) as webhook,
        opened(webhook, certificate, 2, tls=False) as (silent, halfway),
    ):
        await halfway.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
        assert await silent.closed()
        assert await halfway.closed()
        await emptied(webhook)


async def test_an_idle_connection_is_closed_after_keep_alive(certificate: Certificate, bus: Bus) -> None:
    async with (
        serving(certificate, bus, keep_alive_s=0.3) as webhook,
        opened(webhook, certificate, 2) as (fresh, served),  # the fresh one never sends a byte
    ):
        await served.send(post(a_review()))
        assert (await served.answer())[0] == 200
        assert await fresh.closed()
        assert await served.closed()
        await emptied(webhook)


# --------------------------------------------------------------------------- large bodies


def padded_review(size: int, uid: str) -> bytes:
    """A valid review of ``size`` bytes (a long annotation)."""
    job = a_mpijob()
    job["metadata"]["annotations"] = {"note": ""}
    plain = len(json.dumps(admission_review("CREATE", job, uid=uid)).encode())
    job["metadata"]["annotations"]["note"] = "x" * (size - plain)
    body = json.dumps(admission_review("CREATE", job, uid=uid)).encode()
    assert len(body) == size
    return body


async def test_a_stalled_large_upload_holds_the_pool_until_its_deadline_then_lets_go(
    certificate: Certificate, bus: Bus
) -> None:
    limits = {"max_body_bytes": 256 * KIB, "max_buffered_bytes": 300 * KIB, "request_timeout_s": 1.0}
    async with serving(certificate, bus, **limits) as webhook:
        size = 200 * KIB
        async with opened(webhook, certificate, 1) as (stalled,):
            await stalled.send(post(padded_review(size, uid="stalled")[: size // 2], length=size))
            await until(lambda: webhook.bodies.held == size, what=lambda: f"{webhook.bodies.held} held")

            status, answer = await reviewed(webhook, certificate, padded_review(size, uid="second"))
            assert status == 503, "a second large body does not fit beside the stalled one"
            assert f"holds {size} of its {300 * KIB} bytes for large bodies" in answer["error"]
            status, answer = await reviewed(webhook, certificate, a_review(uid="small"))
            assert (status, answer["response"]["uid"]) == (200, "small"), (
                "a small review never waits on the pool"
            )

            status, _, answer = await stalled.answer()
            assert status == 408
            assert await stalled.closed()
        await emptied(webhook)
        assert webhook.bodies.held == 0, "the stalled body's bytes were let go"
        assert (await reviewed(webhook, certificate, padded_review(size, uid="later")))[0] == 200
        assert [record.request_uid for record in bus.records] == ["small", "later"]


# --------------------------------------------------------------------------- costly bodies


def test_the_security_reviews_update_is_refused_by_counting_before_it_is_parsed() -> None:
    body = deep_update(fields=116_000, changed=116_000, depth=188)
    assert len(body) > 2 << 20
    with pytest.raises(TooCostly, match=r"has 23\d{4} JSON items .*; at most 10000 are read"):
        review(body, T0)


def test_an_update_changed_everywhere_lists_its_first_paths_cut_short() -> None:
    reviewed_ = review(deep_update(fields=4000, changed=4000), T0)
    assert reviewed_.record is not None
    changes = reviewed_.record.changes
    assert len(changes) == 50 and changes[-1] == "…"
    assert changes[0] == "spec." + "k." * 185 + "f000000"
    assert changes[48].endswith(".f000048")


def test_a_record_stays_small_however_long_the_keys() -> None:
    old = a_mpijob()
    new = copy.deepcopy(old)
    key = "k" * (512 * KIB)
    old["spec"] = {key: {f"f{i}": 1 for i in range(60)}}
    new["spec"] = {key: {f"f{i}": 2 for i in range(60)}}
    record = review(json.dumps(admission_review("UPDATE", new, old=old)).encode(), T0).record
    assert record is not None
    assert len(record.changes) == 50
    assert all(len(path) <= MAX_PATH_CHARS and path.endswith("…") for path in record.changes)
    assert len(record.model_dump_json()) < 64 * KIB


async def test_reviews_are_answered_while_costly_bodies_are_being_sent(
    certificate: Certificate, bus: Bus
) -> None:
    over = post(deep_update(fields=116_000, changed=116_000))  # the security review's 2.75 MiB
    within = post(deep_update(fields=4700, changed=1))  # the costliest shape within the budget
    answers: dict[bytes, list[int]] = {over: [], within: []}
    stop = asyncio.Event()
    async with serving(certificate, bus) as webhook:

        async def attacker(data: bytes) -> None:
            while not stop.is_set():
                client = await RawClient.open(webhook, certificate)
                try:
                    await client.send(data)
                    answers[data].append((await client.answer())[0])
                finally:
                    await client.close()

        attackers = [asyncio.create_task(attacker(data)) for data in (over, over, within, within)]
        try:
            await until(lambda: all(answers.values()), what=lambda: "no costly body answered yet")
            before = {data: len(got) for data, got in answers.items()}
            for n in range(5):
                status, answer = await reviewed(webhook, certificate, a_review(uid=f"real-{n}"))
                assert (status, answer["response"]) == (200, {"uid": f"real-{n}", "allowed": True})
            await until(lambda: all(len(got) > before[data] for data, got in answers.items()))
            assert not any(task.done() for task in attackers), "the costly bodies kept coming meanwhile"
        finally:
            stop.set()
            await asyncio.gather(*attackers)
    assert set(answers[over]) == {413}
    assert set(answers[within]) == {200}
    real = [record.request_uid for record in bus.records if (record.request_uid or "").startswith("real-")]
    assert real == [f"real-{n}" for n in range(5)]
    deep = [record for record in bus.records if not (record.request_uid or "").startswith("real-")]
    assert deep and all(record.changes == ("spec." + "k." * 185 + "f000000",) for record in deep)
