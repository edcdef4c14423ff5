"""What ``mpijob-controller demo`` shows besides the history: deliveries landing somewhere real.

On the embedded NATS the demo is the ``admin`` identity (it waits for every consumer to catch
up), the replay publishes as the watchers and each consumer role reads as its own identity.

The test doubles' loopback receivers stand in for a user's: an HTTP endpoint that checks
every request's Standard Webhooks signature (as a CI/CD pipeline receiving our webhooks
would, with :func:`controller.contract.signing.verify`) and an SMTP server that keeps the
messages. Subscriptions are created through the API itself (in-process, auth off), so the
demo exercises the same validation a user meets.
"""

from __future__ import annotations

import asyncio
import json
from email.header import decode_header, make_header
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.cli import report
from controller.cli.runtime import Runtime, replay, run_consumers, runtime
from controller.contract.settings import Settings
from controller.contract.subjects import StreamFamily
from controller.store import outbox
from controller.store.auditchain import AuditFilter, pages, verify
from controller.testing.receivers import Receiver, SmtpSink

HOOK_PATH = "hooks/ci"


async def run_demo(settings: Settings, scenarios: Path, limit: int) -> int:
    """Replay ``scenarios`` (a file or a folder of them) through everything; print what came of it."""
    files = _scenario_files(scenarios)
    with SmtpSink() as mail:
        settings.notify.allow_cidrs = ["127.0.0.0/8"]  # the demo's receivers live on loopback
        settings.notify.smtp = mail.settings
        async with runtime(settings, "mpijc-demo") as rt, Receiver() as hooks:
            print(f"PostgreSQL: {rt.database_url}\nNATS:       {rt.nats_url}\n")
            hooks.secrets[HOOK_PATH] = await subscribe(
                rt.engine, settings, hooks.url(HOOK_PATH), "ml-team@example.com"
            )
            stop, started = asyncio.Event(), asyncio.Event()
            consumers = asyncio.create_task(run_consumers(rt, stop, started))
            await started.wait()
            async with rt.connected_as("watchers") as watchers:  # each part as its own identity
                publisher = Publisher(watchers.jetstream(), rt.topology, settings.nats.publish_retry_s)
                await replay(rt, files, publisher)
            await _caught_up(rt)
            stop.set()
            await consumers
            async with rt.engine.connect() as conn:
                print(await report.history(conn, limit=limit))
            print("\n== deliveries\n" + summary(hooks, mail))
            await _audit_trail(rt.engine)
    return 0


def _scenario_files(scenarios: Path) -> list[Path]:
    return sorted(scenarios.glob("*.jsonl")) if scenarios.is_dir() else [scenarios]


async def _caught_up(rt: Runtime) -> None:
    """Until every durable consumer has acknowledged everything and the outbox is empty."""
    for stream, durable in _DURABLES:
        await wait_until_consumed(rt.js, rt.topology.stream(stream), rt.topology.durable(durable))
    for _ in range(600):  # the dispatcher sends what the notify consumer queued
        async with rt.engine.connect() as conn:
            if not await outbox.pending_count(conn):
                break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # digests and the last responses


_DURABLES: tuple[tuple[StreamFamily, str], ...] = (
    ("jobs", "history"),
    ("jobs", "rules"),
    ("jobs", "notify"),
    ("jobs", "audit-lifecycle"),
    ("findings", "history-findings"),
    ("findings", "notify-findings"),
    ("audit", "audit"),
)


async def _audit_trail(engine: AsyncEngine) -> None:
    records = [r for page in [p async for p in pages(engine, AuditFilter())] for r in page]
    print(f"\n== audit trail: {len(records)} records; {(await verify(engine)).describe()}")
    for stored in records[:10]:
        record = stored.record
        name = record.object.name if record.object else "-"
        print(
            f"   #{stored.seq} {record.at:%Y-%m-%d %H:%M:%S} {record.verb} {record.namespace}/{name} "
            f"{record.reason or ''} hash={stored.hash[:12]}"
        )


async def subscribe(engine: AsyncEngine, settings: Settings, webhook_url: str, recipient: str) -> str:
    """Create the demo's subscriptions through the API; returns the webhook's signing secret."""
    from controller.api.access import OpenAccess
    from controller.api.app import create_app
    from controller.metrics import PipelineMetrics

    app = create_app(engine, PipelineMetrics(), OpenAccess(), notify=settings.notify)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://demo") as client:
        hook = await client.post(
            "/api/v1/webhooks",
            json={
                "channel": "webhook",
                "url": webhook_url,
                "namespace": "team-a",
                "description": "CI pipeline: every phase change and finding of team-a",
            },
        )
        hook.raise_for_status()
        mail = await client.post(
            "/api/v1/webhooks",
            json={
                "channel": "email",
                "recipients": [recipient],
                "namespace": "team-a",
                "event_types": ["finding.*"],
                "description": "ML team: findings only",
            },
        )
        mail.raise_for_status()
    secret: str = hook.json()["secret"]
    return secret


def summary(hooks: Receiver, mail: SmtpSink) -> str:
    """What reached the receivers, for people."""
    arrived = hooks.at(HOOK_PATH)
    received = [request.payload for request in arrived if request.verified]
    kinds: dict[str, int] = {}
    for body in received:
        kinds[body.get("type", "?")] = kinds.get(body.get("type", "?"), 0) + 1
    lines = [
        f"webhooks received at {hooks.url(HOOK_PATH)}: {len(received)} with valid signatures, "
        f"{len(arrived) - len(received)} rejected",
        *(f"   {count:>4} x {kind}" for kind, count in sorted(kinds.items())),
    ]
    example = next((b for b in received if str(b.get("type", "")).startswith("finding.")), None)
    if example:
        lines += ["   e.g. " + json.dumps(example)[:400]]
    lines.append(f"emails received: {len(mail.messages)}")
    lines += [
        f"   {m['To']}: {' '.join(str(make_header(decode_header(m['Subject']))).split())}"
        for m in mail.messages[:20]
    ]
    return "\n".join(lines)
