"""The Kubernetes API's failures as our own classes, so callers tell 403, 404, 409 and 410 apart.

:mod:`controller.kube.gateway` translates the client's ``ApiException`` and urllib3's transport
errors into these, and only there, raised ``from`` the original so tracebacks keep it; the long
requests (:mod:`controller.kube.streams`) raise them too::

    APIError                  a call failed: .status (HTTP or Status code; 0: no answer), .reason, .message
    ├── APIForbiddenError     403: RBAC denies it; retrying will not help until someone grants it
    ├── APINotFoundError      404: no such object (or the CRD is not installed)
    ├── APIConflictError      409: the name exists (create) or the resourceVersion is stale (replace)
    ├── APIGoneError          410: the watch's resourceVersion was compacted away; relist
    └── APIUnavailableError   no answer (refused, reset, timed out), a broken stream, 429 or 5xx: retry

:class:`KubeConfigError` (not an ``APIError``) says that no usable configuration was found.
"""

from __future__ import annotations

import json
from typing import cast

from controller.kube.resources import RawStatus

__all__ = [
    "APIConflictError",
    "APIError",
    "APIForbiddenError",
    "APIGoneError",
    "APINotFoundError",
    "APIUnavailableError",
    "KubeConfigError",
    "error_from_status",
    "status_body",
    "unavailable",
]


class KubeConfigError(Exception):
    """Neither in-cluster nor kubeconfig configuration could be loaded."""


class APIError(Exception):
    """A Kubernetes API call failed. ``status`` is the HTTP status (or the Status ``code``)."""

    def __init__(
        self, status: int, message: str, *, reason: str | None = None, body: RawStatus | None = None
    ):
        super().__init__(f"({status}{' ' + reason if reason else ''}) {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body


class APIForbiddenError(APIError):
    """403 Forbidden."""


class APINotFoundError(APIError):
    """404 Not Found."""


class APIConflictError(APIError):
    """409 Conflict: AlreadyExists on create, stale ``resourceVersion`` on replace."""


class APIGoneError(APIError):
    """410 Gone/Expired: the requested ``resourceVersion`` is older than the server keeps."""


class APIUnavailableError(APIError):
    """The server could not be reached or answered 429/5xx; the call may succeed later."""


_BY_STATUS: dict[int, type[APIError]] = {
    403: APIForbiddenError,
    404: APINotFoundError,
    409: APIConflictError,
    410: APIGoneError,
    429: APIUnavailableError,
}


def error_from_status(status: int, body: RawStatus | None, fallback: str = "") -> APIError:
    """The most specific :class:`APIError` for an HTTP status and its ``Status`` body (if any)."""
    cls = _BY_STATUS.get(status) or (APIUnavailableError if status == 0 or status >= 500 else APIError)
    message = (body or {}).get("message") or fallback or "no message"
    return cls(status, message, reason=(body or {}).get("reason"), body=body)


def status_body(text: str | bytes | None) -> RawStatus | None:
    """Parse a response body as a ``Status``; anything else (HTML from a proxy, a blob) is not kept."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return cast(RawStatus, parsed) if isinstance(parsed, dict) and parsed.get("kind") == "Status" else None


def unavailable(what: str, exc: BaseException) -> APIUnavailableError:
    """No answer (refused, reset, timed out, a broken stream): what was asked and what broke."""
    return APIUnavailableError(0, f"{what}: {type(exc).__name__}: {exc}")
