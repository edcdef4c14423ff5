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
  demo      the whole pipeline on the embedded services with the example scenarios (``--serve``:
            then its data through the API on loopback, for the client commands)
  wait      follow a job through the API until it ends (API URL and token only)
  runs      list runs through the API (API URL and token only)
  findings  a run's findings through the API (API URL and token only)
  compare   2 to 5 runs side by side through the API (API URL and token only)
  logs      a run's launcher and worker logs through the API, merged by time (API URL and token only)

Every command speaks one grammar (:mod:`controller.cli.grammar`) and ends with one of the exit
statuses of :mod:`controller.cli.exits`; an error a user can fix is one line, never a traceback
(``--debug`` shows it). Modules that start services (SQLAlchemy, NATS, Kubernetes) are imported
by the command that runs them, so ``--help``, shell completion and the API's client commands
start without them (``benchmarks/README.md``, "CLI start-up").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumers.registry import CONSUMERS
from controller.cli import apiclient, browsing, grammar, logs, waiting
from controller.cli.exits import Exit
from controller.client.errors import ClientError
from controller.contract.errors import StartupError
from controller.contract.kinds import KINDS

if TYPE_CHECKING:
    from controller.contract.settings import Settings

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
    """The API, the watchers and the consumer roles in child processes (see :mod:`.supervisor`):
    the roles on a failure's path (history, rules) share one process, the others (audit, notify,
    dispatch, k8s-events) another at a lower priority; each further dispatcher has its own.

    ``up`` itself declares the streams (as ``admin`` on the embedded NATS); each part connects as
    the identity of its role, each role of a shared process as its own: on the embedded NATS ``up``
    hands a part those identities' password files (``MPIJC_NATS__USER``,
    ``MPIJC_NATS__PASSWORD_FILE``, ``MPIJC_NATS__ROLE_PASSWORD_FILES``) and no other."""
    from controller.cli.demodata import claim
    from controller.cli.runtime import runtime, served_metrics, stop_on_signals
    from controller.cli.supervisor import BACKGROUND_NICE, Child, UpMetrics, supervise

    parts = up_parts(settings)
    _cluster_or_stop(settings)
    claim(settings)  # a cluster's data from now on: the demo no longer removes this data directory
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
            if rt.holds_nats_users:  # the embedded NATS: each part gets its identities' passwords only
                for configured in ("PASSWORD", "CREDS_FILE", "ROLE_PASSWORD_FILES"):
                    env.pop(f"MPIJC_NATS__{configured}", None)
            children = [
                Child(
                    name,
                    args,
                    {**more, **rt.nats_environment(*identities)},
                    serves=(settings.api.host, settings.api.port) if name == "api" else None,
                    nice=0 if FAILURE_PATH.issuperset(identities) else BACKGROUND_NICE,
                )
                for name, args, more, identities in parts
            ]
            return await supervise(children, env, stop, settings.up, metrics)


Part = tuple[str, tuple[str, ...], dict[str, str], tuple[str, ...]]
"""One part of ``up``: its name, its command line, its environment, the NATS identities it uses."""


def up_parts(settings: Settings) -> list[Part]:
    """The parts of ``up``, in the order they start (:func:`~controller.cli.supervisor.supervise`:
    the parts after the API once it answers). The process of the roles on a failure's path
    (history, rules) starts first, beside the API: its imports and the rules' warm start are the
    longest wait of a restart before a failure is readable (``benchmarks/README.md``, "``up``'s
    start, phase by phase"), and it is no relist of the cluster to slow the API's answer (the
    watchers start once the API answers)."""
    roles = [name for name in CONSUMERS if name != "k8s-events" or settings.actions.emit_k8s_events]
    others = {"MPIJC_METRICS__PORT": "0"}  # one process serves the fixed metrics port: the API
    failure_path, background = (
        tuple(role for role in roles if (role in FAILURE_PATH) == on_path) for on_path in (True, False)
    )

    def consume(group: tuple[str, ...]) -> Part:
        return ("+".join(group), ("consume", *(a for role in group for a in ("--only", role))), others, group)

    return [
        consume(failure_path),  # beside the API, not after it
        ("api", ("api",), {}, ("api",)),  # reads are answered while the others start (.supervisor)
        ("watchers", ("watch",), others, ("watchers",)),
        *((consume(background),) if background else ()),
        *(  # more dispatchers use more cores (MPIJC_UP__DISPATCHERS): they share the outbox by leased claims
            (f"dispatch-{n}", ("consume", "--only", "dispatch"), others, ("dispatch",))
            for n in range(2, settings.up.dispatchers + 1)
        ),
    ]


