"""AdmissionReview in, answer and audit record out: what the webhook makes of one review.

Every review that has a ``request.uid`` is answered ``allowed: true`` here (the quota check may
add warnings or refuse, :mod:`watchers.admission.quota`); a CREATE, UPDATE or
DELETE of an MPIJob or TrainJob (not a dry run) also yields an
:class:`~controller.contract.audit.AuditRecord` naming who did it.

What one review may cost is bounded before and while it is read, so that no body, however
shaped, holds the event loop for more than a few milliseconds:

- its JSON items (commas and opening brackets, counted in the raw bytes: about a millisecond
  per MiB) are at most ``max_items``, else :class:`TooCostly` before it is parsed: parsing,
  validating and comparing grow with the items, not the bytes;
- its nesting is at most ``max_depth`` (:func:`json_depth` of the parsed document; ``json.loads``
  itself stops at Python's recursion limit with a ``RecursionError``);
- the comparison of an UPDATE's objects (:func:`changed_paths`) visits every field once and stops
  at the :data:`MAX_CHANGES` paths a record lists, each cut at :data:`MAX_PATH_CHARS`.

A namespace that is not an RFC 1123 label, or an object name that is not an RFC 1123 subdomain,
makes the review ``malformed`` (allowed, not recorded, not looked up) before anything is built from
it: the API server sends no such review, and a namespace such as ``..`` would turn the quota
lookup's ``/namespaces/../resourcequotas`` into the cluster-wide list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.contract.audit import (
    Actor,
    AuditRecord,
    AuditVerb,
    audited_object,
    service_account_of,
)
from controller.contract.kubeflow import API_GROUPS, JobKind
from controller.contract.names import is_name, is_namespace

__all__ = [
    "BadReview",
    "CallerTrust",
    "Created",
    "ReviewOutcome",
    "Reviewed",
    "TooCostly",
    "allowed",
    "changed_paths",
    "json_depth",
    "json_items",
    "review",
]

ReviewOutcome = Literal["recorded", "dry_run", "ignored", "malformed"]
CallerTrust = Literal["mtls", "unverified"]

API_VERSION: Final = "admission.k8s.io/v1"
AUDITED: Final[dict[tuple[str, str], JobKind]] = {
    (group, kind): kind for kind, (group, _) in API_GROUPS.items()
}
VERBS: Final[dict[str, AuditVerb]] = {"CREATE": "create", "UPDATE": "update", "DELETE": "delete"}
OPERATIONS: Final = frozenset({*VERBS, "CONNECT"})
MAX_CHANGES = 50
"""Field paths listed for an UPDATE; a longer list ends with ``…``."""
MAX_PATH_CHARS = 512
"""Longest field path listed (a label or annotation key is at most 317 characters); a longer one
is cut and ends with ``…``."""
_UNAUDITED_LENGTH = 3
"""The longest path in :data:`_UNAUDITED_FIELDS`."""
_UNAUDITED_FIELDS = frozenset(
    {
        ("status",),
        ("metadata", "resourceVersion"),
        ("metadata", "generation"),
        ("metadata", "managedFields"),
        ("metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"),
    }
)
"""Paths whose changes say nothing about who changed what (bookkeeping, or a copy of the spec)."""


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 with a request uid: answered with 400 and this message."""


class TooCostly(ValueError):
    """The body has more JSON items than a review is given: answered with 413 and this message."""


