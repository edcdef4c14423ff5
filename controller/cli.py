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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller import migrate, report
from controller.bus import Publisher, connect, ensure_streams, wait_until_consumed
from controller.db import make_engine
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
        try:
            yield Runtime(
                settings,
                topology,
                services.database_url,
                services.nats_url,
                nc,
                js,
                engine,
                PipelineMetrics(),
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

    from controller.api.app import create_app

    app = create_app(rt.engine, rt.metrics)
    server = uvicorn.Server(
        uvicorn.Config(
            app, host=rt.settings.api.host, port=rt.settings.api.port, log_level="warning", lifespan="off"
        )
    )
    serving = asyncio.create_task(server.serve())
    log.info("API on http://%s:%d", rt.settings.api.host, rt.settings.api.port)
    await stop.wait()
    server.should_exit = True
    await serving


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
        await _watchers(rt, _stop_on_signals())
    return 0


async def cmd_consume(settings: Settings, args: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-consumers") as rt:
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
    files = sorted(args.scenarios.glob("*.jsonl")) if args.scenarios.is_dir() else [args.scenarios]
    async with runtime(settings, "mpijc-demo") as rt:
        print(f"PostgreSQL: {rt.database_url}\nNATS:       {rt.nats_url}\n")
        stop = asyncio.Event()
        started = asyncio.Event()
        consumers = asyncio.create_task(_consumers(rt, stop, started))
        await started.wait()
        await _replay(rt, files)
        caught_up: tuple[tuple[StreamFamily, str], ...] = (
            ("jobs", "history"),
            ("jobs", "rules"),
            ("findings", "history-findings"),
        )
        for stream, durable in caught_up:
            await wait_until_consumed(rt.js, rt.topology.stream(stream), rt.topology.durable(durable))
        stop.set()
        await consumers
        async with rt.engine.connect() as conn:
            print(await report.history(conn, limit=args.limit))
    return 0


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
        choices=["history", "rules"],
        help="run only this consumer (repeatable); rules must run as one replica",
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
