"""How audit records leave the system: JSON Lines, CEF, syslog RFC 5424 frames, Splunk HEC events.

Pure functions over :class:`~controller.store.auditchain.StoredRecord`, shared by the exporters
(``consumers.audit.export``) and the API's streaming export, so a record reads the same
wherever it lands:

- **JSON Lines**: the chain link (``seq``, ``recorded_at``, ``prev_hash``, ``hash``, ``record``)
  as canonical JSON, one per line; anyone can re-verify it (``docs/audit.md``).
- **CEF**: ``CEF:0|Kubeflow|mpijob-controller|<version>|<signature id>|<name>|<severity>|<extension>``
  with header fields escaped (``\\`` and ``|``) and extension values escaped (``\\``, ``=``,
  line breaks as ``\\n``/``\\r``). Every other character :meth:`str.splitlines` breaks on
  (VT, FF, FS, GS, RS, NEL, U+2028, U+2029) is written as ``\\n`` in an extension value (a space
  in a header field), and every other C0/C1 control (NUL, ESC, DEL …, tab included) as a space
  (a lone surrogate as U+FFFD), so one record is always exactly one line, whatever a SIEM's
  reader splits lines on.
- **syslog**: RFC 5424 (``<PRI>1 TIMESTAMP HOSTNAME APP-NAME - MSGID - MSG``) carrying the CEF
  text, framed by octet counting (RFC 6587 §3.4.1, the framing RFC 5425 mandates over TLS).
- **HEC**: one JSON event per record for ``POST /services/collector/event``.

Every format carries an admission record's ``caller`` and its verdict
(:mod:`controller.store.corroboration`; ``pending`` while there is none): JSON Lines and HEC as
``corroboration`` beside the hashed link (and HEC indexed ``fields``), CEF as ``flexString2``
(labelled ``caller``) and ``cat``. A record from a caller without the API server's certificate that
was ``contradicted`` or ``unmatched`` gets a higher severity.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from controller.contract.audit import AuditRecord, AuditVerb
from controller.store.auditchain import ChainHead, StoredRecord, canonical_json, instant
from controller.store.corroboration import CorroborationVerdict

__all__ = [
    "APP_NAME",
    "EXPORT_FORMATS",
    "SUSPECT",
    "ExportFormat",
    "Render",
    "cef",
    "cef_line",
    "corroboration",
    "hec_event",
    "jsonl_line",
    "octet_frame",
    "product_version",
    "signature",
    "syslog_message",
]

APP_NAME = "mpijob-controller"
VENDOR = "Kubeflow"

_SIGNATURES: dict[AuditVerb, tuple[str, str, int, int]] = {
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


SUSPECT = frozenset({"contradicted", "unmatched", "disputed"})
"""Verdicts that raise the severity of a record from a caller without the API server's certificate."""
_SUSPECT_SEVERITY = (8, 4)
"""CEF and syslog severity of such a record (at least)."""


def corroboration(stored: StoredRecord, verdict: CorroborationVerdict | None) -> dict[str, Any] | None:
    """An admission record's verdict as exported (``status`` ``pending`` without one); None for
    other records."""
    if stored.record.source != "admission":
        return None
    if verdict is None:
        return {"status": "pending", "observed_at": None, "detail": None}
    observed = instant(verdict.observed_at) if verdict.observed_at else None
    return {"status": verdict.status, "observed_at": observed, "detail": verdict.detail}


def _suspect(record: AuditRecord, verdict: CorroborationVerdict | None) -> bool:
    return verdict is not None and verdict.status in SUSPECT and record.caller != "mtls"


def jsonl_line(
    stored: StoredRecord, head: ChainHead | None = None, verdict: CorroborationVerdict | None = None
) -> bytes:
    """One JSON Lines line: the chain link as canonical JSON.

    With ``head`` (what the exporters ship) the line also carries ``"head": {"seq", "hash"}``, the
    chain's newest link when the batch was read: a checkpoint outside the database. An admission
    record's line carries ``"corroboration": {"status", "observed_at", "detail"}`` (``verdict``, or
    ``pending``). Neither is part of the hashed link (drop them with ``hash`` before checking).
    """
    link = stored.export()
    if head is not None:
        link["head"] = head.export()
    if (standing := corroboration(stored, verdict)) is not None:
        link["corroboration"] = standing
    return canonical_json(link) + b"\n"


