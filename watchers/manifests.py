"""A job as it was submitted, as YAML: what the Configuration tab shows and Compare diffs.

From the watched object: ``apiVersion``, ``kind``, the metadata a person wrote (name, namespace,
labels, annotations but ``kubectl``'s last-applied copy of the whole object) and the ``spec``;
never ``status``, ``managedFields`` or the fields the API server fills in (uid, resourceVersion,
generation, timestamps, owner references, finalizers).

Secrets do not travel: every string passes through :func:`~controller.contract.redaction.scrub`
(tokens and passwords of well-known shapes, anywhere: a command's ``--password x``, a URL's
password), and an ``env`` entry whose name and value read as a secret to the same redaction
(``DB_PASSWORD``, ``HF_TOKEN``, ``WANDB_API_KEY`` …) keeps its name with the value
``[REDACTED]``. A secret of no recognisable shape is not caught (``docs/security.md``).

Bounded: the YAML text is cut at a line boundary to at most
:data:`~controller.contract.events.MAX_MANIFEST_BYTES`, and a cut one ends with
:data:`~controller.contract.events.MANIFEST_TRUNCATED` and the whole size.

Written once per submission: a job's status changes with every pod's, and PyYAML's writer is
pure Python (about 1.5 ms a job), so the text of what was submitted is kept
(:class:`_Written`, keyed by a digest of the submission's JSON, at most :data:`CACHE_BYTES`) and
a status change costs a JSON encoding and a digest.

Written by libyaml where that gives PyYAML's own text: where every string is printable ASCII
and every key a short non-empty one (:func:`_libyaml_writes_the_same`). libyaml quotes
multi-line, escaped and non-ASCII strings, and keys of 128 characters or empty ones, otherwise
than PyYAML (at other columns, as ``? key``), which Compare would show as a change between runs
stored before and after; those manifests are written by PyYAML's pure-Python writer.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

import yaml

from controller.contract.events import MANIFEST_TRUNCATED, MAX_MANIFEST_BYTES
from controller.contract.redaction import REDACTED, redact, scrub

__all__ = ["CACHE_BYTES", "manifest"]

CACHE_BYTES: Final = 4 * 1024 * 1024
"""The most manifest text kept written (the texts of the most recently seen submissions)."""

_KEPT_METADATA = ("name", "namespace", "labels", "annotations")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _secret_env(entry: Mapping[str, Any]) -> bool:
    name, value = entry.get("name"), entry.get("value")
    return isinstance(name, str) and isinstance(value, str) and redact(f"{name}={value}") != f"{name}={value}"


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, Mapping):
        if _secret_env(value):
            return {**{k: _clean(v) for k, v in value.items()}, "value": REDACTED}
        return {str(k): _clean(v) for k, v in value.items()}
    return value


def _cut(text: str) -> str:
    size = len(text.encode())
    if size <= MAX_MANIFEST_BYTES:
        return text
    room = MAX_MANIFEST_BYTES - len(MANIFEST_TRUNCATED.encode()) - 32
    head = text.encode()[:room].decode("utf-8", "ignore")
    head = head[: head.rfind("\n") + 1]
    return f"{head}{MANIFEST_TRUNCATED} ({size} bytes in all)\n"


class _Written:
    """The texts of the most recently written submissions, by digest, least recently used first
    out once they hold more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self._texts: OrderedDict[bytes, str] = OrderedDict()

    def get(self, key: bytes) -> str | None:
        text = self._texts.get(key)
        if text is not None:
            self._texts.move_to_end(key)
        return text

    def put(self, key: bytes, text: str) -> None:
        self._texts[key] = text
        self._size += len(text)
        while self._size > self._limit and len(self._texts) > 1:
            _, dropped = self._texts.popitem(last=False)
            self._size -= len(dropped)


_WRITTEN = _Written(CACHE_BYTES)


def manifest(obj: Mapping[str, Any]) -> str:
    """The job ``obj`` as submitted, in YAML, redacted and bounded (see the module docstring)."""
    meta = obj.get("metadata") or {}
    kept: dict[str, Any] = {k: meta[k] for k in _KEPT_METADATA if meta.get(k)}
    annotations = {k: v for k, v in (kept.get("annotations") or {}).items() if k != _LAST_APPLIED}
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    submitted = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": kept,
        "spec": obj.get("spec") or {},
    }
    try:
        key = hashlib.blake2b(json.dumps(submitted, separators=(",", ":")).encode(), digest_size=16).digest()
    except (TypeError, ValueError):  # not JSON's values (never from the API server): written anew
        return _written(submitted)
    text = _WRITTEN.get(key)
    if text is None:
        text = _written(submitted)
        _WRITTEN.put(key, text)
    return text


_OPTIONS: Final[dict[str, Any]] = {"sort_keys": False, "allow_unicode": True, "width": 120}
_LIBYAML: Final = getattr(yaml, "CSafeDumper", None)
"""PyYAML's safe writer with libyaml's emitter, ``None`` where PyYAML was built without it."""
_LONGEST_KEY: Final = 100
"""The longest key :func:`_libyaml_writes_the_same` accepts (either writer turns one of 128 or
more characters into a ``? key``, at a different length)."""


def _printable_ascii(text: str) -> bool:
    return text.isascii() and text.isprintable()


def _libyaml_writes_the_same(value: Any) -> bool:
    """Whether libyaml writes ``value`` as PyYAML's pure-Python writer does: every string
    printable ASCII (no line break, no tab, no escape), every key a non-empty one of at most
    :data:`_LONGEST_KEY` characters."""
    if isinstance(value, str):
        return _printable_ascii(value)
    if isinstance(value, list):
        return all(_libyaml_writes_the_same(item) for item in value)
    if isinstance(value, dict):
        return all(
            isinstance(key, str)
            and 0 < len(key) <= _LONGEST_KEY
            and _printable_ascii(key)
            and _libyaml_writes_the_same(item)
            for key, item in value.items()
        )
    return value is None or isinstance(value, bool | int | float)


def _written(submitted: Mapping[str, Any]) -> str:
    clean = _clean(submitted)
    if _LIBYAML is not None and _libyaml_writes_the_same(clean):
        return _cut(yaml.dump(clean, Dumper=_LIBYAML, **_OPTIONS))
    return _cut(yaml.safe_dump(clean, **_OPTIONS))
