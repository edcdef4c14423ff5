"""What ``mpijob-controller demo`` shows besides the history: deliveries landing somewhere real.

On the embedded NATS the demo is the ``admin`` identity (it waits for every consumer to catch
up), the replay publishes as the watchers and each consumer role reads as its own identity.

The test doubles' loopback receivers stand in for a user's: an HTTP endpoint that checks
every request's Standard Webhooks signature (as a CI/CD pipeline receiving our webhooks
would, with :func:`controller.contract.signing.verify`) and an SMTP server that keeps the
messages. Subscriptions are created through the API itself (in-process, by a static token of
the user ``demo``, who manages ``team-a``), so the demo exercises the same validation a user meets.

The scenarios' times are moved, all by one offset, so that their story ends a minute before
the demo runs (``--since 7d`` finds them), and the log tails they carry are stored on ``LOGS``
as a follower stores lines, so ``logs`` prints them. Each demo starts from an empty data
directory when the last one made it (:mod:`.demodata`); ``demo --serve`` then serves what it
stored through the API on loopback, with a token the client commands pick up.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.header import decode_header, make_header
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.logstore import publish_batches
from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.cli import demodata, report
from controller.cli.embedded import port_open
from controller.cli.runtime import Runtime, replay, run_consumers, runtime, serve_api, stop_on_signals
from controller.contract.errors import StartupError
from controller.contract.events import BusEvent, PodObserved
from controller.contract.logs import LogBatch, LogLine, LogPosition, rank_of
from controller.contract.settings import Settings, StaticUser
from controller.contract.subjects import (
    AUDIT_DURABLE,
    AUDIT_LIFECYCLE_DURABLE,
    HISTORY_DURABLE,
    HISTORY_FINDINGS_DURABLE,
    NOTIFY_DURABLE,
    NOTIFY_FINDINGS_DURABLE,
    RULES_DURABLE,
    StreamFamily,
)
from controller.store import outbox
from controller.store.auditchain import AuditFilter, pages
from controller.store.auditverification import verify
from controller.testing.receivers import Receiver, SmtpSink

HOOK_PATH = "hooks/ci"
DEMO_USER = "demo"
"""Who creates the demo's subscriptions and reads through ``demo --serve``: one identity, so the
API's re-check of each subscription's creator keeps them active while it serves."""


SERVE = ".venv/bin/mpijob-controller demo --serve"
"""The command the demo ends with: its data through the API, for the client commands."""
_QUIET = ("mail.log", "aiosmtpd")
"""The test mail server's loggers: a line per message at INFO."""


async def run_demo(settings: Settings, scenarios: Path, limit: int, *, serve: bool = False) -> int:
    """Replay ``scenarios`` (a file or a folder of them) through everything; print what came of it.
    With ``serve``, then serve the stored data through the API on loopback (:func:`serve_demo`);
    a ``serve`` where the last demo's data is there serves it without replaying."""
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    data_dir = settings.embedded.data_dir
    embedded = demodata.embedded_only(settings)
    if serve and embedded and demodata.made_by_demo(data_dir):
        return await serve_demo(settings)
    if embedded and demodata.made_by_demo(data_dir):
        demodata.reset(data_dir)
        print(f"replaying afresh: removed the last demo's data from {data_dir}/")
    elif embedded and demodata.holds_data(data_dir):
        print(
            f"note: {data_dir}/ already holds data; the replay adds only what it does not hold "
            f"(remove {data_dir}/ for the demo's own report)"
        )
    with tempfile.TemporaryDirectory(prefix="mpijc-demo-") as moved:
        files = relative_to_now(_scenario_files(scenarios), Path(moved), datetime.now(UTC))
        await _replay_and_report(settings, files, limit)
    if embedded:
        demodata.mark(data_dir, len(files))
    print(
        f'\n== next: the same data through the API, as users read it (README, "Using it"):\n   {SERVE}\n'
        f"   then, in a browser, the job list and each run's pages: {pages_url(settings)} (docs/ui.md)"
    )
    if serve:
        return await serve_demo(settings)
    return 0


