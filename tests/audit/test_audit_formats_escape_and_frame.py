"""CEF escaping, RFC 5424 messages, RFC 6587 octet counting and HEC events, character for character."""

from __future__ import annotations

import hashlib
import json

import pytest

from controller.contract.audit import Actor, AuditRecord, audited_object, service_account_of
from controller.store.auditchain import GENESIS, StoredRecord, chain_hash
from controller.store.auditformats import cef, hec_event, jsonl_line, octet_frame, syslog_message
from controller.store.corroboration import CorroborationVerdict
from tests.audit_helpers import T0, parse_cef, parse_syslog

HASH = "ab" * 32


def link(record: AuditRecord, seq: int = 7) -> StoredRecord:
    return StoredRecord(seq, T0, GENESIS, HASH, record.model_dump(mode="json"))


def admission(**overrides: object) -> AuditRecord:
    fields: dict[str, object] = {
        "id": "admission/705ab4f5-6393-11e8-b7cc-42010a800002",
        "source": "admission",
        "verb": "delete",
        "at": T0,
        "namespace": "team-b",
        "actor": Actor(
            username="system:serviceaccount:team-b:pipeline-runner",
            uid="9a1e7f30",
            groups=("system:serviceaccounts", "system:authenticated"),
            service_account=service_account_of("system:serviceaccount:team-b:pipeline-runner"),
        ),
        "object": audited_object("TrainJob", "bert", "uid-bert"),
        "outcome": "allowed",
    }
    return AuditRecord.model_validate({**fields, **overrides})


def test_a_delete_by_a_service_account_as_cef() -> None:
    verified = CorroborationVerdict("verified", T0, "the watch saw it deleted")
    assert cef(link(admission(caller="unverified")), version="0.1.0", verdict=verified) == (
        "CEF:0|Kubeflow|mpijob-controller|0.1.0|job-delete|TrainJob deletion requested|5|"
        "rt=1795424400000 act=delete outcome=allowed "
        "suser=system:serviceaccount:team-b:pipeline-runner suid=9a1e7f30 "
        "cs1Label=namespace cs1=team-b cs2Label=object cs2=TrainJob/bert cs3Label=objectUid cs3=uid-bert "
        "cs4Label=groups cs4=system:serviceaccounts,system:authenticated "
        "cs5Label=serviceAccount cs5=team-b/pipeline-runner "
        f"cs6Label=hash cs6={HASH} cn1Label=seq cn1=7 "
        "flexString2Label=caller flexString2=unverified cat=verified "
        "externalId=admission/705ab4f5-6393-11e8-b7cc-42010a800002"
    )


def test_a_failure_without_a_user_leaves_the_user_fields_out() -> None:
    record = admission(
        id="uid-pi/failed",
        source="lifecycle",
        verb="failed",
        namespace="team-a",
        actor=None,
        object=audited_object("MPIJob", "pi", "uid-pi"),
        outcome="Failed",
        reason="MPIJobFailed",
        message="worker-2: OOMKilled\nexit=137 path C:\\tmp",
    )
    line = cef(link(record), version="0.1.0")
    assert line.startswith("CEF:0|Kubeflow|mpijob-controller|0.1.0|job-failed|MPIJob failed|6|")
    assert "suser=" not in line and "cs4Label" not in line and "cs5Label" not in line
    assert (
        "reason=MPIJobFailed msg=worker-2: OOMKilled\\nexit\\=137 path C:\\\\tmp cs1Label=namespace" in line
    )
    assert "\n" not in line


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("a=b", "a\\=b"),
        ("back\\slash", "back\\\\slash"),
        ("pipe|stays", "pipe|stays"),
        ("two\r\nlines", "two\\nlines"),
        ("cr\ronly", "cr\\ronly"),
        ("ünïcode ✓", "ünïcode ✓"),
    ],
    ids=["equals", "backslash", "pipe-in-extension", "crlf", "cr", "unicode"],
)
def test_extension_values_are_escaped(value: str, escaped: str) -> None:
    line = cef(link(admission(reason=value)), version="1")
    assert f" reason={escaped} suser=" in line


LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
CONTROLS = ["\x00", "\x01", "\x07", "\x08", "\t", "\x1b", "\x1f", "\x7f", "\x80", "\x9b", "\x9f"]


@pytest.mark.parametrize(
    "brk", LINE_BREAKS, ids=["-".join(f"U+{ord(c):04X}" for c in brk) for brk in LINE_BREAKS]
)
def test_every_line_terminator_is_escaped_in_cef_and_syslog(brk: str) -> None:
    record = admission(reason=f"first{brk}second", message=f"msg{brk}<13>1 forged syslog line")
    line = cef(link(record), version=f"1{brk}2")
    frame = syslog_message(link(record), "h", version=f"1{brk}2")
    for text in (line, frame.decode()):
        assert len(text.splitlines()) == 1, repr(text)
        assert brk not in text
    escaped = "\\r" if brk == "\r" else "\\n"
    assert f" reason=first{escaped}second msg=msg{escaped}<13>1 forged syslog line suser=" in line
    assert line.startswith(f"CEF:0|Kubeflow|mpijob-controller|1{' ' * len(brk)}2|")


