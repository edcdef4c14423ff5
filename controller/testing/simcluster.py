"""A simulated Kubernetes API server, over real HTTP, for tests, benchmarks and demos.

It speaks the subset of the API server protocol the controller uses, so the real
``kubernetes`` client path runs end to end: LIST (cluster-wide and namespaced, with label
selectors and a list ``resourceVersion``), WATCH (newline-delimited JSON over a chunked
response, resumable from a ``resourceVersion``, ``BOOKMARK`` events, ``timeoutSeconds``, and the
``410 Expired`` ``ERROR`` event once history is compacted), GET/POST/PUT/DELETE of single
objects with ``resourceVersion`` conflicts, and ``pods/log`` with ``tailLines``/``limitBytes``,
``sinceSeconds``/``sinceTime``, ``timestamps`` and ``follow`` (a chunked stream that ends when the
container or its pod ends, and that :meth:`SimCluster.cut_log_follows` breaks in mid-line).
TokenReviews and SubjectAccessReviews are answered from a table a test sets with
:meth:`SimCluster.set_access`; a TokenReview checks audiences as the API server does (a token
has the API server's own, :data:`APISERVER_AUDIENCE`, unless issued for others).

State is one object store keyed by (group, version, plural, namespace, name) and one global,
monotonically increasing resourceVersion; every change is appended to a history that watches
replay and follow. The test drives the cluster through :meth:`SimCluster.create`,
:meth:`SimCluster.update` and :meth:`SimCluster.delete`, and breaks it on purpose with
:meth:`SimCluster.compact`, :meth:`SimCluster.fail_next`, :meth:`SimCluster.outage` and
:meth:`SimCluster.drop_watches`; :attr:`SimCluster.refused` lists the requests a failure answered.
:meth:`SimCluster.open_watches` counts live watch connections per resource, to check that the
controller holds a constant number of them.

Deliberately simple: one lock, a thread per connection, no authentication, no field
selectors. Lists are paginated as the API server does it (``limit`` and ``continue``): the
first page takes a consistent snapshot at the list's resourceVersion, later pages serve from
it, and a ``continue`` token older than the compacted history (or one of the
``CONTINUE_SNAPSHOTS`` newest snapshots no longer) answers ``410 Expired``.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import json
import logging
import secrets
import select
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from controller.contract.logs import format_ns, parse_ns
from controller.contract.selectors import parse_selector
from controller.kube.resources import (
    EVENTS,
    JOB_RESOURCES,
    LEASES,
    LIMITRANGES,
    NODES,
    PODS,
    RESOURCEQUOTAS,
    RawObject,
    RawStatus,
    Resource,
)

__all__ = ["RecordedRequest", "SimCluster", "SimStatusError"]

log = logging.getLogger(__name__)

GVP = tuple[str, str, str]
"""(group, version, plural) of a resource type."""
_Key = tuple[str, str, str, str, str]
"""(group, version, plural, namespace, name) of one object; namespace is "" for cluster-scoped ones."""

DEFAULT_KINDS: tuple[Resource, ...] = (
    PODS,
    EVENTS,
    LEASES,
    *JOB_RESOURCES.values(),
    RESOURCEQUOTAS,
    LIMITRANGES,
    NODES,
)
"""What a cluster with mpi-operator, the training-operator and Kubeflow Trainer installed serves."""
APISERVER_AUDIENCE = "https://kubernetes.default.svc"
"""The audience of the API server's own tokens (``--api-audiences``): a TokenReview that names no
audience accepts only tokens issued for it."""
_REVIEWS = {("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")}
"""(group, plural) of the reviews answered by :meth:`SimCluster.set_access`'s table."""
CONTINUE_SNAPSHOTS = 64
"""Paginated lists in progress kept at once; an older ``continue`` token has expired."""
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start "
    "a new list without the continue parameter."
)
DEFAULT_WATCH_TIMEOUT_S = 1800
"""A watch without ``timeoutSeconds`` ends after this long, like the API server's default range."""
_REASONS = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}
"""The ``Status`` reason of an injected failure, by code."""


# -- statuses -------------------------------------------------------------------------------------


def status(code: int, reason: str, message: str, **details: Any) -> RawStatus:
    """A ``meta/v1 Status`` failure body as the API server writes it."""
    body: RawStatus = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class SimStatusError(Exception):
    """A request the simulated server refuses; carries the ``Status`` it answers with (and how
    many seconds its ``Retry-After`` header asks the client to wait, if it sends one)."""

    def __init__(self, body: RawStatus, retry_after_s: int | None = None) -> None:
        super().__init__(body.get("message"))
        self.status = body
        self.retry_after_s = retry_after_s


@dataclass(slots=True)
class _Failure:
    """A failure queued by :meth:`SimCluster.fail_next`."""

    body: RawStatus
    match: str | None
    retry_after_s: int | None
    left: int
    """How many more requests it answers: one entry for the whole count, so a request it does not
    match costs one comparison however many were queued."""