async def _replay_and_report(settings: Settings, files: Sequence[Path], limit: int) -> None:
    with SmtpSink() as mail:
        settings.notify.allow_cidrs = ["127.0.0.0/8"]  # the demo's receivers live on loopback
        settings.notify.smtp = mail.settings
        async with runtime(settings, "mpijc-demo") as rt, Receiver() as hooks:
            print(f"PostgreSQL: {rt.database_url}\nNATS:       {rt.nats_url}\n", flush=True)
            hooks.secrets[HOOK_PATH] = await subscribe(
                rt.engine, settings, hooks.url(HOOK_PATH), "ml-team@example.com"
            )
            stop, started = asyncio.Event(), asyncio.Event()
            consumers = asyncio.create_task(run_consumers(rt, stop, started))
            await started.wait()
            async with rt.connected_as("watchers") as watchers:  # each part as its own identity
                publisher = StoringTails(watchers.jetstream(), rt.topology, settings.nats.publish_retry_s)
                await replay(rt, files, publisher)
            await _caught_up(rt)
            stop.set()
            await consumers
            async with rt.engine.connect() as conn:
                print(await report.history(conn, limit=limit))
            print("\n== deliveries\n" + summary(hooks, mail))
            await _audit_trail(rt.engine)


def pages_url(settings: Settings) -> str:
    """Where ``demo --serve`` serves the pages of the demo's data (docs/ui.md)."""
    return f"http://127.0.0.1:{settings.api.port}/ui/jobs"


async def serve_demo(settings: Settings) -> int:
    """The API over the embedded services' data, on loopback only, with a token made for it in
    the data directory (mode 0600), which the client commands read; until Ctrl-C."""
    data_dir = settings.embedded.data_dir
    if port_open(settings.api.port):  # before the token file, which another API's callers read
        raise StartupError(
            f"MPIJC_API__PORT: 127.0.0.1:{settings.api.port} is in use (another `demo --serve` or `api`?): "
            "stop it, or set another port (and MPIJC_CLIENT__API_URL for the client commands)"
        )
    with demodata.served_token(data_dir) as token:
        # reads everything, manages nothing; the subscriptions' creator, so they stay active
        reader = StaticUser(username=DEMO_USER, namespaces=["*"])
        api = settings.api.model_copy(
            update={"host": "127.0.0.1", "auth": "static", "tokens": {token: reader}}
        )
        served = settings.model_copy(update={"api": api})
        async with runtime(served, "mpijc-demo-api", identity="api") as rt:
            stop = stop_on_signals()
            url = f"http://127.0.0.1:{api.port}"
            where = "" if url == settings.client.api_url else f"; set MPIJC_CLIENT__API_URL={url}"
            print(
                f"serving the demo's data: API on {url} (loopback only), its token in "
                f"{data_dir / demodata.TOKEN_FILE} (readable by you only), read by the client commands"
                f"{where}; Ctrl-C to stop. Try:\n   .venv/bin/mpijob-controller runs -n team-a --since 7d\n"
                f"pages: {pages_url(settings)} (sign in with that token)",
                flush=True,
            )
            await serve_api(rt, stop)
    return 0


_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{1,9})?Z")
"""An RFC 3339 UTC time as the scenarios write them (seconds, or with a fraction)."""


def relative_to_now(files: Sequence[Path], into: Path, now: datetime) -> list[Path]:
    """Copies of ``files`` in ``into`` with every time moved by one offset, a whole number of
    seconds, so that the latest ``observed_at`` of them all is a minute before ``now``."""
    latest = max(
        datetime.fromisoformat(json.loads(line)["observed_at"].replace("Z", "+00:00"))
        for path in files
        for line in path.read_text().splitlines()
        if line.strip()
    )
    offset = timedelta(seconds=int((now - timedelta(minutes=1) - latest).total_seconds()))

    def moved(match: re.Match[str]) -> str:
        when = datetime.fromisoformat(match[1]) + offset
        return f"{when:%Y-%m-%dT%H:%M:%S}{match[2] or ''}Z"

    copies = []
    for path in files:
        copy = into / path.name
        copy.write_text(_STAMP.sub(moved, path.read_text()))
        copies.append(copy)
    return copies


