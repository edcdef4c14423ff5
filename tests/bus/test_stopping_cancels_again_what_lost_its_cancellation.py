"""Every stop of a set of tasks (a rules partition handed over, a dispatcher's late sends, the
watchers' log reads) goes through ``controller.contract.cancelling``: a task that loses its
cancellation — as Python 3.11's ``asyncio.wait_for`` loses one landing as its answer arrives, and
nats-py waits for every answer with it — is cancelled again instead of holding its stopper up."""

from __future__ import annotations

import asyncio
import time

from controller.contract.cancelling import cancel_and_wait, stop_within


async def _loses_its_first_cancellation(cancels: list[float]) -> None:
    """Goes on for a minute after its first cancellation, as a lost one does; ends on the next."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancels.append(time.monotonic())
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancels.append(time.monotonic())
        raise


async def test_a_task_that_lost_its_cancellation_is_cancelled_again() -> None:
    cancels: list[float] = []
    task = asyncio.create_task(_loses_its_first_cancellation(cancels))
    await asyncio.sleep(0)
    async with asyncio.timeout(10):
        await cancel_and_wait([task], again_s=0.05)
    assert task.cancelled()
    assert len(cancels) == 2


async def test_stop_within_lets_tasks_end_on_their_own_before_it_cancels() -> None:
    stop = asyncio.Event()

    async def ends_when_told() -> str:
        await stop.wait()
        await asyncio.sleep(0.05)  # the batch in hand settled first
        return "settled"

    cancels: list[float] = []
    polite = asyncio.create_task(ends_when_told())
    stubborn = asyncio.create_task(_loses_its_first_cancellation(cancels))
    await asyncio.sleep(0)
    stop.set()
    began = time.monotonic()
    async with asyncio.timeout(10):
        await stop_within([polite, stubborn], timeout_s=0.5)
    assert polite.result() == "settled"  # not cancelled: it had its time
    assert stubborn.cancelled() and len(cancels) == 2
    assert cancels[0] >= began + 0.45  # the stubborn one was given the time too, then cancelled


async def test_stop_within_returns_at_once_for_tasks_already_done() -> None:
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    async with asyncio.timeout(1):
        await stop_within([done], timeout_s=30)
