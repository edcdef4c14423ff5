"""``mpijob-controller up``'s processes as a benchmark sees them: starting it, when its API
answers, which part each process is, killing them all at once, and what memory they hold together.

``up`` runs its parts as ``python -m controller.cli <command>`` children and starts nats-server
itself; the embedded PostgreSQL is detached (its postmaster's pid is in ``postmaster.pid``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import httpx

from benchmarks.harness import peak_rss_mib, rss_mib
from controller.cli.embedded.processes import alive, die_with_this_process

PART_OF_COMMAND = {"up": "up", "watch": "watcher", "api": "api"}
"""The part a ``python -m controller.cli <command>`` process is, by its command (``consume --only
ROLE …``: its roles, joined by ``+`` as ``up`` names the part)."""


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int) -> set[int]:
    """``root`` and every process below it."""
    parents = {int(p.name): _parent(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    found, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        grew = bool(below)
        found |= below
    return found


def postmaster(data_dir: Path) -> int | None:
    """The embedded PostgreSQL's postmaster pid, from ``postmaster.pid`` under ``data_dir``."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int((data_dir / "postgres" / "pgdata" / "postmaster.pid").read_text().split()[0])
    return None


def part(pid: int) -> str | None:
    """Which part of ``up`` process ``pid`` is (``nats`` for nats-server); None for another
    process, or one gone."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    if Path(argv[0]).name == "nats-server":
        return "nats"
    if "controller.cli" not in argv:
        return None
    command = argv[argv.index("controller.cli") + 1 :]
    if command[:2] == ["consume", "--only"] and len(command) > 2:
        pairs = zip(command[1::2], command[2::2], strict=False)
        return "+".join(role for flag, role in pairs if flag == "--only")
    return PART_OF_COMMAND.get(command[0]) if command else None


def kill_everything(up: subprocess.Popen[bytes], data_dir: Path) -> None:
    """SIGKILL ``up``, its parts, NATS, and the detached PostgreSQL with its backends, at once."""
    pids = descendants(up.pid)
    if (pid := postmaster(data_dir)) is not None:
        pids |= descendants(pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    up.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:  # gone, not just orphaned
        time.sleep(0.01)


def start_up(env: Mapping[str, str], workdir: Path) -> subprocess.Popen[bytes]:
    """``mpijob-controller up`` in ``workdir``, its output (and its parts') appended to ``up.log``;
    stopped by the kernel if the benchmark dies."""
    with (workdir / "up.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "up"],
            env=env,
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_this_process(signal.SIGTERM),  # noqa: PLW1509 - only prctl
        )


def until_answers(port: int, started: float, timeout_s: float = 120) -> float:
    """Seconds from ``started`` until ``GET /api/v1/runs`` is answered 200."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=1) as client:
        while time.monotonic() - started < timeout_s:
            try:
                if client.get("/api/v1/runs?limit=1").status_code == 200:
                    return time.monotonic() - started
            except httpx.TransportError:
                pass
            time.sleep(0.01)
    raise RuntimeError(f"the API did not answer within {timeout_s:g} s")


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pss_mib(pid: int) -> float:
    """Proportional set size (shared pages divided among the processes sharing them), in MiB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


class TreeMemory:
    """The memory of ``up``'s processes, sampled every ``interval_s`` on a thread until
    :meth:`stop`: per part its highest peak (``VmHWM``), the sum of the Python processes' peaks
    (an upper bound: they need not peak at once), the highest sum of their resident memory at
    one sample, nats-server's peak, and PostgreSQL's highest proportional set size summed over
    its processes (its backends share their buffers: resident memory would count them once
    per backend); and the CPU seconds the Python processes and nats-server used, each at its
    last sample."""

    def __init__(self, up: int, data_dir: Path, interval_s: float = 0.25) -> None:
        self.up, self.data_dir, self.interval_s = up, data_dir, interval_s
        self.parts: dict[int, str] = {}
        self._peaks: dict[int, float] = {}
        self._cpu: dict[int, float] = {}
        """Pid → the CPU seconds it had used at its last sample (a Python part's)."""
        self._sampled_peak = self._postgres_peak = 0.0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="up-memory", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tree: set[int] = set()
        refreshed = 0.0
        while not self._stopped.wait(self.interval_s):
            if time.monotonic() - refreshed > 1.0:  # new parts: a scan of /proc once a second
                tree, refreshed = descendants(self.up), time.monotonic()
                self.parts.update({pid: name for pid in tree if (name := part(pid)) is not None})
                self._postgres_peak = max(self._postgres_peak, self._postgres_pss())
            total = 0.0
            for pid in tree:
                with contextlib.suppress(OSError):
                    self._peaks[pid] = max(self._peaks.get(pid, 0.0), peak_rss_mib(pid))
                    if self.parts.get(pid, "nats") != "nats":
                        total += rss_mib(pid)
                    if pid in self.parts:
                        self._cpu[pid] = cpu_s(pid)
            self._sampled_peak = max(self._sampled_peak, total)

    def _postgres_pss(self) -> float:
        pid = postmaster(self.data_dir)
        if pid is None:
            return 0.0
        total = 0.0
        for process in descendants(pid):
            with contextlib.suppress(OSError):
                total += _pss_mib(process)
        return total

    def stop(self) -> None:
        """Stop sampling."""
        self._stopped.set()
        self._thread.join()

    def figures(self) -> dict[str, float]:
        """The figures so far, in MiB."""
        by_part: dict[str, float] = defaultdict(float)
        python = 0.0
        for pid, peak in list(self._peaks.items()):
            name = self.parts.get(pid)
            if name is None:
                continue
            by_part[name] = max(by_part[name], peak)
            python += peak if name != "nats" else 0.0
        cpu_by_part: dict[str, float] = defaultdict(float)
        for pid, spent in list(self._cpu.items()):
            cpu_by_part[self.parts.get(pid, "?")] += spent
        nats_cpu = cpu_by_part.pop("nats", 0.0)
        return {
            **{name: round(peak, 1) for name, peak in sorted(by_part.items())},
            "python_sum_of_peaks": round(python, 1),
            "python_sampled_peak": round(self._sampled_peak, 1),
            "python_cpu_s": round(sum(cpu_by_part.values()), 1),
            **{f"python_cpu_s.{name}": round(spent, 2) for name, spent in sorted(cpu_by_part.items())},
            "nats_cpu_s": round(nats_cpu, 2),
            "postgres_pss_peak": round(self._postgres_peak, 1),
        }
