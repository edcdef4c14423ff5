"""The notify consumer's durable receives job observations only: the server filters out pod
updates and Kubernetes events (most of the watch traffic), and a durable declared by an
earlier version on all of ``jobs.>`` is narrowed when the consumer starts, keeping its place."""

from __future__ import annotations

import dataclasses

from consumers.notify import CONSUMER
from controller.bus.publishing import Publisher
from controller.bus.settling import consumer_config
from controller.bus.streams import wait_until_consumed
from controller.testing import events as eb
from controller.testing.notify import job, subscribe, with_notify
from controller.testing.receivers import Receiver
from tests.notify_fixtures import Notifying


async def test_pods_and_events_never_reach_the_notify_consumer_even_on_an_old_durable(
    notifying: Notifying,
) -> None:
    with_notify(notifying.settings)
    stream, durable = notifying.topology.stream("jobs"), notifying.topology.durable(CONSUMER)
    old = dataclasses.replace(
        consumer_config(notifying.settings.consumer),
        durable_name=durable,
        filter_subject=notifying.topology.wildcard("jobs"),
    )
    await notifying.js.add_consumer(stream, old)  # as the version before this one declared it
    created = job("Pending", change="ADDED")
    pod, event = (
        eb.pod(job=created.ref),
        eb.k8s_event("FailedScheduling", "0/8 nodes are available", job=created.ref),
    )
    async with Receiver() as rx, notifying.api() as api:
        await subscribe(api, rx, "ci")
        await Publisher(notifying.js, notifying.topology).publish([created, pod, event, job("Running")])
        async with notifying.consuming():
            await wait_until_consumed(notifying.js, stream, durable)
            info = await notifying.js.consumer_info(stream, durable)

    assert info.config.filter_subject == notifying.topology.job_observations()
    assert info.delivered.consumer_seq == 2  # the two job observations, not the pod or the event
    assert info.num_pending == 0 and info.num_ack_pending == 0
