"""Validating admission webhook that records who created, changed or deleted MPIJobs and TrainJobs.

The API server calls it (HTTPS, ``AdmissionReview`` ``admission.k8s.io/v1``) for CREATE,
UPDATE and DELETE of ``kubeflow.org/v2beta1 mpijobs`` and ``trainer.kubeflow.org/v1alpha1
trainjobs``. It never refuses anything: every review it can read is answered ``allowed: true``
with the request's ``uid``, and the manifests register it with ``failurePolicy: Ignore``, so
this process being down or slow never blocks a user. What it does is publish an
:class:`~controller.contract.audit.AuditRecord` on ``audit.<ns>`` with the request's ``userInfo``
(username, uid, groups, extra, and the service account parsed from
``system:serviceaccount:<ns>:<name>``), the operation, the object (kind, name, uid — from
``oldObject`` for DELETE), the field paths an UPDATE changed, and the time.

- A dry-run request (``dryRun: true``) is answered and not recorded (``sideEffects: NoneOnDryRun``).
- A body that is not an AdmissionReview v1 with a ``request.uid`` gets a 400 naming what is
  wrong (the API server then applies ``failurePolicy: Ignore``). A readable review whose
  details are off (no object, unknown kind) is still allowed, just not recorded.
- Input is bounded before it is read (docs/admission.md): a ``Content-Length`` over
  ``max_body_bytes`` is a 413 before any of the body is read, a chunked body is counted as it
  streams; a request whose headers and body do not arrive within ``request_timeout_s`` of its
  first byte is a 408 and the connection is dropped; JSON nested deeper than ``max_json_depth``
  is a 400 found by a linear scan (:func:`json_depth`) before ``json.loads`` could recurse.
  Every refusal is a JSON ``{"error": …}``.
- Every record says how the connection was authenticated (``caller``): ``mtls`` when the
  handshake required a client certificate from ``webhook_client_ca_file``, else ``unverified``.
- Publishing waits at most ``publish_timeout_s`` for JetStream; a record it could not store
  is written to the durable spool (:mod:`watchers.admission.spool`, ``spool_dir``) before the
  review is answered, or, without one (or when it fails), kept in a bounded in-memory backlog;
  both are published again in the background. The ``Nats-Msg-Id`` is the record id: retries
  of the same record are stored once.

The server is plain asyncio with ``h11`` for HTTP/1.1 (keep-alive, as the API server uses
it) and an ``ssl.SSLContext`` this module owns, so a renewed certificate (cert-manager
rewrites the Secret) is loaded without a restart (:class:`CertificateReloader`). With
``webhook_client_ca_file`` set it requires a client certificate from that CA, so only the API
server (configured to present one) can post reviews: anyone else who can reach the Service
could otherwise forge "who did it". Besides the webhook path it serves ``GET /healthz`` and
``GET /metrics``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import h11
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.contract.audit import (
    Actor,
    AuditRecord,
    Verb,
    audited_object,
    service_account_of,
)
from controller.contract.backoff import Backoff
from controller.contract.clock import Clock, utcnow
from controller.contract.kubeflow import API_GROUPS, JobKind
from controller.contract.settings import AuditSettings
from controller.metrics import MetricGroup
from watchers.admission.spool import Spool

__all__ = [
    "AdmissionMetrics",
    "AdmissionWebhook",
    "BadReview",
    "CertificateReloader",
    "RecordPublisher",
    "changed_paths",
    "json_depth",
    "review",
    "serve_admission",
]

log = logging.getLogger(__name__)

Publish = Callable[[Sequence[AuditRecord]], Awaitable[int]]
Outcome = Literal["recorded", "dry_run", "ignored", "malformed"]
Caller = Literal["mtls", "unverified"]

API_VERSION: Final = "admission.k8s.io/v1"
WEBHOOK_PATH: Final = "/validate"
AUDITED: Final[dict[tuple[str, str], JobKind]] = {
    (group, kind): kind for kind, (group, _) in API_GROUPS.items()
}
VERBS: Final[dict[str, Verb]] = {"CREATE": "create", "UPDATE": "update", "DELETE": "delete"}
OPERATIONS: Final = frozenset({*VERBS, "CONNECT"})

SPOOL_TIMEOUT_S = 1.5
"""Longest wait for the spool's fsync before the record is kept in memory instead: with
``publish_timeout_s`` (1 s) the answer still comes inside the API server's 3 s."""
MAX_HEADER_BYTES = 64 << 10
IDLE_TIMEOUT_S = 120.0
"""Keep-alive connections idle longer than this are closed."""
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