@dataclass(frozen=True, slots=True)
class _Outage:
    """Every request answered 503 until :meth:`SimCluster.end_outage` (or ``until``, monotonic)."""

    retry_after_s: int | None
    until: float | None


def _qualified(kind: Resource) -> str:
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def _not_found(kind: Resource, name: str) -> SimStatusError:
    return SimStatusError(
        status(
            404,
            "NotFound",
            f'{_qualified(kind)} "{name}" not found',
            name=name,
            group=kind.group,
            kind=kind.plural,
        )
    )


LabelPredicate = Callable[[Mapping[str, str]], bool]


# -- store and history ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Change:
    """One entry of the history: the object after the change (before it, for a label-selector watch)."""

    rv: int
    type: str
    namespace: str
    object: RawObject
    previous: RawObject | None
    line: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The rest of a paginated list: what later pages serve, as it was at ``rv``."""

    rv: int
    items: list[RawObject]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received, for assertions such as "resumed from resourceVersion 7"."""

    method: str
    path: str
    query: dict[str, str]
    authorization: str | None = None


_RAW = "RAW"
"""Type of a history entry made by :meth:`SimCluster.inject`: its line goes out unfiltered."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _labels(obj: RawObject | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _event_line(event_type: str, obj: RawObject) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


class SimCluster:
    """The simulated API server. Use as a context manager, or call :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        *,
        bookmark_interval_s: float = 1.0,
        history_limit: int = 100_000,
        kinds: tuple[Resource, ...] = DEFAULT_KINDS,
    ) -> None:
        self.bookmark_interval_s = bookmark_interval_s
        self.history_limit = history_limit
        """Changes kept per resource type; older ones are compacted away, as etcd does over time."""
        self.requests: list[RecordedRequest] = []
        self.refused: list[RecordedRequest] = []
        """The requests answered with an injected failure (:meth:`fail_next`, :meth:`outage`)."""
        self._cond = threading.Condition()
        self._kinds: dict[GVP, Resource] = {}
        self._plurals: dict[tuple[str, str, str], str] = {}  # (group, version, Kind) -> plural
        self._objects: dict[_Key, RawObject] = {}
        self._history: dict[GVP, list[_Change]] = {}
        self._history_rvs: dict[GVP, list[int]] = {}
        self._continues: dict[str, _Snapshot] = {}  # continue token -> the rest of that list
        self._rv = 0
        self._compacted_rv = 0  # a new watch from an older version gets 410 Expired
        self._dropped_upto: dict[
            GVP, int
        ] = {}  # newest compacted change per type: a live watch behind it expires
        self._failures: list[_Failure] = []  # in the order queued, each with its count left
        self._outage: _Outage | None = None
        self._logs: dict[tuple[str, str, str], list[_LogEntry]] = {}
        self._previous_logs: dict[tuple[str, str, str], list[_LogEntry]] = {}  # restart_container()
        self._log_instances: Counter[tuple[str, str, str]] = Counter()
        self._log_cuts = 0  # bumped by cut_log_follows(): follows of older generations break mid-line
        self._log_ends = 0  # bumped by end_log_follows(): follows of older generations end cleanly
        self._open_follows: Counter[tuple[str, str]] = Counter()  # (namespace, pod) -> follows
        self._open_watches: Counter[str] = Counter()
        self._tokens: dict[str, RawObject] = {}  # bearer token -> TokenReview status.user
        self._audiences: dict[str, tuple[str, ...]] = {}  # bearer token -> the audiences it was issued for
        self.audience_blind = False
        """Answer TokenReviews as an authenticator that knows no audiences (an old webhook token
        authenticator): every known token authenticated, no ``status.audiences``."""
        self._grants: set[tuple[str, str, str, str]] = set()  # (user or group:NAME, plural, ns or *, verb)
        self._generation = 0  # bumped by drop_watches(): streams of older generations end
        self._abrupt_drop = True
        self._closing = False
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        for kind in kinds:
            self.register(kind)

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> SimCluster:
        """Listen on 127.0.0.1, on a free port; :attr:`url` says where."""
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="simcluster", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End every stream and connection, and stop listening."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self._server is None:
            raise RuntimeError("SimCluster is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- driving the cluster ------------------------------------------------------------------------

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig that points the official client at this server; returns ``path``."""
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
            f"clusters:\n- name: sim\n  cluster:\n    server: {self.url}\n"
            "users:\n- name: nobody\n  user: {}\n"
            "contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: nobody\n"
        )
        return path

    def register(self, kind: Resource) -> None:
        """Serve another resource type (a CRD, in a real cluster); the label selector is ignored."""
        with self._cond:
            self._kinds[(kind.group, kind.version, kind.plural)] = kind
            self._plurals[(kind.group, kind.version, kind.kind)] = kind.plural

    def discovery(self, group: str, version: str) -> RawObject:
        """The ``APIResourceList`` of one API group version, as ``GET /apis/<group>/<version>``
        answers it; 404 when no registered resource is of it (its CRDs are not installed)."""
        with self._cond:
            kinds = [k for (g, v, _), k in self._kinds.items() if (g, v) == (group, version)]
        if not kinds:
            raise SimStatusError(status(404, "NotFound", "the server could not find the requested resource"))
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": [
                {"name": k.plural, "kind": k.kind, "namespaced": k.namespaced, "verbs": ["list", "watch"]}
                for k in kinds
            ],
        }

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self._cond:
            return self._rv

    def create(self, obj: RawObject) -> RawObject:
        """Store a new object (uid, resourceVersion, creationTimestamp assigned); return a copy as stored."""
        kind, namespace, _ = self._locate(obj)
        return self._create(kind, namespace, obj)

    def update(self, obj: RawObject) -> RawObject:
        """Replace an object unconditionally (a controller's or kubelet's write); return it as stored."""
        kind, namespace, name = self._locate(obj)
        return self._replace(kind, namespace, name, obj, check_version=False)

    def delete(self, obj: RawObject) -> RawObject:
        """Delete an object (identified by apiVersion, kind, namespace, name); return its last state."""
        kind, namespace, name = self._locate(obj)
        return self._delete(kind, namespace, name)

    def get(self, obj: RawObject) -> RawObject | None:
        """The stored state of an object identified like :meth:`delete`, or None."""
        kind, namespace, name = self._locate(obj)
        with self._cond:
            stored = self._objects.get(self._key(kind, namespace, name))
            return copy.deepcopy(stored) if stored is not None else None

    def compact(self, upto_rv: int | None = None) -> None:
        """Forget history up to ``upto_rv`` (default: now); watches from older versions get 410 Expired."""
        with self._cond:
            self._compacted_rv = max(self._compacted_rv, self._rv if upto_rv is None else upto_rv)
            for gvp in self._history:
                self._drop(gvp, bisect.bisect_right(self._history_rvs[gvp], self._compacted_rv))
            self._cond.notify_all()

    def fail_next(
        self, count: int, code: int = 503, *, match: str | None = None, retry_after_s: int | None = None
    ) -> None:
        """Answer the next ``count`` requests (whose path+query has ``match``, if given) with ``code``,
        with a ``Retry-After: retry_after_s`` header if given."""
        if count <= 0:
            return
        failure = _Failure(
            status(code, _REASONS.get(code, "Failure"), f"injected failure {code}"),
            match,
            retry_after_s,
            count,
        )
        with self._cond:
            self._failures.append(failure)

    def outage(self, *, retry_after_s: int | None = None, for_s: float | None = None) -> None:
        """Answer every new request 503 ServiceUnavailable (``Retry-After: retry_after_s`` if given)
        until :meth:`end_outage`, or for ``for_s`` seconds. Streams already open go on."""
        with self._cond:
            self._outage = _Outage(retry_after_s, None if for_s is None else time.monotonic() + for_s)

    def end_outage(self) -> None:
        """Answer requests again."""
        with self._cond:
            self._outage = None

    def clear_failures(self) -> None:
        """Forget the failures :meth:`fail_next` queued and that no request has consumed yet."""
        with self._cond:
            self._failures.clear()

    def inject(self, kind: Resource, event: Mapping[str, Any]) -> None:
        """Send a raw watch event, as is, to every watch of ``kind`` (malformed objects, unknown types).

        The store does not change; the event only takes a resourceVersion in the history, so
        it is replayed to watches that resume from before it, like any other change.
        """
        with self._cond:
            self._rv += 1
            line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
            self._append(kind, _Change(self._rv, _RAW, "", {}, None, line))

    def drop_watches(self, *, abrupt: bool = True) -> None:
        """End every live watch: ``abrupt`` cuts the connection mid-stream, else the stream ends cleanly."""
        with self._cond:
            self._generation += 1
            self._abrupt_drop = abrupt
            self._cond.notify_all()

    def set_log(
        self, namespace: str, pod: str, container: str, text: str | bytes, at_ns: int | None = None
    ) -> None:
        """The log ``pods/log`` serves for this container, all written now (or stamped ``at_ns``)."""
        with self._cond:
            self._logs[(namespace, pod, container)] = []
        self.append_log(namespace, pod, container, text, at_ns)

    def append_log(
        self, namespace: str, pod: str, container: str, text: str | bytes, at_ns: int | None = None
    ) -> None:
        """Lines the container writes now (``sinceSeconds`` sees them as new), stamped with the wall
        clock or, for a kubelet whose clock differs, ``at_ns``; followers see them at once."""
        data = text.encode() if isinstance(text, str) else text
        with self._cond:
            now, wall = time.monotonic(), time.time_ns() if at_ns is None else at_ns
            self._logs.setdefault((namespace, pod, container), []).extend(
                _LogEntry(now, wall, line) for line in data.splitlines(keepends=True)
            )
            self._cond.notify_all()

    def append_logs(self, texts: Mapping[tuple[str, str, str], str | bytes]) -> None:
        """:meth:`append_log` of each (namespace, pod, container), written at once (followers are
        woken once, not once per container)."""
        with self._cond:
            for (namespace, pod, container), text in texts.items():
                self.append_log(namespace, pod, container, text)

    def restart_container(self, namespace: str, pod: str, container: str) -> None:
        """The container exits and the kubelet starts it again: its log so far becomes the one
        ``previous=true`` serves, its follows end (after the rest of that log), a new log begins.
        (The pod's ``restartCount`` is the test's to update, as the kubelet reports it later.)"""
        key = (namespace, pod, container)
        with self._cond:
            self._previous_logs[key] = self._logs.get(key, [])
            self._logs[key] = []
            self._log_instances[key] += 1
            self._cond.notify_all()

    def cut_log_follows(self) -> None:
        """Break every open log follow in the middle of the next line it sends (a connection lost
        to a kubelet or an API server restarting): the lines before it go out whole, half of it,
        then the connection is cut."""
        with self._cond:
            self._log_cuts += 1
            self._cond.notify_all()

    def end_log_follows(self) -> None:
        """End every open log follow cleanly although its container runs on (a proxy or load
        balancer closing a long request): only the follower can tell it from the container's end."""
        with self._cond:
            self._log_ends += 1
            self._cond.notify_all()

    def open_log_follows(self) -> Counter[tuple[str, str]]:
        """Open ``follow=true`` log streams per (namespace, pod)."""
        with self._cond:
            return +self._open_follows

    def set_access(
        self,
        tokens: Mapping[str, RawObject],
        grants: Iterable[tuple[str, str, str] | tuple[str, str, str, str]] = (),
        audiences: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Answer TokenReviews from ``tokens`` (token → ``status.user``) and SubjectAccessReviews
        from ``grants``: (username or ``group:NAME``, resource plural, namespace or ``*``, and
        optionally the verbs, comma-separated; ``list`` when left out).

        ``audiences``: token → the audiences it was issued for (a projected service-account token
        with ``audience:``); the others have :data:`APISERVER_AUDIENCE`. A review authenticates a
        token when one of its ``spec.audiences`` (else the API server's) is the token's, and
        answers that intersection in ``status.audiences``.

        A ``*`` grant is a ClusterRoleBinding: it allows every namespace and the cluster-wide
        question (no namespace); a namespaced grant allows that namespace only.
        """
        with self._cond:
            self._tokens = {token: copy.deepcopy(dict(user)) for token, user in tokens.items()}
            self._audiences = {token: tuple(issued) for token, issued in (audiences or {}).items()}
            self._grants = {
                (subject, plural, place, verb)
                for subject, plural, place, *verbs in grants
                for verb in (verbs[0] if verbs else "list").split(",")
            }

    def _review(self, plural: str, body: RawObject) -> RawObject:
        spec = body.get("spec") or {}
        with self._cond:
            if plural == "tokenreviews":
                token = str(spec.get("token") or "")
                user = self._tokens.get(token)
                issued = self._audiences.get(token, (APISERVER_AUDIENCE,))
                wanted = spec.get("audiences") or [APISERVER_AUDIENCE]
                common = [audience for audience in wanted if audience in issued]
                status: RawObject = (
                    {"authenticated": True, "user": user}
                    if user and self.audience_blind
                    else {"authenticated": True, "user": user, "audiences": common}
                    if user and common
                    else {"authenticated": False}
                )
            else:
                attributes = spec.get("resourceAttributes") or {}
                subjects = {spec.get("user"), *(f"group:{g}" for g in spec.get("groups") or ())}
                places = {"*", attributes["namespace"]} if attributes.get("namespace") else {"*"}
                allowed = any(
                    (subject, attributes.get("resource"), place, attributes.get("verb")) in self._grants
                    for subject in subjects
                    for place in places
                )
                status = {"allowed": allowed}
        return {**body, "status": status}

    def open_watches(self) -> Counter[str]:
        """Live watch connections by resource, named like ``str(Resource)``.

        For example ``pods[training.kubeflow.org/job-name]`` or ``mpijobs.kubeflow.org``.
        """
        with self._cond:
            return +self._open_watches

    # -- store internals ----------------------------------------------------------------------------

    def _locate(self, obj: RawObject) -> tuple[Resource, str, str]:
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        plural = self._plurals.get((group, version, str(obj.get("kind", ""))))
        if plural is None:
            raise SimStatusError(
                status(404, "NotFound", f"no resource for {obj.get('apiVersion')} {obj.get('kind')}")
            )
        kind = self._kinds[(group, version, plural)]
        meta = obj.get("metadata") or {}
        namespace = (meta.get("namespace") or "default") if kind.namespaced else ""
        return kind, namespace, str(meta.get("name", ""))

    @staticmethod
    def _key(kind: Resource, namespace: str, name: str) -> _Key:
        return (kind.group, kind.version, kind.plural, namespace, name)

    def _record(self, kind: Resource, event_type: str, obj: RawObject, previous: RawObject | None) -> None:
        """Append a change of a stored object at the current resourceVersion (under the lock)."""
        namespace = obj["metadata"].get("namespace", "")
        self._append(
            kind, _Change(self._rv, event_type, namespace, obj, previous, _event_line(event_type, obj))
        )

    def _append(self, kind: Resource, change: _Change) -> None:
        """Add to the history (under the lock), compacting the oldest tenth past the limit; wake watches."""
        gvp = (kind.group, kind.version, kind.plural)
        changes, rvs = self._history.setdefault(gvp, []), self._history_rvs.setdefault(gvp, [])
        changes.append(change)
        rvs.append(change.rv)
        if len(changes) > self.history_limit:
            cut = len(changes) - self.history_limit * 9 // 10
            self._compacted_rv = max(self._compacted_rv, rvs[cut - 1])
            self._drop(gvp, cut)
        self._cond.notify_all()

    def _drop(self, gvp: GVP, count: int) -> None:
        """Forget the oldest ``count`` changes of one type (under the lock)."""
        if count > 0:
            rvs = self._history_rvs[gvp]
            self._dropped_upto[gvp] = max(self._dropped_upto.get(gvp, 0), rvs[count - 1])
            del self._history[gvp][:count], rvs[:count]

    def _create(self, kind: Resource, namespace: str, body: RawObject) -> RawObject:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise SimStatusError(status(422, "Invalid", "metadata.name: Required value"))
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        if kind.namespaced:
            meta["namespace"] = namespace
        with self._cond:
            key = self._key(kind, namespace, meta["name"])
            if key in self._objects:
                raise SimStatusError(
                    status(
                        409,
                        "AlreadyExists",
                        f'{_qualified(kind)} "{meta["name"]}" already exists',
                        name=meta["name"],
                    )
                )
            self._rv += 1
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            meta["resourceVersion"] = str(self._rv)
            self._objects[key] = obj
            self._record(kind, "ADDED", obj, None)
            return copy.deepcopy(obj)

    def _replace(
        self, kind: Resource, namespace: str, name: str, body: RawObject, *, check_version: bool
    ) -> RawObject:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        with self._cond:
            key = self._key(kind, namespace, name)
            current = self._objects.get(key)
            if current is None:
                raise _not_found(kind, name)
            sent_rv = meta.get("resourceVersion")
            if check_version and sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
                raise SimStatusError(
                    status(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {_qualified(kind)} "{name}": the object has been '
                        "modified; please apply your changes to the latest version and try again",
                        name=name,
                    )
                )
            self._rv += 1
            obj.setdefault("apiVersion", kind.api_version)
            obj.setdefault("kind", kind.kind)
            for immutable in ("uid", "creationTimestamp", "namespace", "name"):
                if immutable in current["metadata"]:
                    meta[immutable] = current["metadata"][immutable]
            meta["resourceVersion"] = str(self._rv)
            self._objects[key] = obj
            self._record(kind, "MODIFIED", obj, current)
            return copy.deepcopy(obj)

    def _delete(self, kind: Resource, namespace: str, name: str) -> RawObject:
        with self._cond:
            current = self._objects.pop(self._key(kind, namespace, name), None)
            if current is None:
                raise _not_found(kind, name)
            self._rv += 1
            final = copy.deepcopy(current)
            final["metadata"]["resourceVersion"] = str(self._rv)
            self._record(kind, "DELETED", final, current)
            return copy.deepcopy(final)

    def _take_failure(self, target: str) -> SimStatusError | None:
        with self._cond:
            outage = self._outage
            if outage is not None and (outage.until is None or time.monotonic() < outage.until):
                body = status(503, _REASONS[503], "the server is currently unable to handle the request")
                return SimStatusError(body, outage.retry_after_s)
            for i, failure in enumerate(self._failures):
                if failure.match is None or failure.match in target:
                    failure.left -= 1
                    if not failure.left:
                        del self._failures[i]
                    return SimStatusError(failure.body, failure.retry_after_s)
        return None

    # -- request handling (called from handler threads) --------------------------------------------

    def _list(
        self,
        kind: Resource,
        namespace: str | None,
        selector: LabelPredicate,
        limit: int | None = None,
        token: str | None = None,
    ) -> RawObject:
        """One page of a list (all of it without ``limit``); stored objects are never changed in
        place, so a snapshot holds them as they are."""
        with self._cond:
            if token is None:
                rv = self._rv
                items = [
                    obj
                    for (g, v, p, ns, _), obj in sorted(self._objects.items())
                    if (g, v, p) == (kind.group, kind.version, kind.plural)
                    and (namespace is None or ns == namespace)
                    and selector(_labels(obj))
                ]
            else:
                snapshot = self._continues.pop(token, None)
                if snapshot is None or snapshot.rv < self._compacted_rv:
                    raise SimStatusError(status(410, "Expired", CONTINUE_EXPIRED))
                rv, items = snapshot.rv, snapshot.items
            page, rest = (items, []) if limit is None else (items[:limit], items[limit:])
            metadata: RawObject = {"resourceVersion": str(rv)}
            if rest:
                metadata["continue"] = secrets.token_urlsafe(16)
                metadata["remainingItemCount"] = len(rest)
                self._continues[metadata["continue"]] = _Snapshot(rv, rest)
                while len(self._continues) > CONTINUE_SNAPSHOTS:
                    del self._continues[next(iter(self._continues))]
        if not kind.group:  # built-in lists omit apiVersion/kind on their items, as the real server does
            page = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in page]
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": metadata,
            "items": page,
        }

    def _log_key(self, namespace: str, pod: str, query: dict[str, str]) -> tuple[str, str, str]:
        """Under the lock: the (namespace, pod, container) a log request names; 404 or 400 if none."""
        obj = self._objects.get(self._key(PODS, namespace, pod))
        if obj is None:
            raise _not_found(PODS, pod)
        spec = obj.get("spec") or {}
        names = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        container = query.get("container") or (names[0] if len(names) == 1 else None)
        if container is None or container not in names:
            raise SimStatusError(
                status(
                    400,
                    "BadRequest",
                    f"container {container!r} is not valid for pod {pod}; choose one of {names}",
                )
            )
        return namespace, pod, str(container)

    def _pod_log(self, namespace: str, pod: str, query: dict[str, str]) -> bytes:
        with self._cond:
            key = self._log_key(namespace, pod, query)
            if query.get("previous") == "true":
                if key not in self._previous_logs:
                    message = f'previous terminated container "{key[2]}" in pod "{pod}" not found'
                    raise SimStatusError(status(400, "BadRequest", message))
                entries = _since(self._previous_logs[key], query)
            else:
                entries = _since(self._logs.get(key, []), query)
        if "tailLines" in query:
            entries = entries[len(entries) - min(len(entries), int(query["tailLines"])) :]
        data = _rendered(entries, query)
        return data[: int(query["limitBytes"])] if "limitBytes" in query else data

    def _follow_log(self, handler: _Handler, namespace: str, pod: str, query: dict[str, str]) -> None:
        """Stream a container's log as it is written, until the container or its pod ends (or a
        :meth:`cut_log_follows` breaks it)."""
        with self._cond:
            key = self._log_key(namespace, pod, query)
            sent = 0
            cuts, ends, instance = self._log_cuts, self._log_ends, self._log_instances[key]
            self._open_follows[(namespace, pod)] += 1
        handler.start_chunked("text/plain")
        try:
            while True:
                with self._cond:
                    while True:
                        restarted = self._log_instances[key] != instance  # its instance exited
                        written = (self._previous_logs if restarted else self._logs).get(key, [])
                        ended = (
                            self._closing or self._log_ends != ends or restarted or self._container_ended(key)
                        )
                        if len(written) > sent or ended:
                            break
                        self._cond.wait(timeout=0.05)
                        if handler.client_gone():
                            return
                    entries = _since(written[sent:], query)
                    sent = len(written)
                    cut = self._log_cuts != cuts
                if cut and entries:
                    whole = _rendered(entries[:-1], query)
                    last = _rendered(entries[-1:], query)
                    handler.write_chunk(whole + last[: max(1, len(last) // 2)])
                    handler.cut()
                    return
                handler.write_chunk(_rendered(entries, query))
                if ended:
                    handler.end_chunked()
                    return
        except OSError:
            log.debug("log follow client went away: %s/%s", namespace, pod)
        finally:
            with self._cond:
                self._open_follows[(namespace, pod)] -= 1
                self._cond.notify_all()

    def _container_ended(self, key: tuple[str, str, str]) -> bool:
        """Under the lock: whether the followed container terminated, or its pod ended or is gone."""
        namespace, pod, container = key
        obj = self._objects.get(self._key(PODS, namespace, pod))
        if obj is None:
            return True
        status_ = obj.get("status") or {}
        if status_.get("phase") in ("Succeeded", "Failed"):
            return True
        for state in status_.get("containerStatuses") or ():
            if state.get("name") == container and "terminated" in (state.get("state") or {}):
                return True
        return False

    def _watch(self, handler: _Handler, kind: Resource, namespace: str | None, query: dict[str, str]) -> None:
        """Stream a watch: replay history after resourceVersion, then follow, with bookmarks, to timeout."""
        selector = parse_selector(query.get("labelSelector") or "").matches
        bookmarks = query.get("allowWatchBookmarks") == "true"
        timeout_s = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT_S)
        gvp = (kind.group, kind.version, kind.plural)
        name = _qualified(kind) + (f"[{query['labelSelector']}]" if query.get("labelSelector") else "")
        since = query.get("resourceVersion") or "0"
        if not since.isdigit():
            raise SimStatusError(status(400, "BadRequest", f"invalid resourceVersion {since!r}"))

        handler.start_chunked()
        with self._cond:
            self._open_watches[name] += 1
            self._cond.notify_all()
            generation = self._generation
            last, initial = self._starting_point(gvp, namespace, selector, int(since))
        try:
            handler.write_chunk(initial)
            deadline = time.monotonic() + timeout_s
            next_bookmark = time.monotonic() + self.bookmark_interval_s
            while True:
                with self._cond:
                    lines, last, end = self._next_lines(
                        gvp, last, namespace, selector, generation, deadline, next_bookmark
                    )
                if lines:
                    handler.write_chunk(b"".join(lines))
                if end == "timeout":
                    break
                if end == "dropped":
                    if self._abrupt_drop:
                        handler.cut()
                        return
                    break
                if end == "expired":
                    message = f"too old resource version: {since} ({self._compacted_rv})"
                    body = status(410, "Expired", message)
                    handler.write_chunk(_event_line("ERROR", dict(body)))
                    break
                if bookmarks and time.monotonic() >= next_bookmark:
                    handler.write_chunk(_bookmark_line(kind, last))
                    next_bookmark = time.monotonic() + self.bookmark_interval_s
            handler.end_chunked()
        except OSError:
            log.debug("watch client went away: %s", name)
        finally:
            with self._cond:
                self._open_watches[name] -= 1
                self._cond.notify_all()

    def _starting_point(
        self, gvp: GVP, namespace: str | None, selector: LabelPredicate, since: int
    ) -> tuple[int, bytes]:
        """Under the lock: the version a new watch continues from, and what it is sent first.

        Version 0 (none given) sends the current state as ADDED events; a version older than
        the compacted history comes back as -1, which the stream answers with 410 Expired.
        """
        if 0 < since < self._compacted_rv:
            return -1, b""
        if since > 0:
            return since, b""
        return self._rv, b"".join(
            _event_line("ADDED", obj)
            for (g, v, p, ns, _), obj in sorted(self._objects.items())
            if (g, v, p) == gvp and (namespace is None or ns == namespace) and selector(_labels(obj))
        )

    def _next_lines(
        self,
        gvp: GVP,
        last: int,
        namespace: str | None,
        selector: LabelPredicate,
        generation: int,
        deadline: float,
        next_bookmark: float,
    ) -> tuple[list[bytes], int, str | None]:
        """Under the lock: wait for changes after ``last`` (or a reason to stop waiting), render them.

        Returns the lines, the resourceVersion they bring the watch to, and why the stream
        should end (``timeout``, ``dropped``, ``expired``) or None to go on.
        """
        while True:
            if self._closing or generation != self._generation:
                return [], last, "dropped"
            if last < 0 or last < self._dropped_upto.get(gvp, 0):
                return [], last, "expired"
            rvs = self._history_rvs.get(gvp, [])
            start = bisect.bisect_right(rvs, last)
            if start < len(rvs):
                changes = self._history[gvp][start:]
                return [line for c in changes if (line := _render(c, namespace, selector))], self._rv, None
            now = time.monotonic()
            if now >= deadline:
                return [], last, "timeout"
            if now >= next_bookmark:
                return [], self._rv, None
            self._cond.wait(timeout=min(deadline, next_bookmark) - now)


def _bookmark_line(kind: Resource, rv: int) -> bytes:
    """A BOOKMARK: an object with only its kind and the resourceVersion the watch has reached."""
    return _event_line(
        "BOOKMARK",
        {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": {"resourceVersion": str(rv)}},
    )


def _render(change: _Change, namespace: str | None, selector: LabelPredicate) -> bytes | None:
    """The line a watch with this namespace and selector sees for a change, if any.

    Like the API server's watch cache, an object entering the selector shows up as ADDED and
    one leaving it as DELETED.
    """
    if change.type == _RAW:
        return change.line
    if namespace is not None and change.namespace != namespace:
        return None
    now_in = selector(_labels(change.object))
    was_in = change.previous is not None and selector(_labels(change.previous))
    if change.type == "MODIFIED" and now_in != was_in:
        return _event_line("ADDED" if now_in else "DELETED", change.object)
    if change.type == "DELETED":
        return change.line if was_in else None
    return change.line if now_in else None


@dataclass(frozen=True, slots=True)
class _LogEntry:
    """One line a container wrote: when (monotonic, for ``sinceSeconds``), its kubelet's
    timestamp (nanoseconds, for ``sinceTime`` and ``timestamps``), the bytes with their newline."""

    at: float
    ns: int
    line: bytes


def _since(entries: list[_LogEntry], query: dict[str, str]) -> list[_LogEntry]:
    """The entries ``sinceSeconds`` or ``sinceTime`` (whole seconds, as the API server reads it) keep."""
    if "sinceSeconds" in query:
        since = time.monotonic() - float(query["sinceSeconds"])
        return [entry for entry in entries if entry.at >= since]
    if "sinceTime" in query:
        since_ns = parse_ns(query["sinceTime"])
        if since_ns is None:
            raise SimStatusError(status(400, "BadRequest", f"invalid sinceTime {query['sinceTime']!r}"))
        return [entry for entry in entries if entry.ns >= since_ns]
    return list(entries)


def _rendered(entries: list[_LogEntry], query: dict[str, str]) -> bytes:
    """The entries as ``pods/log`` sends them: each with its timestamp first under ``timestamps``."""
    if query.get("timestamps") == "true":
        return b"".join(format_ns(entry.ns).encode() + b" " + entry.line for entry in entries)
    return b"".join(entry.line for entry in entries)


# -- HTTP -----------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024
    """Connections waiting to be accepted (socketserver's default, 5, drops the SYNs of many
    follows opened at once, and each waits out TCP's 1 s retransmission)."""

    def __init__(self, address: tuple[str, int], handler: type[_Handler], cluster: SimCluster) -> None:
        self.cluster = cluster
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.cluster._cond:
            self.server.cluster._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.cluster._cond:
            self.server.cluster._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("simcluster: " + format, *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- responses ------------------------------------------------------------------------------

    def send_body(
        self, code: int, body: bytes, content_type: str = "application/json", retry_after_s: int | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if retry_after_s is not None:
            self.send_header("Retry-After", str(retry_after_s))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, code: int, body: object) -> None:
        self.send_body(code, json.dumps(body).encode())

    def start_chunked(self, content_type: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def client_gone(self) -> bool:
        """Whether the client closed its end (a stream that sends nothing would not notice)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def cut(self) -> None:
        """Drop the connection mid-response, as a crashed API server or a broken network would."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- routing --------------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        cluster = self.server.cluster
        target = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(target.query, keep_blank_values=True).items()}
        request = RecordedRequest(method, target.path, query, self.headers.get("Authorization"))
        cluster.requests.append(request)
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        try:
            injected = cluster._take_failure(self.path)
            if injected is not None:
                cluster.refused.append(request)
                raise injected
            self._route(method, [unquote(p) for p in target.path.strip("/").split("/")], query, raw_body)
        except SimStatusError as exc:
            code = int(exc.status.get("code", 500))
            self.send_body(code, json.dumps(exc.status).encode(), retry_after_s=exc.retry_after_s)
        except (ValueError, KeyError, TypeError) as exc:
            self.send_json(400, status(400, "BadRequest", f"{type(exc).__name__}: {exc}"))

    def _route(self, method: str, parts: list[str], query: dict[str, str], raw_body: bytes) -> None:
        cluster = self.server.cluster
        if method == "POST" and len(parts) == 4 and (parts[1], parts[3]) in _REVIEWS:
            self.send_json(201, cluster._review(parts[3], json.loads(raw_body or b"{}")))
            return
        if method == "GET" and parts[:1] == ["apis"] and len(parts) == 3:
            self.send_json(200, cluster.discovery(parts[1], parts[2]))
            return
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise SimStatusError(status(404, "NotFound", "the server could not find the requested resource"))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        kind = cluster._kinds.get((group, version, rest[0]))
        if kind is None or len(rest) > 3:
            raise SimStatusError(status(404, "NotFound", "the server could not find the requested resource"))
        name = rest[1] if len(rest) >= 2 else None
        subresource = rest[2] if len(rest) == 3 else None
        body: RawObject = json.loads(raw_body) if raw_body else {}

        if (
            subresource == "log"
            and kind is PODS
            and method == "GET"
            and namespace
            and name
            and query.get("follow") == "true"
        ):
            cluster._follow_log(self, namespace, name, query)
        elif subresource == "log" and kind is PODS and method == "GET" and namespace and name:
            self.send_body(200, cluster._pod_log(namespace, name, query), "text/plain")
        elif subresource is not None:
            raise SimStatusError(status(404, "NotFound", "the server could not find the requested resource"))
        elif name is None and method == "GET" and query.get("watch") in ("true", "1"):
            cluster._watch(self, kind, namespace, query)
        elif name is None and method == "GET":
            selector = parse_selector(query.get("labelSelector") or "").matches
            limit = int(query["limit"]) if int(query.get("limit") or 0) > 0 else None
            self.send_json(
                200, cluster._list(kind, namespace, selector, limit, query.get("continue") or None)
            )
        elif name is None and method == "POST":
            self.send_json(201, cluster._create(kind, namespace or "", body))
        elif name is not None and method == "GET":
            stored = cluster.get(
                {
                    "apiVersion": kind.api_version,
                    "kind": kind.kind,
                    "metadata": {"namespace": namespace, "name": name},
                }
            )
            if stored is None:
                raise _not_found(kind, name)
            self.send_json(200, stored)
        elif name is not None and method == "PUT":
            self.send_json(200, cluster._replace(kind, namespace or "", name, body, check_version=True))
        elif name is not None and method == "DELETE":
            self.send_json(200, cluster._delete(kind, namespace or "", name))
        else:
            raise SimStatusError(status(405, "MethodNotAllowed", f"{method} is not supported here"))
