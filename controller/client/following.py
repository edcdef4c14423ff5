"""Following a job's live events until a goal is settled: the one rule ``wait`` keeps, for the
Python client (:meth:`AsyncClient.follow`, :meth:`AsyncClient.wait`) and the ``wait`` command alike.

A :class:`Following` reads ``GET /api/v1/namespaces/{ns}/jobs/{name}/events`` (through
:meth:`~controller.client.connection.Connection.events`, which rides out a lost connection and
resumes with ``Last-Event-ID``) and yields each event as a :class:`WaitEvent`; the last one it
yields carries the :class:`Settled` outcome:

- a ``phase`` event of ``Succeeded`` (or ``Running`` for the goal ``running``) meets the goal,
  unless the attempt had already ended when the following started: its phases are then history,
  and only its ``end`` (its outcome) settles it (``running`` on a run that already failed is not met);
- an ``end`` event meets ``finished`` whatever the outcome, ``succeeded`` and ``running`` only for
  ``Succeeded``: a failed or deleted attempt cannot meet them any more.

A job or attempt that is not recorded is looked for during ``created_within_s``
(``MPIJC_CLIENT__WAIT_CREATED_WITHIN_S``) and then :class:`~controller.client.errors.NotFound`,
unless ``wait_for_creation`` (or ``attempt="next"``, recorded later by definition) waits for it.
Past ``timeout_s``, :class:`~controller.client.errors.TimedOut`. An entry sent again after a
connection broke within one poll's entries (the same ``(uid, seq)``) is given once, and the
``waiting`` event (sent again at each reconnect) once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

from controller.client.connection import Connection, NoticeCallback, log
from controller.client.errors import NotFound, TimedOut, Unreachable
from controller.client.refs import not_found

if TYPE_CHECKING:
    from controller.contract.runs import RunSummary

__all__ = ["LOOK_EVERY_S", "AttemptChoice", "EventKind", "Following", "Goal", "Settled", "WaitEvent"]

Goal = Literal["finished", "succeeded", "running"]
"""What a wait is for: the run's end whatever it is, its success, or it running (or succeeded)."""
AttemptChoice = int | Literal["latest", "next"]
"""Which attempt of a job to follow: its number, the newest (or the first to be recorded), or the
first created from now on (for a re-run under the same name)."""
EventKind = Literal["phase", "finding", "deleted", "timeline", "waiting", "end"]
LOOK_EVERY_S = 1.0
"""Pause between two looks for a job or attempt not recorded yet."""
_KINDS = frozenset(("phase", "finding", "deleted", "timeline", "waiting", "end"))
_ENDED = ("Succeeded", "Failed")

T = TypeVar("T")
Find = Callable[[str, str, int | None], Awaitable["RunSummary | None"]]
"""How an attempt is looked up in the history (:meth:`AsyncClient.find_attempt`)."""


@dataclasses.dataclass(frozen=True)
class Settled:
    """How the wait ended: whether the goal was ``met``, the attempt's last ``phase``, whether it
    was ``deleted``, and the findings its ``end`` listed (None: settled by a phase event)."""

    met: bool
    phase: str | None
    deleted: bool = False
    findings: tuple[dict[str, Any], ...] | None = None

    @property
    def outcome(self) -> str:
        """What became of the attempt, said after its name: ``is Failed``, ``was deleted …``."""
        if self.deleted and self.phase != "Failed":
            return "was deleted before it finished"
        return f"is {self.phase}"


@dataclasses.dataclass(frozen=True)
class WaitEvent:
    """One event of the job's stream, as the API sent it (``data``: its JSON document), and the
    outcome when it settles the wait."""

    kind: EventKind
    data: dict[str, Any]
    settled: Settled | None = None

    @property
    def job(self) -> str:
        """``NAMESPACE/JOB attempt N``: the attempt the event is about."""
        return f"{self.data.get('namespace')}/{self.data.get('name')} attempt {self.data.get('attempt')}"

    @property
    def at(self) -> str | None:
        """When it happened (RFC 3339), as the API said."""
        at = self.data.get("at")
        return None if at is None else str(at)

    @property
    def phase(self) -> str | None:
        """The phase entered (``phase``) or ended in (``end``)."""
        phase = self.data.get("phase")
        return None if phase is None else str(phase)

    @property
    def finding(self) -> dict[str, Any]:
        """A ``finding`` event's finding, as the API's ``Finding`` document (empty for others)."""
        finding = self.data.get("finding")
        return finding if isinstance(finding, dict) else {}


