"""Builders for the audit tests: AdmissionReview bodies in their real shapes, audit records,
self-signed certificates (``openssl`` CLI), and a way to write records into the chain."""

from __future__ import annotations

import contextlib
import copy
import re
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.audit import Actor, AuditRecord, AuditVerb, audited_object, service_account_of
from controller.store.auditchain import StoredRecord, append
from controller.testing.objects import mpijob

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
Obj = dict[str, Any]


@dataclass(frozen=True)
class Certificate:
    """A self-signed server certificate (also its own CA)."""

    cert: Path
    key: Path

    def trusted(self) -> ssl.SSLContext:
        """A client's TLS context that trusts this certificate."""
        return ssl.create_default_context(cafile=str(self.cert))

    def client(self, port: int) -> httpx.AsyncClient:
        """An HTTPS client of ``localhost:port`` that trusts this certificate."""
        return httpx.AsyncClient(base_url=f"https://localhost:{port}", verify=self.trusted())


def make_certificate(
    directory: Path, name: str = "server", names: Sequence[str] = ("DNS:localhost", "IP:127.0.0.1")
) -> Certificate:
    """A fresh P-256 certificate, valid for a day, for ``names`` (subjectAltName entries)."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", f"/CN=localhost/O={name}",
            "-addext", f"subjectAltName={','.join(names)}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return Certificate(cert, key)


def trainjob(name: str = "bert", namespace: str = "team-b", uid: str | None = None) -> Obj:
    """A TrainJob ``trainer.kubeflow.org/v1alpha1`` as the API server stores it."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": "48213",
            "generation": 1,
            "creationTimestamp": "2026-11-23T08:55:00Z",
        },
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
            "trainer": {"numNodes": 2, "image": "registry.example.com/team-b/bert:1.4"},
        },
    }  # fmt: skip


USERS: dict[str, Obj] = {
    "alice": {
        "username": "alice@example.com",
        "uid": "4f6c1d2e-alice",
        "groups": ["team-a", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=3c9b"], "scopes": ["openid", "groups"]},
    },
    "pipeline": {
        "username": "system:serviceaccount:team-b:pipeline-runner",
        "uid": "9a1e7f30-sa",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team-b", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["pipeline-7d9f-x2k"]},
    },
}

_GROUPS = {
    "MPIJob": ("kubeflow.org", "v2beta1", "mpijobs"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
}
_OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


def admission_review(
    operation: str,
    obj: Obj,
    *,
    user: str = "alice",
    old: Obj | None = None,
    dry_run: bool = False,
    uid: str | None = None,
) -> Obj:
    """The AdmissionReview the API server sends: ``object`` is null for DELETE, ``oldObject`` for UPDATE/DELETE."""
    group, version, resource = _GROUPS.get(obj["kind"], ("", "v1", obj["kind"].lower() + "s"))
    meta = obj["metadata"]
    options: Obj = {"apiVersion": "meta.k8s.io/v1", "kind": _OPTIONS.get(operation, "CreateOptions")}
    if operation == "DELETE":
        options["propagationPolicy"] = "Background"
    else:
        options["fieldManager"] = "kubectl-client-side-apply"
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    gvr = {"group": group, "version": version, "resource": resource}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "operation": operation,
            "userInfo": copy.deepcopy(USERS[user]),
            "object": None if operation == "DELETE" else obj,
            "oldObject": old if operation == "UPDATE" else (obj if operation == "DELETE" else None),
            "dryRun": dry_run,
            "options": options,
        },
    }


def a_mpijob(name: str = "pi", namespace: str = "team-a", uid: str | None = None) -> Obj:
    return mpijob(name, namespace, uid=uid)


def audit_record(
    n: int,
    *,
    namespace: str = "team-a",
    verb: AuditVerb = "create",
    at: datetime | None = None,
    user: str | None = "alice@example.com",
    name: str | None = None,
    uid: str | None = None,
    reason: str | None = None,
    message: str | None = None,
) -> AuditRecord:
    """Record number ``n``: a distinct id, an event time ``n`` minutes after :data:`T0`."""
    return AuditRecord(
        id=f"test/{n}",
        source="lifecycle" if verb in {"completed", "failed", "deleted"} else "admission",
        verb=verb,
        at=at or T0 + timedelta(minutes=n),
        namespace=namespace,
        actor=Actor(
            username=user,
            uid="u-1",
            groups=("team-a", "system:authenticated"),
            service_account=service_account_of(user),
        )
        if user
        else None,
        object=audited_object("MPIJob", name or f"job-{n}", uid or f"uid-{n}"),
        outcome="allowed" if user else "Failed",
        reason=reason,
        message=message,
    )


async def write(
    engine: AsyncEngine, records: Sequence[AuditRecord], now: datetime = T0
) -> list[StoredRecord]:
    """Append ``records`` to the chain in one transaction, recorded at ``now``."""
    async with engine.begin() as conn:
        return await append(conn, records, now)


async def write_aged_history(engine: AsyncEngine) -> None:
    """Records 1-3 recorded 40 days before T0, 4-5 twenty days before, 6 at T0: a 30-day purge
    at T0 removes the first three."""
    day = timedelta(days=1)
    await write(engine, [audit_record(n) for n in (1, 2, 3)], T0 - 40 * day)
    await write(engine, [audit_record(n) for n in (4, 5)], T0 - 20 * day)
    await write(engine, [audit_record(6)], T0)


_CEF_PAIR = re.compile(r"(\w+)=((?:\\.|[^\\])*?)(?= \w+=|$)")
_CEF_UNESCAPE = {"\\": "\\", "=": "=", "|": "|", "n": "\n", "r": "\r"}


def parse_cef(line: str) -> tuple[list[str], dict[str, str]]:
    """A CEF line read back as a SIEM reads it: the six header fields (``\\|`` and ``\\\\``
    unescaped) after ``CEF:0``, and the extension's keys and values (``\\=``, ``\\\\``, ``\\n``,
    ``\\r`` unescaped; a value runs to the next unescaped `` key=``)."""
    assert line.startswith("CEF:0|"), line[:20]
    header: list[str] = []
    field, i = "", len("CEF:0|")
    while len(header) < 6:
        if line[i] == "\\":
            field, i = field + line[i + 1], i + 2
        elif line[i] == "|":
            header, field, i = [*header, field], "", i + 1
        else:
            field, i = field + line[i], i + 1
    extension = line[i:]
    pairs = {
        key: re.sub(r"\\(.)", lambda m: _CEF_UNESCAPE.get(m.group(1), m.group(1)), value)
        for key, value in _CEF_PAIR.findall(extension)
    }
    return header, pairs


_RFC5424 = re.compile(rb"<(\d{1,3})>1 (\S+) (\S+) (\S+) (\S+) (\S+) (-|\[.*?\]) (.*)", re.DOTALL)


def parse_syslog(message: bytes) -> tuple[int, int, str, str]:
    """An RFC 5424 message's facility, severity, MSGID and MSG (UTF-8)."""
    match = _RFC5424.fullmatch(message)
    assert match is not None, message[:80]
    pri = int(match.group(1))
    return pri // 8, pri % 8, match.group(6).decode(), match.group(8).decode()


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain asyncpg connection to ``url`` (bypassing the store), closed on the way out."""
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()