@dataclass(frozen=True)
class StoringTails(Publisher):
    """The replay's publisher, which also stores the log tail a pod observation carries on
    ``LOGS``, as a follower would have stored those lines (a capture holds no more of a log),
    so ``logs`` reads them. The batches name no ``kind`` nor ``pod_uid``: the rules read no
    batch without them (``docs/logs.md``), as the tail already reached them with the pod."""

    async def publish(self, observed: Sequence[BusEvent]) -> int:
        new = await super().publish(observed)
        tails = [tail_batch(event) for event in observed if isinstance(event, PodObserved) and event.log_tail]
        await publish_batches(self.js, self.topology, [b for b in tails if b is not None], self.retry_s)
        return new


def tail_batch(pod: PodObserved) -> LogBatch | None:
    """A pod's log tail as one batch of its (first failed) container, its lines a millisecond
    apart and ending when the container finished."""
    if not pod.containers:
        return None
    failed = [c for c in pod.containers if c.state == "terminated" and c.exit_code]
    container = (failed or list(pod.containers))[0]
    end = container.finished_at or pod.observed_at
    last_ns = int(end.timestamp()) * 1_000_000_000 + end.microsecond * 1000
    count = len(pod.log_tail)
    lines = tuple(
        LogLine(ts=last_ns - (count - 1 - i) * 1_000_000, rank=rank_of(text), text=text)
        for i, text in enumerate(pod.log_tail)
    )
    return LogBatch(
        run_uid=pod.job.uid,
        namespace=pod.namespace,
        job=pod.job.name,
        pod=pod.name,
        container=container.name,
        role=pod.role if pod.role in ("launcher", "worker") else None,
        index=pod.index,
        lines=lines,
        position=LogPosition(ts=lines[-1].ts, ties=1, stored_bytes=sum(len(x.text.encode()) for x in lines)),
    )


def _scenario_files(scenarios: Path) -> list[Path]:
    return sorted(scenarios.glob("*.jsonl")) if scenarios.is_dir() else [scenarios]


async def _caught_up(rt: Runtime) -> None:
    """Until every durable consumer has acknowledged everything and the outbox is empty, saying
    what it waits for (a line per consumer, with the seconds it took)."""
    print("catching up: the consumers store, judge and deliver what was replayed …", flush=True)
    began = time.monotonic()
    for stream, durable in _DURABLES:
        await wait_until_consumed(rt.js, rt.topology.stream(stream), rt.topology.durable(durable))
        print(f"   {durable:<17} done at {time.monotonic() - began:5.1f} s", flush=True)
    # the dispatcher sends what the notify consumer queued: what is due now or being sent (claimed
    # for at most lease_s), not emails held for their digest window (digest_window_s, 10 min)
    horizon = timedelta(seconds=rt.settings.notify.lease_s + 1)
    for _ in range(600):
        async with rt.engine.connect() as conn:
            if not await outbox.pending_count(conn, due_by=datetime.now(UTC) + horizon):
                break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # digests and the last responses
    print(f"   {'deliveries':<17} done at {time.monotonic() - began:5.1f} s\n", flush=True)


_DURABLES: tuple[tuple[StreamFamily, str], ...] = (
    ("jobs", HISTORY_DURABLE),
    ("jobs", RULES_DURABLE),
    ("jobs", NOTIFY_DURABLE),
    ("jobs", AUDIT_LIFECYCLE_DURABLE),
    ("findings", HISTORY_FINDINGS_DURABLE),
    ("findings", NOTIFY_FINDINGS_DURABLE),
    ("audit", AUDIT_DURABLE),
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
    from controller.api.access import StaticAccess
    from controller.api.app import create_app
    from controller.metrics import PipelineMetrics

    token = secrets.token_urlsafe(32)  # one-off: the subscriptions' creator, as a user would be
    creator = StaticUser(username=DEMO_USER, namespaces=["team-a"], manage=["team-a"])
    app = create_app(engine, PipelineMetrics(), StaticAccess({token: creator}), notify=settings.notify)
    bearer = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://demo", headers=bearer
    ) as client:
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
