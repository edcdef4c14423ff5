"""``wait NAMESPACE/JOB``: follow a job's live events through the API until it ends, for pipelines.

Reads ``GET /api/v1/namespaces/{ns}/jobs/{name}/events`` (Server-Sent Events, through
:meth:`controller.client.connection.Connection.events`, which rides out a lost connection and resumes
with ``Last-Event-ID``) with a bearer token, prints each phase change and each finding as it
comes, and exits (:mod:`controller.cli.exits`) 0 when the goal is met, 1 when it cannot be any
more (the attempt failed or was deleted: the finding that explains it follows, its root cause and
remediation), 4 when there is no such job or attempt, 5 when ``--timeout`` passes first, 3 when the
API refuses to answer, or ends the stream with ``denied`` (the token was revoked or the caller's
access removed meanwhile).

A job or attempt that does not exist is reported within ``MPIJC_CLIENT__WAIT_CREATED_WITHIN_S``
(15 s: the time the watchers and the history take to record a job just applied), not at the
timeout: a typo in a pipeline fails fast. ``--wait-for-creation`` (and ``--attempt next``, whose
run is created later by definition) waits for it instead. Where the attempt has already ended when
``wait`` starts, its outcome decides, not the phases it passed through: ``--for running`` on a run
that already failed exits 1.

``-o json`` or ``-o yaml`` prints the outcome as one document on stdout (:func:`outcome_document`:
the run, its last phase, the exit status and its meaning, the findings), the lines a person reads
on stderr.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from controller.cli import grammar, rendering
from controller.cli.apiclient import add_client_options
from controller.cli.browsing import job_target
from controller.cli.exits import CommandError, Exit
from controller.client.errors import NotFound, TimedOut
from controller.client.following import Goal
from controller.client.refs import RunRef, job_ref
from controller.contract.settings import ClientSettings

if TYPE_CHECKING:
    from controller.client.following import Following, Settled, WaitEvent

__all__ = ["Goal", "lines_of", "outcome_document", "wait"]

CREATED_WITHIN_S = ClientSettings.model_fields["wait_created_within_s"].default
"""How long a job or attempt named but not (yet) in the history is looked for before ``wait``
says there is none (``MPIJC_CLIENT__WAIT_CREATED_WITHIN_S``)."""
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}


def lines_of(event: WaitEvent) -> list[str]:
    """What a person reads of one event: a phase change, a finding, a deletion, the wait for the
    next attempt."""
    at = rendering.when(event.at)
    if event.kind == "phase":
        reason = f" ({event.data['reason']})" if event.data.get("reason") else ""
        return [f"{at}  {event.job}: {event.phase}{reason}"]
    if event.kind == "finding":
        finding = event.finding
        return [
            f"{at}  {event.job}: finding {finding.get('rule')} "
            f"({finding.get('severity')}, {finding.get('status')}): {finding.get('root_cause')}"
        ]
    if event.kind == "deleted":
        return [f"{at}  {event.job}: deleted"]
    if event.kind == "waiting":
        return [f"waiting for the next attempt of {event.data.get('namespace')}/{event.data.get('name')}"]
    return []


def _settled_lines(job: str, settled: Settled) -> list[str]:
    """The outcome, and for an attempt that ended otherwise than succeeding, its root cause and
    remediation, and what else fired."""
    lines = [f"{job} {settled.outcome}"]
    if settled.findings is None or settled.phase == "Succeeded":
        return lines
    findings = sorted(settled.findings, key=lambda f: _SEVERITY.get(str(f.get("severity")), 9))
    if findings:
        cause = findings[0]
        lines.append(f"root cause ({cause.get('rule')}, {cause.get('severity')}): {cause.get('root_cause')}")
        lines += [f"  - {step}" for step in cause.get("remediation") or ()]
        if cause.get("doc_anchor"):
            lines.append(f"  see {cause['doc_anchor']}")
        lines += [f"also firing: {f.get('rule')}: {f.get('root_cause')}" for f in findings[1:]]
    elif settled.phase == "Failed":
        lines.append("no finding explains the failure yet: see the run's timeline")
    return lines


def outcome_document(
    run: dict[str, Any], phase: str | None, code: Exit, findings: list[dict[str, Any]]
) -> dict[str, Any]:
    """``wait``'s outcome for a program: ``run`` (namespace, name, attempt, uid), its last ``phase``
    seen, ``exit`` (``code``, ``name``, ``meaning``: :mod:`controller.cli.exits`) and ``findings``."""
    return {
        "run": run,
        "phase": phase,
        "exit": {"code": int(code), "name": code.name, "meaning": code.meaning},
        "findings": findings,
    }


def _document(following: Following, code: Exit, settled: Settled | None) -> dict[str, Any]:
    """The findings the ``end`` listed, else those the events carried."""
    listed = settled.findings if settled is not None else None
    findings = list(following.findings.values()) if listed is None else list(listed)
    return outcome_document(following.run, following.phase, code, findings)


async def wait(
    target: str | tuple[str, str],
    client: ClientSettings,
    *,
    goal: Goal = "succeeded",
    attempt: str = "latest",
    timeout_s: float = 7200.0,
    wait_for_creation: bool = False,
    created_within_s: float = CREATED_WITHIN_S,
    output: str = "table",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> Exit:
    """Follow ``target`` (``namespace/job``) with :meth:`AsyncClient.follow` until ``goal`` is
    settled, printing each event; the exit status (printed on ``out`` and ``err``, standard
    output and error by default). :class:`~controller.client.errors.Refused` when the API
    refuses, a :class:`~controller.cli.exits.CommandError` (not found) when there is no such job
    or attempt; a malformed target, ValueError."""
    out, err = out or sys.stdout, err or sys.stderr
    machine = output in rendering.DOCUMENTS
    said = err if machine else out  # with -o json|yaml, stdout holds the outcome's document only
    namespace, name = job_ref(target) if isinstance(target, str) else target
    from controller.client.aio import AsyncClient  # the models: for the commands that use them only

    def lost(line: str) -> None:
        print(f"wait: {line}", file=err, flush=True)

    async with AsyncClient(settings=client) as api:
        following = api.follow(
            RunRef(namespace=namespace, name=name),
            goal=goal,
            attempt=attempt if attempt in ("latest", "next") else int(attempt),  # type: ignore[arg-type]
            timeout_s=timeout_s,
            wait_for_creation=wait_for_creation,
            created_within_s=created_within_s,
            notice=lost,
        )
        try:
            async for event in following:
                for line in lines_of(event):
                    print(line, file=said, flush=True)
                if event.settled is None:
                    continue
                code = Exit.OK if event.settled.met else Exit.FAILED
                for line in _settled_lines(event.job, event.settled):
                    print(line, file=said if code == Exit.OK else err, flush=True)
                if machine:
                    document = _document(following, code, event.settled)
                    print(rendering.document(document, output), file=out, flush=True)
                return code
        except NotFound as exc:
            raise CommandError(f"{exc}; --wait-for-creation waits for it", Exit.NOT_FOUND) from None
        except TimedOut:
            print(
                f"wait: {namespace}/{name} did not reach {goal} within {_span(timeout_s)}",
                file=err,
                flush=True,
            )
            if machine:
                document = _document(following, Exit.TIMED_OUT, None)
                print(rendering.document(document, output), file=out, flush=True)
            return Exit.TIMED_OUT
    raise AssertionError("unreachable")  # pragma: no cover - the events go on until one settles


def _span(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"


def add_parser(commands: Any) -> Any:
    """The ``wait`` subcommand's arguments (on ``commands``, an argparse subparsers action)."""
    parser = grammar.command(
        commands,
        "wait",
        "follow a job through the API until it ends, printing each phase and finding",
        description=f"""Exits 0 when the goal (--for) is met, 1 when it cannot be any more (the attempt
failed or was deleted; its root cause and remediation are printed on stderr), 4
when no such job or attempt is recorded within {CREATED_WITHIN_S:g} s (a typo fails fast;
MPIJC_CLIENT__WAIT_CREATED_WITHIN_S; --wait-for-creation waits for it), 5 at
--timeout. A lost connection to the API is reopened, resuming where it stopped.
An attempt that has already ended is judged by its outcome: --for running on a
run that already failed exits 1.""",
        examples=[
            "mpijob-controller wait team-a/train --timeout 2h",
            "kubectl apply -f job.yaml && mpijob-controller wait team-a/train --wait-for-creation",
            "mpijob-controller wait team-a/train --attempt next --for running   # before re-applying",
            "mpijob-controller wait team-a/train -o json | jq -r .exit.name",
        ],
        exits=(
            Exit.OK,
            Exit.FAILED,
            Exit.USAGE,
            Exit.REFUSED,
            Exit.NOT_FOUND,
            Exit.TIMED_OUT,
            Exit.INTERRUPTED,
        ),
    )
    parser.add_argument("target", metavar="NAMESPACE/JOB", type=job_target)
    parser.add_argument(
        "--attempt",
        default="latest",
        type=_attempt,
        help="latest (default: the newest), next (the first created from now on: for a re-run "
        "under the same name) or an attempt number",
    )
    parser.add_argument(
        "--for",
        dest="goal",
        choices=["finished", "succeeded", "running"],
        default="succeeded",
        help="succeeded (default); running: once it runs (or succeeded); finished: however it ends",
    )
    parser.add_argument(
        "--wait-for-creation",
        action="store_true",
        help=f"wait for a job or attempt not recorded yet, instead of exiting 4 after {CREATED_WITHIN_S:g} s",
    )
    parser.add_argument(
        "--timeout", type=grammar.duration, default=7200.0, help="e.g. 2h (default), 30m, 90s, 1h30m"
    )
    grammar.add_output(parser, ("table", *rendering.DOCUMENTS))
    add_client_options(parser)
    return parser


def _attempt(value: str) -> str:
    if value in {"latest", "next"} or re.fullmatch(r"[1-9][0-9]{0,8}", value):
        return value
    raise ValueError(value)
