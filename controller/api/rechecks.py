"""Subscriptions are re-checked against their creators' access: suspended when lost, resumed when back.

A subscription delivers what happens in its namespace (every namespace, for a cluster-wide
one) to whoever its creator chose. Creating one needs read access there
(:mod:`controller.api.notifications`); :class:`CreatorRecheck` asks again every
``api.subscription_recheck_s`` seconds, with the same question and the same reviewer the API
asks a caller — may the creator list MPIJobs or TrainJobs there? — for the creator as recorded
at creation (username, uid, groups, extra attributes: :mod:`controller.api.creators`). Answers
come through the API's reviewer, so they are cached like any other (``api.review_ttl_s``), and one
creator with many subscriptions in one namespace costs one decision.

- **no** for an active subscription: it is ``suspended`` (never deleted), with the reason in
  ``disabled_reason`` and a notice; the notify consumer stops matching it and the dispatcher
  holds its pending deliveries;
- **yes** for a suspended one: it is ``active`` again, with a notice, and its pending
  deliveries are due at once;
- a reviewer that cannot answer (the Kubernetes API is down): nothing changes, and the next
  round asks again — an outage of the API server must not silence every alert.

With ``api.auth=static`` the question is the static user's ``namespaces`` list (a user whose
token was removed reads nothing); with ``off`` everyone reads everything, so nothing is ever
suspended. Several API replicas may re-check at once: each change is a conditional update, so
a subscription is suspended (or resumed) once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import AccessReviewer, Principal, ReviewUnavailableError
from controller.api.creators import creator_of, lost_access
from controller.contract.clock import Clock, pause, utcnow
from controller.store import outbox, subscriptions
from controller.store.engine import UNAVAILABLE

__all__ = ["CONCURRENCY", "CreatorRecheck", "Rechecked"]

log = logging.getLogger(__name__)

CONCURRENCY = 8
"""Creators (with a namespace) reviewed at once in one round."""
Question = tuple[Principal, str | None]
"""May this creator list jobs in this namespace (``None``: in every namespace)?"""


@dataclass(frozen=True)
class Rechecked:
    """What one round did: ids suspended and resumed, and how many creators could not be asked."""

    suspended: tuple[str, ...] = ()
    resumed: tuple[str, ...] = ()
    unanswered: int = 0


class CreatorRecheck:
    """Re-checks every active or suspended subscription's creator, one round per ``interval_s``."""

    def __init__(
        self, engine: AsyncEngine, reviewer: AccessReviewer, interval_s: float, clock: Clock = utcnow
    ) -> None:
        self._engine = engine
        self._reviewer = reviewer
        self._interval_s = interval_s
        self._clock = clock

    async def run(self, stop: asyncio.Event) -> None:
        """A round now and every ``interval_s`` until ``stop`` is set; a failed round is logged."""
        while not stop.is_set():
            try:
                await self.round()
            except UNAVAILABLE as exc:
                log.warning("subscription re-check: the database did not answer: %s", exc)
            except Exception:  # the API goes on serving; the next round tries again
                log.exception("subscription re-check: the round failed")
            await pause(stop, self._interval_s)

    async def round(self) -> Rechecked:
        """Ask about every creator once; suspend and resume what their answers say."""
        async with self._engine.connect() as conn:
            subs = await subscriptions.rechecked_subscriptions(conn)
        verdicts = await self._ask({(creator_of(s), s.namespace) for s in subs})
        gone, back = {}, {}
        for sub in subs:
            verdict = verdicts.get((creator_of(sub), sub.namespace))
            if sub.state == "active" and verdict is False:
                gone[sub.id] = lost_access(sub)
            elif sub.state == "suspended" and verdict is True:
                back[sub.id] = f"resumed: its creator {sub.created_by} may read there again"
        if not (gone or back):
            return Rechecked(unanswered=sum(v is None for v in verdicts.values()))
        now = self._clock()
        async with self._engine.begin() as conn:
            suspended = await subscriptions.suspend(conn, gone, now)
            resumed = await subscriptions.resume(conn, back, now)
            for subscription_id in resumed:
                await outbox.resume(conn, subscription_id, now)
        for subscription_id in suspended:
            log.warning("subscription %s %s", subscription_id, gone[subscription_id])
        for subscription_id in resumed:
            log.info("subscription %s %s", subscription_id, back[subscription_id])
        unanswered = sum(v is None for v in verdicts.values())
        return Rechecked(tuple(suspended), tuple(resumed), unanswered)

    async def _ask(
        self, questions: set[tuple[Principal, str | None]]
    ) -> dict[tuple[Principal, str | None], bool | None]:
        """May each creator list jobs in each namespace? ``None`` where the reviewer could not tell."""
        gate = asyncio.Semaphore(CONCURRENCY)

        async def ask(creator: Principal, namespace: str | None) -> bool | None:
            async with gate:
                try:
                    return await self._reviewer.can_list(creator, namespace)
                except ReviewUnavailableError as exc:
                    log.warning("subscription re-check: cannot ask about %s: %s", creator.username, exc)
                    return None

        ordered = sorted(questions, key=lambda q: (q[0].username, q[1] or ""))
        answers = await asyncio.gather(*(ask(*q) for q in ordered))
        return dict(zip(ordered, answers, strict=True))
