"""The admission webhook runs as its rendered container does, and lets in only the API server.

The kubernetes overlay with the admission components is rendered with the real ``kubectl
kustomize``. Its cert-manager Certificates are issued here as cert-manager would (issuer chain,
common name, DNS names, usages; with ``cryptography``) into the Secrets they name, or
``self-signed-ca.sh`` makes them (with ``kubectl`` answering offline), and the pod's Secret
volumes are laid out as the kubelet would (only the listed items). ``mpijob-controller`` is then
started with the container's args and environment (its ConfigMap and its own variables, mount
paths moved to this test's directories; only the ports and NATS are this test's). Then, calling
as the API server does (the Service's DNS name, verified against the CA the webhook configuration
trusts):

- the probes answer: readiness connects to the https port, liveness gets /healthz on the metrics port;
- without a client certificate, or with one from another CA, the handshake fails and nothing is
  recorded; with the API server's certificate the review is allowed and its record on the AUDIT
  stream says ``caller: mtls``;
- with the no-client-auth component anyone gets in, and the record says ``caller: unverified``;
- a client CA file the webhook cannot read stops it with one line naming its variable.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import functools
import os
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.bus.streams import ensure_streams
from controller.contract.audit import AuditRecord, parse_audit_record
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
from controller.testing.objects import mpijob
from controller.testing.ports import free_port
from controller.testing.processes import run_cli, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.waits import STARTUP_S, until
from tests.audit_helpers import a_mpijob, admission_review
from tests.conftest import Services
from tests.deploy.test_deploy_manifests_render_and_validate import (
    ADMISSION,
    DEPLOY,
    NO_CLIENT_AUTH,
    _effective_env,
    _kubectl,
    _overlay_copy,
    find,
    render,
)
from tests.processes import stop

# `slow`: one worker runs them all, in file order (tests/conftest.py): the manifests are rendered
# once for the module
pytestmark = pytest.mark.slow

Obj = dict[str, Any]
Secrets = dict[str, dict[str, bytes]]
Start = Callable[..., AbstractAsyncContextManager["Webhook"]]
""":func:`running` in this test's directory, on its NATS: ``start(objs, secrets, serving_ca, extra=None)``."""
"""Secret name → key → bytes, as the pods would see them."""
RecordedCaller = Callable[[Obj], Awaitable[str | None]]
"""How the caller of the one audit record a test's webhook stored, that of the review given, was
authenticated."""

USAGES = {"server auth": ExtendedKeyUsageOID.SERVER_AUTH, "client auth": ExtendedKeyUsageOID.CLIENT_AUTH}

# ---------------------------------------------------------------------- cert-manager, in short


def _pem(thing: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    if isinstance(thing, x509.Certificate):
        return thing.public_bytes(serialization.Encoding.PEM)
    return thing.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    spec: Obj,
    key: ec.EllipticCurvePrivateKey,
    signer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
) -> x509.Certificate:
    """What cert-manager issues for a Certificate's ``spec``; self-signed when ``signer`` is None."""
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, spec["commonName"])] if "commonName" in spec else []
    )
    issuer_name, signing_key = (signer[0].subject, signer[1]) if signer else (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    hours = int(spec.get("duration", "2160h").removesuffix("h"))
    ca = bool(spec.get("isCA"))
    usages = spec.get("usages", ["digital signature", "key encipherment"])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=hours))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()), critical=False
        )
    )
    signs, enciphers = "digital signature" in usages or ca, "key encipherment" in usages
    if signs or enciphers:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=signs,
                content_commitment=False,
                key_encipherment=enciphers,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if extended := [USAGES[u] for u in usages if u in USAGES]:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    if names := spec.get("dnsNames"):
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=not subject
        )
    return builder.sign(signing_key, hashes.SHA256())


