"""``mpijob-controller`` command line: one command per part, as the Deployments run them.

Each command builds its settings once, reaches only the services it uses (starting the
embedded PostgreSQL/NATS where no URL is configured), and passes everything down.

Commands:
  up        watchers, each consumer role and the API, each in its own process, supervised
  watch     watchers only (the watcher Deployment, leader-elected)
  consume   consumer roles (one Deployment per role, ``--only``)
  api       the read API only
  admission the validating admission webhook that records who changed jobs (NATS only)
  replay    feed capture files / ``kubectl get -w -o json`` output through the pipeline
  capture   record a live cluster's watch streams to JSON Lines (Kubernetes only)
  migrate   bring the database schema to head (database only)
  history   print stored runs and their timelines (database only)
  audit     verify, export or purge the audit trail (database only)
  demo      the whole pipeline on the embedded services with the example scenarios
  wait      follow a job through the API until it ends (API URL and token only)
  runs      list runs through the API (API URL and token only)
  findings  a run's findings through the API (API URL and token only)
  compare   2 to 5 runs side by side through the API (API URL and token only)
  logs      a run's launcher and worker logs through the API, merged by time (API URL and token only)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path

from consumers.registry import CONSUMERS
from controller.cli import apiclient, browsing, logs, waiting
from controller.cli.collecting import pace_collector
from controller.cli.embedded import EmbeddedServiceError
from controller.cli.runtime import (
    metrics_server,
    replay,
    run_consumers,
    run_watchers,
    runtime,
    serve_api,
    served_metrics,
    stop_on_signals,
)
from controller.cli.supervisor import Child, UpMetrics, supervise
from controller.contract.errors import StartupError
from controller.contract.kinds import KINDS
from controller.contract.settings import Settings, SettingsError, load_settings
from controller.metrics import PipelineMetrics

EXAMPLES = Path(str(files("controller.testing.scenarios")))


def _version() -> str:
    try:
        return version("mpijob-controller")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown"


def _invoking_user() -> str:
    """Who runs the command, for the audit record of a purge; a uid without a passwd entry
    (containers run as an arbitrary uid) is named by its number."""
    with contextlib.suppress(KeyError, OSError):
        return getpass.getuser()
    return f"uid:{os.getuid()}"


async def cmd_up(settings: Settings, _: argparse.Namespace) -> int:
    """Watchers, every consumer role and the API, each in its own process (see :mod:`.supervisor`).

    ``up`` itself declares the streams (as ``admin`` on the embedded NATS); each part connects as
    the identity of its role: on the embedded NATS ``up`` hands it that identity's password file
    (``MPIJC_NATS__USER``, ``MPIJC_NATS__PASSWORD_FILE``) and no other."""
    roles = [name for name in CONSUMERS if name != "k8s-events" or settings.actions.emit_k8s_events]
    others = {"MPIJC_METRICS__PORT": "0"}  # one process serves the fixed metrics port: the API
    parts = [  # the API first: reads are answered while the others start (see .supervisor)
        ("api", ("api",), {}, "api"),
        ("watchers", ("watch",), others, "watchers"),
        *((role, ("consume", "--only", role), others, role) for role in roles),
        *(  # more dispatchers use more cores (MPIJC_UP__DISPATCHERS): they share the outbox by leased claims
            (f"dispatch-{n}", ("consume", "--only", "dispatch"), others, "dispatch")
            for n in range(2, settings.up.dispatchers + 1)
        ),
    ]
    stop = stop_on_signals()  # before the services start, so a SIGTERM meanwhile stops them cleanly
    metrics = UpMetrics()
    up_port, stuck_after_s = settings.metrics.up_port, settings.metrics.stuck_after_s
    async with served_metrics(metrics.registry, up_port, "MPIJC_METRICS__UP_PORT", stuck_after_s):  # noqa: SIM117
        async with runtime(settings, "mpijc-up") as rt:
            if stop.is_set():
                return 0
            env = {
                **os.environ,
                "MPIJC_DATABASE__URL": rt.database_url,
                "MPIJC_NATS__URL": rt.nats_url,
                "MPIJC_DATABASE__MIGRATE": "false",  # migrated above: the parts only check it is at head
            }
            if rt.nats_for is not None:  # the embedded NATS: each part gets its identity's password only
                for configured in ("MPIJC_NATS__PASSWORD", "MPIJC_NATS__CREDS_FILE"):
                    env.pop(configured, None)
            children = [
                Child(
                    name,
                    args,
                    {**more, **rt.nats_environment(identity)},
                    serves=(settings.api.host, settings.api.port) if name == "api" else None,
                )
                for name, args, more, identity in parts
            ]
            return await supervise(children, env, stop, settings.up, metrics)


async def cmd_watch(settings: Settings, _: argparse.Namespace) -> int:
    async with (
        runtime(settings, "mpijc-watchers", database=False, identity="watchers") as rt,
        metrics_server(rt),
    ):
        await run_watchers(rt, stop_on_signals())
    return 0


async def cmd_consume(settings: Settings, args: argparse.Namespace) -> int:
    only: Sequence[str] = args.only or ()
    # on the embedded NATS the roles connect as their own identities; this connection only
    # checks the streams, as the one role's identity when there is one
    identity = only[0] if len(only) == 1 else "admin"
    async with runtime(settings, "mpijc-consumers", identity=identity) as rt, metrics_server(rt):
        await run_consumers(rt, stop_on_signals(), only=only)
    return 0


async def cmd_api(settings: Settings, _: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-api", identity="api") as rt:
        await serve_api(rt, stop_on_signals())
    return 0


async def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    async with runtime(settings, "mpijc-replay", database=False, identity="watchers") as rt:
        return await replay(rt, args.files)


async def cmd_capture(settings: Settings, args: argparse.Namespace) -> int:
    from controller.kube.gateway import KubeGateway
    from watchers.service import capture

    gateway = KubeGateway.from_settings(settings.kube)
    stop = stop_on_signals()
    with args.out.open("a") as out:
        print(f"capturing watch streams to {args.out}; Ctrl-C to stop", file=sys.stderr)
        await capture(settings, gateway, out, stop)
    return 0


async def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    """Bring the schema to head; with ``MPIJC_DATABASE__OWNER_URL`` as the owner role only
    (the migration Job needs no runtime credentials). With ``MPIJC_NATS__URL`` set it declares
    the streams too: with NATS authorization only its identity, ``admin``, may (docs/security.md)."""
    database = settings.database
    if database.owner_url is not None:
        database = database.model_copy(update={"url": database.owner_url, "migrate": True})
    else:
        database = database.model_copy(update={"migrate": True})
    bus = settings.nats.url is not None
    async with runtime(
        settings.model_copy(update={"database": database}), "mpijc-migrate", bus=bus, owner=True
    ):
        print("schema is at head" + (", streams declared" if bus else ""))
    return 0


async def cmd_history(settings: Settings, args: argparse.Namespace) -> int:
    from controller.cli import report

    async with runtime(settings, "mpijc-history", bus=False) as rt, rt.engine.connect() as conn:
        print(
            await report.history(
                conn, namespace=args.namespace, name=args.name, kind=args.kind, limit=args.limit
            )
        )
    return 0


async def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from controller.cli.demo import run_demo

    return await run_demo(settings, args.scenarios, args.limit)


async def cmd_admission(settings: Settings, args: argparse.Namespace) -> int:
    """The validating admission webhook: needs only NATS (no database in the webhook pod).

    It starts without waiting for NATS: until NATS answers (and whenever it is away), records
    go to the spool (``admission.spool_dir``) and are published once it is back. Without a client
    CA (``admission.client_ca_file``) anyone who reaches the port can post reviews and forge "who
    did it": it refuses to start, unless told ``--insecure-no-client-auth`` (then it warns).
    """
    from controller.kube.gateway import NO_RETRIES, KubeConfigError, KubeGateway
    from watchers.admission.certificates import UnreadableCertificate
    from watchers.admission.quota import Lookup, gateway_lookup
    from watchers.admission.spool import FileSpool, LazyJetStream
    from watchers.admission.webhook import serve_admission

    if settings.admission.client_ca_file is None:
        if not args.insecure_no_client_auth:
            raise StartupError(
                "MPIJC_ADMISSION__CLIENT_CA_FILE is not set: without the API server's client CA anyone "
                "who reaches the webhook can post reviews and forge records; set it (docs/admission.md), "
                "or start with --insecure-no-client-auth"
            )
        logging.getLogger(__name__).warning(
            "admission: --insecure-no-client-auth: no client certificate is asked for; anyone who reaches "
            "port %d can post reviews and put records in the audit trail (each says caller: unverified)",
            settings.admission.port,
        )
    if not settings.nats.url:
        raise StartupError("MPIJC_NATS__URL: the admission webhook needs the installation's NATS")
    spool_dir = settings.admission.spool_dir
    try:
        spool = FileSpool(spool_dir) if spool_dir is not None else None
    except OSError as exc:
        raise StartupError(f"MPIJC_ADMISSION__SPOOL_DIR: {exc}") from exc
    registry = PipelineMetrics().registry
    gateways: list[KubeGateway] = []

    def connect() -> Lookup | None:
        """The quota check's lookup: ResourceQuotas and LimitRanges, no retries within its budget."""
        kube = settings.kube
        try:
            gateways.append(KubeGateway.from_config(kube.kubeconfig, kube.context, retries=NO_RETRIES))
        except KubeConfigError as exc:
            logging.getLogger(__name__).warning(
                "no Kubernetes API for the quota check (MPIJC_ADMISSION__QUOTA_CHECK): %s", exc
            )
            return None
        return gateway_lookup(gateways[0])

    bus = LazyJetStream(settings.nats.url, settings.nats)
    bus.start()
    try:
        # the probes and Prometheus use the metrics port: with a client CA the HTTPS port lets in
        # only callers with a client certificate, which neither the kubelet nor Prometheus has
        metrics = settings.metrics
        async with served_metrics(registry, metrics.port, "MPIJC_METRICS__PORT", metrics.stuck_after_s):
            await serve_admission(
                settings.admission,
                bus,
                registry,
                stop_on_signals(),
                spool=spool,
                connect=connect,
            )
    except UnreadableCertificate as exc:
        raise StartupError(f"MPIJC_ADMISSION__{exc.setting.upper()}: {exc}") from exc
    finally:
        await bus.close()
        for gateway in gateways:
            gateway.close()
    return 0


