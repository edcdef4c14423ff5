"""Webhook events as CloudEvents 1.0 over HTTP (CNCF CloudEvents, "HTTP Protocol Binding").

A subscription's ``format`` picks what its endpoint receives:

==========================  ===============================================================
``standard``                the event as one JSON object (``type``, ``timestamp``, ``data``)
``cloudevents``             CloudEvents *binary* mode: attributes in ``ce-*`` headers, the
                            body is the event's ``data`` (``content-type: application/json``)
``cloudevents-structured``  CloudEvents *structured* mode: the whole event as one JSON object
                            (``content-type: application/cloudevents+json``)
==========================  ===============================================================

Attributes: ``specversion`` ``1.0``; ``id`` the delivery id (the ``webhook-id``, the same on
every retry, so a receiver deduplicates on it); ``type`` :data:`TYPE_PREFIX` + the event type
(``io.mpijob-controller.finding.firing``); ``source``
``/clusters/<cluster>/namespaces/<namespace>/jobs/<name>``; ``subject`` the run (job uid);
``time`` when it happened; ``datacontenttype`` ``application/json``. Every format is signed
the same way (Standard Webhooks headers over the exact body sent).
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal, get_args

from controller.contract.notifications import parse_payload

Format = Literal["standard", "cloudevents", "cloudevents-structured"]
FORMATS: Final[tuple[str, ...]] = get_args(Format)
TYPE_PREFIX: Final = "io.mpijob-controller."
SPECVERSION: Final = "1.0"
STRUCTURED_CONTENT_TYPE: Final = "application/cloudevents+json"


def attributes(body: bytes | str, delivery_id: str, cluster: str) -> tuple[dict[str, str], Any]:
    """The CloudEvents context attributes of a stored webhook event, and its ``data``."""
    event = parse_payload(body)
    job = event.data.job
    return {
        "specversion": SPECVERSION,
        "id": delivery_id,
        "type": TYPE_PREFIX + event.type,
        "source": f"/clusters/{cluster}/namespaces/{job.namespace}/jobs/{job.name}",
        "subject": job.uid,
        "time": event.timestamp.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
    }, json.loads(event.data.model_dump_json())


def encode(body: bytes | str, delivery_id: str, fmt: str, cluster: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers a ``fmt`` endpoint gets for a stored webhook event (``standard``:
    the body as stored, ``content-type: application/json``)."""
    raw = body.encode() if isinstance(body, str) else body
    if fmt == "standard":
        return raw, {"content-type": "application/json"}
    context, data = attributes(raw, delivery_id, cluster)
    if fmt == "cloudevents-structured":
        return _dump({**context, "data": data}), {"content-type": STRUCTURED_CONTENT_TYPE}
    if fmt == "cloudevents":
        headers = {f"ce-{name}": value for name, value in context.items() if name != "datacontenttype"}
        return _dump(data), {"content-type": context["datacontenttype"], **headers}
    raise ValueError(f"unknown webhook format {fmt!r}; choose from {list(FORMATS)}")


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