def issue_certificates(objs: list[Obj]) -> Secrets:
    """The Secret of every Certificate of the render, each issued by its Issuer (self-signed or a CA
    whose Secret is another Certificate's), with ``tls.crt``, ``tls.key`` and ``ca.crt``."""
    issuers = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Issuer"}
    wanted = {o["spec"]["secretName"]: o["spec"] for o in objs if o["kind"] == "Certificate"}
    secrets: Secrets = {}

    def issue(secret: str) -> dict[str, bytes]:
        if secret not in secrets:
            spec = wanted[secret]
            issuer = issuers[spec["issuerRef"]["name"]]
            key = ec.generate_private_key(ec.SECP256R1())
            signer = None
            if "ca" in issuer:
                ca = issue(issuer["ca"]["secretName"])
                signer = (
                    x509.load_pem_x509_certificate(ca["tls.crt"]),
                    serialization.load_pem_private_key(ca["tls.key"], None),
                )
                assert isinstance(signer[1], ec.EllipticCurvePrivateKey)
            else:
                assert "selfSigned" in issuer, issuer
            certificate = _certificate(spec, key, signer)  # type: ignore[arg-type]
            secrets[secret] = {
                "tls.crt": _pem(certificate),
                "tls.key": _pem(key),
                "ca.crt": _pem(signer[0] if signer else certificate),
            }
        return secrets[secret]

    for secret in wanted:
        issue(secret)
    return secrets


# ------------------------------------------------------------------------- the pod, as rendered


@dataclass
class Webhook:
    """The started webhook: where it listens and who it says it is."""

    https: int
    metrics: int
    service_name: str
    serving_ca: bytes
    process: subprocess.Popen[bytes]
    log: Path


NATS_PASSWORDS = {"mpijc-nats-users": {"admission": b"p" + os.urandom(8).hex().encode()}}


def _pod_files(objs: list[Obj], secrets: Secrets, root: Path) -> tuple[Obj, dict[str, str]]:
    """The webhook container, and its volumes laid out under ``root`` as the kubelet would
    (a Secret volume holds only its listed items): mount path → directory."""
    webhook = find(objs, "StatefulSet", "mpijc-admission")
    pod = webhook["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounted = {}
    for mount in container["volumeMounts"]:
        directory = root / mount["name"]
        directory.mkdir(parents=True)
        source = volumes.get(mount["name"], {}).get("secret")  # no entry: a volumeClaimTemplate
        if source is not None:
            data = secrets[source["secretName"]]  # a missing Secret keeps the pod from starting
            for item in source.get("items") or [{"key": key, "path": key} for key in data]:
                (directory / item["path"]).write_bytes(data[item["key"]])
        mounted[mount["mountPath"]] = str(directory)
    return container, mounted


def _environment(
    objs: list[Obj], container: Obj, mounted: dict[str, str], secrets: Secrets
) -> dict[str, str]:
    """The container's environment with mount paths moved to ``mounted``; Secret references resolved."""
    env: dict[str, str] = {}
    owner = find(objs, "StatefulSet", "mpijc-admission")
    for name, given in _effective_env(objs, owner).items():
        if isinstance(given, dict):
            ref = given["secretKeyRef"]
            given = secrets[ref["name"]][ref["key"]].decode()  # noqa: PLW2901
        value: str = given
        for path, directory in mounted.items():
            if value == path or value.startswith(path + "/"):
                value = directory + value.removeprefix(path)
                break
        env[name] = value
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "https": int(env["MPIJC_ADMISSION__PORT"]),
        "metrics": int(env["MPIJC_METRICS__PORT"]),
    }
    return env


def _serving_ca(objs: list[Obj], secrets: Secrets) -> bytes:
    """The CA cert-manager's injector puts into the webhook configuration's caBundle."""
    configuration = find(objs, "ValidatingWebhookConfiguration", "mpijob-controller-audit")
    _, name = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    return secrets[find(objs, "Certificate", name)["spec"]["secretName"]]["ca.crt"]


def _issued(objs: list[Obj]) -> tuple[Secrets, bytes]:
    """The Secrets cert-manager issues for ``objs`` (with the NATS passwords) and the serving CA."""
    secrets = issue_certificates(objs) | NATS_PASSWORDS
    return secrets, _serving_ca(objs, secrets)


