"""``up``: the parts of the controller in child processes, kept running.

The API, the watchers and the consumer roles run as child processes of ``up`` (``api``,
``watch``, ``consume --only <role> …``), so a laptop uses its cores the way a cluster does. The
consumer roles share two processes (:func:`~controller.cli.commands.cmd_up`): those on a failure's
path (history, rules) one, the others (audit, notify, dispatch, k8s-events) another; each role
in them connects to NATS as its own identity, as it does in its own Deployment. A Python process
costs 100 to 125 MiB and 1 to 1.5 s of CPU before it holds any data, so five processes instead of eight
start sooner on a small machine and hold less (``benchmarks/README.md``, "``up`` as users run
it"). Further dispatchers (``MPIJC_UP__DISPATCHERS``) run in processes of their own, to use more
cores.

``up`` supervises them as Kubernetes supervises the pods: a part that exits on its own (a
crash, an OOM kill, a ``kill -9``, a failed loop of one of its roles) is logged with its status
and started again after a jittered backoff (:class:`~controller.contract.backoff.Backoff`,
``MPIJC_UP__RESTART_INITIAL_S`` doubling up to ``MPIJC_UP__RESTART_MAX_S``), never taking the
other parts down. A part that ran ``MPIJC_UP__HEALTHY_AFTER_S`` before it exited starts over
from the initial delay. A part that keeps exiting at once (bad settings, an unreachable cluster)
keeps being restarted at the capped delay, and each restart's log line says how many starts in
a row failed at once, so the cause is in the log and the part comes back on its own once the
cause is fixed. Every restart counts in ``mpijc_up_restarts_total{part}`` (a part of several
roles is named by them: ``history+rules``), served by ``up`` on ``MPIJC_METRICS__UP_PORT``.

The API is started first, beside it only the process of history and rules, and the other parts
once it answers (:attr:`Child.serves`): a restart on a small machine answers reads in about the
time one process takes to start, not the time all take to start together (the watchers started
beside the API made its answer wait two to three times as long on a loaded 2-core box:
``benchmarks/README.md``, "``up`` as users run it"), and history and rules, the last part a
failure waits for, do not wait for the API's answer before their imports and warm start
(``benchmarks/README.md``, "``up``'s start, phase by phase"). The process of the roles off a
failure's path to the API (audit, notify, dispatch, k8s-events) runs at a lower CPU priority
(:attr:`Child.nice`, :data:`BACKGROUND_NICE`): when the parts compete for the CPU — a start, a
restart's relist and warm starts on a small machine — the watchers, rules, history and API get
it first, and on an idle machine nothing changes.

SIGINT/SIGTERM stops them all: SIGTERM, then SIGKILL after ``MPIJC_UP__STOP_GRACE_S``; ``up``
then exits 0. Children are asked by the kernel to stop if ``up`` dies without a chance to stop
them (``PR_SET_PDEATHSIG``), so a killed ``up`` leaves no orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from controller.cli.embedded.processes import die_with_this_process
from controller.contract.backoff import Backoff
from controller.contract.clock import pause
from controller.contract.settings import UpSettings
from controller.metrics import MetricGroup

log = logging.getLogger("mpijob_controller.up")

FAILING_AT_ONCE = 3
"""Starts in a row that ended before ``healthy_after_s`` after which the log calls the part failing."""
READY_WAIT_S = 15.0
"""Longest wait for a part's ``serves`` port before the parts after it are started anyway."""
BACKGROUND_NICE = 10
"""Added to the nice value of the parts off a failure's path: under contention each gets about a
tenth of the CPU share of a part at the default priority (the kernel's weights), never none."""


@dataclass(frozen=True)
class Child:
    """One process ``up`` runs: a name for messages, and its command line arguments."""

    name: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None = None
    serves: tuple[str, int] | None = None
    """Where the part accepts connections once it is ready (host, port): the parts listed after
    it are started once it does, so on a busy machine it does not share the start with them."""
    nice: int = 0
    """Added to the part's nice value (``os.nice`` before it runs): how much it yields the CPU to
    the other parts when they compete for it."""


