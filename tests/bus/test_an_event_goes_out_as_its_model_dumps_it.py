"""An observation goes out as the bytes of its model's JSON: :meth:`Publisher.event` calls the
model's serializer directly (issue 40, the watcher's CPU per event), and what it sends is what
``model_dump_json()`` writes, for every type of event, on the subject and with the id as before."""

from __future__ import annotations

from typing import Any

import pytest

from controller.bus.publishing import Publisher
from controller.contract.events import BusEvent, message_id, parse_event
from controller.contract.subjects import Topology
from controller.testing import events as ev

EVENTS: list[BusEvent] = [
    ev.job(),
    ev.launcher(),
    ev.failed_launcher("Traceback: boom"),
    ev.pending_worker(2, "0/4 nodes are available"),
    ev.replica("Master", 0),
    ev.k8s_event("FailedScheduling", "0/4 nodes are available"),
    ev.log_probe(12),
    ev.log_seen("step 1", "CUDA out of memory"),
    ev.usage(ev.pod_usage(0, util=[90.0, 95.0], memory_gib=[10.0, 12.0])),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: str(e.type))
def test_the_payload_is_the_models_json(event: Any) -> None:
    outgoing = Publisher(None, Topology("t")).event(event)  # type: ignore[arg-type]  # no bus needed

    assert outgoing.payload == event.model_dump_json().encode()
    assert outgoing.subject == Topology("t").job_event(event)
    assert outgoing.msg_id == message_id(event)
    assert parse_event(outgoing.payload) == event