@contextlib.asynccontextmanager
async def running(
    objs: list[Obj],
    secrets: Secrets,
    serving_ca: bytes,
    where: Path,
    nats_url: str,
    topology: Topology,
    extra: dict[str, str] | None = None,
) -> AsyncIterator[Webhook]:
    """``mpijob-controller`` started as the rendered container, until the probes say it is up;
    ``extra`` variables stand for what the pod gets from outside (its API server)."""
    container, mounted = _pod_files(objs, secrets, where / "pod")
    env = _environment(objs, container, mounted, secrets)
    ports = {"https": free_port(), "metrics": free_port()}
    env |= {
        "MPIJC_ADMISSION__PORT": str(ports["https"]),
        "MPIJC_METRICS__PORT": str(ports["metrics"]),
        "MPIJC_NATS__URL": nats_url,
        "MPIJC_NATS__PREFIX": topology.prefix,
        **(extra or {}),
    }
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    log = where / "admission.log"
    process = start_cli(container["args"], inherited | env, where, log)
    ref = find(objs, "ValidatingWebhookConfiguration", "mpijob-controller-audit")["webhooks"][0][
        "clientConfig"
    ]
    name = f"{ref['service']['name']}.{ref['service']['namespace']}.svc"
    webhook = Webhook(ports["https"], ports["metrics"], name, serving_ca, process, log)
    try:

        async def probes_pass() -> bool:
            assert process.poll() is None, log.read_text()
            return all([await _probe(container[p], ports) for p in ("readinessProbe", "livenessProbe")])

        await until(probes_pass, timeout_s=STARTUP_S, what=log.read_text)
        yield webhook
    finally:
        stop(process)


async def _probe(probe: Obj, ports: dict[str, int]) -> bool:
    """One kubelet probe of the container: a TCP connection, or an HTTP GET answered 2xx/3xx."""
    if "tcpSocket" in probe:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", ports[probe["tcpSocket"]["port"]])
        except OSError:
            return False
        writer.close()
        return True
    get = probe["httpGet"]
    assert get.get("scheme", "HTTP") == "HTTP", "the kubelet has no client certificate for HTTPS"
    try:
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"http://127.0.0.1:{ports[get['port']]}{get['path']}")
    except httpx.TransportError:
        return False
    return 200 <= answer.status_code < 400


async def post_review(webhook: Webhook, body: Obj, client: tuple[Path, Path] | None) -> httpx.Response:
    """POST ``body`` as the API server does: to the Service's DNS name (SNI and verification)."""
    context = ssl.create_default_context(cadata=webhook.serving_ca.decode())
    if client is not None:
        context.load_cert_chain(*client)
    async with httpx.AsyncClient(verify=context) as http:
        return await http.post(
            f"https://127.0.0.1:{webhook.https}/validate",
            json=body,
            extensions={"sni_hostname": webhook.service_name},
        )


def _pair(secret: dict[str, bytes], where: Path) -> tuple[Path, Path]:
    where.mkdir(parents=True)
    (where / "tls.crt").write_bytes(secret["tls.crt"])
    (where / "tls.key").write_bytes(secret["tls.key"])
    return where / "tls.crt", where / "tls.key"


def reviews_counted(webhook: Webhook) -> float:
    """``mpijc_admission_reviews_total`` over its labels, from the metrics port."""
    text = httpx.get(f"http://127.0.0.1:{webhook.metrics}/metrics").text
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("mpijc_admission_reviews_total{")
    )


async def stored(js: JetStreamContext, topology: Topology, count: int) -> list[AuditRecord]:
    """The AUDIT stream's records once it holds ``count`` of them."""

    async def holds() -> bool:
        return (await js.stream_info(topology.stream("audit"))).state.messages >= count

    await until(holds, timeout_s=15)
    sub = await js.pull_subscribe(topology.wildcard("audit"), stream=topology.stream("audit"))
    try:
        return [parse_audit_record(m.data) for m in await sub.fetch(count, timeout=5)]
    finally:
        await sub.unsubscribe()


# ------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Obj]]:
    combinations = {
        "cert-manager": ADMISSION,
        "no-client-auth": (*ADMISSION, NO_CLIENT_AUTH),
        "self-signed": ("admission",),
    }
    return {
        name: render(_overlay_copy("kubernetes", components, tmp_path_factory.mktemp("overlays") / name))
        for name, components in combinations.items()
    }


@pytest.fixture
async def audit_stream(nats_client: NATS, topology: Topology, services: Services) -> JetStreamContext:
    js = nats_client.jetstream()
    await ensure_streams(js, topology, NatsSettings(url=services.nats_url, prefix=topology.prefix))
    return js


