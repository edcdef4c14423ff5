"""The asynchronous client: the history and live state of training runs, read through the API with
the caller's own token, as typed models (:mod:`controller.contract.runs`, the API's own).

A run is named by its uid, by ``"NAMESPACE/JOB"`` (the newest attempt) or ``"NAMESPACE/JOB@N"``
(attempt N), or by a :class:`~controller.client.refs.RunRef`. Every error is a
:class:`~controller.client.errors.ClientError` carrying the exit status the commands end with.
:class:`controller.client.Client` is the same client for code that is not asynchronous.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any
from urllib.parse import quote

from controller.client.connection import Connection, NoticeCallback, settings_with
from controller.client.errors import NotFound, RunFailed, UsageError
from controller.client.following import AttemptChoice, Following, Goal, Settled, WaitEvent
from controller.client.refs import RunRef, not_found, run_ref
from controller.contract.events import JobPhase
from controller.contract.kubeflow import JobKind
from controller.contract.runs import (
    Comparison,
    Finding,
    FindingList,
    LogEntry,
    LogPage,
    RunDetail,
    RunPage,
    RunSummary,
)
from controller.contract.settings import ClientSettings

__all__ = ["PAGE", "AsyncClient", "Goal", "client_settings"]

PAGE = 500
"""The API's largest page."""
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}


def client_settings(environ: Mapping[str, str] | None = None) -> ClientSettings:
    """The ``MPIJC_CLIENT__*`` settings of the environment (and ``.env``), as the commands read them;
    :class:`UsageError` naming the variable that is malformed."""
    from controller.contract.settings import SettingsError, load_settings

    try:
        return load_settings(environ).client
    except SettingsError as exc:
        raise UsageError(str(exc)) from exc


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


def _labels(labels: Mapping[str, str] | Iterable[str] | None) -> list[str]:
    if isinstance(labels, Mapping):
        return [f"{key}={value}" for key, value in labels.items()]
    return list(labels or ())


def _ref(ref: str | RunRef) -> RunRef:
    if isinstance(ref, RunRef):
        return ref
    try:
        return run_ref(ref)
    except ValueError:
        raise UsageError(f"{ref!r} is not a run: UID, NAMESPACE/JOB or NAMESPACE/JOB@N") from None


