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

import asyncio
import dataclasses
import json
import re
import sys
from typing import TYPE_CHECKING, Any, Literal, TextIO

from controller.cli import grammar, rendering
from controller.cli.apiclient import add_client_options
from controller.cli.browsing import job_target
from controller.cli.exits import CommandError, Exit
from controller.client.errors import Unreachable
from controller.client.refs import job_ref, not_found
from controller.contract.settings import ClientSettings

if TYPE_CHECKING:
    from controller.client.aio import AsyncClient

__all__ = ["Goal", "Watch", "outcome_document", "wait"]

Goal = Literal["finished", "succeeded", "running"]
CREATED_WITHIN_S = ClientSettings.model_fields["wait_created_within_s"].default
"""How long a job or attempt named but not (yet) in the history is looked for before ``wait``
says there is none (``MPIJC_CLIENT__WAIT_CREATED_WITHIN_S``)."""
LOOK_EVERY_S = 1.0
"""Pause between two looks for a job or attempt not recorded yet."""
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
_ENDED = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: Exit
    lines: tuple[str, ...]
    findings: tuple[dict[str, Any], ...] | None = None
    """The findings the ``end`` event listed; None: those the events carried."""


@dataclasses.dataclass
class Watch:
    """What the events said so far, and whether they settle the wait."""

    goal: Goal
    ended: str | None = None
    """The uid of the attempt followed when it had already ended as ``wait`` started: its phases
    are history, and only its ``end`` (its outcome) settles the wait."""
    phase: str | None = None
    said_waiting: bool = False
    seen: set[tuple[Any, Any]] = dataclasses.field(default_factory=set)
    run: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The attempt the events are about: namespace, name, attempt, uid."""
    findings: dict[Any, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """The newest revision of each finding the events carried, by rule."""

    def event(self, kind: str, raw: str) -> tuple[list[str], Outcome | None]:
        """:meth:`on` for an event as received: its JSON parsed, an entry sent again after a
        connection broke within one poll's entries (the same ``(uid, seq)``) skipped."""
        try:
            data = json.loads(raw)
        except ValueError:
            return [], None
        if not isinstance(data, dict):
            return [], None
        seen = (data.get("uid"), data.get("seq"))
        if seen[1] is not None:
            if seen in self.seen:
                return [], None
            self.seen.add(seen)
        return self.on(kind, data)

    def on(self, kind: str, data: dict[str, Any]) -> tuple[list[str], Outcome | None]:
        """Lines to print for one event, and the outcome if the event settles the wait."""
        job = f"{data.get('namespace')}/{data.get('name')} attempt {data.get('attempt')}"
        at = rendering.when(data.get("at"))
        if kind != "waiting":
            self.run.update({k: data[k] for k in ("namespace", "name", "attempt", "uid") if k in data})
        if kind == "phase":
            self.phase = str(data.get("phase"))
            reason = f" ({data['reason']})" if data.get("reason") else ""
            lines = [f"{at}  {job}: {self.phase}{reason}"]
            replayed = self.ended is not None and data.get("uid") == self.ended
            if not replayed and (
                self.phase == "Succeeded" or (self.goal == "running" and self.phase == "Running")
            ):
                return lines, Outcome(Exit.OK, (f"{job} is {self.phase}",))
            return lines, None
        if kind == "finding":
            finding = data.get("finding") or {}
            self.findings[finding.get("rule")] = finding
            return [
                f"{at}  {job}: finding {finding.get('rule')} "
                f"({finding.get('severity')}, {finding.get('status')}): {finding.get('root_cause')}"
            ], None
        if kind == "deleted":
            return [f"{at}  {job}: deleted"], None
        if kind == "waiting":  # sent again at each reconnect: said once
            line = f"waiting for the next attempt of {data.get('namespace')}/{data.get('name')}"
            said, self.said_waiting = self.said_waiting, True
            return ([] if said else [line]), None
        if kind == "end":
            return [], self._end(job, data)
        return [], None

    def _end(self, job: str, data: dict[str, Any]) -> Outcome:
        phase = data.get("phase")
        self.phase = str(phase) if phase else self.phase
        listed = tuple(data.get("findings") or ())
        if phase == "Succeeded":
            return Outcome(Exit.OK, (f"{job} is Succeeded",), listed)
        what = (
            "was deleted before it finished" if data.get("deleted") and phase != "Failed" else f"is {phase}"
        )
        findings = sorted(data.get("findings") or [], key=lambda f: _SEVERITY.get(f.get("severity"), 9))
        lines = [f"{job} {what}"]
        if findings:
            cause = findings[0]
            lines.append(
                f"root cause ({cause.get('rule')}, {cause.get('severity')}): {cause.get('root_cause')}"
            )
            lines += [f"  - {step}" for step in cause.get("remediation") or ()]
            if cause.get("doc_anchor"):
                lines.append(f"  see {cause['doc_anchor']}")
            lines += [f"also firing: {f.get('rule')}: {f.get('root_cause')}" for f in findings[1:]]
        elif phase == "Failed":
            lines.append("no finding explains the failure yet: see the run's timeline")
        return Outcome(Exit.OK if self.goal == "finished" else Exit.FAILED, tuple(lines), listed)

    def document(self, code: Exit, outcome: Outcome | None) -> dict[str, Any]:
        """The outcome as ``-o json``/``-o yaml`` print it (:func:`outcome_document`)."""
        listed = outcome.findings if outcome is not None else None
        findings = list(self.findings.values()) if listed is None else list(listed)
        return outcome_document(self.run, self.phase, code, findings)


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
    """Follow ``target`` (``namespace/job``) until ``goal`` is met or cannot be; the exit status
    (printed on ``out`` and ``err``, standard output and error by default).
    :class:`~controller.client.errors.Refused` when the API refuses, a
    :class:`~controller.cli.exits.CommandError` (not found) when there is no such job or attempt;
    a malformed target, ValueError."""
    out, err = out or sys.stdout, err or sys.stderr
    machine = output in rendering.DOCUMENTS
    said = err if machine else out  # with -o json|yaml, stdout holds the outcome's document only
    namespace, name = job_ref(target) if isinstance(target, str) else target
    watch = Watch(goal)
    path = f"/api/v1/namespaces/{namespace}/jobs/{name}/events"
    from controller.client.aio import AsyncClient  # the models: for the commands that use them only

    async with AsyncClient(settings=client) as api:
        try:
            async with asyncio.timeout(timeout_s):
                if attempt != "next" and not wait_for_creation:
                    number = None if attempt == "latest" else int(attempt)
                    run = await _recorded(api, namespace, name, number, created_within_s, err)
                    if run is None:
                        raise CommandError(
                            f"{not_found(namespace, name, number)} (looked for {created_within_s:g} s; "
                            "--wait-for-creation waits for it)",
                            Exit.NOT_FOUND,
                        )
                    if run["phase"] in _ENDED or run.get("deleted_at"):
                        watch.ended = str(run["uid"])
                    watch.run = {k: run[k] for k in ("namespace", "name", "attempt", "uid")}

                def lost(line: str) -> None:
                    print(f"wait: {line}", file=err, flush=True)

                async for event in api.connection.events(path, {"attempt": attempt}, notice=lost):
                    lines, outcome = watch.event(event.event, event.data)
                    for line in lines:
                        print(line, file=said, flush=True)
                    if outcome is not None:
                        for line in outcome.lines:
                            print(line, file=said if outcome.code == Exit.OK else err, flush=True)
                        if machine:
                            document = watch.document(outcome.code, outcome)
                            print(rendering.document(document, output), file=out, flush=True)
                        return outcome.code
        except TimeoutError:
            print(
                f"wait: {namespace}/{name} did not reach {goal} within {_span(timeout_s)}",
                file=err,
                flush=True,
            )
            if machine:
                document = watch.document(Exit.TIMED_OUT, None)
                print(rendering.document(document, output), file=out, flush=True)
            return Exit.TIMED_OUT
    raise AssertionError("unreachable")  # pragma: no cover - the events go on until one settles


async def _recorded(
    api: AsyncClient, namespace: str, name: str, number: int | None, within_s: float, err: TextIO
) -> dict[str, Any] | None:
    """The attempt as the history lists it, looked for during ``within_s``; an unreachable API is
    asked again (with backoff, as a lost stream) until the caller's timeout."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + within_s
    backoff = 0.5
    while True:
        try:
            found = await api.find_attempt(namespace, name, number)
        except Unreachable as exc:
            backoff = min(backoff * 2, 30.0)
            print(f"wait: lost the API ({exc}); reconnecting in {backoff:.1f} s", file=err, flush=True)
            await asyncio.sleep(backoff)
            give_up = max(give_up, loop.time() + within_s)  # what could not be asked was not seen
            continue
        if found is not None or loop.time() >= give_up:
            return None if found is None else found.model_dump(mode="json")
        await asyncio.sleep(LOOK_EVERY_S)


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
