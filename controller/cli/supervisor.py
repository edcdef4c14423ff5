"""``up``: every part of the controller in its own process, as the Deployments run them.

The watchers, each consumer role and the API run as child processes of ``up`` (``watch``,
``consume --only <role>``, ``api``), so a laptop uses every core the way a cluster does. ``up``
starts the embedded services once, migrates and declares the streams, then passes the
services' URLs to the children. It stops them all on SIGINT/SIGTERM (SIGTERM, then SIGKILL
after a grace period); when a child exits on its own, ``up`` says which and with what status,
stops the others and exits non-zero. Children are asked by the kernel to stop if ``up`` dies
without a chance to stop them (``PR_SET_PDEATHSIG``), so a killed ``up`` leaves no orphans.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.cli.embedded import die_with_this_process

log = logging.getLogger("mpijob_controller.up")


@dataclass(frozen=True)
class Child:
    """One process ``up`` runs: a name for messages, and its command line arguments."""

    name: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None = None


async def _start(child: Child, env: Mapping[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        *child.args,
        env={**env, **(child.env or {})},
        preexec_fn=die_with_this_process(signal.SIGTERM),
    )


async def supervise(
    children: Sequence[Child], env: Mapping[str, str], stop: asyncio.Event, grace_s: float = 20.0
) -> int:
    """Run ``children`` until ``stop`` is set or one exits; stop the rest. Exit status for ``up``."""
    processes = {child.name: await _start(child, env) for child in children}
    log.info("up: %s", ", ".join(f"{name} (pid {p.pid})" for name, p in processes.items()))
    exits = {asyncio.create_task(process.wait()): name for name, process in processes.items()}
    stopping = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*exits, stopping], return_when=asyncio.FIRST_COMPLETED)
    ended = [(exits[task], task.result()) for task in done if task in exits]
    for name, status in ended:
        print(
            f"mpijob-controller up: {name} exited with status {status}; stopping the others", file=sys.stderr
        )
    for process in processes.values():
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(grace_s):
            await asyncio.gather(*(process.wait() for process in processes.values()))
    except TimeoutError:
        for name, process in processes.items():
            if process.returncode is None:
                print(f"mpijob-controller up: {name} did not stop in {grace_s:g} s; killed", file=sys.stderr)
                process.kill()
        await asyncio.gather(*(process.wait() for process in processes.values()))
    stopping.cancel()
    return 1 if ended else 0
