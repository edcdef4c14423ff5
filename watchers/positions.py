"""Where each watch stands: the resourceVersion up to which its changes were handed on.

A :class:`WatchPositions` starts with the positions stored by the previous watcher
(:func:`controller.bus.positions.read_positions`), tells each watch loop where to resume
(:meth:`WatchPositions.resume_from`), hears from the loops how far they got
(:meth:`WatchPositions.handed`) and gives the publish loop what changed since it last saved
(:meth:`WatchPositions.due`) — which it saves only once everything handed on before is
published, so a position never runs ahead of the bus.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from controller.contract.kubeflow import comparable
from controller.kube.resources import Resource

__all__ = ["WatchPositions", "position_name"]


def position_name(resource: Resource, namespace: str | None) -> str:
    """A stable key-safe name for the watch of ``resource`` in ``namespace`` (``None``: cluster-wide)."""
    digest = hashlib.blake2s(f"{resource}|{namespace or ''}".encode(), digest_size=8).hexdigest()
    return f"{resource.plural}.{digest}"


class WatchPositions:
    """The stored and the current position of every watch, by :func:`position_name`."""

    def __init__(self, stored: Mapping[str, str] | None = None) -> None:
        self._current: dict[str, str] = {}
        self._saved = dict(stored or {})
        """What is stored: the previous watcher's positions, then those saved since."""
        self._due_at = 0.0

    def resume_from(self, resource: Resource, namespace: str | None) -> str | None:
        """Where the watch of ``resource`` may resume without listing first: its stored position,
        if it has the comparable form (the watch orders what it lists beside by it)."""
        stored = self._saved.get(position_name(resource, namespace))
        return stored if comparable(stored) else None

    def handed(self, resource: Resource, namespace: str | None, version: str) -> None:
        """Every change of this watch up to ``version`` went to the sink."""
        self._current[position_name(resource, namespace)] = version

    def unsaved(self) -> dict[str, str]:
        """Current positions that differ from the ones last saved."""
        return {name: rv for name, rv in self._current.items() if self._saved.get(name) != rv}

    def due(self, now: float, interval_s: float) -> dict[str, str]:
        """:meth:`unsaved`, at most once per ``interval_s`` (``now`` on a monotonic clock)."""
        if now < self._due_at:
            return {}
        self._due_at = now + interval_s
        return self.unsaved()

    def saved(self, positions: Mapping[str, str]) -> None:
        """``positions`` are stored now."""
        self._saved.update(positions)