# ------------------------------------------------------------------------- AdmissionReview in


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


# ----------------------------------------------------------------------------------- metrics


class AdmissionMetrics(MetricGroup):
    """The webhook's series, on the registry it serves at ``/metrics``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        registry = self.registry
        self.reviews = Counter(
            "mpijc_admission_reviews",
            "AdmissionReviews answered, by operation and outcome (recorded, dry_run, ignored, malformed).",
            ["operation", "outcome"],
            registry=registry,
        )
        self.rejected = Counter(
            "mpijc_admission_bad_requests", "Requests answered 4xx, by status.", ["status"], registry=registry
        )
        self.publish_failures = Counter(
            "mpijc_admission_publish_failures",
            "Audit records JetStream did not store in time (spooled, or kept in the backlog).",
            registry=registry,
        )
        self.backlog = Gauge(
            "mpijc_admission_backlog",
            "Audit records held in memory to be published again (the spool is unset or failing).",
            registry=registry,
        )
        self.spooled = Gauge(
            "mpijc_admission_spooled",
            "Audit records in the durable spool (audit.spool_dir), waiting for JetStream.",
            registry=registry,
        )
        self.spool_failures = Counter(
            "mpijc_admission_spool_failures",
            "Audit records the spool could not store (kept in memory instead).",
            registry=registry,
        )
        self.dropped = Counter(
            "mpijc_admission_dropped",
            "Audit records dropped because the backlog was full.",
            registry=registry,
        )


# --------------------------------------------------------------------------------- publishing


class RecordPublisher:
    """Publishes records without holding the API server up: a short wait, then a background retry.

    A record JetStream did not store within ``timeout_s`` goes to the durable ``spool`` (when
    one is given) before the review is answered, else (or when the spool fails too) to a
    bounded in-memory backlog. :meth:`run` publishes both again, oldest first, and removes a
    spooled record only once JetStream acknowledged it.
    """

    BATCH = 100

    def __init__(
        self,
        publish: Publish,
        timeout_s: float,
        backlog: int,
        metrics: AdmissionMetrics,
        spool: Spool | None = None,
    ) -> None:
        self._publish = publish
        self._timeout_s = timeout_s
        self._limit = backlog
        self._metrics = metrics
        self._spool = spool
        self._backlog: collections.deque[AuditRecord] = collections.deque()
        self._waiting = asyncio.Event()
        self._waiting.set()  # a restart may find spooled records: look at once

    @property
    def pending(self) -> int:
        """Records waiting in the in-memory backlog."""
        return len(self._backlog)

    async def spooled(self) -> int:
        """Records waiting in the spool."""
        return 0 if self._spool is None else await self._spool.count()

    async def submit(self, record: AuditRecord) -> bool:
        """Publish ``record``, waiting at most the timeout; False if it was kept for a retry."""
        try:
            await asyncio.wait_for(self._publish([record]), self._timeout_s)
        except Exception as exc:  # NATS down, slow or refusing: keep it, answer the API server anyway
            log.warning("audit record %s not stored yet (%s); retrying in the background", record.id, exc)
            self._metrics.publish_failures.inc()
            await self._keep(record)
            return False
        return True

    async def _keep(self, record: AuditRecord) -> None:
        if self._spool is not None:
            try:
                await asyncio.wait_for(self._spool.put(record), SPOOL_TIMEOUT_S)
            except Exception as exc:
                log.error("audit record %s not spooled (%s); kept in memory", record.id, exc)
                self._metrics.spool_failures.inc()
            else:
                self._metrics.spooled.inc()
                self._waiting.set()
                return
        if len(self._backlog) >= self._limit:
            dropped = self._backlog.popleft()
            self._metrics.dropped.inc()
            log.error("audit backlog full (%d): dropped record %s", self._limit, dropped.id)
        self._backlog.append(record)
        self._metrics.backlog.set(len(self._backlog))
        self._waiting.set()

    async def run(self, stop: asyncio.Event, backoff_max_s: float = 10.0) -> None:
        """Retry the spool and the backlog, oldest first, until ``stop`` is set."""
        backoff = Backoff(0.1, backoff_max_s)
        while not stop.is_set():
            await _first_of(self._waiting, stop)
            if stop.is_set():
                return
            self._waiting.clear()  # before looking: a record kept meanwhile sets it again
            try:
                more = await self._drain_spool() or await self._drain_backlog()
            except Exception as exc:
                self._waiting.set()
                log.info("audit records still not publishable: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=backoff.next_delay())
                continue
            backoff.reset()
            if more:
                self._waiting.set()

    async def _drain_spool(self) -> bool:
        """Publish one batch of the spool; True if there was one."""
        if self._spool is None:
            return False
        self._metrics.spooled.set(await self._spool.count())  # also what a restart found
        batch = await self._spool.take(self.BATCH)
        if batch:
            await asyncio.wait_for(self._publish([item.record for item in batch]), self._timeout_s * 5)
            await self._spool.remove([item.key for item in batch])
            self._metrics.spooled.set(await self._spool.count())
        return bool(batch)

    async def _drain_backlog(self) -> bool:
        """Publish one batch of the in-memory backlog; True if there was one."""
        batch = list(self._backlog)[: self.BATCH]
        if not batch:
            return False
        await asyncio.wait_for(self._publish(batch), self._timeout_s * 5)
        for _ in batch:
            self._backlog.popleft()
        self._metrics.backlog.set(len(self._backlog))
        return True


async def _first_of(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


# ------------------------------------------------------------------------------ certificates


class CertificateReloader:
    """A server ``SSLContext`` that picks up a renewed certificate and key from their files."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None = None) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        if client_ca_file is not None:  # only the API server, with its client certificate, gets in
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(cafile=client_ca_file)
        self._seen = self._stamp()
        self.context.load_cert_chain(cert_file, key_file)

    def _stamp(self) -> tuple[int, ...]:
        cert, key = self.cert_file.stat(), self.key_file.stat()
        return (cert.st_mtime_ns, cert.st_size, cert.st_ino, key.st_mtime_ns, key.st_size, key.st_ino)

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; a half-written pair keeps the old certificate."""
        try:
            stamp = self._stamp()
            if stamp == self._seen:
                return False
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate not reloaded (keeping the current one): %s", exc)
            return False
        self._seen = stamp
        log.info("reloaded the webhook certificate from %s", self.cert_file)
        return True

    async def run(self, stop: asyncio.Event, interval_s: float) -> None:
        """Check every ``interval_s`` until ``stop`` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
            self.reload_if_changed()


