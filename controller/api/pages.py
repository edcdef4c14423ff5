"""The pages people read in a browser (``/ui/…``): the job list, a run's six tabs, two attempts compared.

Rendered on the server from the answers of the JSON routes themselves (each page calls the route
functions of :mod:`~controller.api.runs`, :mod:`~controller.api.jobs`, :mod:`~controller.api.logs`
and :mod:`~controller.api.compare`), so a page shows exactly what the caller may read through the
API, checked the same way, and nothing else. Every asset is shipped in the package; pages make no
request to any other site (their Content-Security-Policy forbids it). The static parts read without
JavaScript; ``static/pages.js`` only keeps phases live (an event stream on a run's page, the list
refreshed every 5 s), follows logs and filters them as one types.

Signing in: a browser does not send a bearer header on navigation, so ``/ui/sign-in`` takes a
token in a form, reviews it as every request's token is reviewed (rate limits included) and sets it
as the session cookie (:data:`~controller.api.auth.SESSION_COOKIE`: HttpOnly, SameSite=Strict,
Secure over HTTPS), which :func:`~controller.api.auth.current_principal` accepts on ``GET``
requests only. The sign-in and sign-out posts are refused unless their ``Origin`` is this site.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

import jinja2
import yaml
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import TypeAdapter, ValidationError

from controller.api import charts, compare, jobs, logs, models, runs
from controller.api.auth import SESSION_COOKIE, Principal, authenticate, principal_of_token, through_proxy
from controller.api.deps import engine_of
from controller.api.params import MAX_COMPARED, MAX_UID, JobName, Namespace, UidPath
from controller.contract.events import JobPhase, manifest_truncated
from controller.contract.kinds import JobKind
from controller.contract.runs import LogEntry, LogPage
from controller.store import queries

__all__ = ["PREFIX", "SIGN_IN", "STATIC", "STATIC_DIR", "body_gate", "line_anchor", "router"]

PREFIX = "/ui"
SIGN_IN = f"{PREFIX}/sign-in"
SIGN_OUT = f"{PREFIX}/sign-out"
PROXY_SIGN_OUT = "/oauth/sign_out"
"""Where OpenShift's OAuth proxy ends its session (its ``--proxy-prefix``, ``/oauth`` by default)."""
STATIC = f"{PREFIX}/static"
STATIC_DIR = Path(__file__).with_name("static")
"""The pages' stylesheet and script, served as files (they hold no data: no sign-in needed)."""
TABS = ("overview", "configuration", "workers", "logs", "metrics", "events")
Tab = Literal["overview", "configuration", "workers", "logs", "metrics", "events"]
SORTS = ("created", "name", "namespace", "kind", "phase")
PAGE_SIZES = (25, 50, 100)
LOG_LINES = 500
"""Lines a Logs tab shows at once (the JSON route's most per page)."""
MAX_TOKEN_FORM = 17 * 1024
"""The sign-in form's most bytes (a token of :data:`~controller.api.auth.MAX_TOKEN` and the rest)."""
_NEXT = re.compile(r"/ui/[A-Za-z0-9._~/?&=%:,+-]{0,2000}")
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make a form post's Origin "null"
    "Cache-Control": "no-store",
}

