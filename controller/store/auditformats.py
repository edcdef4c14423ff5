"""How audit records leave the system: JSON Lines, CEF, syslog RFC 5424 frames, Splunk HEC events.

Pure functions over :class:`~controller.store.auditchain.StoredRecord`, shared by the exporters
(``consumers.audit.export``) and the API's streaming export, so a record reads the same
wherever it lands:

- **JSON Lines**: the chain link (``seq``, ``recorded_at``, ``prev_hash``, ``hash``, ``record``)
  as canonical JSON, one per line; anyone can re-verify it (``docs/audit.md``).
- **CEF**: ``CEF:0|Kubeflow|mpijob-controller|<version>|<signature id>|<name>|<severity>|<extension>``
  with header fields escaped (``\\`` and ``|``) and extension values escaped (``\\``, ``=``,
  line breaks as ``\\n``/``\\r``).
- **syslog**: RFC 5424 (``<PRI>1 TIMESTAMP HOSTNAME APP-NAME - MSGID - MSG``) carrying the CEF
  text, framed by octet counting (RFC 6587 §3.4.1, the framing RFC 5425 mandates over TLS).
- **HEC**: one JSON event per record for ``POST /services/collector/event``.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from controller.contract.audit import AuditRecord, Verb
from controller.store.auditchain import StoredRecord, canonical_json

__all__ = [
    "APP_NAME",
    "EXPORT_FORMATS",
    "ExportFormat",
    "cef",
    "cef_line",
    "hec_event",
    "jsonl_line",
    "octet_frame",
    "product_version",
    "signature",
    "syslog_message",
]

APP_NAME = "mpijob-controller"
VENDOR = "Kubeflow"

_SIGNATURES: dict[Verb, tuple[str, str, int, int]] = {
    # verb: (signature id, name ({kind} is filled in), CEF severity 0-10, syslog severity 0-7)
    "create": ("job-create", "{kind} created", 3, 6),
    "update": ("job-update", "{kind} changed", 3, 6),
    "delete": ("job-delete", "{kind} deletion requested", 5, 5),
    "completed": ("job-completed", "{kind} completed", 1, 6),
    "failed": ("job-failed", "{kind} failed", 6, 4),
    "deleted": ("job-deleted", "{kind} deleted", 3, 5),
    "purge": ("audit-purge", "Audit records purged", 7, 5),
}


@functools.cache
def product_version() -> str:
    """This package's version (the CEF ``Device Version``)."""
    try:
        return importlib.metadata.version(APP_NAME)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def signature(record: AuditRecord) -> tuple[str, str]:
    """The CEF signature id and event name of a record, e.g. ``("job-failed", "MPIJob failed")``."""
    sig, name, _, _ = _SIGNATURES[record.verb]
    return sig, name.format(kind=record.object.kind if record.object else "Job")


def jsonl_line(stored: StoredRecord) -> bytes:
    """One JSON Lines line: the chain link as canonical JSON."""
    return canonical_json(stored.export()) + b"\n"


def _header(value: str) -> str:
    value = value.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(value.splitlines())


def _value(value: str) -> str:
    return (
        value.replace("\\", "\\\\")
        .replace("=", "\\=")
        .replace("\r\n", "\\n")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
    )


def _millis(at: datetime) -> str:
    return str(int(at.timestamp() * 1000))


def _extension(stored: StoredRecord, record: AuditRecord) -> list[tuple[str, str | None]]:
    actor, obj = record.actor, record.object
    account = actor.service_account if actor else None
    return [
        ("rt", _millis(record.at)),
        ("act", record.verb),
        ("outcome", record.outcome),
        ("reason", record.reason),
        ("msg", record.message),
        ("suser", actor.username if actor else None),
        ("suid", actor.uid if actor else None),
        ("cs1Label", "namespace"),
        ("cs1", record.namespace),
        ("cs2Label", "object"),
        ("cs2", f"{obj.kind}/{obj.name}" if obj else None),
        ("cs3Label", "objectUid"),
        ("cs3", obj.uid if obj else None),
        ("cs4Label", "groups"),
        ("cs4", ",".join(actor.groups) if actor and actor.groups else None),
        ("cs5Label", "serviceAccount"),
        ("cs5", f"{account.namespace}/{account.name}" if account else None),
        ("cs6Label", "hash"),
        ("cs6", stored.hash),
        ("cn1Label", "seq"),
        ("cn1", str(stored.seq)),
        ("externalId", record.id),
    ]


def cef(stored: StoredRecord, version: str | None = None) -> str:
    """The record as one CEF line (no line break); labels are left out with their empty values."""
    record = stored.record
    sig, name = signature(record)
    severity = _SIGNATURES[record.verb][2]
    pairs = _extension(stored, record)
    present = {key for key, value in pairs if value}
    extension = " ".join(
        f"{key}={_value(value)}"
        for key, value in pairs
        if value and (not key.endswith("Label") or key.removesuffix("Label") in present)
    )
    header = "|".join(
        _header(part) for part in (VENDOR, APP_NAME, version or product_version(), sig, name, str(severity))
    )
    return f"CEF:0|{header}|{extension}"


def _syslog_token(value: str, limit: int) -> str:
    """An RFC 5424 header field: printable US-ASCII without spaces, or ``-``."""
    cleaned = "".join(c for c in value if 33 <= ord(c) <= 126)[:limit]
    return cleaned or "-"


def syslog_message(
    stored: StoredRecord, hostname: str, facility: int = 13, version: str | None = None
) -> bytes:
    """An RFC 5424 message carrying the record's CEF text (UTF-8, no BOM, no structured data)."""
    record = stored.record
    sig = _SIGNATURES[record.verb][0]
    pri = facility * 8 + _SIGNATURES[record.verb][3]
    timestamp = record.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    head = f"<{pri}>1 {timestamp} {_syslog_token(hostname, 255)} {APP_NAME} - {sig} -"
    return f"{head} {cef(stored, version)}".encode()


def octet_frame(message: bytes) -> bytes:
    """RFC 6587 octet-counting framing: ``<length in bytes> SP <message>``."""
    return b"%d %s" % (len(message), message)


def hec_event(stored: StoredRecord, host: str, sourcetype: str, index: str | None = None) -> dict[str, Any]:
    """One Splunk HEC event (``/services/collector/event``): the JSON Lines link as ``event``."""
    event: dict[str, Any] = {
        "time": round(stored.record.at.timestamp(), 3),
        "host": host,
        "source": APP_NAME,
        "sourcetype": sourcetype,
        "event": stored.export(),
    }
    if index:
        event["index"] = index
    return event


def cef_line(stored: StoredRecord) -> bytes:
    """One CEF line with its line break, for a file or a stream of them."""
    return cef(stored).encode() + b"\n"


ExportFormat = Literal["jsonl", "cef"]
EXPORT_FORMATS: dict[ExportFormat, tuple[str, Callable[[StoredRecord], bytes]]] = {
    "jsonl": ("application/x-ndjson", jsonl_line),
    "cef": ("text/plain; charset=utf-8", cef_line),
}
"""File formats of an ad-hoc export (API, CLI): media type and how one record is written."""