# ------------------------------------------------------------------------------------ server

_Reply = tuple[int, bytes, str, list[tuple[str, str]]]


def _error(status: int, message: str, *headers: tuple[str, str]) -> _Reply:
    return status, json.dumps({"error": message}).encode(), "application/json", list(headers)


_CLOSE: Final = ("connection", "close")


class _TooSlow(Exception):
    """The request's headers and body did not arrive within ``request_timeout_s``."""


class AdmissionWebhook:
    """The HTTPS server: ``POST /validate``, ``GET /healthz``, ``GET /metrics``."""

    def __init__(
        self,
        settings: AuditSettings,
        publish: Publish,
        metrics: AdmissionMetrics,
        *,
        clock: Clock = utcnow,
        path: str = WEBHOOK_PATH,
        spool: Spool | None = None,
    ) -> None:
        if settings.webhook_cert_file is None or settings.webhook_key_file is None:
            raise ValueError("the admission webhook needs audit.webhook_cert_file and audit.webhook_key_file")
        self.settings = settings
        self.metrics = metrics
        self.path = path
        self.certificate = CertificateReloader(
            settings.webhook_cert_file, settings.webhook_key_file, settings.webhook_client_ca_file
        )
        self.publisher = RecordPublisher(
            publish, settings.publish_timeout_s, settings.backlog, metrics, spool
        )
        self._clock = clock
        self._server: asyncio.Server | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (useful with ``webhook_port=0``)."""
        assert self._server is not None, "not started"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._connection,
            self.settings.webhook_host,
            self.settings.webhook_port,
            ssl=self.certificate.context,
            ssl_handshake_timeout=10.0,
        )
        self._tasks = [
            asyncio.create_task(self.publisher.run(self._stop)),
            asyncio.create_task(self.certificate.run(self._stop, self.settings.cert_reload_s)),
        ]
        log.info("admission webhook on https://%s:%d%s", self.settings.webhook_host, self.port, self.path)

    async def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
        await asyncio.gather(*self._tasks)

    async def __aenter__(self) -> AdmissionWebhook:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _route(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, caller: Caller
    ) -> _Reply:
        path = target.partition("?")[0]
        if path == "/healthz" and method == "GET":
            return 200, b"ok\n", "text/plain", []
        if path == "/metrics" and method == "GET":
            return 200, generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST, []
        if path != self.path:
            return _error(404, f"no such path {path!r}; the webhook is at {self.path}")
        if method != "POST":
            return _error(
                405, f"{method} is not allowed; send the AdmissionReview with POST", ("allow", "POST")
            )
        content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        if content_type != "application/json":
            return _error(415, f"content-type must be application/json, not {content_type or 'missing'!r}")
        try:
            reviewed = review(body, self._clock(), caller=caller, max_depth=self.settings.max_json_depth)
        except BadReview as exc:
            return _error(400, f"not an AdmissionReview: {exc}")
        except RecursionError:  # max_json_depth bounds it; this is the belt to those braces
            return _error(400, "not an AdmissionReview: nested too deep")
        self.metrics.reviews.labels(reviewed.operation, reviewed.outcome).inc()
        if reviewed.outcome == "malformed":
            log.warning("allowed a review that could not be recorded: %s", reviewed.why)
        if reviewed.record is not None:
            await self.publisher.submit(reviewed.record)
        return 200, json.dumps(reviewed.response).encode(), "application/json", []

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        # with webhook_client_ca_file the handshake required a certificate from that CA
        caller: Caller = "mtls" if writer.get_extra_info("peercert") else "unverified"
        try:
            await self._serve(reader, writer, caller)
        except (ConnectionError, TimeoutError, ssl.SSLError, h11.ProtocolError) as exc:
            log.debug("webhook connection ended: %s", exc)
        except Exception:
            log.exception("webhook connection failed")
        except asyncio.CancelledError:  # close() ends the connections; the task ends quietly
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(writer.wait_closed(), 5.0)

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, caller: Caller
    ) -> None:
        """Serve requests on one connection: each must arrive whole within ``request_timeout_s``."""
        http = _Http(reader, writer, self.settings.request_timeout_s, self.metrics)
        limit, budget = self.settings.max_body_bytes, self.settings.request_timeout_s
        while True:
            try:
                request = await http.next_event()
                if not isinstance(request, h11.Request):
                    return  # the client closed the connection
                length = _content_length(request.headers)
                if length is not None and length > limit:
                    await http.refuse(413, f"request body of {length} bytes; at most {limit} are read")
                    await http.linger(2 * limit)
                    return
                body = bytearray()
                while not isinstance(event := await http.next_event(), h11.EndOfMessage):
                    if not isinstance(event, h11.Data):
                        return
                    body += event.data
                    if len(body) > limit:
                        await http.refuse(413, f"request body over {limit} bytes")
                        await http.linger(2 * limit)
                        return
            except h11.RemoteProtocolError as exc:
                await http.refuse(exc.error_status_hint, f"bad HTTP request: {exc}")
                return
            except _TooSlow:
                await http.refuse(408, f"the request did not arrive within {budget:g} s")
                return
            http.deadline = None
            headers = {name.decode().lower(): value.decode("latin-1") for name, value in request.headers}
            try:
                reply = await self._route(
                    request.method.decode(), request.target.decode(), headers, bytes(body), caller
                )
            except Exception:
                log.exception("review failed")
                reply = _error(500, "the webhook failed to read the review (logged)", _CLOSE)
            await http.send(reply)
            if http.conn.our_state is h11.MUST_CLOSE:
                return
            http.conn.start_next_cycle()


class _Http:
    """One HTTP/1.1 connection (h11) with a deadline per request, from its first byte to its last."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        budget_s: float,
        metrics: AdmissionMetrics,
    ) -> None:
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.reader, self.writer, self.budget_s, self.metrics = reader, writer, budget_s, metrics
        self.deadline: float | None = None
        """Loop time by which the current request must be complete; None between requests."""
        self._loop = asyncio.get_running_loop()

    async def next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.deadline is None:  # between requests: wait for the next one's first bytes
                data = await asyncio.wait_for(self.reader.read(65536), IDLE_TIMEOUT_S)
                self.deadline = self._loop.time() + self.budget_s
            else:
                left = max(self.deadline - self._loop.time(), 0.0)
                try:
                    data = await asyncio.wait_for(self.reader.read(65536), left)
                except TimeoutError:
                    raise _TooSlow from None
            self.conn.receive_data(data)

    async def send(self, reply: _Reply) -> None:
        status, payload, content_type, extra = reply
        if status >= 400:
            self.metrics.rejected.labels(str(status)).inc()
        headers = [("content-type", content_type), ("content-length", str(len(payload))), *extra]
        data = self.conn.send(h11.Response(status_code=status, headers=headers))
        self.writer.write((data or b"") + (self.conn.send(h11.Data(data=payload)) or b""))
        self.writer.write(self.conn.send(h11.EndOfMessage()) or b"")
        await asyncio.wait_for(self.writer.drain(), self.budget_s)  # a client that does not read: dropped

    async def linger(self, most: int, seconds: float = 1.0) -> None:
        """Discard what the client still sends (at most ``most`` bytes, ``seconds``) before closing.

        A client still sending the body it was refused would otherwise get a reset instead of
        the answer; nothing is kept, so this costs no memory.
        """
        end = self._loop.time() + seconds
        with contextlib.suppress(TimeoutError, ConnectionError, ssl.SSLError):
            while most > 0 and (left := end - self._loop.time()) > 0:
                data = await asyncio.wait_for(self.reader.read(65536), left)
                if not data:
                    return
                most -= len(data)

    async def refuse(self, status: int, message: str) -> None:
        """Answer and close, unless an answer can no longer be sent on this connection."""
        if self.conn.our_state in {h11.IDLE, h11.SEND_RESPONSE}:
            await self.send(_error(status, message, _CLOSE))


def _content_length(headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The declared Content-Length (h11 has checked it is one number), or None (chunked)."""
    for name, value in headers:
        if name == b"content-length":
            return int(value)
    return None


async def serve_admission(
    settings: AuditSettings,
    publish: Publish,
    registry: CollectorRegistry,
    stop: asyncio.Event,
    clock: Clock = utcnow,
    spool: Spool | None = None,
) -> None:
    """Serve the admission webhook until ``stop`` is set (the ``mpijob-controller admission`` command)."""
    async with AdmissionWebhook(settings, publish, AdmissionMetrics(registry), clock=clock, spool=spool):
        await stop.wait()
