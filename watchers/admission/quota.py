"""The quota check of a job being created: look its namespace up, in a time budget, and judge.

A CREATE of an MPIJob or TrainJob that is not suspended is judged (:mod:`.demand`, :mod:`.fit`)
against its namespace's ResourceQuotas and LimitRanges, listed from the API server through
:class:`~controller.kube.gateway.KubeGateway` in a thread of a small pool of its own. The
lookup never holds the review up for long:

- at most ``quota_budget_s`` is waited for it; then the review is answered allowed, with no
  warning (outcome ``timeout``). The lookup goes on in its thread (bounded by its own read
  timeout) and fills the cache for the next review;
- one lookup per namespace at a time: reviews that arrive meanwhile wait for the same one;
- a namespace's answer is reused for ``quota_cache_s`` (at most :data:`MAX_CACHED` namespaces);
- lookups (two LISTs each) start at most ``quota_lookups_per_s`` a second over all namespaces
  (a token bucket holding as many): reviews of many namespaces cannot become a LIST storm on the
  API server. A review whose namespace would need a lookup beyond that is judged against the
  namespace's last answer if one is still kept (however old), else allowed with no warning
  (outcome ``throttled``);
- an API error (forbidden, unavailable) answers allowed with no warning (outcome ``failed``).

What the review says is bounded before it is judged: the namespace is an RFC 1123 label (checked
by :mod:`.reviews`, and again by the gateway's paths), quantities are read capped
(:mod:`controller.contract.quantities`) and replicas too (:mod:`.demand`). A job whose requests
or limits the check cannot read as quantities is ``unjudged``: allowed, in ``warn`` and ``deny``
mode alike, with a warning naming the values (the API server refuses what is not a quantity at
all; a number the check cannot read is not a reason to refuse).

Every check counts one outcome in ``mpijc_admission_quota_checks_total``: ``fits``, ``warned``,
``denied``, ``suspended`` (not judged: Kueue's ClusterQueue decides), ``unjudged``, ``timeout``,
``throttled``, ``failed``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Literal

from controller.contract.names import is_namespace
from controller.contract.settings import AdmissionSettings
from controller.kube.errors import APIError
from controller.kube.gateway import KubeGateway
from controller.kube.resources import LIMITRANGES, RESOURCEQUOTAS, RawObject
from watchers.admission.demand import demand, suspended
from watchers.admission.fit import container_defaults, problems
from watchers.admission.metrics import AdmissionMetrics

__all__ = ["Lookup", "LookupRate", "QuotaCheck", "QuotaJudgement", "Rules", "Throttled", "gateway_lookup"]

log = logging.getLogger(__name__)

QuotaOutcome = Literal["fits", "warned", "denied", "suspended", "unjudged", "timeout", "throttled", "failed"]
Mode = Literal["warn", "deny"]


@dataclass(frozen=True)
class Rules:
    """A namespace's ResourceQuotas and LimitRanges, as listed."""

    quotas: list[RawObject]
    limit_ranges: list[RawObject]


Lookup = Callable[[str], Rules]
"""Lists a namespace's rules (blocking; run in a thread); raises :class:`APIError`."""

LOOKUP_THREADS: Final = 4
"""Lookups in flight at once, over all namespaces; more wait their turn (within the budget)."""
READ_TIMEOUT_S: Final = 10.0
"""Silence after which a lookup's thread gives up (long after the review was answered)."""
MAX_CACHED: Final = 4096
"""Namespaces kept in the cache; beyond it the stale entries go, then all."""


class Throttled(Exception):
    """No lookup may start now (``quota_lookups_per_s``) and no earlier answer is kept."""


class LookupRate:
    """A token bucket: ``per_s`` lookups a second, as many at once; ``per_s`` 0 means no bound."""

    def __init__(self, per_s: float, clock: Callable[[], float]) -> None:
        self.per_s, self._clock = per_s, clock
        self._tokens, self._at = max(1.0, per_s), clock()

    def take(self) -> bool:
        """Whether a lookup may start now (a token is taken if so)."""
        if self.per_s <= 0:
            return True
        now = self._clock()
        self._tokens = min(max(1.0, self.per_s), self._tokens + (now - self._at) * self.per_s)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


def gateway_lookup(gateway: KubeGateway) -> Lookup:
    """A :data:`Lookup` that lists through ``gateway`` (which should not retry: the budget is short)."""

    def lookup(namespace: str) -> Rules:
        quotas, _ = gateway.list(RESOURCEQUOTAS, namespace, read_timeout_s=READ_TIMEOUT_S)
        limit_ranges, _ = gateway.list(LIMITRANGES, namespace, read_timeout_s=READ_TIMEOUT_S)
        return Rules(quotas, limit_ranges)

    return lookup


@dataclass(frozen=True)
class QuotaJudgement:
    """What the check says of one job: ``problems`` (sentences), and whether they refuse it."""

    outcome: QuotaOutcome
    problems: tuple[str, ...] = ()

    @property
    def denied(self) -> bool:
        return self.outcome == "denied"