async def cmd_audit(settings: Settings, args: argparse.Namespace) -> int:
    """``audit verify|export|purge``: the database only."""
    from consumers.audit.consumer import purge_once
    from consumers.audit.export import drain, run_exporters, sinks_from_settings, verdict_wait
    from controller.contract.audit import Actor
    from controller.store.auditchain import AuditFilter, compare_with_export, pages, verify
    from controller.store.auditformats import EXPORT_FORMATS
    from controller.store.corroboration import verdicts

    async with runtime(settings, "mpijc-audit", bus=False) as rt:
        if args.audit_command == "verify":
            result = await verify(rt.engine)
            print(result.describe())
            if args.against is None:
                return 0 if result.ok else 1
            compared = await compare_with_export(rt.engine, args.against.read_bytes().splitlines())
            print(compared.describe())
            return 0 if result.ok and compared.ok else 1
        if args.audit_command == "purge":
            purged = await purge_once(
                rt.engine,
                args.older_than_days,
                Actor(username=args.actor or _invoking_user()),
                datetime.now(UTC),
                respect_cursors=not args.ignore_export_cursors,
            )
            print(purged.record.record.message if purged.record else "nothing was due")
            for name, seq in sorted(purged.held_back_by.items()):
                print(f"kept records after seq {seq}: not yet exported to {name}", file=sys.stderr)
            return 0
        if args.to_sinks:
            if args.follow:
                await run_exporters(rt.engine, settings.audit, stop_on_signals(), rt.metrics.registry)
                return 0
            for sink in sinks_from_settings(settings.audit):
                try:
                    shipped = await drain(
                        rt.engine,
                        sink,
                        settings.audit.export_batch_size,
                        wait=verdict_wait(settings.audit),
                    )
                    print(f"{sink.name}: {shipped} records shipped")
                finally:
                    await sink.close()
            return 0
        _, render = EXPORT_FORMATS[args.format]
        where = AuditFilter(namespace=args.namespace, since=args.since, until=args.until)
        with contextlib.ExitStack() as stack:
            out = sys.stdout.buffer if args.out is None else stack.enter_context(args.out.open("wb"))
            async for page in pages(rt.engine, where):
                async with rt.engine.connect() as conn:
                    found = await verdicts(conn, [record.seq for record in page])
                out.write(b"".join(render(record, found.get(record.seq)) for record in page))
    return 0


