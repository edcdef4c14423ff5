"""A real Prometheus for tests, scraping DCGM- and cAdvisor-shaped series the test sets.

:func:`prometheus_binary` finds or installs Debian's ``prometheus`` package
(:func:`controller.testing.packages.debian_binary`). :class:`UsageExporter` serves
``/metrics`` on loopback with the series of simulated pods — ``DCGM_FI_DEV_GPU_UTIL``,
``DCGM_FI_DEV_FB_USED``/``FB_FREE`` and the health series (``DCGM_FI_DEV_XID_ERRORS``, ECC,
row-remap and NVLink counters, ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``, ``DCGM_FI_DEV_GPU_TEMP``)
labelled as dcgm-exporter does (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``)
with its pod mapping on (after a ServiceMonitor's relabeling: ``exported_namespace``/
``exported_pod``, or plain ``namespace``/``pod``; a GPU no pod holds has none),
``container_memory_working_set_bytes`` and ``container_cpu_usage_seconds_total`` as the
kubelet's cAdvisor, and ``kube_pod_info`` as kube-state-metrics (the pod's node and owner, set
with :meth:`UsageExporter.place`) — whatever values the test sets now. :class:`Prometheus`
runs one server scraping it every second, so the real query engine answers the controller's
real queries.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from controller.testing.packages import debian_binary, stop_server, until_ready
from controller.testing.ports import free_port
from controller.testing.waits import until

__all__ = ["GpuSeries", "Prometheus", "UsageExporter", "pci_bus_id", "prometheus_binary"]

PACKAGE = "prometheus"


def prometheus_binary() -> tuple[str | None, str]:
    """The Prometheus executable, installing Debian's package when missing; else ``None`` and why."""
    return debian_binary(PACKAGE, (PACKAGE,))


@dataclass
class GpuSeries:
    """One GPU of one pod, as DCGM reports it (framebuffer in MiB); its health series as
    dcgm-exporter names them: the last Xid, the ECC, row-remap and NVLink counters (cumulative,
    as on a real GPU: set them to what the GPU has counted since the driver loaded), the clock
    throttle reasons' bitmask, the temperature."""

    util: float
    fb_used_mib: float
    fb_total_mib: float = 81_920.0
    xid: int = 0
    ecc_dbe: int = 0
    ecc_sbe: int = 0
    remapped_rows: int = 0
    remap_failure: int = 0
    nvlink_crc_errors: int = 0
    throttle_reasons: int = 0
    temperature_c: float = 45.0
    hostname: str = "gpu-node-0"

    def health_lines(self, labels: str) -> Iterator[str]:
        """The health series of this GPU under ``labels``."""
        yield f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {self.xid}"
        yield f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{labels}}} {self.ecc_dbe}"
        yield f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{labels}}} {self.ecc_sbe}"
        yield f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{labels}}} {self.remapped_rows}"
        yield f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{labels}}} {self.remap_failure}"
        for kind in ("CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY"):
            count = self.nvlink_crc_errors if kind == "CRC_FLIT" else 0
            yield f"DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL{{{labels}}} {count}"
        yield f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{labels}}} {self.throttle_reasons}"
        yield f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {self.temperature_c}"


def pci_bus_id(gpu: str) -> str:
    """The PCI address the exporter gives GPU ``gpu`` (an index), as DCGM writes it."""
    return f"00000000:{0x18 + 0x10 * int(gpu):02X}:00.0"


def _dcgm_labels(gpu: str, uuid: str, series: GpuSeries, mapped: str) -> str:
    """The labels dcgm-exporter puts on a GPU's series, then the pod mapping's (may be empty)."""
    own = (
        f'gpu="{gpu}",UUID="{uuid}",device="nvidia{gpu}",modelName="NVIDIA H100 80GB HBM3",'
        f'Hostname="{series.hostname}",pci_bus_id="{pci_bus_id(gpu)}",DCGM_FI_DRIVER_VERSION="550.90.07"'
    )
    return f"{own},{mapped}" if mapped else own


@dataclass
class _PodSeries:
    namespace: str
    pod: str
    gpus: dict[str, GpuSeries] = field(default_factory=dict)
    memory_bytes: float | None = None
    cpu_seconds: float = 0.0
    cpu_cores: float = 0.0
    cpu_at: float = field(default_factory=time.monotonic)
    exported: bool = True
    placed: tuple[str, str, str] | None = None
    """Its node, owner kind and owner name, as ``kube_pod_info`` says (``None``: not served)."""


