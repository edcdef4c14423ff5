"""The cluster's Prometheus, read through its HTTP API: the one door to it.

Only ``/api/v1/query`` and ``/api/v1/query_range`` are used, as ``POST`` forms (a pod-name
matcher for a namespace of hundreds of pods does not fit in a URL). OpenShift's Thanos querier
and kube-prometheus-stack's Prometheus answer both the same way.

Errors::

    PrometheusError
    ├── PrometheusUnavailableError   not answered, timed out, 429 or 5xx: retried here, with
    │                                backoff, at most ``retries`` times, then raised
    └── PrometheusRejectedError      4xx or ``status: error`` (a query it refuses): never retried

The bearer token is read from its file before every request, so a rotated service-account
token is used at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx

from controller.contract.credentials import bearer_header, tls_context
from controller.contract.settings import UsageSettings

__all__ = [
    "PrometheusError",
    "PrometheusReader",
    "PrometheusRejectedError",
    "PrometheusUnavailableError",
    "Series",
    "escape_regex",
]

USER_AGENT = "mpijob-controller-usage/1"
MAX_SERIES = 200_000
"""Most series one answer may hold; a larger answer is refused as a query gone wrong."""

QueryOutcome = Literal["ok", "retried", "unavailable", "rejected"]


class PrometheusError(Exception):
    """A query that got no usable answer."""


class PrometheusUnavailableError(PrometheusError):
    """Not answered, timed out, or answered 429/5xx, after every retry."""


class PrometheusRejectedError(PrometheusError):
    """Refused as wrong (4xx or ``status: error``): repeating it cannot help."""


@dataclass(frozen=True)
class Series:
    """One series of an answer: its labels and its points (unix seconds, value)."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def escape_regex(value: str) -> str:
    """``value`` matched literally inside a PromQL ``=~`` matcher (RE2, fully anchored)."""
    escaped = "".join(f"\\{c}" if c in _REGEX_SPECIAL else c for c in value)
    return escaped.replace("\\", "\\\\").replace('"', '\\"')


def _value(raw: Any) -> float:
    return float(raw)  # "NaN", "+Inf" included


def _series(data: Any) -> list[Series]:
    """The series of a ``matrix`` or ``vector`` answer."""
    if not isinstance(data, dict) or data.get("resultType") not in {"matrix", "vector"}:
        raise PrometheusRejectedError(f"unexpected answer: {str(data)[:200]}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusRejectedError("unexpected answer: no result list")
    if len(result) > MAX_SERIES:
        raise PrometheusRejectedError(f"{len(result)} series in one answer (at most {MAX_SERIES})")
    found: list[Series] = []
    for item in result:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        if data["resultType"] == "matrix":
            points = tuple((float(t), _value(v)) for t, v in item.get("values") or ())
        else:
            t, v = item.get("value") or (0, "NaN")
            points = ((float(t), _value(v)),)
        found.append(Series(labels, points))
    return found


class PrometheusReader(AbstractAsyncContextManager["PrometheusReader"]):
    """Queries one Prometheus (``async with PrometheusReader(settings) as reader``).

    ``observe`` is told the outcome and seconds of every request (metrics); ``transport``
    replaces the network in the few tests of what a real server cannot be made to do."""

    def __init__(
        self,
        settings: UsageSettings,
        *,
        observe: Callable[[QueryOutcome, float], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not settings.enabled:
            raise ValueError("MPIJC_USAGE__URL is not set")
        self._settings = settings
        self._observe = observe or (lambda outcome, seconds: None)
        self._client = httpx.AsyncClient(
            base_url=settings.url,
            verify=tls_context(settings.ca_file),
            timeout=httpx.Timeout(settings.timeout_s),
            headers={"user-agent": USER_AGENT},
            transport=transport,
        )

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def query(self, promql: str, at: datetime) -> list[Series]:
        """An instant query (``/api/v1/query``)."""
        return await self._ask("/api/v1/query", {"query": promql, "time": f"{at.timestamp():.3f}"})

    async def query_range(self, promql: str, start: datetime, end: datetime, step_s: float) -> list[Series]:
        """A range query (``/api/v1/query_range``)."""
        form = {
            "query": promql,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": f"{step_s:g}",
        }
        return await self._ask("/api/v1/query_range", form)

    async def _ask(self, path: str, form: dict[str, str]) -> list[Series]:
        s = self._settings
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                answer = await self._once(path, form)
            except PrometheusUnavailableError:
                seconds = time.monotonic() - started
                if attempt >= s.retries:
                    self._observe("unavailable", seconds)
                    raise
                self._observe("retried", seconds)
                await asyncio.sleep(s.retry_backoff_s * 2**attempt)
                attempt += 1
                continue
            except PrometheusRejectedError:
                self._observe("rejected", time.monotonic() - started)
                raise
            self._observe("ok", time.monotonic() - started)
            return answer

    async def _once(self, path: str, form: dict[str, str]) -> list[Series]:
        try:
            response = await self._client.post(
                path, data=form, headers=bearer_header(self._settings.bearer_token_file)
            )
        except httpx.TimeoutException as exc:
            raise PrometheusUnavailableError(
                f"{path}: timed out after {self._settings.timeout_s:g} s"
            ) from exc
        except httpx.TransportError as exc:
            raise PrometheusUnavailableError(f"{path}: {exc!r}") from exc
        except OSError as exc:  # the token file unreadable
            raise PrometheusRejectedError(f"bearer token file: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise PrometheusUnavailableError(f"{path}: answered {response.status_code}")
        try:
            body = response.json()
        except ValueError as exc:
            raise PrometheusRejectedError(
                f"{path}: answered {response.status_code} with no JSON: {response.text[:200]!r}"
            ) from exc
        if response.status_code >= 400 or body.get("status") != "success":
            raise PrometheusRejectedError(
                f"{path}: answered {response.status_code}: {body.get('errorType')}: {body.get('error')}"
            )
        return _series(body.get("data"))
