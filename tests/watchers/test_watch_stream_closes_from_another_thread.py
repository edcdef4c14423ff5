"""A watch or a followed log blocked on a quiet socket ends at once when another thread closes it.

This is what lets the async loop stop promptly although the client reads in a thread.
"""

from __future__ import annotations

import threading
import time

from controller.kube.gateway import KubeGateway
from controller.kube.resources import MPIJOBS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.log_fixtures import running_run


def test_close_interrupts_a_blocked_read_and_ends_iteration_quietly(gateway: KubeGateway) -> None:
    with SimCluster(bookmark_interval_s=60) as quiet, KubeGateway.for_url(quiet.url) as kube:
        stream = kube.watch(MPIJOBS, None, "0", timeout_s=60)
        events: list[object] = []
        reader = threading.Thread(target=lambda: events.extend(stream))
        reader.start()
        time.sleep(0.2)  # the reader is now blocked in recv(): nothing happens on the server
        started = time.monotonic()
        stream.close()
        reader.join(timeout=2)
        assert not reader.is_alive()
        assert time.monotonic() - started < 0.5
        assert events == []


def test_close_before_the_first_read_sends_no_request(sim: SimCluster, gateway: KubeGateway) -> None:
    sim.create(k.mpijob("pi"))
    stream = gateway.watch(MPIJOBS, None, "0", timeout_s=60)
    stream.close()
    assert list(stream) == []
    assert not [r for r in sim.requests if r.query.get("watch") == "true"]


def test_close_interrupts_a_blocked_log_follow_and_ends_it_quietly(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    namespace, pod, container = running_run(sim, "quiet").pod(0)
    sim.append_log(namespace, pod, container, "one line\n")
    follow = gateway.follow_log(namespace, pod, container)
    read: list[bytes] = []

    def reader() -> None:
        while chunk := follow.read():
            read.append(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.3)  # the line is read; the reader is now blocked: the container prints nothing more
    started = time.monotonic()
    follow.close()
    thread.join(timeout=2)
    assert not thread.is_alive()
    assert time.monotonic() - started < 0.5
    assert b"".join(read).endswith(b" one line\n")
    assert follow.read() == b""  # closed: nothing more, no request sent again