class UpMetrics(MetricGroup):
    """What ``up`` itself reports: how often it restarted each part."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.restarts = Counter(
            "mpijc_up_restarts_total",
            "Parts of `up` started again after they exited on their own, by part",
            ["part"],
            registry=self.registry,
        )


def _before_exec(nice: int) -> Callable[[], None] | None:
    """What the child runs between fork and exec: stop with ``up`` (where the platform can), and
    lower its priority by ``nice``."""
    die = die_with_this_process(signal.SIGTERM)
    if not nice:
        return die

    def prepare() -> None:
        if die is not None:
            die()
        os.nice(nice)

    return prepare


async def _start(child: Child, env: Mapping[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        *child.args,
        env={**env, **(child.env or {})},
        preexec_fn=_before_exec(child.nice),
    )


async def _stop(child: Child, process: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; returns once the process is gone."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(grace_s):
            await process.wait()
    except TimeoutError:
        log.warning("up: %s (pid %d) did not stop in %g s; killed", child.name, process.pid, grace_s)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def _keep_running(
    child: Child, env: Mapping[str, str], stop: asyncio.Event, policy: UpSettings, metrics: UpMetrics
) -> None:
    """Run ``child`` until ``stop`` is set, starting it again (backed off) whenever it exits."""
    loop = asyncio.get_running_loop()
    backoff = Backoff(policy.restart_initial_s, policy.restart_max_s)
    at_once = 0  # starts in a row that ended before healthy_after_s
    restarted = False
    while not stop.is_set():
        try:
            process = await _start(child, env)
        except OSError as exc:
            log.error("up: %s could not be started: %s", child.name, exc)
            status, ran_s = f"not started ({exc})", 0.0
        else:
            if restarted:
                metrics.restarts.labels(child.name).inc()
                log.info("up: %s started again (pid %d)", child.name, process.pid)
            started = loop.time()
            exited = asyncio.ensure_future(process.wait())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait([exited, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if process.returncode is None:  # stop is set
                exited.cancel()
                await _stop(child, process, policy.stop_grace_s)
                return
            status, ran_s = f"status {process.returncode}", loop.time() - started
        if stop.is_set():
            return
        if ran_s >= policy.healthy_after_s:
            backoff.reset()
            at_once = 0
        else:
            at_once += 1
        delay = backoff.next_delay()
        why = (
            f"; it failed {at_once} times in a row within {policy.healthy_after_s:g} s of starting: "
            f"check its settings and the lines above (retrying every {policy.restart_max_s:g} s at most)"
            if at_once >= FAILING_AT_ONCE
            else ""
        )
        log.warning(
            "up: %s exited with %s after %.1f s; starting it again in %.1f s%s",
            child.name,
            status,
            ran_s,
            delay,
            why,
        )
        restarted = True
        if await pause(stop, delay):
            return


async def supervise(
    children: Sequence[Child],
    env: Mapping[str, str],
    stop: asyncio.Event,
    policy: UpSettings,
    metrics: UpMetrics,
) -> int:
    """Keep ``children`` running until ``stop`` is set, then stop them all. Exit status for ``up``."""
    log.info("up: starting %s", ", ".join(child.name for child in children))
    running: list[asyncio.Task[None]] = []
    for child in children:
        running.append(asyncio.create_task(_keep_running(child, env, stop, policy, metrics)))
        if child.serves is not None:
            await _until_serving(*child.serves, stop)
    await asyncio.gather(*running)
    return 0


async def _until_serving(host: str, port: int, stop: asyncio.Event) -> None:
    """Wait until ``host:port`` accepts a connection, ``stop`` is set, or :data:`READY_WAIT_S`."""
    address = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(READY_WAIT_S):
            while not stop.is_set():
                try:
                    _, writer = await asyncio.open_connection(address, port)
                except OSError:
                    await asyncio.sleep(0.02)
                    continue
                writer.close()
                return