class AsyncClient(AbstractAsyncContextManager["AsyncClient"]):
    """Reads of the API for a notebook, a pipeline or a command: ``async with AsyncClient() as api``.

    Settings are the commands' (``MPIJC_CLIENT__API_URL``, ``…__TOKEN``, ``…__TOKEN_FILE``,
    ``…__CA_FILE``, ``…__ALLOW_INSECURE_HTTP``); each argument given replaces its setting
    (``settings``: start from these instead of the environment's). A token is refused over plain
    http to a host that is not this machine unless ``insecure_http``.
    """

    def __init__(
        self,
        api_url: str | None = None,
        *,
        token: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        insecure_http: bool | None = None,
        settings: ClientSettings | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        overrides = {
            "api_url": api_url,
            "token": token,
            "token_file": token_file,
            "ca_file": ca_file,
            "allow_insecure_http": insecure_http,
        }
        self.settings = settings_with(settings if settings is not None else client_settings(), overrides)
        self.connection = Connection(self.settings, timeout_s=timeout_s)
        """The door every request goes through (JSON reads, event streams)."""

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections kept open."""
        await self.connection.__aexit__()

    # ------------------------------------------------------------------ runs

    async def runs(
        self,
        namespace: str | None = None,
        *,
        name: str | None = None,
        kind: JobKind | None = None,
        phase: JobPhase | None = None,
        labels: Mapping[str, str] | Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RunPage:
        """Up to ``limit`` runs the filters select (created in [``since``, ``until``)), newest
        first, following the API's pages (``labels``: ``{"team": "a"}`` or ``["team=a"]``, all must
        match); ``next_cursor`` (pass it as ``cursor``) goes on after them."""
        if limit < 1:
            raise UsageError(f"limit must be at least 1, not {limit}")
        params: dict[str, Any] = {
            key: value
            for key, value in (
                ("namespace", namespace),
                ("name", name),
                ("kind", kind),
                ("phase", phase),
                ("label", _labels(labels)),
                ("created_after", since and since.isoformat()),
                ("created_before", until and until.isoformat()),
            )
            if value
        }
        items: list[RunSummary] = []
        while True:
            asked = {**params, "limit": min(PAGE, limit - len(items))}
            asked = asked if cursor is None else {**asked, "cursor": cursor}
            page = RunPage.model_validate(await self.connection.get("/api/v1/runs", asked))
            items += page.items
            cursor = page.next_cursor
            if cursor is None or len(items) >= limit:
                return RunPage(items=items, next_cursor=cursor)

    async def find_attempt(self, namespace: str, name: str, attempt: int | None = None) -> RunSummary | None:
        """Attempt ``attempt`` of job ``namespace/name`` (its newest for None); None when there is
        none the token may read. The job's runs come newest first."""
        path = f"/api/v1/namespaces/{_path(namespace, 'jobs', name)}/runs"
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": PAGE} if cursor is None else {"limit": PAGE, "cursor": cursor}
            page = RunPage.model_validate(await self.connection.get(path, params))
            for run in page.items:
                if attempt is None or run.attempt == attempt:
                    return run
                if run.attempt < attempt:  # older ones follow: there is no attempt N
                    return None
            cursor = page.next_cursor
            if cursor is None:
                return None

    async def uid_of(self, ref: str | RunRef) -> str:
        """The uid of the run ``ref`` names; :class:`NotFound` when there is none the token may read."""
        ref = _ref(ref)
        if ref.uid is not None:
            return ref.uid
        run = await self.find_attempt(ref.namespace, ref.name, ref.attempt)
        if run is None:
            raise NotFound(not_found(ref.namespace, ref.name, ref.attempt))
        return run.uid

    async def run(self, ref: str | RunRef) -> RunDetail:
        """The run ``ref`` names, with its spec, pods, findings and what its pods used."""
        uid = await self.uid_of(ref)
        return RunDetail.model_validate(await self.connection.get(f"/api/v1/runs/{_path(uid)}"))

    async def findings(self, ref: str | RunRef) -> list[Finding]:
        """What the rules concluded about the run ``ref`` names, firing first."""
        uid = await self.uid_of(ref)
        answer = await self.connection.get(f"/api/v1/runs/{_path(uid)}/findings")
        return FindingList.model_validate(answer).items

    async def compare(self, *refs: str | RunRef) -> Comparison:
        """2 to 5 runs side by side: what changed in the spec, durations, outcomes, failure causes,
        what each pod used."""
        if not 2 <= len(refs) <= 5:
            raise UsageError(f"compare takes 2 to 5 runs, not {len(refs)}")
        uids = [await self.uid_of(ref) for ref in refs]
        if len(set(uids)) != len(uids):
            raise UsageError("each run may appear once (two of the names given are the same run)")
        return Comparison.model_validate(
            await self.connection.get("/api/v1/compare", {"runs": ",".join(uids)})
        )

    # ------------------------------------------------------------------ logs

    async def logs(
        self,
        ref: str | RunRef,
        *,
        grep: str | None = None,
        ignore_case: bool = False,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        follow: bool = False,
        on_stored: Callable[[int], None] | None = None,
        notice: NoticeCallback | None = None,
    ) -> AsyncGenerator[LogEntry, None]:
        """The launcher's and workers' lines of the run ``ref`` names, merged by time; ``grep`` an
        RE2 expression (a substring is one). With ``follow``, then each line stored from then on,
        until the caller stops iterating: a lost connection resumes after the last line received
        (``Last-Event-ID``), ``notice`` told each time. ``on_stored`` is told how many stored lines
        came before following starts."""
        uid = await self.uid_of(ref)
        search: dict[str, str] = {}
        if grep:
            search.update(q=f"(?i:{grep})" if ignore_case else grep, regex="true")
        for key, value in (("since", since), ("until", until)):
            if value is not None:
                search[key] = value.isoformat() if isinstance(value, datetime) else value
        path = f"/api/v1/runs/{_path(uid)}/logs"
        seen = _Seen()
        params = {"limit": str(PAGE), **search}
        while True:
            page = LogPage.model_validate(await self.connection.get(path, params))
            for entry in page.items:
                seen.add(entry)
                yield entry
            if not page.next_cursor:
                break
            params["cursor"] = page.next_cursor
        if on_stored is not None:
            on_stored(seen.count)
        if not follow:
            return
        followed = {"follow": "true", **search}
        if seen.at is not None:
            followed["since"] = seen.at
        async for event in self.connection.events(path, followed, notice=notice):
            if event.event != "line":
                continue
            entry = LogEntry.model_validate_json(event.data)
            if seen.new(entry):
                seen.add(entry)
                yield entry

    # ------------------------------------------------------------------ wait

    def follow(
        self,
        job: str | RunRef,
        *,
        goal: Goal = "succeeded",
        attempt: AttemptChoice | None = None,
        timeout_s: float = 7200.0,
        wait_for_creation: bool = False,
        created_within_s: float | None = None,
        notice: NoticeCallback | None = None,
    ) -> Following:
        """The live events of the job ``job`` names (``"NAMESPACE/JOB"``, ``@N`` for attempt N)
        until ``goal`` is settled: ``async for event in api.follow(...)``, each a
        :class:`~controller.client.following.WaitEvent`, the last one carrying the outcome
        (``event.settled``). ``attempt`` (``"latest"``, ``"next"`` or a number) replaces the
        reference's; :class:`TimedOut` after ``timeout_s``, :class:`NotFound` when no such attempt
        is recorded within ``created_within_s`` (``MPIJC_CLIENT__WAIT_CREATED_WITHIN_S``) unless
        ``wait_for_creation``. A uid is not a job: name it as ``NAMESPACE/JOB@N``."""
        ref = _ref(job)
        if ref.uid is not None:
            raise UsageError(f"{ref} is a uid: follow takes NAMESPACE/JOB or NAMESPACE/JOB@N")
        chosen: AttemptChoice = attempt if attempt is not None else (ref.attempt or "latest")
        within = self.settings.wait_created_within_s if created_within_s is None else created_within_s
        return Following(
            self.connection,
            self.find_attempt,
            ref.namespace,
            ref.name,
            goal=goal,
            attempt=chosen,
            timeout_s=timeout_s,
            wait_for_creation=wait_for_creation,
            created_within_s=within,
            notice=notice,
        )

    async def wait(
        self,
        job: str | RunRef,
        *,
        goal: Goal = "succeeded",
        attempt: AttemptChoice | None = None,
        timeout_s: float = 7200.0,
        wait_for_creation: bool = False,
        created_within_s: float | None = None,
        notice: NoticeCallback | None = None,
        on_event: Callable[[WaitEvent], None] | None = None,
    ) -> RunDetail:
        """Follow the run ``job`` names (``"NAMESPACE/JOB"``: its newest attempt; ``@N``: attempt N;
        or a uid) until ``goal`` is met (:meth:`follow`, ``on_event`` told each event); the run
        as the API then tells it. :class:`RunFailed` (its ``run`` and findings) when the goal
        cannot be met any more (the run failed or was deleted; for ``goal="finished"`` that is an
        answer, not an error), :class:`TimedOut` after ``timeout_s``, :class:`NotFound` when no
        such run is recorded within ``created_within_s`` (the time a job just applied takes to be
        recorded), unless ``wait_for_creation``. A run that had already ended is settled by its
        outcome, not by the phases it passed."""
        ref = _ref(job)
        if ref.uid is not None:
            run = await self.run(ref.uid)
            ref = RunRef(namespace=run.namespace, name=run.name, attempt=run.attempt)
        following = self.follow(
            ref,
            goal=goal,
            attempt=attempt,
            timeout_s=timeout_s,
            wait_for_creation=wait_for_creation,
            created_within_s=created_within_s,
            notice=notice,
        )
        async for event in following:
            if on_event is not None:
                on_event(event)
            if event.settled is not None:
                run = await self.run(str(following.run["uid"]))
                if event.settled.met:
                    return run
                raise RunFailed(_failure(run, event.settled), run)
        raise AssertionError("unreachable")  # pragma: no cover - the events go on until one settles


def _failure(run: RunDetail, settled: Settled) -> str:
    """One line for a run that cannot meet its goal any more: what became of it, its root cause."""
    line = f"{run.namespace}/{run.name} attempt {run.attempt} {settled.outcome}"
    firing = sorted(
        (f for f in run.findings if f.status == "firing"), key=lambda f: _SEVERITY.get(f.severity, 9)
    )
    if firing:
        line += f": root cause ({firing[0].rule}, {firing[0].severity}): {firing[0].root_cause}"
    return line


class _Seen:
    """The timestamp of the last line given, and the lines given with that very timestamp: a
    follow starts at that timestamp and skips those."""

    def __init__(self) -> None:
        self.count = 0
        self.at: str | None = None
        self.lines: set[tuple[str, str, str]] = set()

    def add(self, entry: LogEntry) -> None:
        self.count += 1
        if entry.at != self.at:
            self.at, self.lines = entry.at, set()
        self.lines.add((entry.pod, entry.container, entry.text))

    def new(self, entry: LogEntry) -> bool:
        """Whether a followed line was not given yet (timestamps of one format sort as text)."""
        if self.at is None or entry.at > self.at:
            return True
        return entry.at == self.at and (entry.pod, entry.container, entry.text) not in self.lines
