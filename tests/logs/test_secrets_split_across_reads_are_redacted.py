"""A secret never reaches ``LOGS`` because of where a read of the follow stream ended: a token cut
between two reads is redacted once its line is whole, and a private key block written over
several reads (and across a restart of the follower, resumed from the bus) is redacted from its
``BEGIN`` line through its ``END`` line, the lines around it kept. Real client → simulated API
server → real NATS."""

from __future__ import annotations

from controller.contract.redaction import REDACTED
from controller.testing.waits import until
from tests.log_fixtures import Logged
from watchers.lines import LineSplitter, clean_lines

T = 1_795_000_000 * 10**9


def test_a_token_cut_between_two_reads_is_redacted_in_its_whole_line() -> None:
    splitter = LineSplitter(1024)
    first = splitter.feed(b"step 1\nexport HF_TOKEN=hf_abcdefghijklmn")
    second = splitter.feed(b"opqrstuvwxyz0123456789ABCD done\n")
    assert clean_lines(first) == ["step 1"]
    assert clean_lines(second) == [f"export HF_TOKEN={REDACTED} done"]


async def test_a_private_key_written_over_several_reads_and_a_restart_is_redacted_whole(
    logged: Logged,
) -> None:
    run = logged.run("key")
    namespace, pod, container = run.pod(0)
    body = ["MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn", "/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yP"]

    has = logged.has(run.job)

    logged.sim.set_log(namespace, pod, container, "step 1\n-----BEGIN RSA PRIVATE KEY-----\n", at_ns=T)
    async with logged.following() as follow:
        follow.add(run)
        await until(lambda: has(2), 10.0)
        logged.sim.append_log(namespace, pod, container, f"{body[0]}\n", at_ns=T + 1)  # a read of its own
        await until(lambda: has(3), 10.0)
    # a new follower knows from the bus alone that a block is open
    logged.sim.append_log(
        namespace, pod, container, f"{body[1]}\n-----END RSA PRIVATE KEY-----\n", at_ns=T + 2
    )
    logged.sim.append_log(namespace, pod, container, "step 2 loss 0.5\n", at_ns=T + 3)
    async with logged.following() as follow:
        follow.add(run)
        await until(lambda: has(6), 10.0)
    assert await logged.texts(run.job) == [
        "step 1",
        REDACTED,
        REDACTED,
        REDACTED,
        REDACTED,
        "step 2 loss 0.5",
    ]
