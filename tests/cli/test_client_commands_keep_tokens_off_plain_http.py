"""The commands that ask the API (``wait``, ``runs``, ``findings``, ``compare``, ``logs``) send their
bearer token over plain http to this machine only; elsewhere they want https, checked against a
CA file, and refuse before connecting unless told ``--insecure-http``. The API serves HTTPS with
the certificate of ``MPIJC_API__TLS_CERT_FILE``: served for real here with a certificate made
for the test, and read by the commands with its CA."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.cli import waiting
from controller.cli.exits import Exit
from controller.cli.runtime import api_certificate
from controller.client.connection import is_loopback
from controller.contract.errors import StartupError
from controller.contract.settings import ApiSettings, ClientSettings, Settings
from controller.testing.processes import run_cli
from tests.api_fixtures import T0, insert_runs, job_story, run_row
from tests.audit_helpers import Certificate, make_certificate
from tests.cli.test_users_read_history_through_the_api import call
from tests.live_events import GUARD_S, Served, Writer, serving
from watchers.admission.certificates import CertificateReloader

ELSEWHERE = "http://mpijc-api.invalid:8480"
"""Another machine over plain http; `.invalid` never resolves, so nothing could reach it anyway."""
COMMANDS = {
    "wait": (["wait", "team-a/pi", "--timeout", "5s"], Exit.REFUSED),
    "runs": (["runs"], Exit.REFUSED),
    "findings": (["findings", "team-a/pi"], Exit.REFUSED),
    "compare": (["compare", "team-a/pi@1", "team-a/pi@2"], Exit.REFUSED),
    "logs": (["logs", "team-a/pi"], Exit.REFUSED),
}
"""Each command's arguments and its exit status for a refusal: the same for all."""


@pytest.fixture(autouse=True)
def no_client_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MPIJC_CLIENT__ALLOW_INSECURE_HTTP", "MPIJC_CLIENT__CA_FILE", "MPIJC_CLIENT__API_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_token_is_not_sent_over_plain_http_to_another_machine(command: str) -> None:
    argv, refused = COMMANDS[command]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}

    said = run_cli([*argv, "--api", ELSEWHERE, "--token", "token-admin"], env, timeout_s=GUARD_S)

    assert said.returncode == refused, said
    (line,) = said.stderr.strip().splitlines()
    assert "refusing to send the token over plain http to mpijc-api.invalid:8480" in line
    assert "--insecure-http" in line and "MPIJC_CLIENT__ALLOW_INSECURE_HTTP=true" in line


async def test_told_so_the_token_goes_over_plain_http(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    flagged = await call(capsys, "runs", "--api", ELSEWHERE, "--token", "t", "--insecure-http")
    monkeypatch.setenv("MPIJC_CLIENT__ALLOW_INSECURE_HTTP", "true")
    configured = await call(capsys, "runs", "--api", ELSEWHERE, "--token", "t")

    for said in (flagged, configured):  # past the check: it tried to connect
        assert (
            said.code == Exit.REFUSED and "cannot reach the API at http://mpijc-api.invalid:8480" in said.err
        ), said


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.7", False),
        ("::ffff:10.0.0.7", False),
        ("mpijc-api.mpijob-controller.svc", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_loopback_is_told_from_other_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# -------------------------------------------------------------------------------- the API over TLS


@pytest.fixture
def certificate(tmp_path: Path) -> Certificate:
    return make_certificate(tmp_path, "api")  # for localhost and 127.0.0.1, its own CA


@pytest.fixture
async def https_api(engine: AsyncEngine, certificate: Certificate) -> AsyncIterator[Served]:
    await insert_runs(engine, [run_row("team-a", "pi", T0)])
    reloader = CertificateReloader(certificate.cert, certificate.key)
    async with serving(engine, tls=reloader.context) as served:
        yield served


async def test_the_api_serves_https_to_a_client_that_trusts_its_ca(
    https_api: Served, certificate: Certificate, capsys: pytest.CaptureFixture[str]
) -> None:
    assert https_api.url.startswith("https://")
    token = ["--token", "token-admin"]

    trusted = await call(capsys, "runs", "--api", https_api.url, "--ca-file", str(certificate.cert), *token)
    unknown = await call(capsys, "runs", "--api", https_api.url, *token)

    assert (trusted.code, trusted.err) == (0, ""), trusted
    assert "team-a" in trusted.out and "pi" in trusted.out
    assert unknown.code == Exit.REFUSED and "CERTIFICATE_VERIFY_FAILED" in unknown.err, unknown
    plain = https_api.url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):  # no plain HTTP on that port
        async with httpx.AsyncClient(timeout=GUARD_S) as client:
            await client.get(f"{plain}/api/v1/runs", headers={"Authorization": "Bearer token-admin"})


async def test_wait_follows_a_job_over_https(engine: AsyncEngine, certificate: Certificate) -> None:
    _, story = job_story("train", outcome="Succeeded")
    await Writer(engine).write(story)
    reloader = CertificateReloader(certificate.cert, certificate.key)
    async with serving(engine, tls=reloader.context) as api:
        client = ClientSettings(api_url=api.url, token="token-alice", ca_file=str(certificate.cert))  # type: ignore[arg-type]

        assert await waiting.wait("team-a/train", client, timeout_s=GUARD_S) == Exit.OK


async def test_an_unreadable_ca_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    said = await call(capsys, "runs", "--api", "https://localhost:1", "--ca-file", str(tmp_path / "none.pem"))

    assert said.code == Exit.USAGE and "--ca-file or MPIJC_CLIENT__CA_FILE: cannot load" in said.err, said


def test_the_api_certificate_needs_both_halves_and_readable_files(tmp_path: Path) -> None:
    made = make_certificate(tmp_path, "api")

    def settings(**api: object) -> Settings:
        return Settings(_env_file=None, api=ApiSettings.model_validate(api))  # type: ignore[call-arg]

    assert api_certificate(settings()) is None
    assert api_certificate(settings(tls_cert_file=made.cert, tls_key_file=made.key)) is not None
    with pytest.raises(StartupError, match=r"^MPIJC_API__TLS_KEY_FILE: unset"):
        api_certificate(settings(tls_cert_file=made.cert))
    with pytest.raises(StartupError, match=r"^MPIJC_API__TLS_CERT_FILE: cannot serve HTTPS"):
        api_certificate(settings(tls_cert_file=tmp_path / "gone.crt", tls_key_file=made.key))