@pytest.mark.parametrize("control", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_other_control_characters_are_replaced(control: str) -> None:
    record = admission(reason=f"a{control}b", message=f"x{control}y")
    line = cef(link(record), version=f"v{control}1")
    assert control not in line and control.encode() not in syslog_message(link(record), "h")
    assert " reason=a b " in line and " msg=x y " in line and "|v 1|" in line


def test_header_fields_escape_pipes_and_backslashes() -> None:
    line = cef(link(admission()), version="1|2\\3")
    assert line.startswith("CEF:0|Kubeflow|mpijob-controller|1\\|2\\\\3|job-delete|")


def test_syslog_message_is_rfc5424_with_cef_and_octet_counted() -> None:
    message = syslog_message(link(admission()), "ctrl-0.example.com", facility=13, version="0.1.0")
    head = b"<109>1 2026-11-23T09:00:00.000000Z ctrl-0.example.com mpijob-controller - job-delete - "
    assert message.startswith(head)
    assert message[len(head) :] == cef(link(admission()), version="0.1.0").encode()
    assert octet_frame(b"<109>1 x \xc3\xbc") == b"11 <109>1 x \xc3\xbc", (
        "the count is in bytes, not characters"
    )


@pytest.mark.parametrize(
    ("verb", "pri"),
    [("create", 13 * 8 + 6), ("failed", 13 * 8 + 4), ("purge", 13 * 8 + 5)],
    ids=["info", "warning", "notice"],
)
def test_syslog_severity_follows_the_verb(verb: str, pri: int) -> None:
    record = admission(verb=verb, **({"namespace": None, "object": None} if verb == "purge" else {}))
    assert syslog_message(link(record), "h").startswith(f"<{pri}>1 ".encode())


def test_hostname_is_cleaned_to_printable_ascii() -> None:
    assert syslog_message(link(admission()), "bad host\u00e9").split(b" ")[2] == b"badhost"
    assert syslog_message(link(admission()), "").split(b" ")[2] == b"-"


def test_jsonl_and_hec_carry_the_verifiable_link() -> None:
    record = admission()
    raw = record.model_dump(mode="json")
    stored = StoredRecord(1, T0, GENESIS, chain_hash(1, GENESIS, T0, raw), raw)
    line = jsonl_line(stored)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    pending = {"status": "pending", "observed_at": None, "detail": None}
    assert json.loads(line) == {**stored.export(), "corroboration": pending}
    event = hec_event(stored, "ctrl-0", "mpijob-controller:audit", "audit")
    assert event == {
        "time": 1795424400.0,
        "host": "ctrl-0",
        "source": "mpijob-controller",
        "sourcetype": "mpijob-controller:audit",
        "index": "audit",
        "event": {**stored.export(), "corroboration": pending},
        "fields": {"corroboration": "pending"},
    }
    lifecycle = admission(source="lifecycle", verb="failed", actor=None, outcome="Failed")
    other = StoredRecord(2, T0, stored.hash, HASH, lifecycle.model_dump(mode="json"))
    assert json.loads(jsonl_line(other)) == other.export(), "only admission records have a verdict"
    assert "fields" not in hec_event(other, "ctrl-0", "t") and "cat=" not in cef(other)


VERDICTS = [
    (
        "unverified",
        CorroborationVerdict("contradicted", T0, "claims spec.x=1 changed;\nthe watch | saw \\ status only"),
    ),
    ("mtls", CorroborationVerdict("verified", T0, "the watch saw it")),
    ("unverified", None),
]


@pytest.mark.parametrize(("caller", "verdict"), VERDICTS, ids=["contradicted", "mtls-verified", "pending"])
def test_every_format_carries_the_caller_and_the_verdict(
    caller: str, verdict: CorroborationVerdict | None
) -> None:
    record = admission(caller=caller, message="a=b | c\\d\ne")
    raw = record.model_dump(mode="json")
    stored = StoredRecord(1, T0, GENESIS, chain_hash(1, GENESIS, T0, raw), raw)
    status = verdict.status if verdict else "pending"
    suspect = status == "contradicted"

    header, pairs = parse_cef(cef(stored, verdict=verdict))
    assert (pairs["flexString2Label"], pairs["flexString2"], pairs["cat"]) == ("caller", caller, status)
    assert pairs["msg"] == "a=b | c\\d\ne" and pairs["externalId"] == record.id, "the rest reads back too"
    assert header[5] == ("8" if suspect else "5"), (
        "a contradicted record from an unverified caller stands out"
    )

    facility, severity, msgid, text = parse_syslog(syslog_message(stored, "ctrl-0", verdict=verdict))
    assert (facility, severity, msgid) == (13, 4 if suspect else 5, "job-delete")
    assert parse_cef(text)[1] == pairs

    for link_json in (
        json.loads(jsonl_line(stored, verdict=verdict)),
        hec_event(stored, "h", "t", verdict=verdict)["event"],
    ):
        assert link_json["record"]["caller"] == caller
        assert link_json.pop("corroboration") == {
            "status": status,
            "observed_at": "2026-11-23T09:00:00.000000+00:00" if verdict else None,
            "detail": verdict.detail if verdict else None,
        }
        digest = link_json.pop("hash")
        body = json.dumps(link_json, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert hashlib.sha256(body).hexdigest() == digest, "the link still verifies without the verdict"
    fields = hec_event(stored, "h", "t", verdict=verdict)["fields"]
    assert fields == {"caller": caller, "corroboration": status}
