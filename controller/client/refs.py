"""How a run and a job are named, for the client and the commands alike: a run by its uid, by
``NAMESPACE/JOB`` (the newest attempt) or ``NAMESPACE/JOB@N`` (attempt N); a job by
``NAMESPACE/JOB``. Parsed here, once, before anything is sent."""

from __future__ import annotations

import dataclasses
import re

__all__ = ["RunRef", "job_ref", "not_found", "run_ref"]

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_UID = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,63}$")
_ATTEMPT = re.compile(r"^[1-9][0-9]{0,8}$")


@dataclasses.dataclass(frozen=True)
class RunRef:
    """A run as the user names it: by ``uid``, or by ``namespace``/``name`` and an ``attempt``
    (None: the newest)."""

    uid: str | None = None
    namespace: str = ""
    name: str = ""
    attempt: int | None = None

    def __str__(self) -> str:
        if self.uid is not None:
            return self.uid
        return f"{self.namespace}/{self.name}" + (f"@{self.attempt}" if self.attempt else "")


def job_ref(value: str) -> tuple[str, str]:
    """``NAMESPACE/JOB`` as ``(namespace, name)``; ValueError otherwise."""
    namespace, slash, name = value.partition("/")
    if not slash or not _LABEL.fullmatch(namespace) or not _NAME.fullmatch(name):
        raise ValueError(f"{value!r} is not NAMESPACE/JOB")
    return namespace, name


def run_ref(value: str) -> RunRef:
    """``UID``, ``NAMESPACE/JOB`` or ``NAMESPACE/JOB@N``; ValueError naming ``value`` otherwise."""
    if "/" not in value:
        if not _UID.fullmatch(value):
            raise ValueError(value)
        return RunRef(uid=value)
    namespace, _, rest = value.partition("/")
    name, at, attempt = rest.partition("@")
    if (
        not _LABEL.fullmatch(namespace)
        or not _NAME.fullmatch(name)
        or (at and not _ATTEMPT.fullmatch(attempt))
    ):
        raise ValueError(value)
    return RunRef(namespace=namespace, name=name, attempt=int(attempt) if at else None)


def not_found(namespace: str, name: str, attempt: int | None) -> str:
    """The line for a job or attempt that is not in the history (or not readable with the token)."""
    what = f"attempt {attempt} of" if attempt else "run of"
    return f"no {what} {namespace}/{name} that this token may read"
