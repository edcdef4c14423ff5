"""Kubernetes label selectors, read as ``kubectl -l`` reads them.

Requirements are comma-joined and must all hold: ``key`` (exists), ``!key`` (does not
exist), ``key=value`` / ``key==value``, ``key!=value`` (also true when the key is missing),
``key in (a,b)`` and ``key notin (a,b)``. Keys and values are checked against Kubernetes'
label syntax, so a typo is refused with the part named instead of silently matching
nothing. Parsing is linear in the input and bounded (:data:`MAX_LENGTH` characters,
:data:`MAX_REQUIREMENTS` requirements): the patterns below have no nested quantifiers and
run on one bounded part at a time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MAX_LENGTH",
    "MAX_REQUIREMENTS",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "parse_selector",
]

MAX_LENGTH = 4096
"""Characters in one selector (Kubernetes keys are ≤ 316, values ≤ 63)."""
MAX_REQUIREMENTS = 64

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_KEY = re.compile(rf"(?:{_DNS_LABEL}(?:\.{_DNS_LABEL})*/)?{_NAME}")
_VALUE = re.compile(rf"(?:{_NAME})?")
# run on a stripped part; no two adjacent quantifiers can share characters, so matching is linear
_EQUALITY = re.compile(r"(?P<neg>!)?\s*(?P<key>[^=!\s(),]+)(?:\s*(?P<op>==|!=|=)\s*(?P<value>[^\s,]*))?")
_SET = re.compile(r"(?P<key>[^=!\s(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")

Operator = Literal["=", "!=", "exists", "!exists", "in", "notin"]


class SelectorError(ValueError):
    """A label selector that cannot be read; the message names the part and why."""


@dataclass(frozen=True)
class Requirement:
    """One requirement of a selector."""

    key: str
    op: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "!exists":
            return value is None
        if self.op in ("=", "in"):
            return value in self.values
        return value not in self.values  # != and notin also match a missing key, as in Kubernetes


@dataclass(frozen=True)
class LabelSelector:
    """Requirements that must all hold; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


def _parts(text: str) -> Iterator[str]:
    """Comma-separated parts, commas inside ``( … )`` kept."""
    depth, start = 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


def _key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise SelectorError(f"label selector key {key!r} is not a valid label key")
    return key


def _value(value: str) -> str:
    if not _VALUE.fullmatch(value):
        raise SelectorError(f"label selector value {value!r} is not a valid label value")
    return value


def _requirement(part: str) -> Requirement:
    part = part.strip()
    found = _SET.fullmatch(part)
    if found:
        values = frozenset(_value(v.strip()) for v in found["values"].split(",") if v.strip())
        return Requirement(_key(found["key"]), "in" if found["op"] == "in" else "notin", values)
    found = _EQUALITY.fullmatch(part)
    if not found:
        raise SelectorError(
            f"label selector part {part!r} is not key, !key, key=value, key!=value or key in (…)"
        )
    key, op, negated = _key(found["key"]), found["op"], bool(found["neg"])
    if op and negated:
        raise SelectorError(f"label selector part {part!r}: '!' goes with a bare key only")
    if not op:
        return Requirement(key, "!exists" if negated else "exists")
    return Requirement(key, "!=" if op == "!=" else "=", frozenset({_value(found["value"] or "")}))


@functools.lru_cache(maxsize=4096)
def parse_selector(text: str) -> LabelSelector:
    """Read ``text``; raises :class:`SelectorError` naming the bad part. Blank matches everything."""
    if len(text) > MAX_LENGTH:
        raise SelectorError(f"label selector is {len(text)} characters; at most {MAX_LENGTH}")
    if not text.strip():
        return LabelSelector()
    parts = list(_parts(text))
    if len(parts) > MAX_REQUIREMENTS:
        raise SelectorError(f"label selector has {len(parts)} requirements; at most {MAX_REQUIREMENTS}")
    requirements = []
    for part in parts:
        if not part.strip():
            raise SelectorError(f"label selector {text!r} has an empty requirement")
        requirements.append(_requirement(part))
    return LabelSelector(tuple(requirements))
