"""The servers a test starts get distinct ports: a test that asks for many ports before it binds
any (three NATS servers: client, monitor and cluster port each) never gets one twice, and none
from the kernel's ephemeral range."""

from __future__ import annotations

from pathlib import Path

from controller.testing.ports import free_port


def test_ports_asked_for_before_any_is_bound_are_distinct_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(1000)]  # none bound meanwhile, as a test starting servers does
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert len(set(ports)) == len(ports)
    assert all(10_000 <= port < ephemeral for port in ports)
