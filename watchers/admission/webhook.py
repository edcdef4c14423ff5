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
review says and the record it yields), :mod:`.publishing` (spool and backlog),
:mod:`.certificates`, :mod:`.http` (one connection), :mod:`.metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Mapping
from types import TracebackType
from typing import Final

import h11
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from controller.contract.clock import Clock, utcnow
from controller.contract.settings import AdmissionSettings
from watchers.admission.certificates import CertificateReloader
from watchers.admission.http import CLOSE, Http, Reply, TooSlow, content_length, error
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.publishing import Publish, RecordPublisher
from watchers.admission.reviews import BadReview, Caller, review
from watchers.admission.spool import Spool

__all__ = ["AdmissionWebhook", "serve_admission"]

log = logging.getLogger(__name__)

WEBHOOK_PATH: Final = "/validate"


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
    ) -> None:
        if settings.cert_file is None or settings.key_file is None:
            raise ValueError("the admission webhook needs admission.cert_file and admission.key_file")
        self.settings = settings
        self.metrics = metrics
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

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``)."""
        assert self._server is not None, "not started"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._connection,
            self.settings.host,
            self.settings.port,
            ssl=self.certificate.context,
            ssl_handshake_timeout=10.0,
        )
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

    async def __aenter__(self) -> AdmissionWebhook:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _route(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, caller: Caller
    ) -> Reply:
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
            reviewed = review(body, self._clock(), caller=caller, max_depth=self.settings.max_json_depth)
        except BadReview as exc:
            return error(400, f"not an AdmissionReview: {exc}")
        except RecursionError:  # max_json_depth bounds it; this is the belt to those braces
            return error(400, "not an AdmissionReview: nested too deep")
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
        # with client_ca_file the handshake required a certificate from that CA
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
        http = Http(reader, writer, self.settings.request_timeout_s, self.metrics)
        limit, budget = self.settings.max_body_bytes, self.settings.request_timeout_s
        while True:
            try:
                request = await http.next_event()
                if not isinstance(request, h11.Request):
                    return  # the client closed the connection
                length = content_length(request.headers)
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
            except TooSlow:
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
                reply = error(500, "the webhook failed to read the review (logged)", CLOSE)
            await http.send(reply)
            if http.conn.our_state is h11.MUST_CLOSE:
                return
            http.conn.start_next_cycle()


async def serve_admission(
    settings: AdmissionSettings,
    publish: Publish,
    registry: CollectorRegistry,
    stop: asyncio.Event,
    clock: Clock = utcnow,
    spool: Spool | None = None,
) -> None:
    """Serve the admission webhook until ``stop`` is set (the ``mpijob-controller admission`` command)."""
    async with AdmissionWebhook(settings, publish, AdmissionMetrics(registry), clock=clock, spool=spool):
        await stop.wait()