class QuotaCheck:
    """Judges jobs being created against their namespace's quota (see the module)."""

    def __init__(
        self,
        lookup: Lookup,
        metrics: AdmissionMetrics,
        *,
        mode: Mode = "warn",
        budget_s: float = 1.0,
        cache_s: float = 5.0,
        lookups_per_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup, self.metrics, self.mode = lookup, metrics, mode
        self.budget_s, self.cache_s, self._clock = budget_s, cache_s, clock
        self.rate = LookupRate(lookups_per_s, clock)
        self._pool = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="mpijc-quota")
        self._cache: dict[str, tuple[float, Rules]] = {}
        self._pending: dict[str, asyncio.Future[Rules]] = {}

    @classmethod
    def from_settings(
        cls, settings: AdmissionSettings, lookup: Lookup, metrics: AdmissionMetrics
    ) -> QuotaCheck:
        """The check ``settings`` ask for (``quota_check`` warn or deny; ``off`` is the caller's to skip)."""
        return cls(
            lookup,
            metrics,
            mode="deny" if settings.quota_check == "deny" else "warn",
            budget_s=settings.quota_budget_s,
            cache_s=settings.quota_cache_s,
            lookups_per_s=settings.quota_lookups_per_s,
        )

    def close(self) -> None:
        """Stop the lookup threads (one still waiting on the API server ends by its read timeout)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def judge(self, kind: str, namespace: str, obj: Mapping[str, Any]) -> QuotaJudgement:
        """The judgement of ``obj`` (a ``kind`` being created in ``namespace``), counted."""
        judgement = await self._judge(kind, namespace, obj)
        self.metrics.quota_checks.labels(judgement.outcome).inc()
        return judgement

    async def _judge(self, kind: str, namespace: str, obj: Mapping[str, Any]) -> QuotaJudgement:
        if suspended(obj):
            return QuotaJudgement("suspended")
        if not is_namespace(namespace):  # the review is checked first: this is the belt to its braces
            return QuotaJudgement(
                "unjudged", (f"the quota check cannot judge this {kind}: no valid namespace",)
            )
        try:
            rules = await asyncio.wait_for(asyncio.shield(self._rules(namespace)), self.budget_s)
        except TimeoutError:
            log.info("quota of %s not looked up within %g s: allowed unchecked", namespace, self.budget_s)
            return QuotaJudgement("timeout")
        except Throttled:
            log.info("quota of %s not looked up: over %g lookups a second", namespace, self.rate.per_s)
            return QuotaJudgement("throttled")
        except APIError as exc:
            log.warning("quota of %s not looked up: %s; allowed unchecked", namespace, exc)
            return QuotaJudgement("failed")
        try:
            needs = demand(kind, obj, container_defaults(rules.limit_ranges))
            if needs.unreadable:
                return QuotaJudgement(
                    "unjudged",
                    (f"the quota check cannot judge this {kind}: {', '.join(needs.unreadable)} "
                     "not read as quantities",),
                )  # fmt: skip
            found = problems(needs, rules.quotas, rules.limit_ranges)
        except ArithmeticError as exc:  # quantities are capped: a sum should not fail; if one does, say so
            log.warning("quota of a %s in %s not judged: %r", kind, namespace, exc)
            return QuotaJudgement("unjudged", (f"the quota check cannot judge this {kind}: its amounts",))
        if not found:
            return QuotaJudgement("fits")
        return QuotaJudgement("denied" if self.mode == "deny" else "warned", tuple(found))

    def _rules(self, namespace: str) -> asyncio.Future[Rules]:
        """The namespace's rules: cached, being looked up, or a new lookup."""
        loop = asyncio.get_running_loop()
        cached = self._cache.get(namespace)
        if cached is not None and self._clock() - cached[0] < self.cache_s:
            done: asyncio.Future[Rules] = loop.create_future()
            done.set_result(cached[1])
            return done
        pending = self._pending.get(namespace)
        if pending is not None:
            return pending
        if not self.rate.take():
            stale: asyncio.Future[Rules] = loop.create_future()
            if cached is not None:  # older than cache_s, and still better than no judgement
                stale.set_result(cached[1])
            else:
                stale.set_exception(Throttled(namespace))
            return stale
        started = self._clock()
        future = loop.run_in_executor(self._pool, self._lookup, namespace)
        self._pending[namespace] = future

        def finished(f: asyncio.Future[Rules]) -> None:
            self._pending.pop(namespace, None)
            if not f.cancelled() and f.exception() is None:
                self._remember(namespace, started, f.result())

        future.add_done_callback(finished)
        return future

    def _remember(self, namespace: str, at: float, rules: Rules) -> None:
        if len(self._cache) >= MAX_CACHED:
            now = self._clock()
            self._cache = {ns: entry for ns, entry in self._cache.items() if now - entry[0] < self.cache_s}
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
        self._cache[namespace] = (at, rules)