router = APIRouter(prefix=PREFIX, include_in_schema=False)

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_T = TypeVar("_T")


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    whole = round(value)
    hours, rest = divmod(whole, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {seconds:02d} s" if minutes else f"{value:.1f} s"


_env.filters["when"] = _when
_env.filters["seconds"] = _seconds


def _page(request: Request, template: str, code: int = 200, **context: Any) -> HTMLResponse:
    html = _env.get_template(template).render(
        prefix=PREFIX,
        path=request.url.path,
        proxied=through_proxy(request),
        proxy_sign_out=PROXY_SIGN_OUT,
        **context,
    )
    return HTMLResponse(html, code, headers=_SECURITY_HEADERS)


def _problem_page(request: Request, exc: HTTPException) -> HTMLResponse:
    return _page(request, "problem.html", exc.status_code, status=exc.status_code, detail=exc.detail)


async def _caller(request: Request) -> Principal | None:
    """The signed-in caller, or ``None`` (the page sends them to sign in); other refusals raise."""
    try:
        return await authenticate(request)
    except HTTPException as exc:
        if exc.status_code == 401:
            return None
        raise


def _to_sign_in(request: Request) -> RedirectResponse:
    back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{SIGN_IN}?{urllib.parse.urlencode({'next': back})}", 303)


def _optional(adapter: TypeAdapter[_T], value: str | None, name: str) -> _T | None:
    """A form field: empty is unset; anything else must be valid (400 naming the field)."""
    if value is None or value == "":
        return None
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise HTTPException(400, f"{name}: {exc.errors()[0]['msg']}") from exc


_NAMESPACE = TypeAdapter(Namespace)
_NAME = TypeAdapter(JobName)
_KIND: TypeAdapter[JobKind] = TypeAdapter(JobKind)
_PHASE: TypeAdapter[JobPhase] = TypeAdapter(JobPhase)
_DATE = TypeAdapter(date)


def _day(value: str | None, name: str, days: int = 0) -> datetime | None:
    day = _optional(_DATE, value, name)
    return None if day is None else datetime.combine(day, time(), UTC) + timedelta(days=days)


def _sorted(items: list[models.RunSummary], sort: str, order: str) -> list[models.RunSummary]:
    keys: dict[str, Callable[[models.RunSummary], Any]] = {
        "created": lambda r: r.created_at,
        "name": lambda r: (r.name, r.attempt),
        "namespace": lambda r: (r.namespace, r.name),
        "kind": lambda r: (r.kind, r.name),
        "phase": lambda r: (r.phase, r.name),
    }
    return sorted(items, key=keys[sort], reverse=order == "desc")


async def _sentences(request: Request, failed: Sequence[str]) -> dict[str, str]:
    """The newest finding's root cause of each failed run, in one query: the runs are those the
    list route answered, so their namespaces were already found readable."""
    async with engine_of(request).connect() as conn:
        newest = await queries.newest_findings(conn, failed)
    return {uid: finding.root_cause for uid, finding in newest.items()}


@router.get("")
@router.get("/")
async def home() -> RedirectResponse:
    return RedirectResponse(f"{PREFIX}/jobs", 303)


@router.get("/sign-in")
async def sign_in_form(
    request: Request, next_page: Annotated[str | None, Query(alias="next", max_length=2048)] = None
) -> Response:
    return _page(request, "sign_in.html", next=_safe_next(next_page), problem=None)


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: a page of this site, never another one."""
    return value if value is not None and _NEXT.fullmatch(value) and "//" not in value else f"{PREFIX}/jobs"


def _same_origin(request: Request) -> None:
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if origin is None or host is None or urllib.parse.urlsplit(origin).netloc != host:
        raise HTTPException(403, "a sign-in or sign-out is accepted only from this site's own pages")


async def body_gate(request: Request) -> object:
    """The body gate of :class:`~controller.api.bodylimit.BodyLimit`: the sign-in form, whose body
    is the token, comes from this site (its ``Origin``) and is small; every other body needs an
    authenticated caller first."""
    if request.url.path == SIGN_IN and request.method == "POST":
        _same_origin(request)
        length = request.headers.get("content-length", "")
        if not length.isdigit() or int(length) > MAX_TOKEN_FORM:
            raise HTTPException(413, f"a sign-in form has at most {MAX_TOKEN_FORM} bytes")
        return None
    return await authenticate(request)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    _same_origin(request)
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise HTTPException(415, "the sign-in form is sent as application/x-www-form-urlencoded")
    fields = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=4)
    token = (fields.get("token") or [""])[0].strip()
    next_page = _safe_next((fields.get("next") or [""])[0])
    try:
        await principal_of_token(request, token)
    except HTTPException as exc:
        if exc.status_code != 401:
            raise
        return _page(request, "sign_in.html", 401, next=next_page, problem="That token was not accepted.")
    answer = RedirectResponse(next_page, 303, headers=_SECURITY_HEADERS)
    secure = request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"
    answer.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="strict", secure=secure, path="/")
    return answer


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    _same_origin(request)
    answer = RedirectResponse(SIGN_IN, 303, headers=_SECURITY_HEADERS)
    answer.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return answer


@router.get("/jobs")
async def job_list(
    request: Request,
    namespace: Annotated[str | None, Query(max_length=63)] = None,
    name: Annotated[str | None, Query(max_length=253)] = None,
    kind: Annotated[str | None, Query(max_length=20)] = None,
    phase: Annotated[str | None, Query(max_length=20)] = None,
    created_from: Annotated[str | None, Query(alias="from", max_length=10)] = None,
    created_to: Annotated[str | None, Query(alias="to", max_length=10)] = None,
    sort: Annotated[Literal["created", "name", "namespace", "kind", "phase"], Query()] = "created",
    order: Annotated[Literal["asc", "desc"], Query()] = "desc",
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response:
    """Every kind of run in one list, filtered, sorted, paged; phases kept live by the page's script."""
    principal = await _caller(request)
    if principal is None:
        return _to_sign_in(request)
    try:
        after, before = _day(created_from, "from"), _day(created_to, "to", days=1)
        page = await runs.list_runs(
            request,
            principal,
            namespace=_optional(_NAMESPACE, namespace, "namespace"),
            name=_optional(_NAME, name, "name"),
            kind=_optional(_KIND, kind, "kind"),
            phase=_optional(_PHASE, phase, "phase"),
            label=None,
            created_after=after,
            created_before=before,
            limit=limit,
            cursor=cursor,
        )
        failed = [run.uid for run in page.items if run.phase == "Failed"]
        sentences = await _sentences(request, failed)
    except HTTPException as exc:
        return _problem_page(request, exc)
    shown = {
        "namespace": namespace or "",
        "name": name or "",
        "kind": kind or "",
        "phase": phase or "",
        "from": created_from or "",
        "to": created_to or "",
        "limit": str(limit),
    }
    api_query = {
        k: v
        for k, v in {
            "namespace": shown["namespace"],
            "name": shown["name"],
            "kind": shown["kind"],
            "phase": shown["phase"],
            "created_after": after.isoformat() if after else "",
            "created_before": before.isoformat() if before else "",
            "limit": str(limit),
            "cursor": cursor or "",
        }.items()
        if v
    }

    def link(**changes: str) -> str:
        query = {k: v for k, v in {**shown, "sort": sort, "order": order, **changes}.items() if v}
        return f"{PREFIX}/jobs?{urllib.parse.urlencode(query)}"

    return _page(
        request,
        "jobs.html",
        user=principal.username,
        runs=_sorted(page.items, sort, order),
        sentences=sentences,
        shown=shown,
        sort=sort,
        order=order,
        sorts=SORTS,
        kinds=get_args(JobKind),
        phases=get_args(JobPhase),
        sizes=PAGE_SIZES,
        link=link,
        next_link=link(cursor=page.next_cursor) if page.next_cursor else None,
        first_link=link() if cursor else None,
        api_query=urllib.parse.urlencode(api_query),
    )


def line_anchor(entry: LogEntry) -> str:
    """A log line's stable anchor: its time, pod and container, and its text (lines of one instant)."""
    digest = hashlib.sha256(f"{entry.at}\0{entry.pod}\0{entry.container}\0{entry.text}".encode()).hexdigest()
    return f"line-{digest[:16]}"


@router.get("/runs/{uid}")
async def run_page(
    uid: UidPath,
    request: Request,
    tab: Tab = "overview",
    q: Annotated[str | None, Query(max_length=logs.MAX_QUERY)] = None,
    since: Annotated[str | None, Query(max_length=40)] = None,
) -> Response:
    """One run's page, on one of its six tabs; earlier attempts of the job linked from it."""
    principal = await _caller(request)
    if principal is None:
        return _to_sign_in(request)
    context: dict[str, Any] = {"tab": tab, "tabs": TABS, "q": q or "", "since": since or ""}
    try:
        run = await runs.get_run(uid, request, principal)
        attempts = await jobs.attempts(run.namespace, run.name, request, principal, kind=run.kind, limit=50)
        if tab == "events":
            context["timeline"] = await runs.timeline(uid, request, principal)
        if tab == "logs":
            context.update(await _log_lines(request, principal, uid, q or None, since or None))
    except HTTPException as exc:
        return _problem_page(request, exc)
    firing = [f for f in run.findings if f.status == "firing"] or list(run.findings)
    return _page(
        request,
        "run.html",
        user=principal.username,
        run=run,
        attempts=attempts.items,
        cause=firing[0] if firing else None,
        durations=_durations(run),
        spec_yaml=yaml.safe_dump(run.spec.model_dump(mode="json", exclude_defaults=True), sort_keys=False),
        truncated=run.manifest is not None and manifest_truncated(run.manifest),
        charts=[(*charts.pod_charts(u, run.findings), charts.gpu_rows(u)) for u in run.usage]
        if tab == "metrics"
        else [],
        health=[f for f in run.findings if f.rule in charts.HEALTH_RULES] if tab == "metrics" else [],
        **context,
    )


async def _log_lines(
    request: Request, principal: Principal, uid: str, q: str | None, since: str | None
) -> dict[str, Any]:
    """The Logs tab's lines (a page of the logs route: its search, its access check)."""
    when = None
    if since is not None:
        try:
            when = datetime.fromisoformat(since.replace("Z", "+00:00")).astimezone(UTC)
        except ValueError as exc:
            raise HTTPException(400, "since: expected an RFC 3339 date-time") from exc
    page = await logs.run_logs(uid, request, principal, q=q, since=when, limit=LOG_LINES)
    if not isinstance(page, LogPage):  # pragma: no cover - only a follow streams
        raise HTTPException(500, "the logs route answered a stream")
    lines = [(line_anchor(entry), entry) for entry in page.items]
    return {"lines": lines, "more_lines": page.next_cursor is not None}


def _durations(run: models.RunDetail) -> dict[str, float | None]:
    def between(start: datetime | None, end: datetime | None) -> float | None:
        return None if start is None or end is None else (end - start).total_seconds()

    return {
        "queued": between(run.created_at, run.started_at),
        "running": between(run.started_at, run.finished_at),
        "total": between(run.created_at, run.finished_at),
    }


@router.get("/compare")
async def compare_page(
    request: Request,
    uids: Annotated[
        str, Query(alias="runs", pattern=compare.RUN_LIST, max_length=MAX_COMPARED * (MAX_UID + 1))
    ],
) -> Response:
    """Two to five attempts side by side: the comparison route's answer, as a page."""
    principal = await _caller(request)
    if principal is None:
        return _to_sign_in(request)
    try:
        comparison = await compare.compare(request, principal, runs=uids)
    except HTTPException as exc:
        return _problem_page(request, exc)
    async with engine_of(request).connect() as conn:  # the runs the comparison found readable
        stored = await queries.get_runs(conn, [c.run.uid for c in comparison.runs])
    manifests = [(c.run.attempt, getattr(stored.get(c.run.uid), "manifest", None)) for c in comparison.runs]
    return _page(
        request,
        "compare.html",
        user=principal.username,
        comparison=comparison,
        manifest_diffs=_manifest_diffs(manifests),
    )


def _manifest_diffs(manifests: Sequence[tuple[int, str | None]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each later run's submitted manifest against the first's, as unified diff lines with their
    kind (``add``, ``del``, ``hunk``, ``same``); a run without a manifest is left out."""
    (first, base), *others = manifests
    diffs: list[tuple[str, list[tuple[str, str]]]] = []
    for attempt, text in others:
        if base is None or text is None:
            continue
        lines = difflib.unified_diff(base.splitlines(), text.splitlines(), lineterm="", n=3)
        kinds = {"+": "add", "-": "del", "@": "hunk"}
        shown = [(kinds.get(line[:1], "same"), line) for line in lines if not line.startswith(("+++", "---"))]
        diffs.append((f"#{first} → #{attempt}", shown))
    return diffs
