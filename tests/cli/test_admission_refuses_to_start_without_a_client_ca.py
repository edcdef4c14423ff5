"""The bare ``admission`` command used to serve any caller without a word (200 forged reviews, 200
records): without a client CA it now refuses to start, in one line naming the setting and the
flag, and ``--insecure-no-client-auth`` starts it with a warning."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from controller.testing.ports import free_port
from controller.testing.processes import run_cli
from tests.audit_helpers import make_certificate

pytestmark = pytest.mark.slow


def environment(tmp_path: Path, port: int) -> dict[str, str]:
    certificate = make_certificate(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    env.update(
        {
            "MPIJC_EMBEDDED__DATA_DIR": str(tmp_path / "data"),
            "MPIJC_NATS__URL": f"nats://127.0.0.1:{free_port()}",  # records wait in memory: fine here
            "MPIJC_ADMISSION__HOST": "127.0.0.1",
            "MPIJC_ADMISSION__PORT": str(port),
            "MPIJC_ADMISSION__CERT_FILE": str(certificate.cert),
            "MPIJC_ADMISSION__KEY_FILE": str(certificate.key),
            "MPIJC_ADMISSION__QUOTA_CHECK": "off",
            "MPIJC_METRICS__PORT": str(free_port()),
        }
    )
    return env


def test_without_a_client_ca_it_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    result = run_cli(["admission"], environment(tmp_path, free_port()), tmp_path, timeout_s=60)

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "MPIJC_ADMISSION__CLIENT_CA_FILE is not set" in lines[0]
    assert "--insecure-no-client-auth" in lines[0]


def test_told_insecure_it_serves_and_warns(tmp_path: Path) -> None:
    port = free_port()
    env = environment(tmp_path, port)
    log = tmp_path / "admission.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "admission", "--insecure-no-client-auth"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        context = ssl.create_default_context(cafile=env["MPIJC_ADMISSION__CERT_FILE"])
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                answer = httpx.get(f"https://localhost:{port}/healthz", verify=context, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert answer.status_code == 200
        text = log.read_text()
        assert "WARNING" in text and "--insecure-no-client-auth: no client certificate is asked for" in text
    finally:
        process.terminate()
        process.wait(timeout=30)