@pytest.fixture
def recorded_caller(audit_stream: JetStreamContext, topology: Topology) -> RecordedCaller:
    """How the caller of the one audit record on the test's AUDIT stream was authenticated, once
    it is there; the record must be of ``review``."""

    async def caller(review: Obj) -> str | None:
        (record,) = await stored(audit_stream, topology, 1)
        assert record.request_uid == review["request"]["uid"]
        return record.caller

    return caller


@pytest.fixture
def start(tmp_path: Path, services: Services, topology: Topology) -> Start:
    return functools.partial(running, where=tmp_path, nats_url=services.nats_url, topology=topology)


# ---------------------------------------------------------------------------------------- tests


async def test_only_the_api_servers_client_certificate_gets_in(
    renders: dict[str, list[Obj]],
    recorded_caller: RecordedCaller,
    start: Start,
    tmp_path: Path,
) -> None:
    objs = renders["cert-manager"]
    secrets, ca_bundle = _issued(objs)
    apiserver = _pair(secrets["mpijc-admission-apiserver-client"], tmp_path / "apiserver")
    # a client certificate from the serving CA: right purpose, wrong CA
    serving_ca = find(objs, "Issuer", "mpijc-admission-ca")["spec"]["ca"]["secretName"]
    stranger = x509.load_pem_x509_certificate(secrets[serving_ca]["tls.crt"])
    stranger_key = serialization.load_pem_private_key(secrets[serving_ca]["tls.key"], None)
    assert isinstance(stranger_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    forged = _certificate(
        {"commonName": "kube-apiserver", "usages": ["client auth", "digital signature"]},
        key,
        (stranger, stranger_key),
    )
    impostor = _pair({"tls.crt": _pem(forged), "tls.key": _pem(key)}, tmp_path / "impostor")

    async with start(objs, secrets, ca_bundle) as webhook:
        for client in (None, impostor):
            with pytest.raises(httpx.TransportError):
                await post_review(webhook, admission_review("DELETE", a_mpijob()), client)
        body = admission_review("CREATE", a_mpijob(), user="alice")
        answer = await post_review(webhook, body, apiserver)
        assert answer.json()["response"] == {"uid": body["request"]["uid"], "allowed": True}
        assert reviews_counted(webhook) == 1
        assert await recorded_caller(body) == "mtls"


async def test_without_client_auth_anyone_gets_in_and_records_say_unverified(
    renders: dict[str, list[Obj]], recorded_caller: RecordedCaller, start: Start
) -> None:
    objs = renders["no-client-auth"]
    async with start(objs, *_issued(objs)) as webhook:
        body = admission_review("DELETE", a_mpijob(), user="alice")  # forged by anyone
        assert (await post_review(webhook, body, None)).json()["response"]["allowed"] is True
        assert await recorded_caller(body) == "unverified"


async def test_the_rendered_webhook_warns_about_a_job_over_its_namespace_gpu_quota(
    renders: dict[str, list[Obj]], start: Start, tmp_path: Path
) -> None:
    objs = renders["no-client-auth"]
    with SimCluster() as cluster:
        cluster.create(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "gpu-quota", "namespace": "team-a"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "16"}},
                "status": {
                    "hard": {"requests.nvidia.com/gpu": "16"},
                    "used": {"requests.nvidia.com/gpu": "4"},
                },
            }
        )
        api = {"MPIJC_KUBE__KUBECONFIG": str(cluster.kubeconfig(tmp_path / "kubeconfig"))}
        async with start(objs, *_issued(objs), extra=api) as webhook:
            body = admission_review("CREATE", mpijob("llm", workers=4, gpus=8), user="alice")
            answer = (await post_review(webhook, body, None)).json()["response"]
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "ResourceQuota team-a/gpu-quota: this MPIJob requests 32 nvidia.com/gpu (4 Workers x 8), "
        "12 of 16 are left"
    ]


