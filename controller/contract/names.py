"""Kubernetes names as the API server accepts them: namespaces are RFC 1123 labels, object names
RFC 1123 subdomains. Whatever takes a namespace or a name from outside (an API parameter, an
admission review) checks it here before it goes into a URL, a subject or a lookup: ``..`` is not
a namespace, and a path built from it would name another collection."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DNS_LABEL", "DNS_SUBDOMAIN", "MAX_NAME", "MAX_NAMESPACE", "is_name", "is_namespace"]

DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace: an RFC 1123 label."""
DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""An object name (a job's): an RFC 1123 subdomain."""
MAX_NAMESPACE: Final = 63
MAX_NAME: Final = 253

_LABEL: Final = re.compile(DNS_LABEL)
_SUBDOMAIN: Final = re.compile(DNS_SUBDOMAIN)


def is_namespace(text: object) -> bool:
    """Whether ``text`` is a namespace name: an RFC 1123 label of at most 63 characters."""
    return isinstance(text, str) and len(text) <= MAX_NAMESPACE and _LABEL.match(text) is not None


def is_name(text: object) -> bool:
    """Whether ``text`` is an object name: an RFC 1123 subdomain of at most 253 characters."""
    return isinstance(text, str) and len(text) <= MAX_NAME and _SUBDOMAIN.match(text) is not None
