"""A follow stores a quiet container's line as soon as it is read, and what a chatty container
writes while its last batch is recent goes out together in one batch: held for up to
``linger_s``, or less once a batch's worth has arrived or the stream ended. Real client → simulated API server →
real NATS."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from controller.contract.settings import LogSettings
from controller.testing.waits import until
from tests.log_fixtures import Logged, stored
from watchers import following

LINGER_S = 5.0
"""The most it may be, longer than the waits below for what must not linger."""


async def test_a_quiet_line_goes_at_once_and_what_arrives_while_lingering_goes_together(
    logged: Logged,
) -> None:
    run = logged.run("linger")
    namespace, pod, container = run.pod(0)
    chatty = [f"step {i} " + "x" * 200 for i in range(30)]  # about 6 KiB: more than a batch's worth

    async def count(n: int) -> bool:
        return len(await logged.texts(run.job)) >= n

    log_settings = LogSettings(retry_s=0.05, linger_s=LINGER_S, batch_max_bytes=4096)
    async with logged.following(log_settings) as follow:
        logged.sim.set_log(namespace, pod, container, "started\n")
        follow.add(run)
        await until(lambda: count(1), 10.0)  # the first line of a quiet container: at once
        logged.sim.append_log(namespace, pod, container, "epoch 1\n")  # within the linger: held
        for line in chatty:  # each a write of its own; a batch's worth ends the linger
            logged.sim.append_log(namespace, pod, container, f"{line}\n")
        await until(lambda: count(2 + 17), LINGER_S - 1)  # 4096 bytes: "epoch 1" and 17 of 240 bytes
        logged.sim.end_log_follows()  # and so does the end of the stream, for what came after
        await until(lambda: count(32), LINGER_S - 1)
    batches = await stored(logged.nc, logged.topology, run.job)
    assert [line.text for line in batches[0].lines] == ["started"]
    assert [line.text for line in batches[1].lines][:2] == ["epoch 1", chatty[0]]
    assert [line.text for batch in batches for line in batch.lines] == ["started", "epoch 1", *chatty]


class _OneRead:
    """A followed log that hands over one chunk, then waits for more until closed."""

    def __init__(self) -> None:
        self.handed = threading.Event()
        self.closed = threading.Event()
        self.reads = 0

    def read(self, size: int = 0) -> bytes:
        self.reads += 1
        if self.reads == 1:
            return b"2026-11-26T06:34:01.000000000Z early\n"
        self.handed.set()  # the first chunk is in the pump's buffer
        self.closed.wait()
        return b""

    def caught_up(self) -> bool:
        return True

    def close(self) -> None:
        self.closed.set()


async def test_what_a_pump_read_before_its_first_take_is_taken_without_more_reads() -> None:
    follow = _OneRead()
    with ThreadPoolExecutor(1) as executor:
        pump = following._Pump(follow, executor, 4096)
        try:
            await asyncio.to_thread(follow.handed.wait, 10.0)  # read before any take waited for it
            assert await asyncio.wait_for(pump.take(), 10.0) == b"2026-11-26T06:34:01.000000000Z early\n"
        finally:
            pump.close()


class _Trickle:
    """A followed log that a container prints into line by line: each read hands over every line
    printed since the last (as a connection's read hands over every chunk that arrived), waiting
    for one when there is none."""

    def __init__(self, whole: bool = True) -> None:
        self.printed: list[bytes] = []
        self.cond = threading.Condition()
        self.reads = 0
        self.closed = False
        self.whole = whole
        """Each read ends where a write did (False: a backlog the reads cut)."""

    def print(self, line: bytes) -> None:
        with self.cond:
            self.printed.append(line)
            self.cond.notify()

    def read(self, size: int = 0) -> bytes:
        with self.cond:
            while not (self.printed or self.closed):
                self.cond.wait()
            self.reads += 1
            lines, self.printed = self.printed, []
            return b"".join(lines)

    def caught_up(self) -> bool:
        return self.whole

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify()


LINES = [b"2026-11-26T06:34:01.%09dZ step %d\n" % (i, i) for i in range(6)]


@contextlib.asynccontextmanager
async def _first_line_taken(follow: _Trickle) -> AsyncIterator[following._Pump]:
    """A pump over ``follow`` (its thread parked until asked, however slow the box), the first
    of :data:`LINES` printed and taken; closed on the way out."""
    with ThreadPoolExecutor(1) as executor:
        pump = following._Pump(follow, executor, 4096)
        try:
            follow.print(LINES[0])
            assert await asyncio.wait_for(pump.take(), 10.0) == LINES[0]
            yield pump
        finally:
            pump.close()


async def test_lines_printed_while_a_take_lingers_are_read_once_when_it_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(following, "PARK_S", 60.0)
    follow = _Trickle()
    async with _first_line_taken(follow) as pump:
        assert follow.reads == 1
        loop = asyncio.get_running_loop()
        take = asyncio.ensure_future(pump.take(loop.time() + 0.5))
        for line in LINES[1:]:  # while the take lingers and the thread is parked
            follow.print(line)
            await asyncio.sleep(0.02)  # time a thread reading would take to read it
        assert await asyncio.wait_for(take, 10.0) == b"".join(LINES[1:])
        assert follow.reads == 2  # one read for the five lines, when the take asked


async def test_a_backlog_is_read_on_while_a_take_lingers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(following, "PARK_S", 60.0)  # a parked thread would not read until asked
    follow = _Trickle(whole=False)
    async with _first_line_taken(follow) as pump:
        loop = asyncio.get_running_loop()
        take = asyncio.ensure_future(pump.take(loop.time() + 60.0))
        for n, line in enumerate(LINES[1:], start=2):  # each read as it arrives
            follow.print(line)
            await until(lambda n=n: follow.reads == n, 10.0)
        take.cancel()