async def cmd_wait(settings: Settings, args: argparse.Namespace) -> int:
    """Follow a job's events through the API; 0 succeeded, 1 failed, 2 timed out, 3 refused."""
    try:
        client = apiclient.client_of(settings.client, args)
    except ValueError as exc:
        print(f"mpijob-controller wait: {exc}", file=sys.stderr)
        return waiting.EXIT_ERROR
    return await waiting.wait(
        args.target, client, goal=args.goal, attempt=args.attempt, timeout_s=args.timeout
    )


async def cmd_browse(settings: Settings, args: argparse.Namespace) -> int:
    """``runs``, ``findings``, ``compare``: ask the API; 0 answered, 1 refused or unreachable, 2 usage."""
    problem = browsing.check(args)
    try:
        client = apiclient.client_of(settings.client, args)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        print(f"mpijob-controller {args.command}: {problem}", file=sys.stderr)
        return 2
    try:
        async with apiclient.ApiClient(client) as api:
            result: int = await args.browse(api, args, sys.stdout, sys.stderr)
    except apiclient.ApiError as exc:
        print(f"mpijob-controller {args.command}: {exc}", file=sys.stderr)
        return browsing.EXIT_REFUSED
    return result


async def cmd_logs(settings: Settings, args: argparse.Namespace) -> int:
    """Print a run's logs through the API; 0 printed, 1 no such job or attempt, 3 refused."""
    try:
        client = apiclient.client_of(settings.client, args)
    except ValueError as exc:
        print(f"mpijob-controller logs: {exc}", file=sys.stderr)
        return waiting.EXIT_ERROR
    return await logs.print_logs(
        args.target, client, attempt=args.attempt, grep=args.grep, follow=args.follow
    )


