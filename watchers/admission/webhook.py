"""Validating admission webhook that records who created, changed or deleted training jobs.

The API server calls it (HTTPS, ``AdmissionReview`` ``admission.k8s.io/v1``) for CREATE,
UPDATE and DELETE of every kind of :mod:`controller.contract.kinds` (``kubeflow.org/v2beta1
mpijobs``, the ``kubeflow.org/v1`` training-operator kinds, ``trainer.kubeflow.org/v1alpha1
trainjobs``). Every review it can read is answered ``allowed: true`` with the request's ``uid``
— unless the quota check (:mod:`.quota`, ``admission.quota_check: deny``) refuses a job being
created that cannot fit its namespace's quota; with ``warn`` (the default) it is allowed with
``warnings``. The manifests register it with ``failurePolicy: Ignore``, so this process being
down or slow never blocks a user. What it also does is publish an
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
  first byte is a 408 and the connection is dropped; a body with more JSON items than
  ``max_json_items`` is a 413 found by counting bytes before it is parsed, one nested deeper than
  ``max_json_depth`` a 400. Every refusal is a JSON ``{"error": …}``.
- What all connections hold at once is bounded (:mod:`.capacity`): at most ``max_connections``
  (a new one beyond it closes the one that waited longest for its client), TLS handshakes within
  ``handshake_timeout_s`` (connections are accepted as plain TCP and counted before their
  handshake, which costs the TLS layer's buffers), idle connections for ``keep_alive_s``, and the
  bytes of bodies over 64 KiB within ``max_buffered_bytes`` (a 503 before reading one that does
  not fit).
- Every record says how the connection was authenticated (``caller``): ``mtls`` when the
  handshake required a client certificate from ``admission.client_ca_file``, else ``unverified``.
- Publishing waits at most ``publish_timeout_s`` for JetStream; a record it could not store
  is written to the durable spool (:mod:`watchers.admission.spool`, ``spool_dir``) before the
  review is answered, or, without one (or when it fails), kept in a bounded in-memory backlog;
  both are published again in the background. The ``Nats-Msg-Id`` is the record id: retries
  of the same record are stored once.

The server is plain asyncio with ``h11`` for HTTP/1.1 (keep-alive, as the API server uses
it) and an ``ssl.SSLContext`` this module owns, so a renewed certificate (cert-manager
rewrites the Secret) is loaded without a restart (:class:`CertificateReloader`). With
``admission.client_ca_file`` set it requires a client certificate from that CA, so only the API
server (configured to present one) can post reviews: anyone else who can reach the Service
could otherwise forge "who did it". Besides the webhook path it serves ``GET /healthz`` and
``GET /metrics``.

This module is the server; the parts it wires are one module each: :mod:`.reviews` (what a
review says and the record it yields), :mod:`.quota` (the quota check, with :mod:`.demand` and
:mod:`.fit`), :mod:`.publishing` (spool and backlog),
:mod:`.certificates`, :mod:`.http` (one connection), :mod:`.capacity` (all connections
together), :mod:`.metrics`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final

import h11
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from controller.contract.clock import Clock, utcnow
from controller.contract.settings import AdmissionSettings
from watchers.admission.capacity import SMALL_BODY_BYTES, BodyPool, Connections, Slot
from watchers.admission.certificates import CertificateReloader
from watchers.admission.http import CLOSE, Http, HttpReply, TooSlow, content_length, error
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.publishing import Publish, RecordPublisher
from watchers.admission.quota import Lookup, QuotaCheck, QuotaJudgement
from watchers.admission.reviews import BadReview, CallerTrust, TooCostly, review
from watchers.admission.spool import Spool

__all__ = ["AdmissionWebhook", "answer", "serve_admission"]

log = logging.getLogger(__name__)

WEBHOOK_PATH: Final = "/validate"
CLOSE_TIMEOUT_S: Final = 1.0
"""How long a closing TLS connection waits for the client's close_notify before it is aborted
(asyncio would wait 30 s, holding the connection's buffers outside the cap)."""


class AdmissionWebhook:
    """The HTTPS server: ``POST /validate``, ``GET /healthz``, ``GET /metrics``."""

    def __init__(
        self,
        settings: AdmissionSettings,
        publish: Publish,
        metrics: AdmissionMetrics,
        *,
        clock: Clock = utcnow,
        path: str = WEBHOOK_PATH,
        spool: Spool | None = None,
        quota: QuotaCheck | None = None,
    ) -> None:
        if settings.cert_file is None or settings.key_file is None:
            raise ValueError("the admission webhook needs admission.cert_file and admission.key_file")
        self.settings = settings
        self.metrics = metrics
        self.quota = quota
        """Judges jobs being created against their namespace's quota; None: not looked at."""
        self.path = path
        self.certificate = CertificateReloader(settings.cert_file, settings.key_file, settings.client_ca_file)
        self.publisher = RecordPublisher(
            publish, settings.publish_timeout_s, settings.backlog, metrics, spool
        )
        self._clock = clock
        self._server: asyncio.Server | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        """Every connection's task, until it has closed its connection."""
        self.capacity = Connections(settings.max_connections, time.monotonic)
        self.bodies = BodyPool(settings.max_buffered_bytes)

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``)."""
        assert self._server is not None, "not started"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        # plain TCP: a connection is counted, and may be refused, before its TLS handshake
        self._server = await asyncio.start_server(self._connection, self.settings.host, self.settings.port)
        self._tasks = [
            asyncio.create_task(self.publisher.run(self._stop)),
            asyncio.create_task(self.certificate.run(self._stop, self.settings.cert_reload_s)),
        ]
        log.info("admission webhook on https://%s:%d%s", self.settings.host, self.port, self.path)

    async def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
        await asyncio.gather(*self._tasks)
        if self.quota is not None:
            self.quota.close()

    async def __aenter__(self) -> AdmissionWebhook:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _route(
        self, method: str, target: str, headers: Mapping[str, str], body: bytearray, caller: CallerTrust
    ) -> HttpReply:
        path = target.partition("?")[0]
        if path == "/healthz" and method == "GET":
            return 200, b"ok\n", "text/plain", []
        if path == "/metrics" and method == "GET":
            return 200, generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST, []
        if path != self.path:
            return error(404, f"no such path {path!r}; the webhook is at {self.path}")
        if method != "POST":
            return error(
                405, f"{method} is not allowed; send the AdmissionReview with POST", ("allow", "POST")
            )
        content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        if content_type != "application/json":
            return error(415, f"content-type must be application/json, not {content_type or 'missing'!r}")
        try:
            reviewed = review(
                body,
                self._clock(),
                caller=caller,
                max_depth=self.settings.max_json_depth,
                max_items=self.settings.max_json_items,
            )
        except TooCostly as exc:
            return error(413, f"not read: {exc}")
        except BadReview as exc:
            return error(400, f"not an AdmissionReview: {exc}")
        except RecursionError:  # max_json_depth bounds it; this is the belt to those braces
            return error(400, "not an AdmissionReview: nested too deep")
        self.metrics.reviews.labels(reviewed.operation, reviewed.outcome).inc()
        if reviewed.outcome == "malformed":
            log.warning("allowed a review that could not be recorded: %s", reviewed.why)
        if reviewed.record is not None:
            await self.publisher.submit(reviewed.record)
        response = reviewed.response
        if reviewed.created is not None and self.quota is not None:
            created = reviewed.created
            judgement = await self.quota.judge(created.kind, created.namespace, created.object)
            response = answer(response, judgement)
        return 200, json.dumps(response).encode(), "application/json", []

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        slot, evicted = self.capacity.admit(task)
        if evicted is not None:
            self.metrics.connections_evicted.inc()
        if slot is None:  # every connection is being answered: this one is closed unserved
            self.metrics.connections_refused.inc()
            writer.close()
            return
        self._connections.add(task)
        self.metrics.connections.set(len(self.capacity))
        graceful = True  # answered, timed out or closed by the client: let the answer reach it
        try:
            await writer.start_tls(
                self.certificate.context, ssl_handshake_timeout=self.settings.handshake_timeout_s
            )
            # with client_ca_file the handshake required a certificate from that CA
            caller: CallerTrust = "mtls" if writer.get_extra_info("peercert") else "unverified"
            await self._serve(reader, writer, caller, slot)
        except TimeoutError as exc:  # idle for keep_alive_s, or a client that does not read its answer
            log.debug("webhook connection timed out: %s", exc)
        except (ConnectionError, ssl.SSLError, h11.ProtocolError) as exc:
            graceful = False
            log.debug("webhook connection ended: %s", exc)
        except Exception:
            graceful = False
            log.exception("webhook connection failed")
        except asyncio.CancelledError:  # closed to make room, or by close(): the task ends quietly
            graceful = False
        finally:
            slot.wait()  # for the client's close: a closing connection makes room like an idle one
            await self._close(writer, graceful)
            self.capacity.leave(slot)
            self._connections.discard(task)
            self.metrics.connections.set(len(self.capacity))

    @staticmethod
    async def _close(writer: asyncio.StreamWriter, graceful: bool) -> None:
        """Close the connection: ``graceful``, waiting for the client's TLS close_notify at most
        ``CLOSE_TIMEOUT_S``; else (or then) aborted, so that its buffers go at once."""
        try:
            if graceful:
                writer.close()
                await asyncio.wait_for(writer.wait_closed(), CLOSE_TIMEOUT_S)
                return
        except (ConnectionError, ssl.SSLError, TimeoutError, asyncio.CancelledError):
            pass
        writer.transport.abort()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, caller: CallerTrust, slot: Slot
    ) -> None:
        """Serve requests on one connection: each must arrive whole within ``request_timeout_s``."""
        settings = self.settings
        http = Http(reader, writer, settings.request_timeout_s, settings.keep_alive_s, self.metrics, slot)
        limit, budget = settings.max_body_bytes, settings.request_timeout_s
        while True:
            held = 0  # bytes of the pool this request's body holds
            try:
                try:
                    request = await http.next_event()
                    if not isinstance(request, h11.Request):
                        return  # the client closed the connection
                    length = content_length(request.headers)
                    if length is not None and length > limit:
                        await http.refuse(413, f"request body of {length} bytes; at most {limit} are read")
                        await http.linger(2 * limit)
                        return
                    if length is not None and length > SMALL_BODY_BYTES:
                        if not self.bodies.take(length):
                            await self._busy(http, length)
                            return
                        held = length
                    body = bytearray()
                    while not isinstance(event := await http.next_event(), h11.EndOfMessage):
                        if not isinstance(event, h11.Data):
                            return
                        body += event.data
                        if len(body) > limit:
                            await http.refuse(413, f"request body over {limit} bytes")
                            await http.linger(2 * limit)
                            return
                        if len(body) > SMALL_BODY_BYTES and not held:  # chunked: it may grow to the limit
                            if not self.bodies.take(limit):
                                await self._busy(http, limit)
                                return
                            held = limit
                except h11.RemoteProtocolError as exc:
                    await http.refuse(exc.error_status_hint, f"bad HTTP request: {exc}")
                    return
                except TooSlow:
                    await http.refuse(408, f"the request did not arrive within {budget:g} s")
                    return
                slot.work()
                http.deadline = None
                headers = {name.decode().lower(): value.decode("latin-1") for name, value in request.headers}
                try:
                    reply = await self._route(
                        request.method.decode(), request.target.decode(), headers, body, caller
                    )
                except Exception:
                    log.exception("review failed")
                    reply = error(500, "the webhook failed to read the review (logged)", CLOSE)
                del body
            finally:
                self.bodies.give(held)
            await http.send(reply)
            if http.conn.our_state is h11.MUST_CLOSE:
                return
            http.conn.start_next_cycle()

    async def _busy(self, http: Http, size: int) -> None:
        """Answer 503 for a large body the pool cannot hold now, and close."""
        pool = self.bodies
        await http.refuse(
            503,
            f"request body of up to {size} bytes not read: the webhook holds {pool.held} of its "
            f"{pool.most} bytes for large bodies already; try again",
        )
        await http.linger(2 * self.settings.max_body_bytes)


def answer(response: dict[str, Any], judgement: QuotaJudgement) -> dict[str, Any]:
    """``response`` (an allowing AdmissionReview) with the quota check's ``warnings``, or refused
    (403, the problems as its message) when the check denies."""
    if not judgement.problems:
        return response
    inner = dict(response["response"])
    if judgement.denied:
        inner["allowed"] = False
        inner["status"] = {
            "code": 403,
            "reason": "Forbidden",
            "message": "; ".join(judgement.problems),
        }
    else:
        inner["warnings"] = list(judgement.problems)
    return {**response, "response": inner}


async def serve_admission(
    settings: AdmissionSettings,
    publish: Publish,
    registry: CollectorRegistry,
    stop: asyncio.Event,
    clock: Clock = utcnow,
    spool: Spool | None = None,
    connect: Callable[[], Lookup | None] | None = None,
) -> None:
    """Serve the admission webhook until ``stop`` is set (the ``mpijob-controller admission`` command).

    With ``quota_check`` not off, ``connect`` is called once the certificates are read (so a
    certificate problem is the one thing a failed start says): the lookup it returns, if any,
    judges jobs being created against their quota.
    """
    metrics = AdmissionMetrics(registry)
    webhook = AdmissionWebhook(settings, publish, metrics, clock=clock, spool=spool)
    if connect is not None and settings.quota_check != "off" and (lookup := connect()) is not None:
        webhook.quota = QuotaCheck.from_settings(settings, lookup, metrics)
    async with webhook:
        await stop.wait()
