"""Real servers for tests from Debian's packages (Prometheus, Alertmanager), found or installed.

:func:`debian_binary` looks on ``PATH``, then in a cache where an earlier run extracted the
package, then installs it (``apt-get install`` as root, else ``apt-get download`` and
``dpkg-deb -x`` into the cache); ``None`` with the reason when none of that works, so the test
that needs it is skipped saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import httpx

from controller.testing.waits import until

__all__ = ["debian_binary", "stop_server", "until_ready"]


def _cache(package: str) -> Path:
    return Path(tempfile.gettempdir()) / f"mpijc-{package}"


def _extracted(package: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        found = _cache(package) / "usr" / "bin" / name
        if found.exists():
            return str(found)
    return None


def _install(package: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["apt-get", "install", "-y", "-q", package], capture_output=True, text=True, check=False
    )


def debian_binary(package: str, names: tuple[str, ...]) -> tuple[str | None, str]:
    """The executable of ``package`` (first of ``names`` found), installing it when missing; else
    ``None`` and why."""
    for name in names:
        if found := shutil.which(name):
            return found, ""
    if found := _extracted(package, names):
        return found, ""
    if shutil.which("apt-get") is None:
        return None, f"{package} is not installed and this machine has no apt-get to install it"
    tried: list[str] = []
    if os.geteuid() == 0:
        done = _install(package)
        if done.returncode != 0:  # maybe an empty package list: update once, then try again
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
            done = _install(package)
        for name in names:
            if found := shutil.which(name):
                return found, ""
        tried.append(f"apt-get install: {done.stderr.strip()[-300:]}")
    cache = _cache(package)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["apt-get", "download", "-q", package], cwd=tmp, capture_output=True, text=True, check=False
        )
        debs = list(Path(tmp).glob("*.deb"))
        if debs:
            subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(cache)], capture_output=True, check=False)
        elif done.returncode != 0:
            tried.append(f"apt-get download: {done.stderr.strip()[-300:]}")
    if found := _extracted(package, names):
        return found, ""
    return None, f"cannot install {package}: " + "; ".join(tried or ["no binary after extracting it"])


def _tail(log: Path) -> str:
    return log.read_text()[-2000:]


async def until_ready(process: subprocess.Popen[bytes], url: str, log: Path, name: str) -> None:
    """Until the server ``process`` answers ``GET {url}/-/ready`` (Prometheus and Alertmanager
    both serve it); raises with the tail of its ``log`` if it exits first."""

    async def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}: {_tail(log)}")
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient() as client:
                return (await client.get(f"{url}/-/ready", timeout=1)).status_code == 200
        return False

    await until(ready, timeout_s=30)


async def stop_server(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, and SIGKILL if it has not stopped 15 s later; nothing if it is not running."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(process.wait, 15)
    except subprocess.TimeoutExpired:
        process.kill()
        await asyncio.to_thread(process.wait)