class _In(BaseModel):
    """Incoming Kubernetes JSON: camelCase, unknown fields ignored (the API adds fields over time)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class _GroupVersionKind(_In):
    group: str = ""
    version: str
    kind: str


class _UserInfo(_In):
    username: str = ""
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class _Request(_In):
    uid: str
    kind: _GroupVersionKind
    operation: str
    namespace: str = ""
    name: str = ""
    user_info: _UserInfo = Field(alias="userInfo")
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = Field(default=None, alias="oldObject")
    dry_run: bool = Field(default=False, alias="dryRun")


@dataclass(frozen=True)
class Reviewed:
    """What :func:`review` made of one AdmissionReview."""

    response: dict[str, Any]
    outcome: ReviewOutcome
    operation: str
    record: AuditRecord | None = None
    why: str = ""
    created: Created | None = None
    """The MPIJob or TrainJob a CREATE (dry run or not) makes, for the quota check."""


@dataclass(frozen=True)
class Created:
    """An MPIJob or TrainJob being created: its kind, namespace and object as the review sent it."""

    kind: JobKind
    namespace: str
    object: dict[str, Any]


_CONTAINERS: Final = frozenset({dict, list})


_NOT_ITEMS: Final = bytes(byte for byte in range(256) if byte not in b",[{")


def json_items(body: bytes | bytearray) -> int:
    """Commas and opening brackets in ``body``: an upper bound of the values, keys and containers
    a JSON parser would make of it (those inside strings are counted too), in one C-speed pass
    (about a millisecond per MiB)."""
    return len(body.translate(None, _NOT_ITEMS))


def json_depth(document: Any) -> int:
    """The deepest nesting of arrays and objects in a parsed JSON ``document``, level by level
    (no recursion): one visit per value."""
    depth, level = 0, [document] if type(document) in _CONTAINERS else []
    while level:
        depth += 1
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) in _CONTAINERS
        ]
    return depth


def _request_of(body: bytes | bytearray, max_depth: int, max_items: int) -> Mapping[str, Any]:
    """The ``request`` of an AdmissionReview v1 body with a uid, or :class:`BadReview` (or
    :class:`TooCostly`)."""
    items = json_items(body)
    if items > max_items:
        raise TooCostly(
            f"the review has {items} JSON items (commas and opening brackets); at most {max_items} are read"
        )
    try:
        review_doc = json.loads(body)
    except RecursionError as exc:
        raise BadReview(f"JSON nested deeper than the parser goes; at most {max_depth} is accepted") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReview(f"body is not JSON: {exc}") from exc
    depth = json_depth(review_doc)
    if depth > max_depth:
        raise BadReview(f"JSON nested {depth} deep; at most {max_depth} is accepted")
    if not isinstance(review_doc, dict):
        raise BadReview("body is not a JSON object")
    if review_doc.get("kind") != "AdmissionReview" or review_doc.get("apiVersion") != API_VERSION:
        raise BadReview(
            f"expected kind AdmissionReview, apiVersion {API_VERSION}; got kind "
            f"{review_doc.get('kind')!r}, apiVersion {review_doc.get('apiVersion')!r}"
        )
    request = review_doc.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid is missing: nothing to answer")
    return request


def allowed(uid: str) -> dict[str, Any]:
    """The AdmissionReview v1 answer that allows request ``uid``."""
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}


def changed_paths(old: Any, new: Any, most: int = MAX_CHANGES + 1) -> list[str]:
    """Dotted paths of the fields that differ between two objects, in key order, at most ``most``
    (lists compare whole; each path cut at :data:`MAX_PATH_CHARS`).

    Objects are walked once, field by field: comparing whole subtrees at every level instead
    would cost the size of the object times its depth (1.5 s for a 2.75 MiB UPDATE 190 deep).
    """
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [] if old == new else ["."]
    found: list[str] = []
    _walk(old, new, [], found, most)
    return found


def _walk(old: dict[str, Any], new: dict[str, Any], path: list[str], found: list[str], most: int) -> None:
    """Add the paths under ``path`` where two objects differ to ``found`` (one call per object)."""
    keys = old.keys() if old.keys() == new.keys() else old.keys() | new.keys()
    for key in sorted(keys):
        a, b = old.get(key), new.get(key)
        nested = type(a) is dict and type(b) is dict
        if not nested and a == b:
            continue
        path.append(key)
        if len(path) > _UNAUDITED_LENGTH or tuple(path) not in _UNAUDITED_FIELDS:
            if nested:
                _walk(a, b, path, found, most)  # type: ignore[arg-type]
            else:
                found.append(_dotted(path))
        path.pop()
        if len(found) >= most:
            return


def _dotted(path: list[str]) -> str:
    """``path`` joined with dots, cut at :data:`MAX_PATH_CHARS` (without joining a longer one first)."""
    parts, size = [], 0
    for part in path:
        parts.append(part[: MAX_PATH_CHARS + 1 - size])
        size += len(part) + 1
        if size > MAX_PATH_CHARS + 1:
            return ".".join(parts)[: MAX_PATH_CHARS - 1] + "…"
    return ".".join(parts) or "."


def review(
    body: bytes | bytearray,
    now: datetime,
    *,
    caller: CallerTrust = "unverified",
    max_depth: int = 200,
    max_items: int = 10_000,
) -> Reviewed:
    """Answer one AdmissionReview (always allowing) and make its audit record, if it warrants one.

    ``caller`` says how the connection's peer was authenticated and goes into the record.
    Raises :class:`BadReview` only when there is no request uid to answer (or the body is
    nested deeper than ``max_depth``), :class:`TooCostly` when it has more than ``max_items``
    JSON items.
    """
    raw = _request_of(body, max_depth, max_items)
    response = allowed(raw["uid"])
    operation = str(raw.get("operation"))
    operation = operation if operation in OPERATIONS else "other"  # a metric label: keep it bounded
    try:
        request = _Request.model_validate(raw)
    except ValidationError as exc:
        return Reviewed(response, "malformed", operation, why=str(exc).replace("\n", "; "))
    if request.namespace and not is_namespace(request.namespace):
        return Reviewed(response, "malformed", operation, why=_not_a("namespace", request.namespace))
    kind = AUDITED.get((request.kind.group, request.kind.kind))
    created = None
    if kind is not None and request.operation == "CREATE" and request.object is not None:
        meta = request.object.get("metadata")
        namespace = request.namespace or (str(meta.get("namespace") or "") if isinstance(meta, dict) else "")
        if namespace and not is_namespace(namespace):
            return Reviewed(response, "malformed", operation, why=_not_a("namespace", namespace))
        created = Created(kind, namespace, request.object) if namespace else None
    if request.dry_run:
        return Reviewed(response, "dry_run", operation, created=created)
    verb = VERBS.get(request.operation)
    if kind is None or verb is None:
        return Reviewed(response, "ignored", operation, why=f"{request.operation} {request.kind.kind}")
    subject = request.old_object if verb == "delete" else request.object
    metadata = subject.get("metadata") if subject else None
    if not isinstance(metadata, dict):
        side = "oldObject" if verb == "delete" else "object"
        return Reviewed(response, "malformed", operation, why=f"{side}.metadata is missing")
    namespace = request.namespace or str(metadata.get("namespace") or "")
    name = str(metadata.get("name") or request.name)
    if not namespace or not name:
        return Reviewed(response, "malformed", operation, why="no namespace or name")
    if not is_namespace(namespace):
        return Reviewed(response, "malformed", operation, why=_not_a("namespace", namespace))
    if not is_name(name):
        return Reviewed(response, "malformed", operation, why=_not_a("name", name))
    user = request.user_info
    record = AuditRecord(
        id=f"admission/{request.uid}",
        source="admission",
        verb=verb,
        at=now,
        namespace=namespace,
        actor=Actor(
            username=user.username,
            uid=user.uid or None,
            groups=user.groups,
            extra=user.extra,
            service_account=service_account_of(user.username),
        ),
        object=audited_object(kind, name, str(metadata["uid"]) if metadata.get("uid") else None),
        outcome="allowed",
        changes=_bounded(changed_paths(request.old_object, request.object)) if verb == "update" else (),
        request_uid=request.uid,
        caller=caller,
    )
    return Reviewed(response, "recorded", operation, record, created=created)


def _not_a(what: str, value: str) -> str:
    """Why a review is malformed: its ``what`` (namespace or name) ``value`` is not one."""
    shape = "an RFC 1123 label" if what == "namespace" else "an RFC 1123 subdomain"
    shown = value if len(value) <= MAX_PATH_CHARS else f"{value[:MAX_PATH_CHARS]}…"
    return f"{what} {shown!r} is not {shape}"


def _bounded(paths: list[str]) -> tuple[str, ...]:
    return tuple(paths) if len(paths) <= MAX_CHANGES else (*paths[: MAX_CHANGES - 1], "…")