def _audit_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admission = commands.add_parser("admission", help="validating admission webhook (audit)")
    admission.add_argument(
        "--insecure-no-client-auth",
        action="store_true",
        help="start without MPIJC_ADMISSION__CLIENT_CA_FILE: any caller may post reviews (records say "
        "caller: unverified); for a trial cluster only",
    )
    admission.set_defaults(handler=cmd_admission)
    audit = commands.add_parser("audit", help="verify, export or purge the audit trail")
    audit.set_defaults(handler=cmd_audit)
    sub = audit.add_subparsers(dest="audit_command", required=True)
    check = sub.add_parser("verify", help="check the hash chain; exit 1 at the first broken record")
    check.add_argument(
        "--against",
        type=Path,
        metavar="JSONL",
        help="also compare with a SIEM's JSON Lines export: records it received that the database "
        "no longer has (or that changed), and the newest chain head it was told",
    )
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
    purge.add_argument("--actor", help="who asks for the purge (default: the invoking user)")
    purge.add_argument("--ignore-export-cursors", action="store_true")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mpijob-controller", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler, text in (
        ("up", cmd_up, "watchers, consumers and API, each in its own process"),
        ("watch", cmd_watch, "watchers only"),
        ("api", cmd_api, "read API only"),
        ("migrate", cmd_migrate, "bring the schema to head"),
    ):
        commands.add_parser(name, help=text).set_defaults(handler=handler)
    consume = commands.add_parser("consume", help="consumer roles (all, or those named with --only)")
    consume.add_argument(
        "--only",
        action="append",
        choices=list(CONSUMERS),
        help="run only this consumer role (repeatable): "
        + "; ".join(f"{role.name}: {role.help}" for role in CONSUMERS.values()),
    )
    consume.set_defaults(handler=cmd_consume)
    replay_cmd = commands.add_parser("replay", help="publish capture files through the pipeline")
    replay_cmd.add_argument("files", nargs="+", type=Path)
    replay_cmd.set_defaults(handler=cmd_replay)
    cap = commands.add_parser("capture", help="record live watch streams to JSON Lines")
    cap.add_argument("--out", type=Path, required=True)
    cap.set_defaults(handler=cmd_capture)
    hist = commands.add_parser(
        "history", help="print stored runs and timelines from the database (administrators; users: runs)"
    )
    hist.add_argument("--namespace")
    hist.add_argument("--name")
    hist.add_argument(
        "--kind", choices=[spec.kind for spec in KINDS], help="only runs of this kind (PyTorchJob, TFJob, …)"
    )
    hist.add_argument("--limit", type=int, default=20)
    hist.set_defaults(handler=cmd_history)
    demo = commands.add_parser("demo", help="replay the example scenarios end to end and print the results")
    demo.add_argument("--scenarios", type=Path, default=EXAMPLES)
    demo.add_argument("--limit", type=int, default=50)
    demo.set_defaults(handler=cmd_demo)
    _audit_parser(commands)
    waiting.add_parser(commands).set_defaults(handler=cmd_wait)
    browsing.add_parsers(commands)
    for name in ("runs", "findings", "compare"):
        commands.choices[name].set_defaults(handler=cmd_browse)
    logs.add_parser(commands).set_defaults(handler=cmd_logs)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line's arguments, as :func:`main` reads them (its ``handler`` is the command)."""
    return _parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: exit status 2 with one line on stderr when settings or services are wrong."""
    args = parse(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"mpijob-controller: {exc}", file=sys.stderr)
        return 2
    pace_collector()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("alembic", "nats"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        result: int = asyncio.run(args.handler(settings, args))
    except (StartupError, EmbeddedServiceError) as exc:
        print(f"mpijob-controller {args.command}: {exc}", file=sys.stderr)
        return 2
    return result
