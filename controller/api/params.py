"""Request parameters every router shares: their types, checks and error responses.

Each parameter is checked where it is declared (a pattern, a range, a timezone), so a bad one
is answered 422 with the parameter's name before a handler runs, and the OpenAPI schema
says exactly what is accepted. The pagination cursor is opaque to clients: URL-safe base64 of
the last row's (created_at, uid); one that does not decode is a 400.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import HTTPException, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, BeforeValidator, StringConstraints

from controller.store.models import Run

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace: an RFC 1123 label."""
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A job name: an RFC 1123 subdomain."""
UID = r"^[A-Za-z0-9][-A-Za-z0-9_.]*$"
"""A run uid (Kubernetes hands out UUIDs; replayed captures keep theirs)."""
LABEL = r"^([A-Za-z0-9][-A-Za-z0-9_./]*)=([-A-Za-z0-9_.]*)$"
"""One ``key=value`` label requirement."""
MAX_COMPARED = 5


class Problem(BaseModel):
    """An error: what was wrong, in one sentence."""

    detail: str


def _problem(description: str) -> dict[str, Any]:
    return {"model": Problem, "description": description}


AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _problem("No bearer token, or one that is not accepted."),
    403: _problem("The caller may not list MPIJobs or TrainJobs in that namespace."),
    503: _problem("Access could not be checked (the Kubernetes API did not answer)."),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _problem("No such run.")}
BAD_REQUEST: dict[int | str, dict[str, Any]] = {400: _problem("A parameter is well-formed but unusable.")}


RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _rfc3339(value: object) -> object:
    """Only RFC 3339 date-times, as the schema says (pydantic alone would take 0.5 as a Unix time)."""
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        raise ValueError(
            "expected an RFC 3339 date-time with an offset, e.g. 2026-11-20T10:00:00Z "
            "(in a URL, write a + offset as %2B)"
        )
    return value


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("time is out of range once converted to UTC") from exc


Instant = Annotated[datetime, BeforeValidator(_rfc3339), AfterValidator(_utc)]
"""An RFC 3339 date-time with an offset, compared in UTC."""


def _query_names(dependant: Dependant) -> Iterator[str]:
    yield from (param.alias for param in dependant.query_params)
    for sub in dependant.dependencies:
        yield from _query_names(sub)


async def known_query_only(request: Request) -> None:
    """400 for a query parameter the route does not declare: a typo (``namspace=``) must not
    silently return everything."""
    route = request.scope.get("route")
    if isinstance(route, APIRoute):
        unknown = sorted(set(request.query_params) - set(_query_names(route.dependant)))
        if unknown:
            raise HTTPException(400, f"unknown query parameter(s): {', '.join(map(repr, unknown))}")


NamespacePath = Annotated[
    str, Path(pattern=DNS_LABEL, max_length=63, description="Namespace (an RFC 1123 label).")
]
NamePath = Annotated[
    str, Path(pattern=DNS_SUBDOMAIN, max_length=253, description="Job name (an RFC 1123 subdomain).")
]
UidPath = Annotated[str, Path(pattern=UID, max_length=64, description="Run uid (the job object's uid).")]
Label = Annotated[str, StringConstraints(pattern=LABEL, max_length=317)]
Limit = Annotated[int, Query(ge=1, le=500, description="Most runs on one page.")]
Cursor = Annotated[
    str | None,
    Query(
        max_length=512,
        pattern=r"^[-A-Za-z0-9_=]+$",
        description="`next_cursor` of the previous page; omit for the first page.",
    ),
]


def encode_cursor(run: Run) -> str:
    """The cursor of the page that follows ``run``."""
    raw = json.dumps([run.created_at.isoformat(), run.uid], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """(created_at, uid) of the last row already seen; 400 if ``cursor`` is not one of ours."""
    if cursor is None:
        return None
    try:
        created_at, uid = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        when = datetime.fromisoformat(created_at)
        if when.tzinfo is None or not isinstance(uid, str) or not re.fullmatch(UID, uid):
            raise ValueError("not a cursor")
        return when, uid
    except (ValueError, TypeError, binascii.Error) as exc:
        raise HTTPException(400, "cursor is not valid: pass the next_cursor of a previous page") from exc


def labels_of(labels: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["team=a", "exp=3"]`` → ``(("team", "a"), ("exp", "3"))`` (already checked by the pattern)."""
    pairs = (label.partition("=") for label in labels)
    return tuple((key, value) for key, _, value in pairs)
