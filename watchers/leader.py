"""Leader election through a ``coordination.k8s.io/v1`` Lease, so only one replica publishes.

The algorithm is client-go's ``leaderelection`` with a Lease lock:

* a replica that finds no Lease creates one naming itself; one that finds a Lease held by
  someone else waits until that holder has not renewed for ``leaseDurationSeconds`` — judged
  by when *this* replica last saw the record change (its own clock), never by comparing the
  holder's ``renewTime`` with local time, so clock skew between nodes cannot cause two leaders;
* every write is a replace guarded by the Lease's ``metadata.resourceVersion``: of two
  replicas racing for an expired Lease, one gets 409 Conflict and stays a follower;
* the leader renews every ``renew_period_s``; if it cannot renew for ``lease_duration_s -
  renew_period_s`` (client-go's renew deadline) it steps down — cancels the leading coroutine —
  before any follower may take over, and then competes again like any follower;
* a leader stopped through ``stop`` releases the Lease (empty holder) so a follower takes over
  at its next attempt instead of after a whole lease duration. A cancelled ``run`` (a crash)
  does not: the others take over when the lease expires.

Time comes from an injected clock, so tests advance a fake clock instead of sleeping through
lease durations; only the short renew period is real waiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from controller.contract.clock import Clock, pause, utcnow
from controller.contract.settings import LeaderSettings
from controller.kube.errors import APIConflictError, APIError, APINotFoundError
from controller.kube.resources import LEASES, Lease, LeaseSpec

__all__ = ["LeaderElector", "LeaseGateway", "format_micro_time", "parse_micro_time"]

log = logging.getLogger(__name__)

"""Returns the current time, timezone-aware."""


def format_micro_time(moment: datetime) -> str:
    """A Kubernetes ``MicroTime``: ``2026-11-23T06:41:57.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> datetime:
    """Parse a ``MicroTime`` (or an RFC 3339 ``Time``) into an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class LeaseGateway(Protocol):
    """The Lease calls the elector makes (:class:`controller.kube.gateway.KubeGateway` implements them)."""

    def get_lease(self, namespace: str, name: str) -> Lease: ...
    def create_lease(self, namespace: str, body: Lease) -> Lease: ...
    def replace_lease(self, namespace: str, name: str, body: Lease) -> Lease: ...


class LeaderElector:
    """Competes for one Lease; runs a coroutine only while holding it."""

    def __init__(self, gateway: LeaseGateway, settings: LeaderSettings, *, clock: Clock = utcnow) -> None:
        self.gateway = gateway
        self.settings = settings
        self.identity = settings.identity
        self._clock = clock
        self._is_leader = False
        self.holder: str | None = None  # the holder seen at the last attempt
        self._observed_version: str | None = None
        self._observed_at: datetime | None = None
        self._renew_deadline = timedelta(
            seconds=max(settings.renew_period_s, settings.lease_duration_s - settings.renew_period_s)
        )

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    async def run(self, on_started_leading: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
        """Until ``stop`` is set: become leader, run ``on_started_leading()`` while leader, cancel it on loss.

        If the leading coroutine ends by itself, the Lease is released and ``run`` returns (or
        raises what the coroutine raised).
        """
        while not stop.is_set():
            if await self._attempt():
                if await self._lead(on_started_leading, stop):
                    return
                continue
            await pause(stop, self.settings.renew_period_s)

    async def _lead(self, on_started_leading: Callable[[], Awaitable[None]], stop: asyncio.Event) -> bool:
        """Lead until leadership is lost (False) or the work ends or ``stop`` is set (True)."""
        log.info(
            "%s became the leader of lease %s/%s",
            self.identity,
            self.settings.lease_namespace,
            self.settings.lease_name,
        )
        self._is_leader = True
        work = asyncio.ensure_future(on_started_leading())
        stopped = asyncio.ensure_future(stop.wait())
        last_renewal = self._clock()
        try:
            while True:
                await asyncio.wait(
                    {work, stopped}, timeout=self.settings.renew_period_s, return_when=asyncio.FIRST_COMPLETED
                )
                if stopped.done() or work.done():
                    await _cancel(work)
                    await self._release()
                    if not work.cancelled():
                        work.result()  # re-raise what the leading coroutine raised
                    return True
                if await self._attempt():
                    last_renewal = self._clock()
                elif (
                    self.holder not in (None, self.identity)
                    or self._clock() - last_renewal >= self._renew_deadline
                ):
                    log.warning(
                        "%s lost leadership (holder now %r); stepping down", self.identity, self.holder
                    )
                    return False
        finally:
            self._is_leader = False
            stopped.cancel()
            await _cancel(work)

    async def _attempt(self) -> bool:
        try:
            return await asyncio.to_thread(self._try_acquire_or_renew)
        except APIError as exc:
            log.warning(
                "%s could not acquire or renew lease %s: %s", self.identity, self.settings.lease_name, exc
            )
            return False

    def _try_acquire_or_renew(self) -> bool:
        """One round (blocking): True if this replica holds the Lease afterwards."""
        namespace, name = self.settings.lease_namespace, self.settings.lease_name
        now = self._clock()
        try:
            lease = self.gateway.get_lease(namespace, name)
        except APINotFoundError:
            body: Lease = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": name, "namespace": namespace},
                "spec": self._spec(now, acquired=now, transitions=0),
            }
            try:
                self._observe(self.gateway.create_lease(namespace, body), now)
            except APIConflictError:
                return False
            return True
        self._observe(lease, now)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder and holder != self.identity and not self._expired(spec, now):
            return False
        if holder == self.identity:
            acquired = parse_micro_time(spec["acquireTime"]) if spec.get("acquireTime") else now
            transitions = spec.get("leaseTransitions", 0)
        else:
            acquired, transitions = now, spec.get("leaseTransitions", 0) + 1
        try:
            updated = self.gateway.replace_lease(
                namespace, name, {**lease, "spec": self._spec(now, acquired, transitions)}
            )
        except APIConflictError:
            return False
        self._observe(updated, now)
        return True

    def _spec(self, now: datetime, acquired: datetime, transitions: int) -> LeaseSpec:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.settings.lease_duration_s)),
            "acquireTime": format_micro_time(acquired),
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: Lease, now: datetime) -> None:
        """Remember when the record last changed, by our clock: the basis of expiry."""
        version = (lease.get("metadata") or {}).get("resourceVersion")
        if version != self._observed_version or self._observed_at is None:
            self._observed_version = version
            self._observed_at = now
        self.holder = (lease.get("spec") or {}).get("holderIdentity") or None

    def _expired(self, spec: LeaseSpec, now: datetime) -> bool:
        duration = timedelta(seconds=spec.get("leaseDurationSeconds") or self.settings.lease_duration_s)
        return self._observed_at is not None and self._observed_at + duration <= now

    async def _release(self) -> None:
        """Give the Lease up (empty holder) so a follower need not wait for it to expire."""
        namespace, name = self.settings.lease_namespace, self.settings.lease_name
        now = self._clock()

        def release() -> None:
            lease = self.gateway.get_lease(namespace, name)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            released: LeaseSpec = {
                **spec,
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "renewTime": format_micro_time(now),
            }
            self.gateway.replace_lease(namespace, name, {**lease, "spec": released})

        try:
            await asyncio.to_thread(release)
            log.info("%s released lease %s/%s", self.identity, namespace, name)
        except APIError as exc:
            log.warning("%s could not release lease %s: %s", self.identity, name, exc)


async def _cancel(task: asyncio.Future[None]) -> None:
    """Cancel and wait for ``task`` without swallowing a cancellation of the caller."""
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
