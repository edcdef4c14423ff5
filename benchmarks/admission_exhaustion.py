"""Admission exhaustion benchmark: what clients without a client certificate cost the webhook.

The webhook runs as ``mpijob-controller admission`` serves it (:func:`serve_admission`, TLS
without mutual TLS, the default) in a process of its own, with a bus that takes every record
at once (no NATS: the probes measure the server); its resident memory and CPU seconds are read
from ``/proc``. The probes, from this process over loopback TLS:

- **idle connections**: ``--idle`` connections complete the TLS handshake and send nothing.
  Memory while they are held, how many the server holds, and whether a review sent on a new
  connection meanwhile is answered.
- **stalled uploads**: ``--uploads`` connections each declare a body of the limit less one
  byte, send all of it but the last byte, and stall. Memory while they are held and once the
  request deadline has passed, and how each was answered.
- **bodies**: CPU per request of the UPDATE the security review sent (2.75 MiB, 190 levels
  deep, every one of 116,000 fields changed), of the costliest UPDATE within the item budget
  (the same shape, one field changed), and of an ordinary MPIJob UPDATE; and the latency of
  ordinary reviews while four clients send each costly body back to back.

Settings come from the environment (``MPIJC_ADMISSION__…``). Run it in a checkout of another
commit (same file copied there) to compare; prints one JSON document and writes it to
``benchmarks/results/admission_exhaustion.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import copy
import json
import ssl
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Connection, ServedProcess, close_all, connection_states, held_past_deadline
from controller.contract.settings import Settings
from controller.testing.objects import mpijob
from controller.testing.ports import free_port

MIB = 1 << 20


# --------------------------------------------------------------------------- the server


def serve(port: int, cert: str, key: str) -> None:
    """The webhook, as ``mpijob-controller admission`` serves it, with a bus that takes everything."""
    from prometheus_client import CollectorRegistry

    import controller.cli.commands  # noqa: F401  # what the admission command's process has loaded
    from controller.contract.audit import AuditRecord
    from watchers.admission.webhook import serve_admission

    async def publish(records: Sequence[AuditRecord]) -> int:
        return len(records)

    settings = Settings().admission.model_copy(
        update={"host": "127.0.0.1", "port": port, "cert_file": Path(cert), "key_file": Path(key)}
    )
    asyncio.run(serve_admission(settings, publish, CollectorRegistry(), asyncio.Event()))


class Server(ServedProcess):
    """The webhook process: its address, memory and CPU."""

    def __init__(self, cert: Path, key: Path) -> None:
        port = free_port()
        super().__init__(
            port,
            ["-m", "benchmarks.admission_exhaustion", "--serve", str(port), str(cert), str(key)],
            {"MPIJC_LOG_LEVEL": "WARNING"},
            "the webhook",
        )
        self.context = ssl.create_default_context(cafile=str(cert))

    async def connect(self) -> Connection:
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=self.context, server_hostname="localhost"
        )


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed P-256 certificate for localhost (``openssl`` CLI)."""
    cert, key = directory / "server.crt", directory / "server.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


# --------------------------------------------------------------------------- the bodies


