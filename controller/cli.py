"""``mpijob-controller`` command line: the entry points that wire watchers, consumers and API.

Each command builds its settings once, starts the embedded PostgreSQL/NATS where no URL is
configured, migrates, declares the streams, and passes everything down explicitly.

Commands:
  up        watchers + consumers + API in one process (the local/dev shape)
  watch     watchers only (the watcher Deployment, leader-elected)
  consume   consumers only (the consumer Deployment, horizontally scalable)
  api       the read API only
  replay    feed capture files / ``kubectl get -w -o json`` output through the pipeline
  capture   record a live cluster's watch streams to JSON Lines
  migrate   bring the database schema to head
  history   print stored runs and their timelines
  demo      the whole pipeline on the embedded services with the example scenarios
  admission the validating admission webhook that records who changed jobs
  audit     verify, export or purge the audit trail
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller import migrate, report
from controller.bus import Publisher, connect, ensure_streams, wait_until_consumed
from controller.db import make_engine
from controller.dbtiming import observe_db_writes
from controller.embedded import EmbeddedServices
from controller.metrics import PipelineMetrics
from controller.settings import Settings
from controller.subjects import StreamFamily, Topology

log = logging.getLogger("mpijob_controller")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "scenarios"


@dataclass
class Runtime:
    """What every command gets: settings, reachable services, bus and database handles."""

    settings: Settings
    topology: Topology
    database_url: str
    nats_url: str
    nc: NATS
    js: JetStreamContext
    engine: AsyncEngine
    metrics: PipelineMetrics


@contextlib.asynccontextmanager
async def runtime(settings: Settings, name: str) -> AsyncIterator[Runtime]:
    """Start what is not configured, migrate, declare streams; tear down in reverse."""
    db_url = settings.database.url.get_secret_value() if settings.database.url else None
    embedded = settings.embedded
    with EmbeddedServices(
        embedded.data_dir.resolve(), embedded.postgres_port, embedded.nats_port, db_url, settings.nats.url
    ) as services:
        await migrate.upgrade_async(services.database_url)
        topology = Topology(settings.nats.prefix)
        nc = await connect(services.nats_url, name)
        js = nc.jetstream()
        await ensure_streams(js, topology, settings.nats)
        engine = make_engine(services.database_url, settings.database.pool_size)
        metrics = PipelineMetrics()
        observe_db_writes(engine, metrics)
        try:
            yield Runtime(
                settings, topology, services.database_url, services.nats_url, nc, js, engine, metrics
            )
        finally:
            await engine.dispose()
            await nc.drain()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _consumers(
    rt: Runtime, stop: asyncio.Event, started: asyncio.Event | None = None, only: Sequence[str] | None = None
) -> None:
    from consumers.service import CONSUMERS, run_consumers

    await run_consumers(
        rt.nats_url, rt.topology, rt.settings, rt.engine, rt.metrics, stop, started, only or CONSUMERS
    )


async def _watchers(rt: Runtime, stop: asyncio.Event) -> None:
    from watchers.kube import KubeGateway
    from watchers.service import run_watchers_elected

    gateway = KubeGateway.from_config(rt.settings.kube.kubeconfig, rt.settings.kube.context)
    await run_watchers_elected(rt.settings, gateway, Publisher(rt.js, rt.topology), rt.metrics, stop)


async def _api(rt: Runtime, stop: asyncio.Event) -> None:
    import uvicorn

    from controller.api import audit as audit_api
    from controller.api import webhooks as webhooks_api
    from controller.api.access import AccessReviewer, build_reviewer
    from controller.api.app import create_app
    from controller.api.metrics_collectors import JetStreamCollector

    def kubernetes() -> AccessReviewer:
        from watchers.kube import KubeGateway
        from watchers.reviews import KubeAccessReviewer

        gateway = KubeGateway.from_config(rt.settings.kube.kubeconfig, rt.settings.kube.context)
        return KubeAccessReviewer(gateway, rt.settings.api.token_audiences)

    api = rt.settings.api
    app = create_app(
        rt.engine,
        rt.metrics,
        build_reviewer(api, kubernetes),
        routers=[webhooks_api.build_router(rt.settings.notify), audit_api.router],
        collectors=[JetStreamCollector(rt.js, rt.topology, rt.metrics.registry, api.metrics_ttl_s)],
        metrics_ttl_s=api.metrics_ttl_s,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=api.host, port=api.port, log_level="warning", lifespan="off")
    )
    serving = asyncio.create_task(server.serve())
    log.info("API on http://%s:%d (auth: %s)", api.host, api.port, api.auth)
    await stop.wait()
    server.should_exit = True
    await serving


@contextlib.contextmanager
def _metrics_server(rt: Runtime) -> Iterator[None]:
    """/metrics of a watcher or consumer process, for its probes and ServiceMonitor."""
    from prometheus_client import start_http_server

    server, thread = start_http_server(rt.settings.api.metrics_port, registry=rt.metrics.registry)
    try:
        yield
    finally:
        server.shutdown()
        thread.join(5)


async def cmd_up(settings: Settings, _: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-up") as rt:
        stop = _stop_on_signals()
        async with asyncio.TaskGroup() as group:
            group.create_task(_consumers(rt, stop))
            group.create_task(_watchers(rt, stop))
            group.create_task(_api(rt, stop))
    return 0


async def cmd_watch(settings: Settings, _: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-watchers") as rt:
        with _metrics_server(rt):
            await _watchers(rt, _stop_on_signals())
    return 0


async def cmd_consume(settings: Settings, args: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-consumers") as rt:
        with _metrics_server(rt):
            await _consumers(rt, _stop_on_signals(), only=args.only)
    return 0


async def cmd_api(settings: Settings, _: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-api") as rt:
        await _api(rt, _stop_on_signals())
    return 0


async def _replay(rt: Runtime, files: Sequence[Path]) -> int:
    from watchers.pipeline import replay_files

    stats = await replay_files(files, rt.settings, Publisher(rt.js, rt.topology), rt.metrics)
    print(
        f"replayed {stats.records} records from {len(files)} file(s); skipped {stats.malformed} malformed "
        f"and {stats.unknown_kind} of other kinds {dict(stats.skipped_kinds) or ''}".rstrip()
    )
    return 0 if stats.records or not files else 1


async def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-replay") as rt:
        return await _replay(rt, args.files)


async def cmd_capture(settings: Settings, args: argparse.Namespace) -> int:
    from watchers.kube import KubeGateway
    from watchers.service import capture

    gateway = KubeGateway.from_config(settings.kube.kubeconfig, settings.kube.context)
    stop = _stop_on_signals()
    with args.out.open("a") as out:
        print(f"capturing watch streams to {args.out}; Ctrl-C to stop", file=sys.stderr)
        await capture(settings, gateway, out, stop)
    return 0


async def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-migrate"):
        print("schema is at head")
    return 0


async def cmd_history(settings: Settings, args: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-history") as rt, rt.engine.connect() as conn:
        print(await report.history(conn, namespace=args.namespace, name=args.name, limit=args.limit))
    return 0


async def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from controller import outbox
    from controller.auditlog import AuditFilter, pages, verify
    from controller.demo import MailInbox, WebhookInbox, subscribe, summary

    files = sorted(args.scenarios.glob("*.jsonl")) if args.scenarios.is_dir() else [args.scenarios]
    hooks, mail = WebhookInbox(), MailInbox()
    settings.notify.allow_cidrs = ["127.0.0.0/8"]  # the demo's receivers live on loopback
    settings.notify.smtp.host, settings.notify.smtp.port, settings.notify.smtp.security = (
        "127.0.0.1",
        mail.port,
        "none",
    )
    async with runtime(settings, "mpijc-demo") as rt, hooks.running():
        print(f"PostgreSQL: {rt.database_url}\nNATS:       {rt.nats_url}\n")
        with mail.running():
            hooks.secret = await subscribe(rt.engine, settings, hooks.url, "ml-team@example.com")
            stop, started = asyncio.Event(), asyncio.Event()
            consumers = asyncio.create_task(_consumers(rt, stop, started))
            await started.wait()
            await _replay(rt, files)
            caught_up: tuple[tuple[StreamFamily, str], ...] = (
                ("jobs", "history"),
                ("jobs", "rules"),
                ("jobs", "notify"),
                ("jobs", "audit-lifecycle"),
                ("findings", "history-findings"),
                ("findings", "notify-findings"),
                ("audit", "audit"),
            )
            for stream, durable in caught_up:
                await wait_until_consumed(rt.js, rt.topology.stream(stream), rt.topology.durable(durable))
            for _ in range(600):  # the dispatcher sends what the notify consumer queued
                async with rt.engine.connect() as conn:
                    if not await outbox.pending_count(conn):
                        break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # digests and the last responses
            stop.set()
            await consumers
        async with rt.engine.connect() as conn:
            print(await report.history(conn, limit=args.limit))
        print("\n== deliveries\n" + summary(hooks, mail))
        records = [r for page in [p async for p in pages(rt.engine, AuditFilter())] for r in page]
        print(f"\n== audit trail: {len(records)} records; {(await verify(rt.engine)).describe()}")
        for stored in records[:10]:
            record = stored.record
            name = record.object.name if record.object else "-"
            print(
                f"   #{stored.seq} {record.at:%Y-%m-%d %H:%M:%S} {record.verb} {record.namespace}/{name} "
                f"{record.reason or ''} hash={stored.hash[:12]}"
            )
    return 0


async def cmd_admission(settings: Settings, _: argparse.Namespace) -> int:
    """The validating admission webhook: needs only NATS (no database in the webhook pod)."""
    from controller.audit import publish_records
    from watchers.admission import serve_admission

    if not settings.nats.url:
        raise SystemExit("the admission webhook needs MPIJC_NATS__URL")
    topology = Topology(settings.nats.prefix)
    nc = await connect(settings.nats.url, "mpijc-admission")
    try:
        js = nc.jetstream()
        await ensure_streams(js, topology, settings.nats)
        await serve_admission(
            settings.audit,
            lambda records: publish_records(js, topology, records),
            PipelineMetrics().registry,
            _stop_on_signals(),
        )
    finally:
        await nc.drain()
    return 0


async def cmd_audit(settings: Settings, args: argparse.Namespace) -> int:
    """``audit verify|export|purge``."""
    from consumers.audit import purge_once
    from consumers.exporting import drain, run_exporters, sinks_from_settings
    from controller.audit import Actor
    from controller.auditformats import EXPORT_FORMATS
    from controller.auditlog import AuditFilter, pages, verify

    async with runtime(settings, "mpijc-audit") as rt:
        if args.audit_command == "verify":
            result = await verify(rt.engine)
            print(result.describe())
            return 0 if result.ok else 1
        if args.audit_command == "purge":
            purged = await purge_once(
                rt.engine,
                args.older_than_days,
                Actor(username=args.actor),
                datetime.now(UTC),
                respect_cursors=not args.ignore_export_cursors,
            )
            print(purged.record.record.message if purged.record else "nothing was due")
            for name, seq in sorted(purged.held_back_by.items()):
                print(f"kept records after seq {seq}: not yet exported to {name}", file=sys.stderr)
            return 0
        if args.to_sinks:
            if args.follow:
                await run_exporters(rt.engine, settings.audit, _stop_on_signals(), rt.metrics.registry)
                return 0
            for sink in sinks_from_settings(settings.audit):
                try:
                    shipped = await drain(rt.engine, sink, settings.audit.export_batch_size)
                    print(f"{sink.name}: {shipped} records shipped")
                finally:
                    await sink.close()
            return 0
        _, render = EXPORT_FORMATS[args.format]
        where = AuditFilter(namespace=args.namespace, since=args.since, until=args.until)
        with contextlib.ExitStack() as stack:
            out = sys.stdout.buffer if args.out is None else stack.enter_context(args.out.open("wb"))
            async for page in pages(rt.engine, where):
                out.write(b"".join(render(record) for record in page))
    return 0


def _audit_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands.add_parser("admission", help="validating admission webhook (audit)").set_defaults(
        handler=cmd_admission
    )
    audit = commands.add_parser("audit", help="verify, export or purge the audit trail")
    audit.set_defaults(handler=cmd_audit)
    sub = audit.add_subparsers(dest="audit_command", required=True)
    sub.add_parser("verify", help="check the hash chain; exit 1 at the first broken record")
    export = sub.add_parser("export", help="write records as JSON Lines or CEF, or ship them to the sinks")
    export.add_argument("--format", choices=["jsonl", "cef"], default="jsonl")
    export.add_argument("--out", type=Path)
    export.add_argument("--namespace")
    export.add_argument("--since", type=datetime.fromisoformat)
    export.add_argument("--until", type=datetime.fromisoformat)
    export.add_argument("--to-sinks", action="store_true", help="ship to the configured SIEM sinks")
    export.add_argument("--follow", action="store_true", help="with --to-sinks: keep shipping until stopped")
    purge = sub.add_parser("purge", help="remove old records through the audited purge path")
    purge.add_argument("--older-than-days", type=int, required=True)
    purge.add_argument("--actor", default=getpass.getuser())
    purge.add_argument("--ignore-export-cursors", action="store_true")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mpijob-controller", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler, text in (
        ("up", cmd_up, "watchers + consumers + API in one process"),
        ("watch", cmd_watch, "watchers only"),
        ("api", cmd_api, "read API only"),
        ("migrate", cmd_migrate, "bring the schema to head"),
    ):
        commands.add_parser(name, help=text).set_defaults(handler=handler)
    consume = commands.add_parser("consume", help="consumers only")
    consume.add_argument(
        "--only",
        action="append",
        choices=["history", "rules", "audit", "notify", "dispatch"],
        help="run only this consumer (repeatable); rules and notify must run as one replica each, "
        "dispatch (webhook and email sending) scales out",
    )
    consume.set_defaults(handler=cmd_consume)
    replay = commands.add_parser("replay", help="publish capture files through the pipeline")
    replay.add_argument("files", nargs="+", type=Path)
    replay.set_defaults(handler=cmd_replay)
    cap = commands.add_parser("capture", help="record live watch streams to JSON Lines")
    cap.add_argument("--out", type=Path, required=True)
    cap.set_defaults(handler=cmd_capture)
    hist = commands.add_parser("history", help="print stored runs and timelines")
    hist.add_argument("--namespace")
    hist.add_argument("--name")
    hist.add_argument("--limit", type=int, default=20)
    hist.set_defaults(handler=cmd_history)
    demo = commands.add_parser("demo", help="replay the example scenarios end to end and print the results")
    demo.add_argument("--scenarios", type=Path, default=EXAMPLES)
    demo.add_argument("--limit", type=int, default=50)
    demo.set_defaults(handler=cmd_demo)
    _audit_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    args = _parser().parse_args(argv)
    settings = Settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("faststream", "consumers.broker", "alembic", "nats"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    result: int = asyncio.run(args.handler(settings, args))
    return result


if __name__ == "__main__":
    sys.exit(main())
