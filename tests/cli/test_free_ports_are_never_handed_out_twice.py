"""The servers a test starts get distinct ports: a test that asks for many ports before it binds
any (three NATS servers: client, monitor and cluster port each) never gets one twice, and none
from the kernel's ephemeral range; pytest-xdist workers pick from disjoint slices of that range."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.testing.ports import free_port


def test_ports_asked_for_before_any_is_bound_are_distinct_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(1000)]  # none bound meanwhile, as a test starting servers does
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert len(set(ports)) == len(ports)
    assert all(10_000 <= port < ephemeral for port in ports)


def test_each_xdist_worker_picks_from_its_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    picked: dict[int, set[int]] = {}
    for worker in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        picked[worker] = {free_port() for _ in range(300)}
    assert all(10_000 <= port < ephemeral for ports in picked.values() for port in ports)
    assert max(picked[0]) < min(picked[1]) and max(picked[1]) < min(picked[2])
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")  # not one of the 3: the whole range, as without xdist
    assert all(10_000 <= free_port() < ephemeral for _ in range(50))
