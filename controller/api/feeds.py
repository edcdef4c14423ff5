"""One poll of the history store per watched run, shared by every stream of that run in this process.

A thousand ``wait`` clients cost one poll a tick, whatever runs they watch: every ``poll_s``, the
timelines of every watched run (:class:`~controller.store.livefeed.TimelineTail`) are read together
(:func:`~controller.store.livefeed.poll_tails`); each :class:`RunFeed` keeps what was found for its
run as batches (in the order found, each in time order, each ending at a timeline id), and wakes
its streams. A stream reads the batches from the
start, skipping entries at or below its own resume point, so a stream joining late, or resuming
with an id another replica sent, gets what it lacks and nothing twice. A failed poll (the
database away, the pool exhausted) is logged and retried at the next tick; the streams stay open.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from controller.store import livefeed
from controller.store.models import FindingRow, Run, TimelineEntryRow

__all__ = ["Batch", "RunFeed", "RunFeeds"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Batch:
    """Entries one poll handed on, in time order; ``cursor`` is the highest timeline id among them."""

    cursor: int
    entries: Sequence[TimelineEntryRow]
    findings: dict[str, FindingRow]


class RunFeed:
    """A run's timeline as this process has seen it so far, polled while anyone watches."""

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.batches: list[Batch] = []
        self.run: Run | None = None
        self.polls = 0
        """Polls that succeeded; nothing is known of the run before the first."""
        self.settled = False
        self.firing: Sequence[FindingRow] = ()
        self.over_since: float | None = None
        self.tick = asyncio.Event()
        """Set (and replaced) after every poll, failed ones too."""
        self.watchers = 0
        self.tail = livefeed.TimelineTail(uid)

    @property
    def over(self) -> bool:
        """The run ended (or was deleted) and every entry up to now has been handed on."""
        run = self.run
        return (
            run is not None
            and self.settled
            and (run.phase in livefeed.TERMINAL or run.deleted_at is not None)
        )

    def explained(self, grace_s: float) -> bool:
        """Over, and nothing more to wait for: not a failure, a failure with a firing finding, or a
        failure that no finding explained within ``grace_s`` of the feed seeing it end."""
        run = self.run
        if run is None or not self.over or self.over_since is None:
            return False
        if run.phase != "Failed" or run.deleted_at is not None or self.firing:
            return True
        return time.monotonic() - self.over_since >= grace_s

    def absorb(self, found: livefeed.TailPoll) -> None:
        """What one poll found."""
        if found.entries:
            ordered = sorted(found.entries, key=lambda e: (e.at, e.id))
            self.batches.append(Batch(self.tail.cursor, ordered, found.findings))
        self.run, self.settled = found.run, found.settled
        if self.over:
            self.over_since = self.over_since or time.monotonic()
        self.polls += 1

    def wake(self) -> None:
        """Wake the streams of this run (after every poll, failed ones too)."""
        tick, self.tick = self.tick, asyncio.Event()
        tick.set()


class RunFeeds:
    """The feeds of every run watched in this process, all polled together once a tick (three
    statements whatever their number) by one task that runs while any is watched."""

    def __init__(self, engine: AsyncEngine, poll_s: float) -> None:
        self._engine = engine
        self._poll_s = poll_s
        self._feeds: dict[str, RunFeed] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, uid: str) -> RunFeed:
        """The feed of run ``uid``, polled from the next tick on; pair with :meth:`leave`."""
        feed = self._feeds.get(uid)
        if feed is None:
            feed = self._feeds[uid] = RunFeed(uid)
        feed.watchers += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow(), name="event feeds")
        return feed

    def leave(self, feed: RunFeed) -> None:
        feed.watchers -= 1

    async def _follow(self) -> None:
        while True:
            for uid in [uid for uid, feed in self._feeds.items() if feed.watchers <= 0]:
                del self._feeds[uid]
            if not self._feeds:  # checked and stopped with no await between: a new watcher starts anew
                self._task = None
                return
            feeds = list(self._feeds.values())
            try:
                found = await livefeed.poll_tails(self._engine, [feed.tail for feed in feeds])
                for feed, poll in zip(feeds, found, strict=True):
                    feed.absorb(poll)
                ended = [feed for feed in feeds if feed.over]
                if ended:
                    async with self._engine.connect() as conn:
                        firing = await livefeed.firing_findings(conn, [feed.uid for feed in ended])
                    for feed in ended:
                        feed.firing = firing.get(feed.uid, [])
            except Exception as exc:  # the streams stay open; the next tick tries again
                log.warning("event stream poll of %d runs failed: %s", len(feeds), exc)
            for feed in feeds:
                feed.wake()
            await asyncio.sleep(self._poll_s)
