"""The base of every message the project defines: on the bus, to receivers, in the audit chain."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Message"]


class Message(BaseModel):
    """Immutable, and strict about what it carries: a field we did not define is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")