class Following:
    """An attempt of ``namespace/name`` followed until ``goal`` is settled: iterate it
    (``async for event in following``) for each :class:`WaitEvent`, the last one settled. What it
    learnt stays readable after a :class:`~controller.client.errors.TimedOut` too: :attr:`run`,
    :attr:`phase`, :attr:`findings`."""

    def __init__(
        self,
        connection: Connection,
        find: Find,
        namespace: str,
        name: str,
        *,
        goal: Goal = "succeeded",
        attempt: AttemptChoice = "latest",
        timeout_s: float = 7200.0,
        wait_for_creation: bool = False,
        created_within_s: float = 15.0,
        notice: NoticeCallback | None = None,
    ) -> None:
        self.namespace, self.name, self.goal, self.attempt = namespace, name, goal, attempt
        self.timeout_s = timeout_s
        self.wait_for_creation = wait_for_creation
        self.created_within_s = created_within_s
        self.run: dict[str, Any] = {}
        """The attempt the events are about: ``namespace``, ``name``, ``attempt``, ``uid``."""
        self.phase: str | None = None
        """Its last phase seen."""
        self.findings: dict[Any, dict[str, Any]] = {}
        """The newest revision of each finding the events carried, by rule."""
        self._connection, self._find, self._notice = connection, find, notice
        self._ended: str | None = None
        self._said_waiting = False
        self._seen: set[tuple[Any, Any]] = set()

    def __aiter__(self) -> AsyncIterator[WaitEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[WaitEvent]:
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        if self.attempt != "next" and not self.wait_for_creation:
            number = None if self.attempt == "latest" else int(self.attempt)
            run = await self._timed(self._recorded(number), deadline)
            if run.phase in _ENDED or run.deleted_at is not None:
                self._ended = run.uid
            self.run = {"namespace": run.namespace, "name": run.name, "attempt": run.attempt, "uid": run.uid}
        path = f"/api/v1/namespaces/{quote(self.namespace, safe='')}/jobs/{quote(self.name, safe='')}/events"
        stream = self._connection.events(path, {"attempt": str(self.attempt)}, notice=self._notice)
        try:
            while True:
                received = await self._timed(anext(stream), deadline)
                event = self._take(received.event, received.data)
                if event is not None:
                    yield event
                    if event.settled is not None:
                        return
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def _timed(self, step: Awaitable[T], deadline: float) -> T:
        try:
            async with asyncio.timeout_at(deadline):
                return await step
        except TimeoutError:
            raise TimedOut(
                f"{self.namespace}/{self.name} did not reach {self.goal} within {self.timeout_s:g} s"
            ) from None

    async def _recorded(self, number: int | None) -> RunSummary:
        """The attempt as the history lists it, looked for during ``created_within_s``; an
        unreachable API is asked again (with backoff, as a lost stream) until the timeout."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.created_within_s
        backoff = 0.5
        while True:
            try:
                run = await self._find(self.namespace, self.name, number)
            except Unreachable as exc:
                backoff = min(backoff * 2, 30.0)
                (self._notice or log.warning)(f"lost the API ({exc}); reconnecting in {backoff:.1f} s")
                await asyncio.sleep(backoff)
                give_up = max(give_up, loop.time() + self.created_within_s)  # unasked is not unseen
                continue
            if run is not None:
                return run
            if loop.time() >= give_up:
                raise NotFound(
                    f"{not_found(self.namespace, self.name, number)} (looked for {self.created_within_s:g} s)"
                )
            await asyncio.sleep(LOOK_EVERY_S)

    def _take(self, kind: str, raw: str) -> WaitEvent | None:
        """The event as received, parsed and judged; None for one to pass over."""
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict) or kind not in _KINDS:
            return None
        seen = (data.get("uid"), data.get("seq"))
        if seen[1] is not None:
            if seen in self._seen:
                return None
            self._seen.add(seen)
        if kind == "waiting":
            said, self._said_waiting = self._said_waiting, True
            return None if said else WaitEvent("waiting", data)
        self.run.update({k: data[k] for k in ("namespace", "name", "attempt", "uid") if k in data})
        if kind == "finding":
            finding = data.get("finding") or {}
            self.findings[finding.get("rule")] = finding
        if kind == "phase":
            self.phase = str(data.get("phase"))
            replayed = self._ended is not None and data.get("uid") == self._ended
            if not replayed and (
                self.phase == "Succeeded" or (self.goal == "running" and self.phase == "Running")
            ):
                return WaitEvent("phase", data, Settled(met=True, phase=self.phase))
        if kind == "end":
            return WaitEvent("end", data, self._end(data))
        return WaitEvent(kind, data)  # type: ignore[arg-type]

    def _end(self, data: dict[str, Any]) -> Settled:
        phase = data.get("phase")
        self.phase = str(phase) if phase else self.phase
        return Settled(
            met=phase == "Succeeded" or self.goal == "finished",
            phase=self.phase,
            deleted=bool(data.get("deleted")),
            findings=tuple(data.get("findings") or ()),
        )
