"""Prometheus metrics: every group of series has one shape, on a registry the entry point makes.

Nothing is registered at import time. A :class:`MetricGroup` subclass declares its series in
``__init__`` on the registry it is given; :meth:`MetricGroup.on` returns the group already
registered on a registry (a consumer built twice on one registry, in a restart in-process or
a test, reuses its series instead of failing on duplicates). :class:`PipelineMetrics` is the
process's group, built once per process and passed down; its registry is the one served on
``/metrics``.

:func:`serve_metrics` serves a registry on the metrics port from a thread of its own, with the
kubelet's liveness probe beside it: ``/healthz`` answers 503 once the process's event loop has
not stamped its :class:`Heartbeat` for ``stale_after_s`` (a loop blocked by a CPU-bound call or
a synchronous wait looks dead, however well the metrics thread still answers), and any other
path is 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, ClassVar, Self
from wsgiref.simple_server import make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["Heartbeat", "MetricGroup", "PipelineMetrics", "serve_metrics"]


class MetricGroup:
    """Series registered together on one registry."""

    _held: ClassVar[weakref.WeakKeyDictionary[CollectorRegistry, dict[type, MetricGroup]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        MetricGroup._held.setdefault(self.registry, {})[type(self)] = self

    @classmethod
    def on(cls, registry: CollectorRegistry) -> Self:
        """This group on ``registry``: the one registered there already, or a new one."""
        held = MetricGroup._held.get(registry, {}).get(cls)
        return held if isinstance(held, cls) else cls(registry)

    def sample(self, name: str, **labels: str) -> float:
        """The current value of one sample (``mpijc_watch_events_total``, …), 0 if never set."""
        return self.registry.get_sample_value(name, labels) or 0.0


class PipelineMetrics(MetricGroup):
    """Counters and histograms of the pipeline stages (other groups add theirs to the same registry)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.skipped_objects = Counter(
            "mpijc_skipped_objects",
            "Objects skipped as malformed or unknown, by reason.",
            ["reason"],
            registry=r,
        )
        self.published = Counter(
            "mpijc_published",
            "Events published to the bus (new, not duplicates), by type.",
            ["type"],
            registry=r,
        )
        self.unpublished = Counter(
            "mpijc_unpublished",
            "Events given up on after the bus's publish retries, by type (progress probes: the "
            "next probe reports the same lines).",
            ["type"],
            registry=r,
        )
        self.uncorrelated = Counter(
            "mpijc_uncorrelated", "Pods and events dropped because no run claimed them.", registry=r
        )
        self.consumed = Counter(
            "mpijc_consumed", "Messages processed and acknowledged, by consumer.", ["consumer"], registry=r
        )
        self.dead_letters = Counter(
            "mpijc_dead_letters",
            "Messages sent to the dead-letter subject, by consumer and reason.",
            ["consumer", "reason"],
            registry=r,
        )
        self.redeliveries = Counter(
            "mpijc_redeliveries",
            "Messages negatively acknowledged for redelivery, by consumer.",
            ["consumer"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "mpijc_batch_seconds",
            "Time to process one pulled batch, by consumer.",
            ["consumer"],
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.watch_lag = Histogram(
            "mpijc_watch_lag_seconds",
            "Seconds from a watcher observing a change to its publication on the bus (includes the "
            "wait for an unknown job's pods/events to be claimed), by event type.",
            ["type"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.db_write_seconds = Histogram(
            "mpijc_db_write_seconds",
            "Seconds one INSERT/UPDATE/DELETE statement (or executemany batch) took, by statement.",
            ["statement"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )


class Heartbeat:
    """The last time an event loop ran a turn: :meth:`run` stamps it every ``interval_s`` on the
    loop it watches; :meth:`alive` (any thread) says whether the stamp is younger than
    ``stale_after_s``. ``clock`` is :func:`time.monotonic`, or a test's."""

    def __init__(
        self, stale_after_s: float, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stale_after_s = stale_after_s
        self.interval_s = interval_s
        self._clock = clock
        self._stamp = clock()

    def beat(self) -> None:
        """Stamp now."""
        self._stamp = self._clock()

    def age_s(self) -> float:
        """Seconds since the last stamp."""
        return self._clock() - self._stamp

    def alive(self) -> bool:
        """The loop stamped within ``stale_after_s``."""
        return self.age_s() < self.stale_after_s

    async def run(self) -> None:
        """Stamp every ``interval_s`` until cancelled (a task on the loop being watched)."""
        while True:
            self.beat()
            await asyncio.sleep(self.interval_s)


def metrics_wsgi_app(registry: CollectorRegistry, heartbeat: Heartbeat) -> WSGIApplication:
    """``/metrics`` of ``registry``, ``/healthz`` of ``heartbeat`` (200, or 503 once stale), 404
    elsewhere."""
    metrics = make_wsgi_app(registry)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            scraped: Iterable[bytes] = metrics(environ, start_response)
            return scraped
        if path == "/healthz":
            age = heartbeat.age_s()
            if age < heartbeat.stale_after_s:
                status, body = "200 OK", b"ok\n"
            else:
                status, body = "503 Service Unavailable", f"event loop stuck for {age:.0f} s\n".encode()
        else:
            status, body = "404 Not Found", b"not found: /metrics and /healthz only\n"
        start_response(
            status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        )
        return [body]

    return app


@contextlib.asynccontextmanager
async def serve_metrics(
    registry: CollectorRegistry, port: int, stale_after_s: float, addr: str = "0.0.0.0"
) -> AsyncIterator[int]:
    """``/metrics`` and ``/healthz`` (see :func:`metrics_wsgi_app`) on ``port`` (0: any free
    one) from a thread of their own while inside, the running loop stamping the heartbeat; yields
    the port. :class:`OSError` when the port cannot be had."""
    heartbeat = Heartbeat(stale_after_s)
    server = make_server(
        addr, port, metrics_wsgi_app(registry, heartbeat), ThreadingWSGIServer, handler_class=_SilentHandler
    )
    thread = threading.Thread(target=server.serve_forever, name="metrics-port", daemon=True)
    thread.start()
    beating = asyncio.create_task(heartbeat.run())
    try:
        yield server.server_port
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
        server.shutdown()
        server.server_close()
        thread.join(5)
