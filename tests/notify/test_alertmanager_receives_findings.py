"""Findings → real NATS → notify consumer → PostgreSQL → pusher → a real Alertmanager (Debian's
``prometheus-alertmanager``) → the webhook receiver it routes to: the alert with its labels and
annotations, its resolve, a highly available pair notifying once, and an outage losing nothing."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import AlertmanagerSettings
from controller.store.models import NotifyAlert
from controller.testing.alertmanager import Alertmanager, alertmanager_binary
from controller.testing.drills import rows_in
from controller.testing.notify import finding, job, with_notify
from controller.testing.ports import free_port
from controller.testing.receivers import Receiver, Reply
from controller.testing.waits import until
from tests.notify_fixtures import Notifying


@pytest.fixture(scope="module")
def binary() -> Iterator[str]:
    found, why = alertmanager_binary()
    if found is None:
        pytest.skip(why)
    yield found


def sink(urls: list[str]) -> AlertmanagerSettings:
    """Fast timings: resent every second, retried after 50-200 ms."""
    return AlertmanagerSettings(urls=urls, resend_interval_s=1.0, retry_initial_s=0.05, retry_max_s=0.2)


def notifications(rx: Receiver, status: str) -> list[dict[str, Any]]:
    """What the receiver got from Alertmanager with this group status."""
    return [r.payload for r in rx.at("am") if r.payload["status"] == status]


async def _at_least(count: Awaitable[float], n: float) -> bool:
    return await count >= n


async def test_a_finding_fires_and_resolves_through_alertmanager(
    binary: str,
    tmp_path: Path,
    notifying: Notifying,
) -> None:
    failed = job("Failed")
    oom = finding(failed)
    async with Receiver() as rx:
        am = Alertmanager(binary, tmp_path / "am", rx.url("am"))
        await am.start()
        try:
            with_notify(
                notifying.settings,
                public_url="https://mpijc.example.com",
                cluster="test-cluster",
                alertmanager=sink([am.url]),
            )
            async with notifying.pushing(), notifying.consuming():
                await notifying.publish_findings(oom)
                (fired,) = [r.payload for r in await rx.wait_for("am", 1)]
                await notifying.publish_findings(finding(failed, status="resolved", revision=2))
                await until(lambda: len(notifications(rx, "resolved")) == 1, timeout_s=15)
                await until(lambda: _none_held(notifying.engine), timeout_s=5)
        finally:
            await am.stop()

    assert fired["status"] == "firing" and fired["receiver"] == "hook"
    (alert,) = fired["alerts"]
    assert alert["labels"] == {
        "alertname": "TrainingJobOOM",
        "namespace": "team-a",
        "training_job": "pi",
        "kind": "MPIJob",
        "uid": failed.uid,
        "rule": "oom",
        "severity": "critical",
        "cluster": "test-cluster",
    }
    assert alert["annotations"] == {
        "summary": oom.root_cause,
        "description": f"{oom.root_cause}\n- Increase the worker memory limit\n- Reduce the per-rank batch size",
        "remediation": "- Increase the worker memory limit\n- Reduce the per-rank batch size",
        "runbook_url": "docs/troubleshooting.md#oom",
        "run_url": f"https://mpijc.example.com/api/v1/runs/{failed.uid}",
    }
    assert alert["generatorURL"] == f"https://mpijc.example.com/api/v1/runs/{failed.uid}"
    assert alert["startsAt"].startswith(oom.first_seen.strftime("%Y-%m-%dT%H:%M:%S"))
    (resolved,) = notifications(rx, "resolved")
    assert resolved["alerts"][0]["labels"] == alert["labels"]
    assert resolved["alerts"][0]["status"] == "resolved"
    assert notifying.sample("mpijc_alertmanager_requests_total", {"alertmanager": am.url, "outcome": "sent"})


async def _none_held(engine: AsyncEngine) -> bool:
    """The resolve was taken by every Alertmanager, so nothing is held any more."""
    return await rows_in(engine, NotifyAlert) == 0


async def test_a_highly_available_pair_notifies_once_per_group(
    binary: str,
    tmp_path: Path,
    notifying: Notifying,
) -> None:
    failed = job("Failed")
    gossip = [free_port(), free_port()]
    async with Receiver() as rx:
        pair = [
            Alertmanager(
                binary,
                tmp_path / f"am{i}",
                rx.url("am"),
                cluster_port=gossip[i],
                peers=gossip,
                group_interval="3s",
                peer_timeout="1s",
            )
            for i in range(2)
        ]
        for am in pair:
            await am.start()
        try:
            with_notify(notifying.settings, alertmanager=sink([am.url for am in pair]))
            async with notifying.pushing(), notifying.consuming():
                await notifying.publish_findings(finding(failed))
                await rx.wait_for("am", 1)

                async def both_hold_it() -> bool:
                    return [len(await am.alerts()) for am in pair] == [1, 1]

                await until(both_hold_it, timeout_s=10)
                await notifying.publish_findings(finding(failed, status="resolved", revision=2))
                # the resolve goes out a group interval (3 s) after the first notification: well
                # after the second member's turn (1 s peer timeout) to send a duplicate had come
                await until(lambda: len(notifications(rx, "resolved")) >= 1, timeout_s=15)
        finally:
            for am in pair:
                await am.stop()

    assert len(notifications(rx, "firing")) == 1
    for am in pair:
        assert notifying.sample("mpijc_alertmanager_alerts_sent_total", {"alertmanager": am.url})


async def test_an_alertmanager_outage_loses_neither_the_alert_nor_its_resolve(
    binary: str,
    tmp_path: Path,
    notifying: Notifying,
) -> None:
    failed = job("Failed")
    async with Receiver() as rx:
        am = Alertmanager(binary, tmp_path / "am", rx.url("am"))  # not started: down
        with_notify(notifying.settings, alertmanager=sink([am.url]))

        def retries() -> float:
            return (
                notifying.sample(
                    "mpijc_alertmanager_requests_total", {"alertmanager": am.url, "outcome": "retry"}
                )
                or 0.0
            )

        try:
            async with notifying.consuming():
                async with notifying.pushing():
                    await notifying.publish_findings(finding(failed))
                    await until(lambda: retries() >= 2, timeout_s=10)
                    assert notifying.sample("mpijc_alertmanager_up", {"alertmanager": am.url}) == 0
                    await am.start()  # back: the firing alert arrives
                    await rx.wait_for("am", 1, timeout_s=15)
                    # its answer seen, so the restart knows the firing was told and a resolve is owed
                    await until(lambda: _at_least(am.notified(), 1), timeout_s=10)
                    await am.stop()  # down again, and the finding resolves meanwhile
                    before = retries()
                    await notifying.publish_findings(finding(failed, status="resolved", revision=2))
                    await until(lambda: retries() > before, timeout_s=10)
                # the pusher restarted too (nothing in memory): the resolve is still owed
                assert await rows_in(notifying.engine, NotifyAlert) == 1
                async with notifying.pushing():
                    await am.start()
                    await until(lambda: len(notifications(rx, "resolved")) == 1, timeout_s=15)
                    await until(lambda: _none_held(notifying.engine), timeout_s=5)
        finally:
            await am.stop()

    assert len(notifications(rx, "firing")) == 1
    assert notifying.sample("mpijc_alertmanager_up", {"alertmanager": am.url}) == 1


async def test_credentials_go_with_every_post_and_only_outages_are_retried(
    tmp_path: Path,
    notifying: Notifying,
) -> None:
    """An HTTP receiver stands in for an Alertmanager here, to see the headers and script answers."""
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    password = tmp_path / "password"
    password.write_text("pa:ss\n")
    failed = job("Failed")
    resolved = finding(failed, status="resolved", revision=2)
    async with Receiver() as bearer, Receiver() as basic:
        bearer.script("api/v2/alerts", Reply(503), Reply(400, body=b"bad alert"))
        urls = [bearer.url(""), basic.url("")]
        with_notify(
            notifying.settings,
            alertmanager=AlertmanagerSettings(
                urls=urls[:1], resend_interval_s=3600, retry_initial_s=0.05, bearer_token_file=token
            ),
        )
        basic_settings = AlertmanagerSettings(
            urls=urls[1:], basic_auth_username="mpijc", basic_auth_password_file=password
        )
        async with (
            notifying.pushing(),
            notifying.pushing(basic_settings),
            notifying.consuming(),
        ):
            await notifying.publish_findings(finding(failed))
            first, again = await bearer.wait_for("api/v2/alerts", 2)  # 503, so repeated: 400
            await notifying.publish_findings(resolved)
            *_, resolve = await bearer.wait_for("api/v2/alerts", 3)
            (basic_first,) = await basic.wait_for("api/v2/alerts", 1)

    assert first.headers["authorization"] == again.headers["authorization"] == "Bearer s3cret-token"
    assert first.payload[0]["labels"] == again.payload[0]["labels"] == resolve.payload[0]["labels"]
    assert resolved.resolved_at is not None
    assert resolve.payload[0]["endsAt"] == resolved.resolved_at.isoformat()
    assert basic_first.headers["authorization"] == "Basic " + base64.b64encode(b"mpijc:pa:ss").decode()
    outcomes = {
        o: notifying.sample(
            "mpijc_alertmanager_requests_total", {"alertmanager": urls[0].rstrip("/"), "outcome": o}
        )
        for o in ("retry", "rejected", "sent")
    }
    assert outcomes == {"retry": 1, "rejected": 1, "sent": 1}
