"""Pagination, one way for every list: ``limit`` and ``cursor`` in, ``items`` and ``next_cursor`` out.

Every list is keyset-paginated: its rows have a total order (runs by creation time then uid,
audit records and deliveries by sequence number, subscriptions by id), the page after one
starts strictly after its last row, and the cursor is that row's key. Each page is read as
``limit + 1`` rows, so ``next_cursor`` is null on the last page, never a link to an empty one.

Cursors are opaque to clients: URL-safe base64 (unpadded) of the JSON array
``[version, list, *key]``. The version lets the encoding change without misreading old
cursors; the list name stops a cursor of one list being used on another. A cursor that does
not decode to a key of this list is a 400 (its form, the ``Cursor`` parameter's pattern and
length, is checked first: 422).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Generic, TypeVar

from fastapi import HTTPException, Query

from controller.contract.runs import Page

__all__ = [
    "CURSOR_VERSION",
    "MAX_LIMIT",
    "MAX_SEQ",
    "Cursor",
    "Keyset",
    "Limit",
    "Page",
    "by_sequence",
    "page_of",
]

CURSOR_VERSION = 1
MAX_LIMIT = 500
"""Most items on one page, of every list."""
MAX_CURSOR = 512
BAD_CURSOR = "cursor is not valid: pass the next_cursor of a previous page of this list, unchanged"

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Most items on one page (1 to {MAX_LIMIT}).")]
"""Every list's ``limit``; each route picks its default."""
Cursor = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR,
        pattern=r"^[-A-Za-z0-9_]+={0,2}$",
        description="`next_cursor` of the previous page; omit for the first page.",
    ),
]
"""Every list's ``cursor``."""

K = TypeVar("K")
R = TypeVar("R")


class Keyset(Generic[K]):
    """How one list writes the key of its last row into a cursor, and reads it back.

    ``dump`` turns a key into JSON values; ``load`` turns them back into a key, raising
    ``ValueError``, ``TypeError`` or ``KeyError`` for anything that is not one.
    """

    def __init__(self, name: str, dump: Callable[[K], list[Any]], load: Callable[[list[Any]], K]) -> None:
        self.name = name
        self._dump = dump
        self._load = load

    def encode(self, key: K) -> str:
        raw = json.dumps([CURSOR_VERSION, self.name, *self._dump(key)], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def decode(self, cursor: str | None) -> K | None:
        """The key in ``cursor`` (``None``: the first page); 400 if it is not a cursor of this list."""
        if cursor is None:
            return None
        try:
            bare = cursor.rstrip("=")
            decoded = json.loads(base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4)))
            if not isinstance(decoded, list) or len(decoded) < 2:
                raise ValueError("not a cursor")
            version, name, *key = decoded
            if type(version) is not int or version != CURSOR_VERSION or name != self.name:
                raise ValueError("not a cursor of this version and list")
            return self._load(key)
        except (ValueError, TypeError, KeyError, IndexError, binascii.Error) as exc:
            raise HTTPException(400, BAD_CURSOR) from exc


MAX_SEQ = 2**63 - 1
"""The largest sequence number a BIGINT column holds."""


def _load_seq(key: list[Any]) -> int:
    (seq,) = key
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
        raise ValueError("not a sequence number")
    return seq


def by_sequence(name: str) -> Keyset[int]:
    """The keyset of a list ordered by a sequence number (audit records, deliveries)."""
    return Keyset[int](name, lambda seq: [seq], _load_seq)


def page_of(
    rows: Sequence[R], limit: int, keyset: Keyset[K], key: Callable[[R], K]
) -> tuple[list[R], str | None]:
    """The first ``limit`` of ``rows`` (read as ``limit + 1``) and the cursor of the page after them."""
    items = list(rows[:limit])
    return items, keyset.encode(key(items[-1])) if len(rows) > limit else None
