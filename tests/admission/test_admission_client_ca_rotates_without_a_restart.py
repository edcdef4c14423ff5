"""A client CA rotation needs no restart of the webhook: a bundle that gains the new CA is loaded
within ``cert_reload_s``, so the API server's certificate from the new CA gets in while the old
one still does; until then the new one is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from tests.admission.test_admission_webhook_records_who_changed_jobs import (
    Bus,
    allows,
    webhook_settings,
)
from tests.audit_helpers import T0, Certificate, a_mpijob, admission_review, make_certificate
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.webhook import AdmissionWebhook


async def _allowed_as(hook: AdmissionWebhook, server: Certificate, client: Certificate) -> bool:
    """A review posted with ``client``'s certificate is answered and allowed (TransportError if the
    handshake refuses it)."""
    context = server.trusted()
    context.load_cert_chain(client.cert, client.key)
    body = admission_review("CREATE", a_mpijob())
    async with httpx.AsyncClient(verify=context) as http:
        return allows(await http.post(f"https://localhost:{hook.port}/validate", json=body), body)


async def test_a_new_client_ca_is_trusted_beside_the_old_one_without_a_restart(tmp_path: Path) -> None:
    server = make_certificate(tmp_path, name="server")
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = make_certificate(tmp_path / "old", name="kube-apiserver-old")  # each its own CA
    new = make_certificate(tmp_path / "new", name="kube-apiserver-new")
    bundle = tmp_path / "client-ca.crt"
    bundle.write_bytes(old.cert.read_bytes())
    bus = Bus()
    settings = webhook_settings(server).model_copy(update={"client_ca_file": bundle})
    async with AdmissionWebhook(
        settings, bus, AdmissionMetrics(CollectorRegistry()), clock=lambda: T0
    ) as hook:
        with pytest.raises(httpx.TransportError):
            await _allowed_as(hook, server, new)
        assert await _allowed_as(hook, server, old)

        bundle.write_bytes(old.cert.read_bytes() + new.cert.read_bytes())
        for _ in range(200):  # reloaded within cert_reload_s (0.05 s)
            try:
                assert await _allowed_as(hook, server, new)
                break
            except httpx.TransportError:
                await asyncio.sleep(0.02)
        else:
            raise AssertionError("the new client CA was never trusted")
        assert await _allowed_as(hook, server, old)
    assert [r.caller for r in bus.records] == ["mtls", "mtls", "mtls"]
