"""AdmissionReview in, answer and audit record out: what the webhook makes of one review.

Every review that has a ``request.uid`` is answered ``allowed: true``; a CREATE, UPDATE or
DELETE of an MPIJob or TrainJob (not a dry run) also yields an
:class:`~controller.contract.audit.AuditRecord` naming who did it. Nesting is measured by a
linear scan (:func:`json_depth`) before ``json.loads`` could recurse.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.contract.audit import (
    Actor,
    AuditRecord,
    Verb,
    audited_object,
    service_account_of,
)
from controller.contract.kubeflow import API_GROUPS, JobKind

__all__ = ["BadReview", "Caller", "Outcome", "Reviewed", "allowed", "changed_paths", "json_depth", "review"]

Outcome = Literal["recorded", "dry_run", "ignored", "malformed"]
Caller = Literal["mtls", "unverified"]

API_VERSION: Final = "admission.k8s.io/v1"
AUDITED: Final[dict[tuple[str, str], JobKind]] = {
    (group, kind): kind for kind, (group, _) in API_GROUPS.items()
}
VERBS: Final[dict[str, Verb]] = {"CREATE": "create", "UPDATE": "update", "DELETE": "delete"}
OPERATIONS: Final = frozenset({*VERBS, "CONNECT"})
MAX_CHANGES = 50
"""Field paths listed for an UPDATE; a longer list ends with ``…``."""
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
    outcome: Outcome
    operation: str
    record: AuditRecord | None = None
    why: str = ""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = tuple(1 if b in b"[{" else -1 for b in range(256))
"""+1 for an opening bracket, -1 for a closing one (only brackets are left when it is used)."""


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in ``body``, without recursion (linear scan).

    String literals are removed first (their brackets are text); for valid JSON the result is
    exact, for invalid JSON an upper bound of what a parser would descend before failing. The
    running sum is computed by C iterators (``map``, ``accumulate``, ``max``): a 3 MiB review
    costs a few milliseconds.
    """
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _request_of(body: bytes, max_depth: int) -> Mapping[str, Any]:
    """The ``request`` of an AdmissionReview v1 body with a uid, or :class:`BadReview`."""
    depth = json_depth(body)
    if depth > max_depth:
        raise BadReview(f"JSON nested {depth} deep; at most {max_depth} is accepted")
    try:
        review_doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadReview(f"body is not JSON: {exc}") from exc
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


def changed_paths(old: Any, new: Any, path: tuple[str, ...] = ()) -> list[str]:
    """Dotted paths of the fields that differ between two objects (lists compare whole)."""
    if path in _UNAUDITED_FIELDS or old == new:
        return []
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [".".join(path) or "."]
    return [
        changed
        for key in sorted(old.keys() | new.keys())
        for changed in changed_paths(old.get(key), new.get(key), (*path, str(key)))
    ]


def review(body: bytes, now: datetime, *, caller: Caller = "unverified", max_depth: int = 200) -> Reviewed:
    """Answer one AdmissionReview (always allowing) and make its audit record, if it warrants one.

    ``caller`` says how the connection's peer was authenticated and goes into the record.
    Raises :class:`BadReview` only when there is no request uid to answer (or the body is
    nested deeper than ``max_depth``).
    """
    raw = _request_of(body, max_depth)
    response = allowed(raw["uid"])
    operation = str(raw.get("operation"))
    operation = operation if operation in OPERATIONS else "other"  # a metric label: keep it bounded
    try:
        request = _Request.model_validate(raw)
    except ValidationError as exc:
        return Reviewed(response, "malformed", operation, why=str(exc).replace("\n", "; "))
    if request.dry_run:
        return Reviewed(response, "dry_run", operation)
    kind = AUDITED.get((request.kind.group, request.kind.kind))
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
    return Reviewed(response, "recorded", operation, record)


def _bounded(paths: list[str]) -> tuple[str, ...]:
    return tuple(paths) if len(paths) <= MAX_CHANGES else (*paths[: MAX_CHANGES - 1], "…")