FAILURE_PATH = frozenset({"watchers", "rules", "history", "api"})
"""The parts a failure travels through to the API (watch → rules → history → read): ``up`` runs
the others at a lower CPU priority, and their consumer roles in a process apart from these."""


def _cluster_or_stop(settings: Settings) -> None:
    """A :class:`StartupError` in one line when no Kubernetes configuration can be loaded: ``up``
    watches a cluster (its watchers would only fail again and again without one)."""
    from controller.kube.errors import KubeConfigError
    from controller.kube.gateway import KubeGateway

    try:
        KubeGateway.from_settings(settings.kube).close()
    except KubeConfigError as exc:
        raise StartupError(
            f"MPIJC_KUBE__KUBECONFIG: no Kubernetes cluster to watch ({exc}); `up` runs on your "
            "kubeconfig's cluster: without one, `make demo` shows the pipeline on recorded jobs and "
            "`mpijob-controller demo --serve` serves them"
        ) from exc


async def cmd_watch(settings: Settings, _: argparse.Namespace) -> int:
    from controller.cli.demodata import claim
    from controller.cli.runtime import metrics_server, run_watchers, runtime, stop_on_signals

    claim(settings)

    async with (
        runtime(settings, "mpijc-watchers", database=False, identity="watchers") as rt,
        metrics_server(rt),
    ):
        await run_watchers(rt, stop_on_signals())
    return 0


async def cmd_consume(settings: Settings, args: argparse.Namespace) -> int:
    from controller.cli.runtime import metrics_server, run_consumers, runtime, stop_on_signals
    from controller.contract.phases import process_age

    only: Sequence[str] = args.only or ()
    # on the embedded NATS the roles connect as their own identities; this connection only
    # checks the streams, as the one role's identity when there is one
    identity = only[0] if len(only) == 1 else "admin"
    entered = process_age()  # the interpreter, the CLI's imports and the settings
    async with runtime(settings, "mpijc-consumers", identity=identity) as rt, metrics_server(rt):
        logging.getLogger(__name__).info(
            "consume %s: command entered at +%.3fs of the process, database and bus reached at +%.3fs",
            ", ".join(only) or "every role",
            entered,
            process_age(),
        )
        await run_consumers(rt, stop_on_signals(), only=only)
    return 0


async def cmd_api(settings: Settings, _: argparse.Namespace) -> int:
    from controller.cli.runtime import runtime, serve_api, stop_on_signals

    async with runtime(settings, "mpijc-api", identity="api") as rt:
        await serve_api(rt, stop_on_signals())
    return 0


async def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    from controller.cli.demodata import claim
    from controller.cli.runtime import replay, runtime

    claim(settings)
    async with runtime(settings, "mpijc-replay", database=False, identity="watchers") as rt:
        return await replay(rt, args.files)


async def cmd_capture(settings: Settings, args: argparse.Namespace) -> int:
    from controller.cli.runtime import stop_on_signals
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
    from controller.cli.runtime import runtime

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
    from controller.cli.runtime import runtime

    async with runtime(settings, "mpijc-history", bus=False) as rt, rt.engine.connect() as conn:
        print(
            await report.history(
                conn,
                namespace=args.namespace,
                name=args.name,
                kind=args.kind,
                limit=args.limit,
                output=args.output,
            )
        )
    return 0


