"""No alarm for a run that recovers: the real pipeline, from stored output to delivered webhooks.

Followed output on ``LOGS`` → the rules' log reader → the rules consumer → ``findings.*`` → the
notify consumer → the outbox → the dispatcher → HTTP. A line a running job printed is evidence,
not a verdict: in a run that goes on and succeeds — a CUDA out-of-memory a batch-size search
caught, an NCCL connection retried, a DataLoader worker crash the loader got over — or behind a
quota refusal the operator retried until the quota freed, a subscriber to everything receives no
``finding.*`` at all (no firing, no resolved); a subscriber who asked for ``finding.observed`` by
name hears what was seen, worded as such. The same OOM followed by its pod ending non-zero is
``gpu-oom`` firing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
from nats.js import JetStreamContext

from consumers.notify.consumer import CONSUMER as NOTIFY_JOBS
from consumers.notify.consumer import FINDINGS_CONSUMER as NOTIFY_FINDINGS
from consumers.rules.service import CONSUMER as RULES
from controller.bus.streams import wait_until_consumed
from controller.contract.subjects import Topology
from controller.testing.events import (
    at,
    failed_launcher,
    job,
    k8s_event,
    launcher,
    log_batch,
    terminated,
    worker,
)
from controller.testing.notify import log_of, settled_log, subscribe
from controller.testing.receivers import Receiver
from tests.notify_fixtures import Notifying
from tests.rules.test_rules_consumer_reads_logs_live import observed, printed, running_and_read

OOM = "[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB."
NCCL_RETRIED = (
    "[1,2]<stderr>:pi-worker-1:58:121 [2] misc/socket.cc:484 NCCL WARN Net : Call to connect to "
    "10.42.1.7<43215> failed : Connection refused",
    "[1,2]<stderr>:pi-worker-1:58:121 [2] NCCL INFO Call to connect returned Connection refused, retrying",
)
LOADER_RESET = (
    "[1,0]<stderr>:ERROR: Unexpected segmentation fault encountered in worker.",
    "[1,0]<stderr>:DataLoader worker 3 restarted; skipping 1 batch",
)
GPU_QUOTA = (
    'worker pod created failed: pods "pi-worker-3" is forbidden: exceeded quota: team-a-gpus, '
    "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=24, limited: requests.nvidia.com/gpu=24"
)


async def _settled(js: JetStreamContext, topology: Topology) -> None:
    """Every message so far taken in by the rules and both notify durables (the outbox written)."""
    await wait_until_consumed(js, topology.stream("jobs"), topology.durable(RULES), timeout_s=20)
    await wait_until_consumed(js, topology.stream("jobs"), topology.durable(NOTIFY_JOBS), timeout_s=20)
    await wait_until_consumed(
        js, topology.stream("findings"), topology.durable(NOTIFY_FINDINGS), timeout_s=20
    )


def _types(log: Sequence[dict[str, Any]]) -> list[str]:
    return sorted(d["event_type"] for d in log)


Subscribers = tuple[Receiver, httpx.AsyncClient]


@pytest.fixture
async def subscribers(
    notifying: Notifying,
) -> AsyncIterator[Subscribers]:
    """A subscribers' receiver and an API client, with notify (consumer and dispatcher) running."""
    async with notifying.serving() as (rx, api):
        yield rx, api


@pytest.mark.parametrize(
    "lines", [(OOM,), NCCL_RETRIED, LOADER_RESET], ids=["cuda-oom", "nccl-retry", "loader"]
)
async def test_a_line_the_run_recovers_from_delivers_nothing_to_subscribers(
    lines: tuple[str, ...],
    notifying: Notifying,
    subscribers: Subscribers,
) -> None:
    rx, api = subscribers
    everything = await subscribe(api, rx, "hooks/all", namespace="team-a")
    evidence = await subscribe(api, rx, "hooks/seen", namespace="team-a", event_types=["finding.observed"])
    async with running_and_read(notifying) as (
        publisher,
        clock,
    ):
        await printed(notifying.js, notifying.topology, clock, log_batch(*lines, observed_at=at(5)))
        went_on = ("[1,3]<stdout>:batch size 16 fits", "[1,0]<stdout>:epoch 1 step 200")
        await printed(
            notifying.js, notifying.topology, clock, log_batch(*went_on, observed_at=at(5, 30), step_s=60)
        )
        ended = launcher(
            observed_at=at(20), phase="Succeeded", ready=False, containers=(terminated("Completed", 0),)
        )
        await observed(publisher, notifying.js, notifying.topology, clock, ended)
        await observed(
            publisher, notifying.js, notifying.topology, clock, job("Succeeded", observed_at=at(20, 5))
        )
        await _settled(notifying.js, notifying.topology)
    (seen,) = await settled_log(api, evidence["id"], 1)
    (request,) = rx.at("hooks/seen")
    told = await log_of(api, everything["id"])

    assert _types(told) == ["job.created", "job.running", "job.succeeded"]  # no finding.* at all
    assert seen["event_type"] == "finding.observed" and request.verified
    finding = request.payload["data"]["finding"]
    assert finding["status"] == "pending" and finding["severity"] == "warning"
    assert " printed " in finding["root_cause"] and finding["root_cause"].endswith("the job is still running")
    assert not finding["root_cause"].startswith(("Rank 3 on worker-0 failed", "Worker"))


async def test_the_same_oom_followed_by_its_pod_ending_non_zero_is_delivered_firing(
    notifying: Notifying,
    subscribers: Subscribers,
) -> None:
    rx, api = subscribers
    everything = await subscribe(api, rx, "hooks/all", namespace="team-a", event_types=["finding.*"])
    async with running_and_read(notifying) as (
        publisher,
        clock,
    ):
        await printed(notifying.js, notifying.topology, clock, log_batch(OOM, observed_at=at(5)))
        await observed(
            publisher, notifying.js, notifying.topology, clock, failed_launcher(OOM, observed_at=at(5, 10))
        )
        await _settled(notifying.js, notifying.topology)
    (delivered,) = await settled_log(api, everything["id"], 1)
    (request,) = rx.at("hooks/all")

    assert delivered["event_type"] == "finding.firing"
    finding = request.payload["data"]["finding"]
    assert (finding["rule"], finding["status"], finding["severity"]) == ("gpu-oom", "firing", "critical")
    assert "still running" not in finding["root_cause"]


async def test_a_quota_refusal_in_a_run_that_then_succeeds_delivers_nothing(
    notifying: Notifying,
    subscribers: Subscribers,
) -> None:
    rx, api = subscribers
    everything = await subscribe(api, rx, "hooks/all", namespace="team-a")
    async with running_and_read(notifying) as (
        publisher,
        clock,
    ):
        refused = k8s_event("MPIJobFailed", GPU_QUOTA, kind="MPIJob", involved="pi", observed_at=at(1))
        await observed(publisher, notifying.js, notifying.topology, clock, refused)
        await observed(
            publisher, notifying.js, notifying.topology, clock, worker(3, created_at=at(3), observed_at=at(3))
        )
        await observed(
            publisher, notifying.js, notifying.topology, clock, job("Succeeded", observed_at=at(20))
        )
        await _settled(notifying.js, notifying.topology)
    told = await log_of(api, everything["id"])

    assert _types(told) == ["job.created", "job.running", "job.succeeded"]
