"""Request parameters every router shares: their types, bounds, checks and error responses.

Each parameter is checked where it is declared, so a bad one is answered 422 naming it before
a handler runs, and the OpenAPI schema says exactly what is accepted. Every string a client
sends has a maximum length, checked before any pattern runs, so no check costs more than a
bounded, linear amount of work:

- :data:`Namespace` (an RFC 1123 label, at most 63) for every namespace, in a path, a query or
  a body; :data:`JobName` (an RFC 1123 subdomain, at most 253) for every job name;
- :data:`Instant` for every timestamp: RFC 3339 with an offset, compared in UTC;
- pagination (``limit``, ``cursor``) is in :mod:`controller.api.paging`.

Errors are ``{"detail": …}`` (:class:`Problem`); :func:`errors` gives a route the documented
answers for the statuses it may return.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import HTTPException, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
    WithJsonSchema,
)

from controller.contract import names
from controller.contract.names import DNS_LABEL, DNS_SUBDOMAIN, MAX_NAMESPACE

MAX_NAME = names.MAX_NAME
"""The longest job name (the routers bound names by it)."""

UID = r"^[A-Za-z0-9][-A-Za-z0-9_.]*$"
"""A run uid (Kubernetes hands out UUIDs; replayed captures keep theirs)."""
LABEL = r"^([A-Za-z0-9][-A-Za-z0-9_./]*)=([-A-Za-z0-9_.]*)$"
"""One ``key=value`` label requirement."""
MAX_COMPARED = 5

# Bounds of every string parameter and body field (characters).
MAX_UID = 64
MAX_LABEL = 317
MAX_LABELS = 32
"""``label`` requirements on one runs list (as many as a subscription's selector may have)."""
MAX_USERNAME = 512
MAX_TIMESTAMP = 64


class Problem(BaseModel):
    """An error: what was wrong, in one sentence."""

    detail: str


class InvalidField(BaseModel):
    """One field that broke its declared form."""

    model_config = ConfigDict(extra="allow")

    loc: list[str | int]
    msg: str
    type: str


class Unprocessable(BaseModel):
    """A parameter or body field that breaks its declared form (a list naming each), or a value
    the route checks itself (one sentence)."""

    detail: str | list[InvalidField]


_DESCRIPTIONS: dict[int, str] = {
    400: "A parameter is well-formed but unusable: a cursor this API did not issue, an unknown query "
    "parameter, an empty time range.",
    401: "No bearer token, or one that is not accepted.",
    403: "The caller may not list MPIJobs or TrainJobs in the namespace they named, or may not change "
    "that subscription.",
    404: "No such object, or one in a namespace the caller may not read: the same answer.",
    409: "The object is not in a state that allows this.",
    413: "The request body is larger than the API accepts.",
    429: "Too many requests from this client (`Retry-After` says when to try again), or a quota is full.",
    503: "Access could not be checked (the Kubernetes API did not answer).",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a route: each status with its model and meaning."""
    documented: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        if status == 422:
            documented[422] = {
                "model": Unprocessable,
                "description": "A parameter or body field that breaks its declared form or its checks.",
            }
            continue
        answer: dict[str, Any] = {"model": Problem, "description": _DESCRIPTIONS[status]}
        if status == 429:
            answer["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait (rate limits only).",
                    "schema": {"type": "integer"},
                }
            }
        documented[status] = answer
    return documented


AUTHENTICATED = errors(401, 422, 429, 503)
"""What any authenticated route may answer besides its own errors."""


def _shaped(pattern: str, what: str) -> Callable[[str], str]:
    """A check that ``value`` (already bounded in length) matches ``pattern``, naming ``what`` it is not."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if compiled.fullmatch(value) is None:
            raise ValueError(f"{value!r} is not {what}")
        return value

    return check


def _bounded_pattern(max_length: int, pattern: str) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "minLength": 1, "maxLength": max_length, "pattern": pattern})


Namespace = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAMESPACE),
    AfterValidator(
        _shaped(
            DNS_LABEL,
            "a valid Kubernetes namespace name (an RFC 1123 label: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit)",
        )
    ),
    _bounded_pattern(MAX_NAMESPACE, DNS_LABEL),
]
"""A namespace, wherever one is taken: an RFC 1123 label of at most 63 characters."""

JobName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME),
    AfterValidator(
        _shaped(
            DNS_SUBDOMAIN,
            "a valid Kubernetes object name (an RFC 1123 subdomain: lowercase letters, digits, '-' and "
            "'.', starting and ending with a letter or digit)",
        )
    ),
    _bounded_pattern(MAX_NAME, DNS_SUBDOMAIN),
]
"""A job name: an RFC 1123 subdomain of at most 253 characters."""

Uid = Annotated[str, StringConstraints(min_length=1, max_length=MAX_UID, pattern=UID)]
"""A run (or other object) uid."""

Username = Annotated[str, StringConstraints(min_length=1, max_length=MAX_USERNAME)]

RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_NOT_RFC3339 = (
    "expected an RFC 3339 date-time with an offset, that is with a timezone, e.g. 2026-11-20T10:00:00Z "
    "or 2026-11-20T11:00:00+01:00 (in a URL, write a + offset as %2B)"
)


def _rfc3339(value: object) -> object:
    """Only RFC 3339 date-times, as the schema says (pydantic alone would take 0.5 as a Unix time)."""
    if not isinstance(value, str) or len(value) > MAX_TIMESTAMP or not RFC3339.fullmatch(value):
        raise ValueError(_NOT_RFC3339)
    return value


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("time is out of range once converted to UTC") from exc


Instant = Annotated[
    datetime,
    BeforeValidator(_rfc3339),
    AfterValidator(_utc),
    WithJsonSchema({"type": "string", "format": "date-time", "maxLength": MAX_TIMESTAMP}),
]
"""A timestamp, wherever one is taken: an RFC 3339 date-time with an offset, compared in UTC."""


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
            shown = ", ".join(repr(name[:64]) for name in unknown[:10])
            raise HTTPException(400, f"unknown query parameter(s): {shown}")


NamespacePath = Annotated[Namespace, Path(description="Namespace (an RFC 1123 label).")]
NamespaceQuery = Annotated[
    Namespace | None,
    Query(description="Only this namespace (an RFC 1123 label); 403 if the caller may not read it."),
]
NamePath = Annotated[JobName, Path(description="Job name (an RFC 1123 subdomain).")]
UidPath = Annotated[Uid, Path(description="Run uid (the job object's uid).")]
Label = Annotated[str, StringConstraints(pattern=LABEL, max_length=MAX_LABEL)]


def labels_of(labels: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["team=a", "exp=3"]`` → ``(("team", "a"), ("exp", "3"))`` (already checked by the pattern)."""
    pairs = (label.partition("=") for label in labels)
    return tuple((key, value) for key, _, value in pairs)