async def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from controller.cli.demo import run_demo

    return await run_demo(settings, args.scenarios, args.limit, serve=args.serve)


async def cmd_admission(settings: Settings, args: argparse.Namespace) -> int:
    """The validating admission webhook: needs only NATS (no database in the webhook pod).

    It starts without waiting for NATS: until NATS answers (and whenever it is away), records
    go to the spool (``admission.spool_dir``) and are published once it is back. Without a client
    CA (``admission.client_ca_file``) anyone who reaches the port can post reviews and forge "who
    did it": it refuses to start, unless told ``--insecure-no-client-auth`` (then it warns).
    """
    from controller.cli.runtime import served_metrics, stop_on_signals
    from controller.kube.errors import KubeConfigError
    from controller.kube.gateway import NO_RETRIES, KubeGateway
    from controller.metrics import PipelineMetrics
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
    from controller.cli.runtime import runtime, stop_on_signals
    from controller.contract.audit import Actor
    from controller.store.auditchain import AuditFilter, pages
    from controller.store.auditformats import EXPORT_FORMATS
    from controller.store.auditverification import compare_with_export, verify
    from controller.store.corroboration import verdicts

    async with runtime(settings, "mpijc-audit", bus=False) as rt:
        if args.audit_command == "verify":
            result = await verify(rt.engine)
            print(result.describe())
            if args.against is None:
                return Exit.OK if result.ok else Exit.FAILED
            compared = await compare_with_export(rt.engine, args.against.read_bytes().splitlines())
            print(compared.describe())
            return Exit.OK if result.ok and compared.ok else Exit.FAILED
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
    """Follow a job's events through the API until it ends (:mod:`.waiting`)."""
    return await waiting.wait(
        args.target,
        apiclient.client_of(settings.client, args),
        goal=args.goal,
        attempt=args.attempt,
        timeout_s=args.timeout,
        wait_for_creation=args.wait_for_creation,
        created_within_s=settings.client.wait_created_within_s,
        output=args.output,
    )


async def cmd_browse(settings: Settings, args: argparse.Namespace) -> int:
    """``runs``, ``findings``, ``compare``: ask the API (:mod:`.browsing`)."""
    from controller.client.aio import AsyncClient  # the models: for the commands that use them only

    async with AsyncClient(settings=apiclient.client_of(settings.client, args)) as api:
        result: int = await args.browse(api, args, sys.stdout, sys.stderr)
    return result


async def cmd_logs(settings: Settings, args: argparse.Namespace) -> int:
    """Print a run's logs through the API (:mod:`.logs`)."""
    return await logs.print_logs(
        args.target,
        apiclient.client_of(settings.client, args),
        attempt=args.attempt,
        grep=args.grep,
        ignore_case=args.ignore_case,
        since=args.since and args.since.isoformat(),
        until=args.until and args.until.isoformat(),
        follow=args.follow,
        output=args.output,
    )


SERVICE_EXITS = (Exit.OK, Exit.USAGE, Exit.INTERRUPTED)
"""A service runs until stopped (SIGTERM or Ctrl-C: a clean stop, 0); 2 when it cannot start."""