_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What :meth:`str.splitlines` breaks on besides ``\\n`` and ``\\r``."""
_CONTROLS = "".join(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\r" + _LINE_BREAKS)
_SURROGATES = dict.fromkeys(map(chr, range(0xD800, 0xE000)), "\ufffd")  # lone ones cannot be UTF-8
_HEADER_TABLE = str.maketrans({**dict.fromkeys("\n\r" + _LINE_BREAKS + _CONTROLS, " "), **_SURROGATES})
_VALUE_TABLE = str.maketrans(
    {**dict.fromkeys(_LINE_BREAKS, "\\n"), **dict.fromkeys(_CONTROLS, " "), **_SURROGATES}
)


def _header(value: str) -> str:
    value = value.replace("\\", "\\\\").replace("|", "\\|")
    return value.translate(_HEADER_TABLE)


def _value(value: str) -> str:
    return (
        value.replace("\\", "\\\\")
        .replace("=", "\\=")
        .replace("\r\n", "\\n")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .translate(_VALUE_TABLE)
    )


def _millis(at: datetime) -> str:
    return str(int(at.timestamp() * 1000))


def _extension(
    stored: StoredRecord,
    record: AuditRecord,
    head: ChainHead | None = None,
    verdict: CorroborationVerdict | None = None,
) -> list[tuple[str, str | None]]:
    actor, obj = record.actor, record.object
    account = actor.service_account if actor else None
    standing = corroboration(stored, verdict)
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
        ("cn2Label", "headSeq"),
        ("cn2", str(head.seq) if head else None),
        ("flexString1Label", "headHash"),
        ("flexString1", head.hash if head else None),
        ("flexString2Label", "caller"),
        ("flexString2", record.caller),
        ("cat", standing["status"] if standing else None),
        ("externalId", record.id),
    ]


def cef(
    stored: StoredRecord,
    version: str | None = None,
    head: ChainHead | None = None,
    verdict: CorroborationVerdict | None = None,
) -> str:
    """The record as one CEF line (no line break); labels are left out with their empty values.

    With ``head``: ``cn2`` (headSeq) and ``flexString1`` (headHash), the chain's newest link. An
    admission record has ``flexString2`` (caller) and ``cat`` (``verdict``'s status, or ``pending``).
    """
    record = stored.record
    sig, name = signature(record)
    severity = _SIGNATURES[record.verb][2]
    if _suspect(record, verdict):
        severity = max(severity, _SUSPECT_SEVERITY[0])
    pairs = _extension(stored, record, head, verdict)
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
    stored: StoredRecord,
    hostname: str,
    facility: int = 13,
    version: str | None = None,
    head: ChainHead | None = None,
    verdict: CorroborationVerdict | None = None,
) -> bytes:
    """An RFC 5424 message carrying the record's CEF text (UTF-8, no BOM, no structured data)."""
    record = stored.record
    sig, _, _, severity = _SIGNATURES[record.verb]
    if _suspect(record, verdict):
        severity = min(severity, _SUSPECT_SEVERITY[1])
    pri = facility * 8 + severity
    timestamp = record.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    prefix = f"<{pri}>1 {timestamp} {_syslog_token(hostname, 255)} {APP_NAME} - {sig} -"
    return f"{prefix} {cef(stored, version, head, verdict)}".encode()


def octet_frame(message: bytes) -> bytes:
    """RFC 6587 octet-counting framing: ``<length in bytes> SP <message>``."""
    return b"%d %s" % (len(message), message)


def hec_event(
    stored: StoredRecord,
    host: str,
    sourcetype: str,
    index: str | None = None,
    head: ChainHead | None = None,
    verdict: CorroborationVerdict | None = None,
) -> dict[str, Any]:
    """One Splunk HEC event (``/services/collector/event``): the JSON Lines link as ``event``.

    With ``head``: indexed ``fields`` ``head_seq`` and ``head_hash``, the chain's newest link. An
    admission record's ``event`` has ``corroboration`` as in JSON Lines, and ``fields`` ``caller``
    and ``corroboration`` (the status).
    """
    link = stored.export()
    fields: dict[str, Any] = {}
    if head is not None:
        fields.update(head_seq=head.seq, head_hash=head.hash)
    if (standing := corroboration(stored, verdict)) is not None:
        link["corroboration"] = standing
        fields["corroboration"] = standing["status"]
        if stored.record.caller is not None:
            fields["caller"] = stored.record.caller
    event: dict[str, Any] = {
        "time": round(stored.record.at.timestamp(), 3),
        "host": host,
        "source": APP_NAME,
        "sourcetype": sourcetype,
        "event": link,
    }
    if index:
        event["index"] = index
    if fields:
        event["fields"] = fields
    return event


def cef_line(stored: StoredRecord, verdict: CorroborationVerdict | None = None) -> bytes:
    """One CEF line with its line break, for a file or a stream of them."""
    return cef(stored, verdict=verdict).encode() + b"\n"


def _jsonl_file_line(stored: StoredRecord, verdict: CorroborationVerdict | None = None) -> bytes:
    return jsonl_line(stored, verdict=verdict)


Render = Callable[[StoredRecord, CorroborationVerdict | None], bytes]
"""How one record (and its verdict, for an admission record) is written."""
ExportFormat = Literal["jsonl", "cef"]
EXPORT_FORMATS: dict[ExportFormat, tuple[str, Render]] = {
    "jsonl": ("application/x-ndjson", _jsonl_file_line),
    "cef": ("text/plain; charset=utf-8", cef_line),
}
"""File formats of an ad-hoc export (API, CLI): media type and how one record is written."""