def _run_self_signed_ca_sh(tmp_path: Path, ca_dir: Path, out_dir: Path) -> tuple[Secrets, bytes]:
    """``self-signed-ca.sh`` with a ``kubectl`` that renders ``--dry-run=client`` for real and
    records what would be applied and patched: (the Secrets applied, the caBundle patched in)."""
    record = tmp_path / "cluster"
    record.mkdir(parents=True)
    shim = tmp_path / "bin" / "kubectl"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        'case " $* " in\n'
        f'  *" apply "*) cat >> "{record}/applied.yaml"; echo --- >> "{record}/applied.yaml" ;;\n'
        f'  *" patch "*) shift $(($# - 1)); printf %s "$1" > "{record}/patch.json" ;;\n'
        f'  *) exec "{_kubectl()}" "$@" ;;\n'
        "esac\n"
    )
    shim.chmod(0o755)
    done = subprocess.run(
        ["bash", str(DEPLOY / "admission" / "self-signed-ca.sh"), "mpijob-controller", "30"],
        env={
            **os.environ,
            "PATH": f"{shim.parent}:{os.environ['PATH']}",
            "KUBECONFIG": str(tmp_path / "no-cluster"),
            "CA_DIR": str(ca_dir),
            "OUT_DIR": str(out_dir),
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    secrets = {
        s["metadata"]["name"]: {k: base64.b64decode(v) for k, v in s["data"].items()}
        for s in yaml.safe_load_all((record / "applied.yaml").read_text())
        if s
    }
    (patch,) = yaml.safe_load((record / "patch.json").read_text())
    assert patch["path"] == "/webhooks/0/clientConfig/caBundle"
    return secrets, base64.b64decode(patch["value"])


async def test_self_signed_ca_sh_makes_what_the_webhook_and_the_api_server_need(
    renders: dict[str, list[Obj]],
    recorded_caller: RecordedCaller,
    start: Start,
    tmp_path: Path,
) -> None:
    ca_dir = tmp_path / "cas"
    ca_dir.mkdir()
    secrets, bundle = _run_self_signed_ca_sh(tmp_path / "first", ca_dir, tmp_path / "first" / "apiserver")
    assert set(secrets["mpijc-admission-client-ca"]) == {"ca.crt"}, (
        "the client CA's key stays out of the cluster"
    )
    # renewing with the same CA_DIR: a new client certificate the running webhook still trusts
    out = tmp_path / "renewed" / "apiserver"
    renewed, renewed_bundle = _run_self_signed_ca_sh(tmp_path / "renewed", ca_dir, out)
    assert (renewed["mpijc-admission-client-ca"], renewed_bundle) == (
        secrets["mpijc-admission-client-ca"],
        bundle,
    )
    kubeconfig = yaml.safe_load((out / "webhook-kubeconfig.yaml").read_text())
    (user,) = kubeconfig["users"]
    assert user["name"] == "mpijc-admission.mpijob-controller.svc"
    files = {k: out / Path(v).name for k, v in user["user"].items()}  # as copied to the node
    assert files["client-key"].stat().st_mode & 0o077 == 0

    async with start(renders["self-signed"], secrets | NATS_PASSWORDS, bundle) as webhook:
        with pytest.raises(httpx.TransportError):
            await post_review(webhook, admission_review("DELETE", a_mpijob()), None)
        body = admission_review("CREATE", a_mpijob())
        answer = await post_review(webhook, body, (files["client-certificate"], files["client-key"]))
        assert answer.json()["response"]["allowed"] is True
        assert await recorded_caller(body) == "mtls"


def test_an_unreadable_client_ca_stops_the_webhook_in_one_line(
    renders: dict[str, list[Obj]], topology: Topology, tmp_path: Path
) -> None:
    objs = renders["cert-manager"]
    secrets, _ = _issued(objs)
    secrets["mpijc-admission-client-ca"]["ca.crt"] = b"not a certificate\n"
    container, mounted = _pod_files(objs, secrets, tmp_path / "pod")
    env = _environment(objs, container, mounted, secrets) | {
        "MPIJC_ADMISSION__PORT": str(free_port()),
        "MPIJC_METRICS__PORT": str(free_port()),
        "MPIJC_NATS__URL": f"nats://127.0.0.1:{free_port()}",  # never reached: it stops before
    }
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    done = run_cli(container["args"], inherited | env, tmp_path, timeout_s=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("mpijob-controller admission: MPIJC_ADMISSION__CLIENT_CA_FILE: "), lines[0]