def review(operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> bytes:
    """An AdmissionReview v1 as the API server sends it (compact JSON, as Go writes it)."""
    gvk = {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": {"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"},
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"]["namespace"],
        "operation": operation,
        "userInfo": {"username": "alice@example.com", "uid": "alice", "groups": ["team-a"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body, separators=(",", ":")).encode()


def ordinary_update() -> bytes:
    """An MPIJob scaled from 4 to 8 workers."""
    old = mpijob("pi", "team-a", workers=4)
    new = copy.deepcopy(old)
    new["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 8
    return review("UPDATE", new, old)


def deep_update(fields: int, changed: int, depth: int = 185) -> bytes:
    """An MPIJob UPDATE whose spec is ``depth`` nested objects around one of ``fields`` fields,
    the first ``changed`` of which differ between the old and the new object (190 levels deep in
    all with the default ``depth``)."""

    def nest(leaf: dict[str, int]) -> dict[str, Any]:
        node: dict[str, Any] = leaf
        for _ in range(depth):
            node = {"k": node}
        return node

    old = mpijob("pi", "team-a")
    new = copy.deepcopy(old)
    old["spec"] = nest({f"k{i:06d}": 1 for i in range(fields)})
    new["spec"] = nest({f"k{i:06d}": 2 if i < changed else 1 for i in range(fields)})
    return review("UPDATE", new, old)


def nested_update(objects: int) -> bytes:
    """An MPIJob UPDATE whose spec holds ``objects`` small objects two deep, one of them changed:
    the most objects for the fewest items (three each), every one compared."""
    old = mpijob("pi", "team-a")
    new = copy.deepcopy(old)
    old["spec"] = {f"k{i:05d}": {"a": {"b": 1}} for i in range(objects)}
    new["spec"] = {f"k{i:05d}": {"a": {"b": 2 if i == 0 else 1}} for i in range(objects)}
    return review("UPDATE", new, old)


def escaped_update(size: int) -> bytes:
    """An MPIJob UPDATE of about ``size`` bytes, nearly all of it one annotation of ``\\u00e9``
    escapes: what costs the JSON parser most per byte."""
    old = mpijob("pi", "team-a")
    new = copy.deepcopy(old)
    plain = len(review("UPDATE", new, old))
    new["metadata"]["annotations"] = {"note": "\u00e9" * ((size - plain) // 6)}
    return review("UPDATE", new, old)


# --------------------------------------------------------------------------- the probes


def post(body: bytes) -> bytes:
    """A review request on a connection of its own (``Connection: close``)."""
    head = (
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def request(server: Server, data: bytes) -> tuple[str, float]:
    """Send ``data`` on a new connection, read the answer to its end; its status ("refused"
    if the connection was closed before an answer) and the seconds it took."""
    start = time.perf_counter()
    answer = b""
    try:
        reader, writer = await server.connect()
    except (ConnectionError, ssl.SSLError, OSError):
        return "refused", time.perf_counter() - start
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        writer.write(data)
        await writer.drain()
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while chunk := await reader.read(65536):
            answer += chunk
    writer.close()
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "refused"
    return status, time.perf_counter() - start


async def open_many(server: Server, count: int, data: bytes) -> list[Connection | None]:
    """``count`` connections that each sent ``data``, and nothing more; None for one the server
    closed before its TLS handshake ended."""

    async def one() -> Connection | None:
        try:
            reader, writer = await server.connect()
        except (ConnectionError, ssl.SSLError, OSError):
            return None
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            writer.write(data)
            await writer.drain()
        return reader, writer

    connections: list[Connection | None] = []
    for start in range(0, count, 50):  # 50 handshakes at a time
        connections += await asyncio.gather(*(one() for _ in range(min(50, count - start))))
    return connections


async def idle_connections(server: Server, count: int) -> dict[str, Any]:
    before = server.rss_mib()
    connections = await open_many(server, count, b"")
    await asyncio.sleep(1.0)
    held = server.rss_mib()
    meanwhile = await request(server, post(ordinary_update()))
    result = {
        "connections": count,
        "rss_before_mib": before,
        "rss_held_mib": held,
        "added_mib": round(held - before, 1),
        "connections_state": await connection_states(connections),
        "a_review_meanwhile": meanwhile[0],
    }
    close_all(connections)
    return result


async def stalled_uploads(server: Server, count: int, limit: int, deadline_s: float) -> dict[str, Any]:
    head = (
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {limit - 1}\r\n\r\n"
    ).encode()
    data = head + b"[" + b"1," * ((limit - 3) // 2)

    async def a_review() -> str:
        return (await request(server, post(ordinary_update())))[0]

    # waiting deadline_s: the last one opened is past its deadline
    return await held_past_deadline(
        server, count, lambda: open_many(server, count, data), deadline_s, deadline_s, a_review
    )


async def cpu_per_request(server: Server, data: bytes, repeat: int) -> dict[str, Any]:
    statuses = set()
    start = server.cpu_s()
    for _ in range(repeat):
        status, _ = await request(server, data)
        statuses.add(status)
    return {"status": sorted(statuses), "cpu_ms": round((server.cpu_s() - start) / repeat * 1000, 1)}


async def reviews_under(server: Server, data: bytes, clients: int, rounds: int) -> dict[str, Any]:
    """Latency of ordinary reviews while ``clients`` send ``data`` back to back."""
    stop = asyncio.Event()
    sent = 0

    async def attacker() -> None:
        nonlocal sent
        while not stop.is_set():
            await request(server, data)
            sent += 1

    attackers = [asyncio.create_task(attacker()) for _ in range(clients)]
    await asyncio.sleep(1.0 if clients else 0.0)
    answers = [await request(server, post(ordinary_update())) for _ in range(rounds)]
    stop.set()
    await asyncio.gather(*attackers)
    latencies = [seconds for _, seconds in answers]
    return {
        "answered": collections.Counter(status for status, _ in answers),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "costly_bodies_sent_meanwhile": sent,
    }


async def bodies(server: Server, repeat: int, budget: int, limit: int) -> dict[str, Any]:
    issue = deep_update(fields=116_000, changed=116_000)
    within = deep_update(fields=(budget - 600) // 2, changed=1)  # both objects hold the fields
    shapes = {
        "issue_update": issue,
        "deep_update_within_budget": within,
        "nested_update_within_budget": nested_update((budget - 600) // 6),
        "escaped_update_at_the_limit": escaped_update(limit - 4096),
        "ordinary_update": ordinary_update(),
    }
    result: dict[str, Any] = {
        name: {"bytes": len(body), **await cpu_per_request(server, post(body), repeat)}
        for name, body in shapes.items()
    }
    result["reviews_alone"] = await reviews_under(server, b"", 0, 20)
    result["reviews_under_4_clients_issue_update"] = await reviews_under(server, post(issue), 4, 20)
    result["reviews_under_4_clients_deep_update_within_budget"] = await reviews_under(
        server, post(within), 4, 20
    )
    return result


async def measure(idle: int, uploads: int, repeat: int) -> dict[str, Any]:
    admission = Settings().admission  # as the server reads them (MPIJC_ADMISSION__…)
    settings = {
        name: getattr(admission, name, None)
        for name in (
            "max_body_bytes",
            "request_timeout_s",
            "max_json_depth",
            "max_json_items",
            "max_connections",
            "max_buffered_bytes",
            "handshake_timeout_s",
            "keep_alive_s",
        )
    }
    budget = int(getattr(admission, "max_json_items", 10_000))  # the default, for older checkouts
    with tempfile.TemporaryDirectory() as directory:
        cert, key = certificate(Path(directory))
        probes: dict[str, Callable[[Server], Awaitable[dict[str, Any]]]] = {
            "idle_connections": lambda server: idle_connections(server, idle),
            "stalled_uploads": lambda server: stalled_uploads(
                server, uploads, admission.max_body_bytes, admission.request_timeout_s
            ),
            "bodies": lambda server: bodies(server, repeat, budget, admission.max_body_bytes),
        }
        result: dict[str, Any] = {"settings": settings}
        for name, probe in probes.items():
            # a new webhook process for each probe: memory a probe took is not handed back
            async with Server(cert, key) as server:
                result[name] = await probe(server)
                result[name]["rss_peak_mib"] = server.peak_rss_mib()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--idle", type=int, default=600, help="idle TLS connections held at once")
    parser.add_argument("--uploads", type=int, default=80, help="stalled uploads held at once")
    parser.add_argument("--repeat", type=int, default=20, help="requests per body shape")
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1], args.serve[2])
        return
    from benchmarks.harness import report  # not in the server's process: it would weigh on its memory

    report("admission_exhaustion", asyncio.run(measure(args.idle, args.uploads, args.repeat)))


if __name__ == "__main__":
    main()