def _service_parsers(commands: Any) -> None:
    """The commands the Deployments run, and ``migrate``, ``replay``, ``capture``, ``demo``."""
    grammar.command(
        commands,
        "up",
        "run the whole controller: watchers, each consumer role and the API, each in its own process",
        description="On your kubeconfig's cluster (MPIJC_KUBE__KUBECONFIG, MPIJC_KUBE__CONTEXT), with the\n"
        "embedded PostgreSQL and NATS where MPIJC_DATABASE__URL and MPIJC_NATS__URL are unset.\n"
        "A part that exits is restarted; SIGTERM or Ctrl-C stops them all.",
        examples=["mpijob-controller up", "MPIJC_API__PORT=9480 mpijob-controller up"],
        exits=SERVICE_EXITS,
    ).set_defaults(handler=cmd_up)
    grammar.command(
        commands,
        "watch",
        "run the watchers only (the watcher Deployment, leader-elected)",
        examples=["mpijob-controller watch"],
        exits=SERVICE_EXITS,
    ).set_defaults(handler=cmd_watch)
    grammar.command(
        commands,
        "api",
        "serve the read API only (history, logs, live events) on MPIJC_API__HOST:MPIJC_API__PORT",
        description="Callers present a bearer token (MPIJC_API__AUTH: the Kubernetes TokenReview by\n"
        "default); docs/api.md describes every endpoint.",
        examples=[
            "mpijob-controller api",
            "MPIJC_API__HOST=127.0.0.1 MPIJC_API__PORT=8480 mpijob-controller api",
        ],
        exits=SERVICE_EXITS,
    ).set_defaults(handler=cmd_api)
    grammar.command(
        commands,
        "migrate",
        "bring the database schema to head (and declare the streams when MPIJC_NATS__URL is set)",
        examples=["MPIJC_DATABASE__OWNER_URL=postgresql://owner@db/mpijc mpijob-controller migrate"],
    ).set_defaults(handler=cmd_migrate)
    consume = grammar.command(
        commands,
        "consume",
        "run consumer roles: all, or those named with --only (one Deployment per role)",
        description="Roles:\n" + "\n".join(f"  {role.name:<12} {role.help}" for role in CONSUMERS.values()),
        examples=[
            "mpijob-controller consume --only rules",
            "mpijob-controller consume --only history --only audit",
        ],
        exits=SERVICE_EXITS,
    )
    consume.add_argument(
        "--only",
        action="append",
        choices=list(CONSUMERS),
        metavar="ROLE",
        help="run only this role (repeatable)",
    )
    consume.set_defaults(handler=cmd_consume)
    replay_cmd = grammar.command(
        commands,
        "replay",
        "publish capture files (or `kubectl get -w -o json` output) through the pipeline",
        examples=["mpijob-controller replay run.jsonl", "mpijob-controller replay day1.jsonl day2.jsonl"],
    )
    replay_cmd.add_argument("files", nargs="+", type=_readable, metavar="FILE")
    replay_cmd.set_defaults(handler=cmd_replay)
    cap = grammar.command(
        commands,
        "capture",
        "record a live cluster's watch streams (with failure log tails) to JSON Lines, until Ctrl-C",
        examples=["mpijob-controller capture --out run.jsonl"],
        exits=SERVICE_EXITS,
    )
    cap.add_argument("--out", type=Path, required=True, metavar="FILE", help="appended to, JSON Lines")
    cap.set_defaults(handler=cmd_capture)
    demo = grammar.command(
        commands,
        "demo",
        "replay the example scenarios end to end on the embedded services and print the results",
        examples=[
            "mpijob-controller demo",
            "mpijob-controller demo --serve",
            "mpijob-controller demo --limit 10",
        ],
    )
    demo.add_argument("--scenarios", type=Path, default=EXAMPLES, metavar="DIR")
    demo.add_argument("--limit", type=int, default=50, help="most runs in the report (default 50)")
    demo.add_argument(
        "--serve",
        action="store_true",
        help="then serve the demo's data through the API on loopback, with a token the client commands "
        "read (runs, findings, compare, logs, wait); the last demo's data is served without replaying it",
    )
    demo.set_defaults(handler=cmd_demo)


def _history_parser(commands: Any) -> None:
    hist = grammar.command(
        commands,
        "history",
        "print stored runs and their timelines straight from the database (administrators)",
        description="Users without database credentials read the same through the API: runs, findings.",
        examples=[
            "mpijob-controller history -n team-a",
            "mpijob-controller history --kind PyTorchJob --limit 5",
            "mpijob-controller history -n team-a --name train -o json",
        ],
    )
    grammar.add_namespace(hist)
    grammar.add_output(hist)
    hist.add_argument("--name", help="only jobs of this name")
    hist.add_argument("--kind", choices=[spec.kind for spec in KINDS], help="only runs of this kind")
    hist.add_argument("--limit", type=int, default=20, help="most runs to print (default 20)")
    hist.set_defaults(handler=cmd_history)


