"""A batch of messages is handed to the client as one run of the very commands its ``publish``
writes for each of them (issue 40: the watcher's CPU per event), headers and all; where that
``publish`` would check or buffer otherwise, the batch is published message by message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NATS

from controller.bus.publishing import Outgoing, _commands, _headers


@pytest.fixture
def written(nats_client: NATS, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """What the client is handed (and not sent)."""
    commands: list[bytes] = []

    async def send_command(cmd: bytes, priority: bool = False) -> None:
        commands.append(cmd)

    monkeypatch.setattr(nats_client, "_send_command", send_command)
    yield commands


MESSAGES = [
    Outgoing("t.jobs.team-a.pi.pod", b'{"a":1}', "pod:uid-1:12:MODIFIED"),
    Outgoing("t.jobs.team-a.pi.urgent", b"", "pod:uid-2:13+log:MODIFIED"),
    Outgoing("t.jobs.team-a.pi.job", "é ünïcode".encode(), None),
    Outgoing("t.kv.published.pod_uid-1", b"12:MODIFIED\nMPIJob/team-a\n{}", "x", after_subject_seq=0),
    Outgoing("t.kv.published.pod_uid-2", b"\r\n", None, after_subject_seq=41),
]


async def test_the_commands_are_the_clients_own(nats_client: NATS, written: list[bytes]) -> None:
    reply = "_INBOX.abc.7."
    for index, message in enumerate(MESSAGES):
        await nats_client.publish(message.subject, message.payload, f"{reply}{index}", _headers(message))

    assert _commands(nats_client, MESSAGES, reply) == b"".join(written)


@pytest.mark.parametrize(
    "odd",
    [
        Outgoing("t.jobs a", b"", "id"),  # a space in the subject: the client refuses it
        Outgoing("t.jobs", b"", "id\r\n"),  # a line break in the id: the client rewrites it
        Outgoing("t.jobs", b"", " id"),  # leading space: stripped
        Outgoing("", b"", "id"),
    ],
)
async def test_what_the_client_would_check_is_published_one_by_one(nats_client: NATS, odd: Outgoing) -> None:
    assert _commands(nats_client, [*MESSAGES, odd], "_INBOX.abc.7.") is None


async def test_a_payload_over_the_limit_is_published_one_by_one(nats_client: NATS) -> None:
    big = Outgoing("t.jobs", b"x" * (nats_client.max_payload + 1), "id")
    assert _commands(nats_client, [big], "_INBOX.abc.7.") is None


async def test_a_client_not_connected_publishes_one_by_one() -> None:
    assert _commands(NATS(), MESSAGES, "_INBOX.abc.7.") is None  # it buffers or refuses each
