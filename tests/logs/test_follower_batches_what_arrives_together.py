"""A follow stores a quiet container's line as soon as it is read, and what a chatty container
writes while its last batch is recent goes out together in one batch: held for up to
``linger_s``, or less once a batch's worth has arrived or the stream ended. Real client → simulated API server →
real NATS."""

from __future__ import annotations

from controller.contract.settings import LogSettings
from controller.testing.waits import until
from tests.log_fixtures import Logged, stored

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