def _audit_parser(commands: Any) -> None:
    admission = grammar.command(
        commands,
        "admission",
        "serve the validating admission webhook that records who changed jobs (needs NATS only)",
        description="It wants a client CA (MPIJC_ADMISSION__CLIENT_CA_FILE): without one, anyone who\n"
        "reaches its port could post reviews and forge who changed a job.",
        examples=[
            "MPIJC_ADMISSION__CLIENT_CA_FILE=ca.crt mpijob-controller admission",
            "MPIJC_NATS__URL=nats://nats:4222 mpijob-controller admission --insecure-no-client-auth",
        ],
        exits=SERVICE_EXITS,
    )
    admission.add_argument(
        "--insecure-no-client-auth",
        action="store_true",
        help="start without MPIJC_ADMISSION__CLIENT_CA_FILE: any caller may post reviews (records say "
        "caller: unverified); for a trial cluster only",
    )
    admission.set_defaults(handler=cmd_admission)
    audit = grammar.command(
        commands,
        "audit",
        "verify, export or purge the audit trail (the database only)",
        examples=[
            "mpijob-controller audit verify",
            "mpijob-controller audit export -n team-a --since 7d --format cef",
            "mpijob-controller audit purge --older-than-days 400",
        ],
        exits=(Exit.OK, Exit.FAILED, Exit.USAGE, Exit.INTERRUPTED),
    )
    audit.set_defaults(handler=cmd_audit)
    sub = audit.add_subparsers(dest="audit_command", required=True, metavar="{verify,export,purge}")
    check = grammar.command(
        sub,
        "verify",
        "check the hash chain; exit 1 at the first broken record",
        examples=["mpijob-controller audit verify --against siem-export.jsonl"],
        exits=(Exit.OK, Exit.FAILED, Exit.USAGE, Exit.INTERRUPTED),
    )
    check.add_argument(
        "--against",
        type=_readable,
        metavar="JSONL",
        help="also compare with a SIEM's JSON Lines export: records it received that the database "
        "no longer has (or that changed), and the newest chain head it was told",
    )
    export = grammar.command(
        sub,
        "export",
        "write records as JSON Lines or CEF, or ship them to the configured sinks",
        examples=[
            "mpijob-controller audit export --since 2026-11-01T00:00:00Z --out november.jsonl",
            "mpijob-controller audit export --to-sinks --follow",
        ],
    )
    export.add_argument("--format", choices=["jsonl", "cef"], default="jsonl")
    export.add_argument("--out", type=Path, metavar="FILE", help="default: standard output")
    grammar.add_namespace(export)
    grammar.add_window(export, "records")
    export.add_argument("--to-sinks", action="store_true", help="ship to the configured SIEM sinks")
    export.add_argument("--follow", action="store_true", help="with --to-sinks: keep shipping until stopped")
    purge = grammar.command(
        sub,
        "purge",
        "remove old records through the audited purge path",
        examples=["mpijob-controller audit purge --older-than-days 400 --actor alice"],
    )
    purge.add_argument("--older-than-days", type=int, required=True, metavar="DAYS")
    purge.add_argument("--actor", help="who asks for the purge (default: the invoking user)")
    purge.add_argument("--ignore-export-cursors", action="store_true")


