"""What an outbound client presents and trusts, read from the files the operator mounts.

Every client the controller opens towards another service (NATS, the cluster's Prometheus, an
Alertmanager, a SIEM's HTTP or syslog endpoint) trusts the system's certificate authorities or
those of one CA file (:func:`tls_context`), and a client that authenticates with a bearer token
reads it from its file before each request (:func:`bearer_header`), so a rotated service-account
token is used without a restart. The ``OSError`` of an unreadable file is the caller's to judge.
"""

from __future__ import annotations

import ssl
from pathlib import Path

__all__ = ["bearer_header", "tls_context"]


def tls_context(ca_file: Path | str | None) -> ssl.SSLContext:
    """A client TLS context verifying servers against ``ca_file`` (PEM), or the system's
    certificate authorities when there is none."""
    return ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)


def bearer_header(token_file: Path | None) -> dict[str, str]:
    """The ``Authorization`` header of the token in ``token_file``, read now (``{}``: no file)."""
    if token_file is None:
        return {}
    return {"authorization": f"Bearer {token_file.read_text().strip()}"}