class UsageExporter:
    """``/metrics`` with the series of simulated pods; set them with :meth:`gpu`, :meth:`memory`,
    :meth:`cpu` (a counter that grows by ``cores`` per second of wall time)."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], _PodSeries] = {}
        self._unassigned: dict[tuple[str, str], GpuSeries] = {}
        self._lock = threading.Lock()
        self.port = free_port()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("content-type", "text/plain; version=0.0.4")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._ticker = threading.Event()

    def _pod(self, namespace: str, pod: str) -> _PodSeries:
        return self._pods.setdefault((namespace, pod), _PodSeries(namespace, pod))

    def gpu(self, namespace: str, pod: str, gpu: str, series: GpuSeries, *, exported: bool = True) -> None:
        """Set one GPU of a pod; ``exported=False`` labels it ``namespace``/``pod`` (no relabeling)."""
        with self._lock:
            held = self._pod(namespace, pod)
            held.gpus[gpu] = series
            held.exported = exported

    def unassigned_gpu(self, gpu: str, series: GpuSeries) -> None:
        """Set a GPU of ``series.hostname`` that no pod holds (DCGM exports it without pod labels)."""
        with self._lock:
            self._unassigned[(series.hostname, gpu)] = series

    def drop(self, namespace: str, pod: str) -> None:
        """Stop exporting a pod's series, as the exporters do once it ended."""
        with self._lock:
            self._pods.pop((namespace, pod), None)

    def place(
        self, namespace: str, pod: str, node: str, owner_kind: str = "<none>", owner_name: str = "<none>"
    ) -> None:
        """Serve ``kube_pod_info`` for a pod: on ``node``, created by ``owner_kind``/``owner_name``
        (kube-state-metrics writes ``<none>`` for a pod nothing owns, ``Node`` for a static pod)."""
        with self._lock:
            self._pod(namespace, pod).placed = (node, owner_kind, owner_name)

    def memory(self, namespace: str, pod: str, working_set_bytes: float) -> None:
        with self._lock:
            self._pod(namespace, pod).memory_bytes = working_set_bytes

    def cpu(self, namespace: str, pod: str, cores: float) -> None:
        with self._lock:
            held = self._pod(namespace, pod)
            held.cpu_seconds += held.cpu_cores * (time.monotonic() - held.cpu_at)
            held.cpu_cores, held.cpu_at = cores, time.monotonic()

    def render(self) -> str:
        """The exposition text now."""
        lines: list[str] = []
        with self._lock:
            now = time.monotonic()
            for held in self._pods.values():
                held.cpu_seconds += held.cpu_cores * (now - held.cpu_at)  # a counter of CPU seconds
                held.cpu_at = now
                lines.extend(self._lines(held))
            for (host, gpu), series in self._unassigned.items():
                lines.extend(series.health_lines(_dcgm_labels(gpu, f"GPU-{host}-{gpu}", series, "")))
        return "\n".join(lines) + "\n"

    @staticmethod
    def _lines(held: _PodSeries) -> Iterator[str]:
        mapped = (
            f'exported_namespace="{held.namespace}",exported_pod="{held.pod}",exported_container="main",'
            'namespace="gpu-operator",pod="nvidia-dcgm-exporter-x7k2p"'
            if held.exported
            else f'namespace="{held.namespace}",pod="{held.pod}",container="main"'
        )
        for gpu, series in held.gpus.items():
            labels = _dcgm_labels(gpu, f"GPU-{held.pod}-{gpu}", series, mapped)
            yield f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {series.util}"
            yield f"DCGM_FI_DEV_FB_USED{{{labels}}} {series.fb_used_mib}"
            yield f"DCGM_FI_DEV_FB_FREE{{{labels}}} {series.fb_total_mib - series.fb_used_mib}"
            yield from series.health_lines(labels)
        cadvisor = f'namespace="{held.namespace}",pod="{held.pod}",container="main"'
        if held.memory_bytes is not None:
            whole_pod = f'namespace="{held.namespace}",pod="{held.pod}",container=""'  # the pod's cgroup
            yield f"container_memory_working_set_bytes{{{cadvisor}}} {held.memory_bytes}"
            yield f"container_memory_working_set_bytes{{{whole_pod}}} {held.memory_bytes}"
        if held.cpu_cores or held.cpu_seconds:
            yield f"container_cpu_usage_seconds_total{{{cadvisor}}} {held.cpu_seconds}"
        if held.placed is not None:
            node, kind, owner = held.placed
            yield (
                f'kube_pod_info{{namespace="{held.namespace}",pod="{held.pod}",uid="uid-{held.pod}",'
                f'host_ip="192.0.2.10",pod_ip="198.51.100.20",node="{node}",created_by_kind="{kind}",'
                f'created_by_name="{owner}",priority_class="",host_network="false"}} 1'
            )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Prometheus:
    """One Prometheus on loopback scraping ``targets`` every ``scrape_s``; ``await start()``, ``stop()``."""

    def __init__(self, binary: str, workdir: Path, targets: list[str], scrape_s: float = 1.0) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        listed = ", ".join(f"'{t}'" for t in targets)
        (workdir / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: {scrape_s:g}s\n  scrape_timeout: {scrape_s:g}s\n"
            "scrape_configs:\n"
            "  - job_name: usage\n"
            f"    static_configs:\n      - targets: [{listed}]\n"
        )
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def _spawn(self) -> subprocess.Popen[bytes]:
        argv = [
            self.binary,
            f"--config.file={self.workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with (self.workdir / "prometheus.log").open("ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    async def start(self) -> None:
        """Start it and wait until it answers ``/-/ready``."""
        self._process = self._spawn()
        await until_ready(self._process, self.url, self.workdir / "prometheus.log", "prometheus")

    async def scraped(self, query: str, timeout_s: float = 20) -> None:
        """Wait until ``query`` has an answer (the exporter was scraped)."""

        async def answered() -> bool:
            async with httpx.AsyncClient() as client:
                body = (await client.get(f"{self.url}/api/v1/query", params={"query": query})).json()
            return bool(body["data"]["result"])

        await until(answered, timeout_s=timeout_s)

    async def stop(self) -> None:
        process, self._process = self._process, None
        await stop_server(process)