def _readable(value: str) -> Path:
    """An argument naming a file to read: a usage error now, not a traceback later, if it cannot be."""
    path = Path(value)
    if not os.access(path, os.R_OK) or path.is_dir():
        reason = "no such file" if not path.exists() else "a directory" if path.is_dir() else "not readable"
        raise argparse.ArgumentTypeError(f"cannot read {value}: {reason}")
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpijob-controller",
        description="An event-driven controller for Kubeflow training jobs (MPIJob, TrainJob, …):\n"
        "one command per part, as the Deployments run them, and commands that read the history.",
        epilog="Each command has --help with examples; exit statuses are the same for all (docs/cli.md):\n"
        + "\n".join(f"  {int(code):<4} {code.meaning}" for code in Exit)
        + '\n\nShell completion: eval "$(register-python-argcomplete mpijob-controller)"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error that is otherwise one line"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _service_parsers(commands)
    _history_parser(commands)
    _audit_parser(commands)
    waiting.add_parser(commands).set_defaults(handler=cmd_wait)
    browsing.add_parsers(commands)
    for name in ("runs", "findings", "compare"):
        commands.choices[name].set_defaults(handler=cmd_browse)
    logs.add_parser(commands).set_defaults(handler=cmd_logs)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line's arguments, as :func:`main` reads them (its ``handler`` is the command);
    with ``_ARGCOMPLETE`` set (a shell asking for completions) it answers them and exits."""
    import argcomplete

    parser = _parser()
    argcomplete.autocomplete(parser)
    return parser.parse_args(argv)


def _one_line(exc: BaseException) -> tuple[Exit, str] | None:
    """The exit status and line of an error a user can act on; None for a bug (a traceback)."""
    from controller.cli.embedded import EmbeddedServiceError

    if isinstance(exc, ClientError):  # a command's own or the API client's: each knows its status
        return exc.status, str(exc)
    if isinstance(exc, StartupError | EmbeddedServiceError):
        return Exit.USAGE, str(exc)
    if isinstance(exc, OSError) and exc.filename is not None:
        return Exit.USAGE, f"cannot use {exc.filename}: {exc.strerror}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: one of :class:`~controller.cli.exits.Exit`, with one line on stderr
    for an error a user can act on (``--debug``: and its traceback), none for Ctrl-C (130)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(file=sys.stderr)  # past the ^C the terminal echoed
        return Exit.INTERRUPTED


def without_websocket_transport() -> None:
    """Keep nats-py from importing aiohttp (its optional WebSocket transport, which no URL of ours
    uses: ``nats://`` and ``tls://`` only): a third of a second of CPU and 8 MiB less in every
    process that sends no webhook (:func:`sends_webhooks`). Called before anything imports
    ``nats``; a process that already imported aiohttp keeps it."""
    sys.modules.setdefault("aiohttp", None)  # type: ignore[arg-type]  # None: "import aiohttp" fails


def sends_webhooks(args: argparse.Namespace) -> bool:
    """Whether the command ``args`` names runs the dispatcher in this process (its HTTP client is
    aiohttp): ``consume`` with the dispatch role (named or all), and the demo."""
    if args.command == "consume":
        return not args.only or "dispatch" in args.only
    return bool(args.command == "demo")


def _main(argv: Sequence[str] | None) -> int:
    args = parse(argv)
    if not sends_webhooks(args):
        without_websocket_transport()
    from controller.cli.collecting import pace_collector
    from controller.contract.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"mpijob-controller: {exc}", file=sys.stderr)
        return Exit.USAGE
    pace_collector()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("alembic", "nats", "httpx"):  # httpx: a line per request at INFO
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    return asyncio.run(execute(args, settings))


async def execute(args: argparse.Namespace, settings: Settings) -> int:
    """Run the command ``args`` names; an error a user can act on is one line on stderr and its
    exit status (with ``--debug``, its traceback first); any other is raised."""
    try:
        result: int = await args.handler(settings, args)
    except Exception as exc:
        known = _one_line(exc)
        if known is None:
            raise
        if getattr(args, "debug", False):
            traceback.print_exception(exc)
        status, line = known
        print(f"mpijob-controller {args.command}: {line}", file=sys.stderr, flush=True)
        return status
    return result
